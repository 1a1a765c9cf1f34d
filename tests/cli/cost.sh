#!/bin/bash
# `tpuoff cost`: totals, per-op list and predicted v6e time of module files and
# kernels (unsharded and sharded), --counting=xla|fused, JSON keys and values,
# usage errors and bad input.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
D="$SRC/tests/cli/data"

# json_check FILE PYTHON_EXPR DESCRIPTION: the expression holds for j = the
# JSON document in FILE.
json_check() {
  local why
  if ! why=$(python3 - "$1" "$2" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
sys.exit(0 if ok else f"does not hold: {sys.argv[2]}; doc: {json.dumps(j)[:600]}")
PY
  ); then
    fail "$3: $why"
    return 1
  fi
  pass "$3"
}

# add_mul.hlo as XLA counts it: multiply 6 flops, 72 bytes; reduce 5 flops,
# 32 bytes; tuple pointer table 16 bytes.
run_cmd 0 "xla counting json" -- cost "$D/add_mul.hlo" --counting=xla --json &&
  json_check "$WORK/out" 'j["flops"] == 11 and j["transcendentals"] == 0 and j["bytes_accessed"] == 120 and j["counting"] == "xla"' "add_mul counted as XLA"
json_check "$WORK/out" 'all(k in j for k in ("flops", "transcendentals", "bytes_accessed", "predicted_seconds", "instructions")) and {"name", "flops", "bytes_read", "bytes_written", "predicted_seconds", "bound"} <= set(j["instructions"][0])' "json keys"
# Fused: one loop reads x and y and writes m, one reduce reads m and its
# init and writes the total; predicted
# time = bytes / 1.64e12 per op.
run_cmd 0 "fused json" -- cost "$D/add_mul.hlo" --json &&
  json_check "$WORK/out" 'j["counting"] == "fused" and j["bytes_read"] == 76 and j["bytes_written"] == 28 and abs(j["predicted_seconds"] - 104 / 1.64e12) < 1e-20' "add_mul fused bytes and time"

run_cmd 0 "text report" -- cost "$D/add_mul.hlo" &&
  expect_in "$WORK/out" "predicted step time per device:" "text has the step time" &&
  expect_in "$WORK/out" "by predicted time" "text lists top ops"

# A tiled kernel with its tile loop: bodies counted times the trip count.
K=(--kernel=grpo_tiled --mode=fwd_bwd --batch=2 --seq=8 --vocab=9000 --block-size=2048 --logits-dtype=bf16)
run_cmd 0 "kernel fused" -- cost "${K[@]}" --json &&
  json_check "$WORK/out" 'any(o["executions"] == 4 for o in j["instructions"]) and j["predicted_seconds"] > 0 and j["notes"] == []' "tile loop runs 4 times"
run_cmd 0 "kernel xla" -- cost "${K[@]}" --json --counting=xla &&
  json_check "$WORK/out" 'all(o["executions"] == 1 for o in j["instructions"])' "xla counts a loop body once"

# Vocab-sharded over v6e-8: all devices in one group, collectives on the
# 2x4 tray, some op bound by them.
run_cmd 0 "sharded kernel" -- cost "${K[@]}" --mesh=8 --shard=vocab --json &&
  json_check "$WORK/out" 'j["num_devices"] == 8 and j["topology"] == "2x4 (no wraparound)" and j["devices"][0]["devices"] == list(range(8)) and j["devices"][0]["collective_seconds"] > 0 and any(o["bound"] == "collective" for o in j["instructions"])' "8 devices, collectives costed"
run_cmd 0 "sharded text" -- cost "${K[@]}" --mesh=8 --shard=vocab &&
  expect_in "$WORK/out" "devices 0-7:" "devices grouped"
# A 2x4 mesh placed as jax places it on the tray (ring 0,1,2,3,7,6,5,4):
# the batch axis pairs partitions 0/4 and 3/7 on chips 4 hops apart, 1/5
# and 2/6 on chips 2 hops apart, so their collectives differ by 2 us each.
run_cmd 0 "2x4 mesh" -- cost "${K[@]}" --mesh=2x4 --shard=batch,vocab --json &&
  json_check "$WORK/out" 'sorted(g["devices"] for g in j["devices"]) == [[0, 3, 4, 7], [1, 2, 5, 6]] and j["topology"] == "2x4 (no wraparound)"' "2x4 mesh on jax's chip order"
run_cmd 0 "spmd module" -- cost "$D/spmd_allreduce.hlo" --json &&
  json_check "$WORK/out" 'j["num_devices"] == 4 and j["topology"] == "2x2 (no wraparound)"' "spmd module on a 2x2 slice"
run_cmd 0 "explicit topology" -- cost "$D/spmd_allreduce.hlo" --topology=4x4:torus --json &&
  json_check "$WORK/out" 'j["topology"] == "4x4 torus"' "topology flag"

# Errors.
run_cmd 2 "bad counting" -- cost "$D/add_mul.hlo" --counting=exact
run_cmd 2 "bad topology" -- cost "$D/add_mul.hlo" --topology=2xq && expect_one_line "$WORK/err" "bad topology"
run_cmd 1 "topology too small" -- cost "$D/spmd_allreduce.hlo" --topology=1x2 &&
  expect_in "$WORK/err" "4 devices" "too-small topology names the device count"
run_cmd 2 "module and kernel" -- cost "$D/add_mul.hlo" --kernel=grpo_tiled
run_cmd 2 "neither" -- cost
run_cmd 1 "missing file" -- cost "$WORK/nope.hlo" && expect_one_line "$WORK/err" "missing file"
run_cmd 1 "bad module" -- cost "$D/bad_syntax.hlo.txt" && expect_in "$WORK/err" "tpuoff cost: " "bad module prefix"
run_cmd 0 "help" -- cost --help && expect_in "$WORK/out" "--counting=fused|xla" "help lists flags"
finish
