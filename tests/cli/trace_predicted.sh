#!/bin/bash
# `tpuoff run --trace`: besides the host wall-time track, every device has a
# predicted v6e track (tid 1) whose ops are the cost model's, laid end to end,
# with collectives ending together on all devices of a group and flows between
# the devices; its length equals `tpuoff cost`'s predicted step time.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
D="$SRC/tests/cli/data"

check_trace() {  # DESCRIPTION TRACE COST_JSON DEVICES
  python3 - "$2" "$3" "$4" <<'PY' || fail "$1: predicted track"
import json, sys
from collections import defaultdict
ev = json.load(open(sys.argv[1]))["traceEvents"]
cost = json.load(open(sys.argv[2]))
n = int(sys.argv[3])
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
for d in range(n):
    assert names.get((d, 1)) == "v6e predicted (tpuoff cost model)", names
    assert names.get((d, 0)) == "host emulator (wall time)", names
pred = defaultdict(list)
for e in ev:
    if e["ph"] == "X" and e["tid"] == 1:
        pred[e["pid"]].append(e)
assert sorted(pred) == list(range(n)), sorted(pred)
want_ops = len(cost["instructions"])
for d, es in pred.items():
    assert len(es) == want_ops, (d, len(es), want_ops)
    es.sort(key=lambda e: e["ts"])
    t = 0.0
    for e in es:  # end to end, from 0
        assert abs(e["ts"] - t) < 2e-3, (d, e["name"], e["ts"], t)
        t = e["ts"] + e["dur"]
    want = cost["predicted_seconds"] * 1e6
    assert abs(t - want) <= 1e-3 * len(es) + 1e-6 * want, (d, t, want)
# Collectives end together across devices.
ends = defaultdict(set)
for d, es in pred.items():
    for e in es:
        if e["cat"] == "predicted collective":
            ends[e["name"]].add(round(e["ts"] + e["dur"], 2))
if n > 1:
    assert ends and all(len(v) == 1 for v in ends.values()), ends
    s = {e["id"]: e for e in ev if e["ph"] == "s"}
    f = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert s and set(s) == set(f), (len(s), len(f))
    assert all(s[i]["pid"] != f[i]["pid"] and s[i]["ts"] <= f[i]["ts"] for i in s)
PY
}

K=(--kernel=grpo_tiled --mode=fwd_bwd --batch=8 --seq=16 --vocab=9000 --block-size=2048)
for shard in vocab batch; do
  run_cmd 0 "cost $shard" -- cost "${K[@]}" --mesh=8 --shard=$shard --json && cp "$WORK/out" "$WORK/cost.json" &&
    run_cmd 0 "run $shard" -- run "${K[@]}" --mesh=8 --shard=$shard --random-inputs --trace="$WORK/t.json" &&
    check_trace "$shard-sharded kernel" "$WORK/t.json" "$WORK/cost.json" 8
done
run_cmd 0 "cost module" -- cost "$D/add_mul.hlo" --json && cp "$WORK/out" "$WORK/cost.json" &&
  run_cmd 0 "run module" -- run "$D/add_mul.hlo" --random-inputs --trace="$WORK/t.json" &&
  check_trace "module file" "$WORK/t.json" "$WORK/cost.json" 1
# More devices than a v6e slice has: the run and its host trace still
# succeed, with a warning instead of the predicted track.
run_cmd 0 "512 devices" -- run --kernel=grpo_tiled --mode=fwd --batch=512 --seq=2 --vocab=300 \
  --mesh=512 --shard=batch --random-inputs --trace="$WORK/t512.json" &&
  expect_in "$WORK/err" "warning: no predicted v6e track in the trace: 512 devices" "512-device warning" &&
  python3 -c 'import json,sys; ev=json.load(open(sys.argv[1]))["traceEvents"]; sys.exit(0 if ev and all(e.get("tid", 0) == 0 for e in ev) else 1)' "$WORK/t512.json" ||
  fail "512 devices: host trace only"
finish
