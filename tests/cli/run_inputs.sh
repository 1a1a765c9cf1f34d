#!/bin/bash
# `tpuoff run` with --inputs and --random-inputs: values, output files,
# manifest, determinism, and the errors for missing/wrong inputs.
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"
M="$SRC/tests/cli/data/add_mul.hlo"
MIXED="$SRC/tests/cli/data/mixed_types.hlo"
IN="$WORK/in"
mkdir -p "$IN"

# --inputs: x = 1..6, y = 2 everywhere -> prod = 2..12, total = 42.
write_npy "$IN/x.npy" '<f4' '(2, 3)' 1 2 3 4 5 6
write_npy "$IN/y.npy" '<f8' '(2, 3)' 2 2 2 2 2 2   # float64 is converted
run_cmd 0 "run --inputs" -- run "$M" --inputs="$IN" --outputs="$WORK/res" --trace="$WORK/trace.json" && {
  expect_in "$WORK/out" "output prod: f32[2,3] sum=42 abs_sum=42" "prod checksum"
  expect_in "$WORK/out" "output total: f32[] sum=42 abs_sum=42" "total checksum"
  expect_in "$WORK/out" "device 0" "per-device HBM line"
  expect_in "$WORK/out" "peak HBM" "per-device HBM line"
  expect_in "$WORK/out" "wall time:" "wall time line"
  got=$(read_npy "$WORK/res/prod.npy")
  [[ $got == "<f4 (2, 3) 2 4 6 8 10 12" ]] || fail "prod.npy holds '$got'"
  got=$(read_npy "$WORK/res/total.npy")
  [[ $got == "<f4 () 42" ]] || fail "total.npy holds '$got'"
  expect_manifest "$WORK/res/manifest.json" '{"name": "prod", "file": "prod.npy", "shape": [2, 3], "dtype": "float32", "hlo_type": "f32"}' "manifest prod"
  expect_manifest "$WORK/res/manifest.json" '{"name": "total", "file": "total.npy", "shape": [], "dtype": "float32"}' "manifest total"
  python3 - "$WORK/trace.json" <<'PY' || fail "trace is not a Chrome trace of the run"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
assert {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "TPU_0 (v6e)"}} in ev, ev[:3]
ops = [e for e in ev if e["ph"] == "X"]
assert ops and all(e["ts"] >= 0 and e["dur"] >= 0 and e["name"] and e["pid"] == 0 for e in ops), ops[:3]
assert any(e["ph"] == "C" and e["args"]["bytes"] > 0 for e in ev), ev[:5]
PY
  no_leftovers "$WORK" "run outputs"
}

# Mixed types: int64 -> s32, bool -> pred, float32 -> bf16 (rounded), and a
# module without output_names -> output_<i>; bf16 results come back float32.
write_npy "$IN/ids.npy" '<i8' '(4,)' 0 5 10 151935
write_npy "$IN/mask.npy" '|b1' '(4,)' 1 0 1 0
write_npy "$IN/h.npy" '<f4' '(2, 2)' 1.00390625 -2.5 0.1 3
run_cmd 0 "run mixed" -- run "$MIXED" --inputs="$IN" --outputs="$WORK/mixed" && {
  got=$(read_npy "$WORK/mixed/output_0.npy")
  [[ $got == "<i4 (4,) 1 5 11 151935" ]] || fail "output_0.npy holds '$got'"
  # bf16(1.00390625) = 1 (ties to even), bf16(0.1) = 0.10009765625.
  got=$(read_npy "$WORK/mixed/output_1.npy")
  [[ $got == "<f4 (2, 2) 2 -5 0.200195 6" ]] || fail "output_1.npy holds '$got'"
  expect_manifest "$WORK/mixed/manifest.json" '{"name": "output_1", "dtype": "float32", "hlo_type": "bf16"}' "manifest bf16 type"
}

# Missing and wrong inputs: exit 1, every expected parameter listed, nothing written.
mkdir -p "$WORK/partial"
cp "$IN/x.npy" "$WORK/partial/"
run_cmd 1 "missing input" -- run "$M" --inputs="$WORK/partial" --outputs="$WORK/never" && {
  expect_in "$WORK/err" "y.npy: missing" "missing input named"
  expect_in "$WORK/err" "x.npy: f32[2,3] (.npy float16, float32, float64 or bfloat16, shape (2, 3))" "expected x listed"
  expect_in "$WORK/err" "y.npy: f32[2,3] (.npy float16, float32, float64 or bfloat16, shape (2, 3))" "expected y listed"
}
[[ -e $WORK/never ]] && fail "outputs written despite missing input"
write_npy "$WORK/partial/y.npy" '<f4' '(3, 2)' 1 2 3 4 5 6
run_cmd 1 "wrong shape" -- run "$M" --inputs="$WORK/partial" &&
  expect_in "$WORK/err" "holds shape (3, 2) float32, expected f32[2,3]" "wrong shape message"
write_npy "$WORK/partial/y.npy" '<i4' '(2, 3)' 1 2 3 4 5 6
run_cmd 1 "wrong dtype" -- run "$M" --inputs="$WORK/partial" &&
  expect_in "$WORK/err" "holds int32 data, expected f32[2,3]" "wrong dtype message"
printf 'garbage' >"$WORK/partial/y.npy"
run_cmd 1 "corrupt npy" -- run "$M" --inputs="$WORK/partial" &&
  expect_in "$WORK/err" "y.npy: not a valid .npy file" "corrupt npy message"

# --random-inputs: deterministic per seed, different across seeds.
strip_time() { grep -v '^wall time' "$1"; }
run_cmd 0 "random seed 7" -- run "$M" --random-inputs --seed=7 --outputs="$WORK/r1" && strip_time "$WORK/out" >"$WORK/s1"
run_cmd 0 "random seed 7 again" -- run "$M" --random-inputs --seed=7 --outputs="$WORK/r2" && strip_time "$WORK/out" >"$WORK/s2"
run_cmd 0 "random seed 8" -- run "$M" --random-inputs --seed=8 && strip_time "$WORK/out" >"$WORK/s3"
cmp -s "$WORK/s1" "$WORK/s2" || fail "same seed, different results: $(diff "$WORK/s1" "$WORK/s2")"
cmp -s "$WORK/r1/prod.npy" "$WORK/r2/prod.npy" || fail "same seed, different prod.npy"
cmp -s "$WORK/s1" "$WORK/s3" && fail "seeds 7 and 8 gave identical results"
# Uniform[-1,1] inputs: every product is in [-1, 1].
python3 - "$WORK/r1/prod.npy" <<'PY' || fail "random products outside [-1, 1]"
import struct, sys
b = open(sys.argv[1], 'rb').read()
vals = struct.unpack('<6f', b[-24:])
assert all(-1 <= v <= 1 for v in vals) and len(set(vals)) == 6, vals
PY
# An existing (user-created) outputs directory receives the files too.
mkdir -p "$WORK/existing"
run_cmd 0 "outputs into existing dir" -- run "$M" --random-inputs --outputs="$WORK/existing" &&
  [[ -f $WORK/existing/manifest.json && -f $WORK/existing/prod.npy ]] || fail "files missing in existing outputs dir"
no_leftovers "$WORK" "random runs"

# SPMD (num_partitions=4): DIR/x.npy feeds every device unless DIR/deviceD/
# exists; outputs are <name>.deviceD.npy with the device in the manifest.
SPMD="$SRC/tests/cli/data/spmd_allreduce.hlo"
mkdir -p "$WORK/spmd_in"
write_npy "$WORK/spmd_in/x.npy" '<f4' '(2,)' 1 2
run_cmd 0 "spmd shared inputs" -- run "$SPMD" --inputs="$WORK/spmd_in" --outputs="$WORK/spmd1" && {
  expect_in "$WORK/out" "4 devices" "spmd device count"
  expect_in "$WORK/out" "device 3 TPU_3" "spmd per-device HBM"
  got=$(read_npy "$WORK/spmd1/total.device2.npy")
  [[ $got == "<f4 (2,) 4 8" ]] || fail "shared-input all-reduce gave '$got'"
}
for d in 0 1 2 3; do
  mkdir -p "$WORK/spmd_in/device$d"
  write_npy "$WORK/spmd_in/device$d/x.npy" '<f4' '(2,)' "$d" 10
done
run_cmd 0 "spmd per-device inputs" -- run "$SPMD" --inputs="$WORK/spmd_in" --outputs="$WORK/spmd2" && {
  got=$(read_npy "$WORK/spmd2/total.device0.npy")
  [[ $got == "<f4 (2,) 6 40" ]] || fail "per-device all-reduce gave '$got'"
  got=$(read_npy "$WORK/spmd2/pid.device3.npy")
  [[ $got == "<u4 () 3" ]] || fail "partition id of device 3 is '$got'"
  expect_manifest "$WORK/spmd2/manifest.json" '{"name": "pid.device3", "file": "pid.device3.npy", "shape": [], "dtype": "uint32", "hlo_type": "u32", "device": 3}' "spmd manifest"
}

# A token parameter (jax's ordered effects) takes no file: it is made, and the
# listing of expected files says so.
TOK="$WORK/token.hlo"
printf '%s\n' 'HloModule t' 'ENTRY e { tk = token[] parameter(0) x = f32[3] parameter(1) a = token[] after-all(tk)' '  ROOT y = f32[3] add(x, x) }' > "$TOK"
mkdir -p "$WORK/tok_in"
write_npy "$WORK/tok_in/x.npy" '<f4' '(3,)' 1 2 3
run_cmd 0 "token parameter without a file" -- run "$TOK" --inputs="$WORK/tok_in" --outputs="$WORK/tok_out" && {
  got=$(read_npy "$WORK/tok_out/output_0.npy")
  [[ $got == "<f4 (3,) 2 4 6" ]] || fail "token module gave '$got'"
}
rm "$WORK/tok_in/x.npy"
run_cmd 1 "token module, x missing" -- run "$TOK" --inputs="$WORK/tok_in" && {
  expect_in "$WORK/err" "tk: token[] (no file: a token carries no data)" "token listed without a file"
  expect_in "$WORK/err" "x.npy: missing" "missing x named"
}
finish
