#!/bin/bash
# `tpuoff compile`: compile-only for TPU v6e topologies with libtpu (no TPU,
# no network): the text report, the JSON keys, --dump-optimized in both
# formats, other v6e shapes, and errors as one line with exit 1/2.
# Registered only when this build has the PJRT backend and libtpu.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
K=(--kernel=entropy_tiled --batch=8 --seq=64 --vocab=8192 --block-size=512)

run_cmd 0 "compile text" -- compile "${K[@]}" --target=tpu-v6e:2x4 && {
  expect_in "$WORK/out" "compiled for tpu-v6e:2x4 (8 devices, platform tpu)" "header"
  for row in argument output alias temp "generated code" peak "HBM allocated"; do
    expect_in "$WORK/out" "  $row " "row $row"
  done
  expect_in "$WORK/out" "tpuoff TPU-padded peak vs XLA:TPU:" "diff line"
  expect_in "$WORK/out" "tpuoff v6e model (temporaries in VMEM" "v6e model line"
}

run_cmd 0 "compile json" -- compile "${K[@]}" --json && {
  python3 - "$WORK/out" <<'PY' && pass "json keys" || fail "json keys: $(cat "$WORK/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d["xla_tpu"]) == {"peak_bytes", "argument_bytes", "output_bytes", "alias_bytes",
                             "temp_bytes", "generated_code_bytes"}, d
assert set(d["tpuoff"]) == {"peak_bytes", "tpu_peak_bytes", "v6e_hbm_bytes",
                            "v6e_hbm_temp_bytes", "v6e_vmem_bytes"}, d
x, t = d["xla_tpu"], d["tpuoff"]
assert x["argument_bytes"] >= 8 * 64 * 8192 * 4 and x["peak_bytes"] >= x["argument_bytes"], x
# entropy_tiled: logits in, entropy out, nothing else of size: tpuoff's
# static peak within 1% of XLA's HBM allocation.
hbm = x["argument_bytes"] + x["output_bytes"] + x["temp_bytes"] - x["alias_bytes"]
assert abs(t["tpu_peak_bytes"] / hbm - 1) < 0.01, (t, hbm)
# The v6e model: every temporary fits the VMEM budget here, so its HBM is
# arguments + outputs, also within 1% of XLA's.
assert t["v6e_hbm_temp_bytes"] == 0 and abs(t["v6e_hbm_bytes"] / hbm - 1) < 0.01, (t, hbm)
assert d["target"] == "tpu-v6e:2x4" and d["num_partitions"] == 1, d
PY
}

# Other v6e shapes; a per-device SPMD module on 8 of them.
for topo in v6e:1x1 v6e:4x4 v6e:16x16; do
  run_cmd 0 "compile $topo" -- compile "${K[@]}" --target=tpu-$topo &&
    expect_in "$WORK/out" "compiled for tpu-$topo" "$topo header" && pass "$topo"
done
run_cmd 0 "compile sharded" -- compile "${K[@]}" --mesh=8 --shard=vocab &&
  expect_in "$WORK/out" "8 partitions (per-device SPMD program)" "sharded header"
run_cmd 1 "8 partitions on one chip" -- compile "${K[@]}" --mesh=8 --shard=vocab \
  --target=tpu-v6e:1x1 && expect_in "$WORK/err" "has 8 partitions" "partitions message" &&
  expect_one_line "$WORK/err" "partitions error"

# The optimised module: binary proto (*.pb) that tpuoff reads back, or text.
run_cmd 0 "dump optimized pb" -- compile "${K[@]}" --dump-optimized="$WORK/opt.pb" && {
  [[ -s $WORK/opt.pb ]] && pass "optimized .pb written" || fail "no optimized .pb"
  python3 - "$WORK/opt.pb" <<'PY' && pass "optimized .pb is an HloModuleProto" || fail "bad .pb"
import sys
b = open(sys.argv[1], "rb").read()
assert b[0] == 0x0a  # field 1 (name), length-delimited
n = b[1]
assert b[2:2 + n].decode().startswith("entropy_tiled"), b[:40]
PY
}
# Text needs tpuoff's importer to know every opcode XLA:TPU emits (issue 16
# widens it): either the text or one clear line naming the .pb way.
"$TPUOFF" compile "${K[@]}" --dump-optimized="$WORK/opt.hlo" >"$WORK/out" 2>"$WORK/err"
case $? in
  0) grep -q "^HloModule " "$WORK/opt.hlo" && pass "optimized text" || fail "optimized text" ;;
  1) expect_one_line "$WORK/err" "text dump error" &&
       expect_in "$WORK/err" "name the file *.pb" "text dump message" && pass "text dump message"
     [[ -e $WORK/opt.hlo ]] && fail "a failed text dump left a file" ;;
  *) fail "text dump: unexpected exit" ;;
esac

# Usage and plugin errors.
run_cmd 2 "bad target" -- compile "${K[@]}" --target=v6e:2x4 &&
  expect_in "$WORK/err" "--target wants tpu-<topology>" "bad target message"
run_cmd 1 "unknown topology" -- compile "${K[@]}" --target=tpu-v6e:3x5 &&
  expect_one_line "$WORK/err" "unknown topology"
run_cmd 1 "missing libtpu" -- compile "${K[@]}" --pjrt-plugin="$WORK/nope.so" &&
  expect_in "$WORK/err" "no such file" "missing plugin message"
run_cmd 2 "no module" -- compile --target=tpu-v6e:2x4
# A zero in the topology (libtpu divides by it) is refused before libtpu.
for t in v6e:0x4 v6e:2x4x0 v6e:-1x2; do
  run_cmd 2 "target tpu-$t" -- compile "${K[@]}" --target=tpu-$t &&
    expect_in "$WORK/err" "topology '$t'" "names the topology"
done
# libtpu crashes (CHECK failure, division by zero) on memory spaces it does
# not have: it compiles in a child process, so that is exit 1 naming the
# signal, never a crash of tpuoff (nor a core file).
for space in 2 3; do
  cat >"$WORK/space$space.hlo" <<HLO
HloModule space$space
ENTRY %main (p: f32[8,128]) -> f32[8,128] {
  %p = f32[8,128]{1,0:S($space)} parameter(0)
  ROOT %n = f32[8,128]{1,0} negate(f32[8,128]{1,0:S($space)} %p)
}
HLO
  (cd "$WORK" && timeout 600 "$TPUOFF" compile "$WORK/space$space.hlo" --target=tpu-v6e:1x1 \
     >"$WORK/out" 2>"$WORK/err")
  code=$?
  [[ $code -eq 1 ]] || fail "S($space): exit $code, want 1 (134 SIGABRT, 136 SIGFPE)"
  expect_in "$WORK/err" "compiling space$space for v6e:1x1 with" "S($space) names the compile"
  grep -qE "the plugin crashed \(signal (6, SIGABRT|8, SIGFPE)\)" "$WORK/err" ||
    fail "S($space): no crash message: $(grep tpuoff "$WORK/err" | head -c 300)"
  ls "$WORK"/core* >/dev/null 2>&1 && fail "S($space): a core file was written"
done

finish
