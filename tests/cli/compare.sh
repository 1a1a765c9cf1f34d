#!/bin/bash
# `tpuoff compare` (sharded vs unsharded: exit 0 within tolerance, 1 beyond it
# with the worst element, 2 on usage errors) and the sharding flags of dump
# and run (per-device modules, global form, global inputs and outputs).
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
CASE="$SRC/tests/testdata/grpo/odd_vocab_tail"   # B=2 T=5 V=37, off-policy
SMALL=(--kernel=grpo_tiled --mode=fwd_bwd --batch=2 --seq=3 --vocab=37 --block-size=2)

# Within tolerance: vocab-sharded with ragged shards (37 = 7*5 + 2 on 8 devices).
run_cmd 0 "compare vocab mesh 8" -- compare "${SMALL[@]}" --mesh=8 --shard=vocab && {
  expect_in "$WORK/out" "vocab-sharded over 8 devices (5 vocab columns each)" "compare header"
  expect_in "$WORK/out" "tolerance: |sharded - unsharded| <= 1e-05 + 0.0001 * |unsharded|" "f32 tolerance"
  expect_in "$WORK/out" "dlogits          f32[2,3,37]" "dlogits row"
  expect_in "$WORK/out" "peak HBM: unsharded" "unsharded peak"
  expect_in "$WORK/out" "device 7 TPU_7 (v6e):" "per-device peak"
  expect_in "$WORK/out" "PASS: 6 outputs within tolerance" "pass line"
}
run_cmd 0 "compare batch mesh 2" -- compare "${SMALL[@]}" --mesh=2 --shard=batch --seed=3 &&
  expect_in "$WORK/out" "batch-sharded over 2 devices" "batch header"
# Ragged batch: B=2 over 8 devices (6 of them hold only padding rows).
run_cmd 0 "compare ragged batch mesh 8" -- compare "${SMALL[@]}" --mesh=8 --shard=batch &&
  expect_in "$WORK/out" "batch-sharded over 8 devices (1 sequence each)" "ragged batch header"
# 2-D meshes and sequence sharding (issue 20).
for spec in "2x4 batch,vocab" "4x2 batch,vocab" "2x4 seq,vocab" "8 seq" "2x4 batch,seq"; do
  set -- $spec
  run_cmd 0 "compare $1 $2" -- compare --kernel=grpo_tiled --mode=fwd_bwd --batch=3 --seq=7 --vocab=37 \
    --block-size=4 --loss-type=sequence_mean --mesh=$1 --shard=$2 --seed=5 &&
    expect_in "$WORK/out" "PASS: 6 outputs within tolerance" "$1 $2 pass"
done
run_cmd 0 "compare 2x4 seq,vocab header" -- compare "${SMALL[@]}" --mesh=2x4 --shard=seq,vocab &&
  expect_in "$WORK/out" "seq,vocab-sharded over mesh 2x4 (8 devices; per device B 2, T 2, V 10)" "2-D header"
# A v6e-256 pod's mesh: 256 device programs, the peaks summarised.
run_cmd 0 "compare 16x16 batch,vocab" -- compare --kernel=grpo_tiled --mode=fwd_bwd --batch=16 \
  --seq=8 --vocab=300 --block-size=16 --mesh=16x16 --shard=batch,vocab --threads=2 && {
  expect_in "$WORK/out" "batch,vocab-sharded over mesh 16x16 (256 devices; per device B 1, T 8, V 19)" "pod header"
  expect_in "$WORK/out" "  256 devices: sharded peak from" "pod peaks summarised"
  expect_in "$WORK/out" "PASS: 6 outputs within tolerance" "pod pass"
}
run_cmd 0 "compare fused seq,vocab" -- compare --kernel=grpo_fused_linear --mode=fwd_bwd --batch=2 --seq=5 \
  --vocab=37 --hidden=16 --block-size=8 --mesh=2x4 --shard=seq,vocab &&
  expect_in "$WORK/out" "PASS: 7 outputs within tolerance" "fused seq,vocab pass"
# Two shardings against each other (2-D batch,vocab against 8-way vocab).
run_cmd 0 "compare against another sharding" -- compare "${SMALL[@]}" --mesh=2x4 \
  --shard=batch,vocab --against-mesh=8 --against-shard=vocab && {
  expect_in "$WORK/out" "reference vocab-sharded over 8 devices (5 vocab columns each) vs batch,vocab-sharded over mesh 2x4" "against header"
  expect_in "$WORK/out" "tolerance: |sharded - reference|" "against tolerance"
  expect_in "$WORK/out" "peak HBM: reference" "against peak"
  expect_in "$WORK/out" "PASS: 6 outputs within tolerance" "against pass"
}
run_cmd 0 "compare against seq on the same mesh" -- compare "${SMALL[@]}" --mesh=2x4 \
  --shard=seq,vocab --against-shard=batch,vocab &&
  expect_in "$WORK/out" "reference batch,vocab-sharded over mesh 2x4" "against same mesh"
run_cmd 1 "compare against: forced mismatch" -- compare "${SMALL[@]}" --mesh=8 --shard=seq \
  --against-shard=vocab --perturb=logp:3 &&
  expect_in "$WORK/out" "FAIL: logp: 1 of 6 elements beyond tolerance; worst [1,0]: sharded" "against mismatch"
run_cmd 0 "compare bf16 entropy" -- compare --kernel=entropy_tiled --batch=2 --seq=4 --vocab=50 \
  --logits-dtype=bf16 --block-size=4 --mesh=4 --shard=vocab && {
  expect_in "$WORK/out" "tolerance: |sharded - unsharded| <= 0.002 + 0.02 * |unsharded|" "bf16 tolerance"
  expect_in "$WORK/out" "PASS: 1 outputs within tolerance" "entropy pass"
}
# Global inputs from a directory (a test-vector case holds them, by name).
run_cmd 0 "compare --inputs" -- compare --kernel=grpo_tiled --mode=fwd_bwd --batch=2 --seq=5 \
  --vocab=37 --block-size=4 --mesh=4 --shard=vocab --inputs="$CASE" &&
  expect_in "$WORK/out" "inputs: $CASE" "inputs named"

# Beyond tolerance: a forced mismatch exits 1 naming the worst element.
run_cmd 1 "forced mismatch" -- compare "${SMALL[@]}" --mesh=8 --shard=vocab --perturb=dlogits:17 && {
  expect_in "$WORK/out" "MISMATCH" "mismatch row"
  expect_in "$WORK/out" "FAIL: dlogits: 1 of 222 elements beyond tolerance; worst [0,0,17]" "worst index"
  expect_in "$WORK/err" "1 of 6 outputs beyond tolerance" "stderr summary"
  expect_one_line "$WORK/err" "mismatch stderr"
}
run_cmd 1 "forced mismatch on a scalar" -- compare "${SMALL[@]}" --mesh=2 --shard=batch --perturb=loss:0 &&
  expect_in "$WORK/out" "FAIL: loss: 1 of 1 elements beyond tolerance; worst []" "scalar worst"

# Usage errors: exit 2.
check_usage() {  # DESCRIPTION EXPECTED_TEXT ARGS...
  local desc=$1 text=$2
  shift 2
  run_cmd 2 "$desc" -- "$@" && {
    expect_in "$WORK/err" "$text" "$desc message"
    expect_one_line "$WORK/err" "$desc"
  }
}
check_usage "compare without --shard" "--shard=KIND[,KIND] (batch, seq or vocab per mesh axis) is required" compare "${SMALL[@]}"
check_usage "compare --shard=none" "--shard" compare "${SMALL[@]}" --shard=none
check_usage "compare without --kernel" "--kernel=NAME is required" compare --shard=vocab
check_usage "compare --mesh=2x" "--mesh must be N or AxB[xC...]" compare "${SMALL[@]}" --shard=vocab --mesh=2x
check_usage "compare --shard per axis" "--shard=batch,vocab,seq has 3 entries but --mesh=2x4 has 2 axes" \
  compare "${SMALL[@]}" --shard=batch,vocab,seq --mesh=2x4
check_usage "compare --against-mesh alone" "--against-mesh needs --against-shard" \
  compare "${SMALL[@]}" --shard=vocab --against-mesh=4
check_usage "compare bad --against-shard" "--against-shard=batch,vocab has 2 entries but --against-mesh=8 has 1 axis" \
  compare "${SMALL[@]}" --shard=batch --against-shard=batch,vocab --against-mesh=8
check_usage "compare --against-shard on reference" "--against-shard=vocab --against-mesh=8: vocab sharding needs a tiled kernel" \
  compare --kernel=grpo_reference --vocab=64 --shard=batch --against-shard=vocab
check_usage "compare --shard=none,none" "--shard must split something" compare "${SMALL[@]}" --shard=none,none --mesh=2x4
check_usage "compare bad kind" "--shard expects one of none|batch|seq|vocab per mesh axis" \
  compare "${SMALL[@]}" --shard=batch,model --mesh=2x4
check_usage "compare reference on vocab" "vocab sharding needs a tiled kernel" \
  compare --kernel=grpo_reference --vocab=64 --shard=seq,vocab --mesh=2x4
check_usage "compare --inputs and --seed" "give --inputs=DIR or --seed=N, not both" \
  compare "${SMALL[@]}" --shard=vocab --inputs="$CASE" --seed=1
check_usage "compare bad --perturb" "--perturb wants OUTPUT:INDEX" compare "${SMALL[@]}" --shard=vocab --perturb=dlogits
check_usage "compare unknown output" "no such output" compare "${SMALL[@]}" --shard=vocab --perturb=nope:0
check_usage "compare --mesh=0" "--mesh must be N or AxB[xC...] with at most 4096 devices" compare "${SMALL[@]}" --shard=vocab --mesh=0
check_usage "compare vocab-sharded reference" "vocab sharding needs a tiled kernel" \
  compare --kernel=grpo_reference --vocab=64 --shard=vocab
check_usage "compare positional" "" compare "${SMALL[@]}" --shard=vocab extra.hlo
check_usage "dump --global-form alone" "--global-form needs a sharding" \
  dump "${SMALL[@]}" --global-form
check_usage "dump --mesh without --kernel" "--mesh only applies with --kernel=NAME" dump --mesh=4 x.hlo
run_cmd 0 "compare --help" -- compare --help && {
  expect_in "$WORK/out" "--shard=KIND[,KIND]" "compare help lists --shard"
  expect_in "$WORK/out" "--mesh=N|AxB[xC...]" "compare help lists --mesh"
}

# dump: the per-device module and the global form.
run_cmd 0 "dump vocab-sharded" -- dump "${SMALL[@]}" --mesh=8 --shard=vocab && {
  expect_in "$WORK/out" "num_partitions=8" "num_partitions"
  expect_in "$WORK/out" "%logits = f32[2,3,5]{2,1,0} parameter(0), sharding={devices=[1,1,8]<=[8]}" "logits sharding"
  expect_in "$WORK/out" "%chosen_ids = s32[2,3]{1,0} parameter(1), sharding={replicated}" "replicated param"
  expect_in "$WORK/out" "replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%maximum_f32" "all-reduce max"
  expect_in "$WORK/out" "partition-id()" "partition id"
  expect_in "$WORK/out" 'global_parameter_shapes="f32[2,3,37];' "global shapes"
}
run_cmd 0 "dump batch-sharded global form" -- dump --kernel=grpo_tiled --batch=4 --seq=3 --vocab=40 \
  --mesh=4 --shard=batch --global-form && {
  expect_in "$WORK/out" "%logits = f32[4,3,40]{2,1,0} parameter(0), sharding={devices=[4,1,1]<=[4]}" "global param"
  expect_in "$WORK/out" 'custom_call_target="SPMDFullToShardShape", sharding={manual}' "full to shard"
  expect_in "$WORK/out" 'custom_call_target="SPMDShardToFullShape"' "shard to full"
  cp "$WORK/out" "$WORK/global.hlo"
}
# The global form runs replicated over the mesh, its shard_map body on each
# device's shard: the same outputs, bit for bit, as the per-device module.
run_cmd 0 "run a global form" -- run "$WORK/global.hlo" --random-inputs --seed=3 && {
  expect_in "$WORK/out" "4 devices (global inputs and outputs)" "global form on the mesh"
  grep "^output " "$WORK/out" >"$WORK/global_outputs"
}
"$TPUOFF" dump --kernel=grpo_tiled --batch=4 --seq=3 --vocab=40 --mesh=4 --shard=batch \
  --out="$WORK/perdev.hlo" || fail "dump per-device"
run_cmd 0 "run the per-device form" -- run "$WORK/perdev.hlo" --random-inputs --seed=3 && {
  grep "^output " "$WORK/out" >"$WORK/perdev_outputs"
  cmp -s "$WORK/global_outputs" "$WORK/perdev_outputs" ||
    fail "global form and per-device module disagree: $(diff "$WORK/global_outputs" "$WORK/perdev_outputs")"
}

# run: a partitioned module takes global inputs and writes global outputs.
run_cmd 0 "run sharded kernel" -- run --kernel=grpo_tiled --mode=fwd_bwd --batch=2 --seq=5 --vocab=37 \
  --mesh=8 --shard=vocab --inputs="$CASE" --outputs="$WORK/sharded" && {
  expect_in "$WORK/out" "8 devices (global inputs and outputs)" "global io line"
  expect_manifest "$WORK/sharded/manifest.json" '{"name": "dlogits", "file": "dlogits.npy", "shape": [2, 5, 37]}' "global dlogits"
}
"$TPUOFF" dump --kernel=grpo_tiled --mode=fwd_bwd --batch=2 --seq=5 --vocab=37 --mesh=2 --shard=batch \
  --out="$WORK/batch2.hlo" || fail "dump batch2"
run_cmd 0 "run dumped partitioned module" -- run "$WORK/batch2.hlo" --inputs="$CASE" &&
  cp "$WORK/out" "$WORK/out_batch"
run_cmd 0 "run unsharded" -- run --kernel=grpo_tiled --mode=fwd_bwd --batch=2 --seq=5 --vocab=37 \
  --inputs="$CASE" && {
  # Batch sharding changes no per-token bit: same checksum (incl. raw hash).
  line=$(grep "^output dlogits:" "$WORK/out")
  grep -qF -- "$line" "$WORK/out_batch" || fail "batch-sharded dlogits differ: $line vs $(grep dlogits "$WORK/out_batch")"
}
finish
