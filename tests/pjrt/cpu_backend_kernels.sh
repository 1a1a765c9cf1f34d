#!/bin/bash
# Every kernel x mode x dtype x sharding tpuoff emits (1-D and 2x4 meshes),
# and the GRPO kernels with GRPO_SPEC v2 loss options and presets, run on the
# XLA CPU plugin (`tpuoff compare --backends=emulator,pjrt`: the same module and the
# same inputs on the emulator and through PJRT, within the spec tolerances),
# plus `run --backend=pjrt` writing outputs exactly as the emulator does.
# Registered only when this build has the PJRT backend and its CPU plugin.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"

# Small shapes: 8 sequences (batch-shardable over 8 devices), a ragged vocab
# (1001 = 7 tiles of 128 + a 105 tail; 126 columns per device, the last one
# padded) and H=32 for the fused kernel. Shardings: 1-D over 8 devices and
# the 2x4 meshes (MESH:KINDS).
SHAPE=(--batch=8 --seq=4 --vocab=1001 --block-size=128)
compare_case() {  # what, then compare flags
  local what=$1; shift
  run_cmd 0 "$what" -- compare "$@" "${SHAPE[@]}" --seed=5 --backends=emulator,pjrt || return
  expect_in "$WORK/out" "emulator vs pjrt on the" "$what: header" &&
    expect_in "$WORK/out" "outputs within tolerance" "$what: pass line" &&
    pass "$what"
}
sharding() {  # MESH:KINDS or none -> flags
  if [[ $1 == none ]]; then echo "--shard=none --mesh=8"; else echo "--mesh=${1%%:*} --shard=${1#*:}"; fi
}
extra_for() { [[ $1 == grpo_fused_linear ]] && echo "--hidden=32 --token-chunk=16"; }
for kernel in grpo_reference grpo_tiled entropy_reference entropy_tiled grpo_fused_linear; do
  case $kernel in
    entropy_*) modes=(fwd) ;;
    *) modes=(fwd bwd fwd_bwd) ;;
  esac
  case $kernel in
    *_reference) shards=(none 8:batch 8:seq 2x4:batch,seq) ;;
    *) shards=(none 8:batch 8:vocab 8:seq 2x4:batch,vocab 2x4:seq,vocab) ;;
  esac
  for mode in "${modes[@]}"; do
    for dtype in f32 bf16; do
      for shard in "${shards[@]}"; do
        # shellcheck disable=SC2046
        compare_case "$kernel $mode $dtype shard=$shard" --kernel=$kernel --mode=$mode \
          --logits-dtype=$dtype $(extra_for $kernel) $(sharding "$shard")
      done
    done
  done
done

# A vocabulary that splits evenly over the devices (1024 = 8 x 128, no
# padding mask): the entropy kernel's shard offset then has no users, a
# partition-id XLA's partitioner refused as ambiguous until it was sent as
# manual like the rest of the per-device program.
for shard in 8:vocab 2x4:batch,vocab; do
  what="entropy_tiled fwd f32 V=1024 shard=$shard"
  # shellcheck disable=SC2046
  run_cmd 0 "$what" -- compare --kernel=entropy_tiled --mode=fwd $(sharding "$shard") \
    --batch=8 --seq=4 --vocab=1024 --block-size=128 --seed=5 --backends=emulator,pjrt &&
    expect_in "$WORK/out" "outputs within tolerance" "$what: pass line" && pass "$what"
done

# JAX's global form of a sharded kernel (--global-form: Sharding and
# SPMDFullToShardShape annotations around the per-device body) runs through
# PJRT as on the emulator (its lowered program kept `Sharding` annotations
# without a sharding, which XLA's propagation refused with a RET_CHECK).
for shard in 2x2:batch,vocab 4:seq; do
  what="global form grpo_tiled fwd_bwd shard=$shard"
  rm -rf "$WORK/g_emu" "$WORK/g_pjrt"
  # shellcheck disable=SC2046
  if run_cmd 0 "$what: dump" -- dump --kernel=grpo_tiled --mode=fwd_bwd --batch=4 --seq=4 \
       --vocab=40 --block-size=16 $(sharding "$shard") --global-form --out="$WORK/global.hlo" &&
     run_cmd 0 "$what: emulator" -- run "$WORK/global.hlo" --random-inputs --outputs="$WORK/g_emu" &&
     run_cmd 0 "$what: pjrt" -- run "$WORK/global.hlo" --random-inputs --backend=pjrt \
       --outputs="$WORK/g_pjrt"; then
    python3 - "$WORK/g_emu" "$WORK/g_pjrt" <<'PY' && pass "$what" || fail "$what: outputs differ"
import os, struct, sys
def f32(path):  # a little-endian f32 .npy
    data = open(path, "rb").read()
    start = 10 + struct.unpack("<H", data[8:10])[0]
    return struct.unpack(f"<{(len(data) - start) // 4}f", data[start:])
names = sorted(n for n in os.listdir(sys.argv[1]) if n.endswith(".npy"))
assert names == sorted(n for n in os.listdir(sys.argv[2]) if n.endswith(".npy")), names
for n in names:
    for a, b in zip(f32(os.path.join(sys.argv[1], n)), f32(os.path.join(sys.argv[2], n))):
        assert abs(a - b) <= 1e-5 + 1e-5 * abs(b), (n, a, b)
PY
  fi
done

# The fused kernel with its dlogits tile rounded to bf16 for the gradient
# products (bf16 x bf16 dots), unsharded and under each sharding.
for mode in bwd fwd_bwd; do
  for shard in none 8:batch 8:vocab 2x4:batch,vocab; do
    # shellcheck disable=SC2046
    compare_case "grpo_fused_linear $mode bf16 dlogits-dtype=bf16 shard=$shard" \
      --kernel=grpo_fused_linear --mode=$mode --logits-dtype=bf16 --dlogits-dtype=bf16 \
      $(extra_for grpo_fused_linear) $(sharding "$shard")
  done
done

# GRPO_SPEC v2 loss options and trainer presets (fwd_bwd, bf16), each set on
# every GRPO kernel under its own sharding (the reference's 2-D mesh splits
# batch and sequence, the others' sequence and vocabulary).
V2_SETS=(
  "none|--policy-loss=gspo --loss-type=sequence_mean"
  "8:batch|--policy-loss=gspo_token --loss-type=sequence_mean --empty-rows=skip"
  "2x4|--policy-loss=cispo --is-level=token --is-mode=mask --kl-estimator=k1 --beta=0.04"
  "8:seq|--policy-loss=sapo --advantage-shape=token --kl-estimator=low_var_kl --beta=0.04 --log-ratio-clamp=20"
  "none|--entropy-coef=0.01 --temperature=0.7 --temperature-mode=post_lse --is-level=sequence --row-count-input --loss-type=sequence_mean --empty-rows=skip"
  "2x4|--preset=verl-gspo"
  "8:batch|--preset=trl-dapo"
)
for kernel in grpo_reference grpo_tiled grpo_fused_linear; do
  for set in "${V2_SETS[@]}"; do
    shard=${set%%|*} opts=${set#*|}
    if [[ $shard == 2x4 ]]; then
      [[ $kernel == grpo_reference ]] && shard=2x4:batch,seq || shard=2x4:seq,vocab
    fi
    # shellcheck disable=SC2046,SC2086
    compare_case "$kernel v2 $opts shard=$shard" --kernel=$kernel --mode=fwd_bwd \
      --logits-dtype=bf16 $(extra_for $kernel) $(sharding "$shard") $opts
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
run_cmd 2 "threads with pjrt" -- run --kernel=grpo_tiled --random-inputs --backend=pjrt --threads=1 &&
  expect_in "$WORK/err" "--threads applies to the emulator, not --backend=pjrt" "threads message"

# The plugin runs in a child process: an endless loop is stopped by
# --timeout (its process killed), a collective that can never complete (the
# plugin aborts after its own rendezvous timeout) is an error naming the
# signal, never a crash of tpuoff.
timeout 120 "$TPUOFF" run "$SRC/tests/cli/data/endless.hlo" --random-inputs --backend=pjrt \
  --timeout=2 \
  >"$WORK/out" 2>"$WORK/err"
code=$?
[[ $code -eq 1 ]] || fail "endless loop on pjrt with --timeout=2: exit $code, want 1"
expect_in "$WORK/err" "exceeded the time limit of 2 s (the plugin's process was killed)" \
  "pjrt timeout message"
# The plugin's process dies with tpuoff however tpuoff ends: killed
# (SIGTERM, SIGKILL) while the endless loop runs, it leaves no process
# spinning behind (before, the orphan ran on at 100% CPU, --timeout or not).
for sig in TERM KILL; do
  "$TPUOFF" run "$SRC/tests/cli/data/endless.hlo" --random-inputs --backend=pjrt --timeout=600 \
    >/dev/null 2>&1 &
  parent=$!
  child=""
  for _ in $(seq 100); do  # up to 10 s for the plugin's process to start
    child=$(pgrep -P "$parent" | head -n 1)
    [[ -n $child ]] && break
    sleep 0.1
  done
  sleep 0.5
  kill -"$sig" "$parent"
  wait "$parent" 2>/dev/null
  if [[ -z $child ]]; then
    fail "SIG$sig: no plugin process seen"
    continue
  fi
  state=""
  for _ in $(seq 50); do  # gone, or a zombie for init to reap
    state=$(ps -o stat= -p "$child" 2>/dev/null | tr -d ' ')
    [[ -z $state || $state == Z* ]] && break
    sleep 0.1
  done
  if [[ -z $state || $state == Z* ]]; then
    pass "SIG$sig: the plugin's process ended with tpuoff"
  else
    fail "SIG$sig: the plugin's process $child is still running ($state)"
    kill -9 "$child" 2>/dev/null
  fi
done
# Device 1 waits at an all-reduce device 0 never reaches.
cat >"$WORK/deadlock.hlo" <<'HLO'
HloModule deadlock, num_partitions=2
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%skip (x: f32[4]) -> f32[4] {
  ROOT %x = f32[4] parameter(0)
}
%reduce (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %r = f32[4] all-reduce(%x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %pid = u32[] partition-id()
  %zero = u32[] constant(0)
  %first = pred[] compare(%pid, %zero), direction=EQ
  ROOT %c = f32[4] conditional(%first, %x, %x), true_computation=%skip, false_computation=%reduce
}
HLO
timeout 300 "$TPUOFF" run "$WORK/deadlock.hlo" --random-inputs --backend=pjrt --timeout=120 \
  >"$WORK/out" 2>"$WORK/err"
code=$?
[[ $code -eq 1 ]] || fail "collective deadlock on pjrt: exit $code, want 1 (134 is SIGABRT)"
grep -qE "the plugin crashed \(signal 6, SIGABRT\)|exceeded the time limit of 120 s" "$WORK/err" ||
  fail "collective deadlock on pjrt: $(grep tpuoff "$WORK/err" | head -c 400)"
run_cmd 2 "bad backends" -- compare --kernel=grpo_tiled --backends=emulator
run_cmd 2 "unknown backend" -- compare --kernel=grpo_tiled --backends=emulator,gpu

[[ $FAILURES -eq 0 ]] || { echo "$FAILURES failures"; exit 1; }
echo "all passed"
