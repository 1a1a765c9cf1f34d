#!/bin/bash
# `tpuoff bench --quick`: the CI smoke run of the benchmark at a small shape.
# Checks the table's shape, that the hand-fused floor agrees with the
# emulator on every case, the JSON output and usage errors; never timings.
# XLA:CPU / jax.jit columns run only when TPUOFF_XLA_PYTHON names the pinned
# venv's python (tools/xla_check/setup_venv.sh); otherwise they read "-".
# The XLA CPU plugin column is checked when TPUOFF_PJRT_CPU=1 (a build with
# the PJRT backend and its plugin).
TPUOFF=$1 SRC=$2
source "$SRC/tests/cli/data/helpers.bash"

XLA=()
if [[ -n ${TPUOFF_XLA_PYTHON:-} ]]; then
  XLA=(--xla-python="$TPUOFF_XLA_PYTHON" --xla-script="$SRC/tools/xla_check/bench_xla.py")
else
  unset TPUOFF_XLA_PYTHON
fi

run_cmd 0 "quick bench" -- bench --quick --json="$WORK/bench.json" "${XLA[@]}" && {
  expect_in "$WORK/out" "shape B=1 T=64 V=8192" "quick shape in the header"
  expect_in "$WORK/out" "streaming bandwidth read" "bandwidth in the header"
  expect_in "$WORK/out" "| case | dtype | emulator | cold run | XLA:CPU | XLA CPU plugin | jax.jit | floor | bound | cold/warm |" \
    "table header"
  # The fused kernel's matmul rates, and bf16 against f32 in the same run.
  expect_in "$WORK/out" "Matrix products (oneDNN" "GEMM backend line"
  expect_in "$WORK/out" "grpo_fused_linear fwd_bwd T=64 H=64 bf16: dots" "bf16 GEMM rate"
  expect_in "$WORK/out" "bf16/f32 GEMM rate" "GEMM ratio"
  # --dlogits-dtype=bf16 (bf16 only): every dot bf16 x bf16, set against the
  # f32 case's rate.
  grep -q "^grpo_fused_linear fwd_bwd T=64 H=64 dlogits bf16 bf16: dots .*; bf16/f32 GEMM rate" \
    "$WORK/out" || fail "no GEMM rate line of the dlogits bf16 case"
  expect_in "$WORK/out" "| grpo_fused_linear fwd_bwd T=64 H=64 dlogits bf16 | bf16 |" \
    "row fused dlogits bf16"
  grep -q "| grpo_fused_linear fwd_bwd T=64 H=64 dlogits bf16 | f32 |" "$WORK/out" &&
    fail "a dlogits bf16 row in f32"
  for c in "grpo_tiled fwd_bwd" "grpo_reference fwd_bwd" "entropy_tiled fwd" \
      "grpo_tiled fwd_bwd vocab/8"; do
    for d in bf16 f32; do
      expect_in "$WORK/out" "| $c | $d |" "row $c $d"
    done
  done
  for d in bf16 f32; do
    expect_in "$WORK/out" "| grpo_fused_linear fwd_bwd T=64 H=64 | $d |" "row fused $d"
  done
  rows=$(grep -c '^| [a-z_]* [a-z_]*.* | \(bf16\|f32\) |' "$WORK/out")
  [[ $rows -eq 11 ]] || fail "expected 11 result rows, got $rows"
  # The sharded rows say what the host's split/assembly cost besides.
  expect_in "$WORK/out" "grpo_tiled fwd_bwd vocab/8 bf16: devices' programs and collectives" \
    "host I/O note"
  # The cold runs beside their page floor, one entry per case.
  grep -q "^Fresh host memory, the cold runs' page floor .*grpo_tiled fwd_bwd bf16: .* in .* = .*x warm, cold/(warm + pages) [0-9]" \
    "$WORK/out" || fail "no page floor line of the cold runs"
  ok=$(grep -c '| ok |$' "$WORK/out")
  [[ $ok -eq 8 ]] || fail "floor check not ok on every row ($ok of 8): $(grep '^|' "$WORK/out")"
  grep -q "MISMATCH" "$WORK/out" && fail "floor disagrees with the emulator"
  if [[ ${#XLA[@]} -gt 0 ]]; then
    grep -q "| error |" "$WORK/out" && fail "an XLA/JAX side failed: $(cat "$WORK/err")"
  fi
  python3 - "$WORK/bench.json" <<'PY' || fail "bench JSON malformed"
import json, os, sys
d = json.load(open(sys.argv[1]))
assert len(d["cases"]) == 11, len(d["cases"])
for c in d["cases"]:
    assert c["emulator"]["median_s"] > 0, c
    assert len(c["emulator"]["samples_s"]) == 2, c
    # The floor: at least 3 timed runs whatever --reps (here 2).
    assert len(c["floor"]["samples_s"]) == (0 if c["case"].startswith("grpo_fused_linear") else 3), c
    assert c["hbm_peak_bytes"] > 0 and c["host_rss_peak_bytes"] > 0, c
    fused = c["case"].startswith("grpo_fused_linear")
    # No floor or bandwidth bound for the fused kernel (a matmul bounds it).
    assert (c["floor_check"] is None) if fused else (c["floor_check"] <= 1), c
    assert (c["bound_s"] == 0) if fused else (c["bound_s"] > 0), c
    assert (c["host_io_s"] > 0) == ("vocab/" in c["case"]), c
    # Cold: one `tpuoff run --random-inputs` process per repetition.
    assert len(c["cold"]["samples_s"]) == 2 and c["cold"]["median_s"] > 0, c
    assert c["cold"]["error"] == "" and c["cold_minor_faults"] > 0, c
    # The cold runs' page floor: their faulted bytes mapped fresh here.
    assert c["cold_fresh_pages_s"] > 0, c
    # Only the fused kernel has dots.
    assert (c["gemm_flops"] > 0 and c["gemm_s"] > 0) == fused, c
    if os.environ.get("TPUOFF_PJRT_CPU") == "1":
        assert c["pjrt"]["median_s"] > 0 and c["pjrt"]["compile_s"] > 0, c
        assert c["pjrt"]["error"] == "", c
PY
  pass "quick bench"
}

# One case, one dtype, its own shape.
run_cmd 0 "single case" -- bench --quick --cases=entropy_tiled --dtypes=f32 --seq=8 \
    --vocab=1000 --reps=1 --warmup=0 && {
  rows=$(grep -c '^| entropy_tiled fwd | f32 |' "$WORK/out")
  [[ $rows -eq 1 ]] || fail "single case: expected one row, got $rows"
  expect_in "$WORK/out" "T=8 V=1000" "single case shape"
}

# Without the cold runs the column reads "-".
run_cmd 0 "no cold runs" -- bench --quick --cases=entropy_tiled --dtypes=f32 --seq=8 \
    --vocab=1000 --reps=1 --warmup=0 --no-cold && {
  grep -q '^| entropy_tiled fwd | f32 | [0-9.]* m\?s | - |' "$WORK/out" ||
    fail "--no-cold: cold column not '-': $(grep '^| entropy' "$WORK/out")"
}

run_cmd 2 "bad case" -- bench --cases=nope
expect_in "$WORK/err" "unknown case 'nope'" "bad case message"
run_cmd 2 "bad dtype" -- bench --dtypes=f16
run_cmd 2 "bf16-only case in f32" -- bench --cases=grpo_fused_linear_dlogits_bf16 --dtypes=f32
expect_in "$WORK/err" "runs in bf16 only" "bf16-only case message"
run_cmd 2 "zero reps" -- bench --reps=0
run_cmd 2 "zero fused seq" -- bench --fused-seq=0
expect_in "$WORK/err" "--fused-seq" "fused seq message"
run_cmd 0 "help" -- bench --help && expect_in "$WORK/out" "hand-fused" "help text"

finish
