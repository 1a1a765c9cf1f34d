#!/bin/bash
# Every kernel x mode x dtype x sharding tpuoff emits, run on the XLA CPU
# plugin (`tpuoff compare --backends=emulator,pjrt`: the same module and the
# same inputs on the emulator and through PJRT, within the spec tolerances),
# plus `run --backend=pjrt` writing outputs exactly as the emulator does.
# Registered only when this build has the PJRT backend and its CPU plugin.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"

# Small shapes: 8 sequences (batch-shardable over 8 devices), a ragged vocab
# (1001 = 7 tiles of 128 + a 105 tail; 126 columns per device, the last one
# padded) and H=32 for the fused kernel.
SHAPE=(--batch=8 --seq=4 --vocab=1001 --block-size=128)
for kernel in grpo_reference grpo_tiled entropy_reference entropy_tiled grpo_fused_linear; do
  case $kernel in
    entropy_*) modes=(fwd) ;;
    *) modes=(fwd bwd fwd_bwd) ;;
  esac
  case $kernel in
    *_reference) shards=(none batch) ;;
    *) shards=(none batch vocab) ;;
  esac
  extra=()
  [[ $kernel == grpo_fused_linear ]] && extra=(--hidden=32 --token-chunk=16)
  for mode in "${modes[@]}"; do
    for dtype in f32 bf16; do
      for shard in "${shards[@]}"; do
        what="$kernel $mode $dtype shard=$shard"
        run_cmd 0 "$what" -- compare --kernel=$kernel --mode=$mode --logits-dtype=$dtype \
          "${SHAPE[@]}" "${extra[@]}" --shard=$shard --mesh=8 --seed=5 \
          --backends=emulator,pjrt || continue
        expect_in "$WORK/out" "emulator vs pjrt on the" "$what: header" &&
          expect_in "$WORK/out" "outputs within tolerance" "$what: pass line" &&
          pass "$what"
      done
    done
  done
done

# run --backend=pjrt writes the same files as the emulator; the values
# agree within tolerance (compare above checks them) and the manifests name
# the same outputs with the same shapes.
ARGS=(--kernel=grpo_tiled --mode=fwd_bwd "${SHAPE[@]}" --mesh=8 --shard=vocab --random-inputs --seed=2)
if run_cmd 0 "run emulator" -- run "${ARGS[@]}" --outputs="$WORK/emu" &&
   run_cmd 0 "run pjrt" -- run "${ARGS[@]}" --backend=pjrt --outputs="$WORK/pjrt"; then
  expect_in "$WORK/out" "pjrt: " "pjrt summary line"
  expect_in "$WORK/out" "8 devices" "pjrt device count"
  a=$(cd "$WORK/emu" && ls | sort | tr '\n' ' ') b=$(cd "$WORK/pjrt" && ls | sort | tr '\n' ' ')
  [[ "$a" == "$b" ]] && pass "same output files: $a" || fail "output files differ: '$a' vs '$b'"
  python3 - "$WORK/emu/manifest.json" "$WORK/pjrt/manifest.json" <<'PY' && pass "manifests agree" || fail "manifests differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def strip(m):  # per-output name/shape/dtype; checksums differ within tolerance
    outs = m.get("outputs", m)
    return [(o.get("name"), o.get("shape"), o.get("dtype")) for o in outs] if isinstance(outs, list) else sorted(outs)
sys.exit(0 if strip(a) == strip(b) else 1)
PY
fi

# Errors are one line and exit 1/2, never a crash.
run_cmd 1 "missing plugin" -- run --kernel=grpo_tiled --random-inputs --backend=pjrt \
  --pjrt-plugin="$WORK/nope.so" && expect_in "$WORK/err" "no such file" "missing plugin message"
echo "not a library" > "$WORK/bad.so"
run_cmd 1 "not a plugin" -- run --kernel=grpo_tiled --random-inputs --backend=pjrt \
  --pjrt-plugin="$WORK/bad.so" && expect_in "$WORK/err" "cannot load" "bad plugin message"
run_cmd 1 "library without GetPjrtApi" -- run --kernel=grpo_tiled --random-inputs --backend=pjrt \
  --pjrt-plugin="$(ldconfig -p | awk '/libm.so.6 .*x86-64/ {print $NF; exit}')" &&
  expect_in "$WORK/err" "no GetPjrtApi" "no GetPjrtApi message"
run_cmd 2 "plugin without backend" -- run --kernel=grpo_tiled --random-inputs --pjrt-plugin=x.so
run_cmd 2 "trace with pjrt" -- run --kernel=grpo_tiled --random-inputs --backend=pjrt --trace=t.json
run_cmd 2 "bad backends" -- compare --kernel=grpo_tiled --backends=emulator
run_cmd 2 "unknown backend" -- compare --kernel=grpo_tiled --backends=emulator,gpu

[[ $FAILURES -eq 0 ]] || { echo "$FAILURES failures"; exit 1; }
echo "all passed"
