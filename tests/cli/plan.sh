#!/bin/bash
# `tpuoff plan`: the answer is verified by `tpuoff memory` (its flags fit
# --hbm-gib; one more batch step does not), on 1-D and 2-D meshes; JSON keys;
# text; errors.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"

G=0.005859375  # 6 MiB per device
P=(--hidden=64 --vocab=3000 --seq=16 --mesh=4 --hbm-gib=$G --logits-dtype=bf16)
for step in 4 6; do
  run_cmd 0 "plan json step $step" -- plan "${P[@]}" --batch-step=$step --json || continue
  cp "$WORK/out" "$WORK/plan.json"
  if ! python3 - "$WORK/plan.json" "$step" <<'PY'; then
import json, sys
j = json.load(open(sys.argv[1]))
step = int(sys.argv[2])
assert {"batch", "batch_step", "flags", "peak_bytes", "predicted_seconds"} <= set(j), j.keys()
assert j["batch"] > 0 and j["batch"] % step == 0 and j["batch_step"] == step, j
assert j["predicted_seconds"] > 0 and 0 < j["peak_bytes"] <= j["hbm_capacity_bytes"], j
PY
    fail "plan json keys/values (step $step)"
    continue
  fi
  mapfile -t FLAGS < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["flags"]))' "$WORK/plan.json")
  B=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["batch"])' "$WORK/plan.json")
  PEAK=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_bytes"])' "$WORK/plan.json")
  run_cmd 0 "memory fits the plan (step $step)" -- memory "${FLAGS[@]}" --hbm-gib=$G --fail-if-over --json &&
    python3 - "$WORK/out" "$PEAK" <<'PY' || fail "memory's padded peak equals plan's peak_bytes (step $step)"
import json, sys
j = json.load(open(sys.argv[1]))
assert max(g["tpu_peak_bytes"] for g in j["groups"]) == int(sys.argv[2]), (j["groups"][0].keys(), sys.argv[2])
PY
  NEXT=()
  for f in "${FLAGS[@]}"; do
    [[ $f == --batch=* ]] && f="--batch=$((B + step))"
    NEXT+=("$f")
  done
  # One more step does not fit: memory says over capacity, or (batch
  # sharding, B+step not divisible by the mesh) the winning sharding cannot
  # take that batch and no configuration searched fits it.
  "$TPUOFF" memory "${NEXT[@]}" --hbm-gib=$G --fail-if-over >"$WORK/out" 2>"$WORK/err"
  rc=$?
  if [[ $rc -eq 1 ]]; then
    pass "plan step $step: batch $B fits, $((B + step)) does not (tpuoff memory)"
  elif [[ $rc -eq 2 ]] && grep -q "not divisible by the mesh" "$WORK/err" &&
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if all(c["batch"] < int(sys.argv[2]) for c in j["candidates"]) else 1)' "$WORK/plan.json" "$((B + step))"; then
    pass "plan step $step: batch $B fits; $((B + step)) is not batch-shardable and fits no other configuration"
  else
    fail "plan step $step: batch $((B + step)) should not fit (memory exit $rc: $(head -c 300 "$WORK/err"))"
  fi
done

# A 2-D mesh: every per-axis sharding is searched; the answer reproduces.
run_cmd 0 "plan 2x2" -- plan --hidden=64 --vocab=3000 --seq=16 --mesh=2x2 --hbm-gib=0.0029296875 \
  --batch-step=2 --json && cp "$WORK/out" "$WORK/plan2.json" && {
  mapfile -t FLAGS < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["flags"]))' "$WORK/plan2.json")
  B=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["batch"])' "$WORK/plan2.json")
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if len(j["candidates"]) == 384 and any("--shard=batch,vocab" in c["flags"] for c in j["candidates"]) else 1)' "$WORK/plan2.json" ||
    fail "2x2: 16 shardings x (4 tiled + 20 fused) configurations searched"
  run_cmd 0 "2x2 plan fits" -- memory "${FLAGS[@]}" --hbm-gib=0.0029296875 --fail-if-over
  NEXT=()
  for f in "${FLAGS[@]}"; do [[ $f == --batch=* ]] && f="--batch=$((B + 2))"; NEXT+=("$f"); done
  run_cmd 1 "2x2 plan: one more step does not fit" -- memory "${NEXT[@]}" --hbm-gib=0.0029296875 --fail-if-over &&
    pass "plan 2x2: batch $B verified by memory"
}
run_cmd 2 "bad mesh" -- plan --mesh=2xq
run_cmd 2 "mesh over a pod" -- plan --mesh=512
run_cmd 0 "plan text" -- plan "${P[@]}" --batch-step=4 &&
  expect_in "$WORK/out" "reproduce: tpuoff memory --kernel=" "text has the flags" &&
  expect_in "$WORK/out" "largest batch: " "text has the batch"
run_cmd 1 "nothing fits" -- plan --hidden=64 --vocab=3000 --seq=16 --mesh=4 --hbm-gib=0.000001 &&
  expect_one_line "$WORK/err" "nothing fits: one line"
run_cmd 2 "bad seq" -- plan --seq=0
run_cmd 2 "bad hbm" -- plan --hbm-gib=-1
run_cmd 2 "positional" -- plan foo.hlo
run_cmd 0 "help" -- plan --help && expect_in "$WORK/out" "--batch-step=INT" "help lists flags"
finish
