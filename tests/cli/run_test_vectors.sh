#!/bin/bash
# End to end through the CLI: every GRPO test vector of a vector folder
# (default tests/testdata/grpo; ctest also runs grpo_v2, grpo_fused,
# grpo_fused_v2 and the ../shared/testdata folders when they exist; inputs
# written by numpy) is run with `tpuoff run --kernel=... --inputs=` — the
# case's params (v1, v2, "preset") as kernel flags — for the reference and the
# tiled kernel, unsharded and sharded (tiled over the vocab on 4 devices, the
# reference over the batch), or for cases with a hidden size H the fused
# LM-head kernel (unsharded, vocab over 3, batch), and every output .npy is
# checked against expected_<name>.npy with the case's tolerance.
# Extra `run` flags come from $TPUOFF_RUN_FLAGS (e.g. --backend=pjrt: the same
# vectors on the XLA CPU plugin).
#   run_test_vectors.sh TPUOFF SRC [CASES_DIR]
TPUOFF=$1 SRC=$2
read -r -a RUN_FLAGS <<< "${TPUOFF_RUN_FLAGS:-}"
source "$SRC/tests/cli/data/helpers.bash"
CASES="${3:-$SRC/tests/testdata/grpo}"
if ! ls "$CASES"/*/case.json >/dev/null 2>&1; then
  fail "no test vectors at $CASES"
  finish
fi

source "$SRC/tests/cli/data/vectors.bash"

for dir in "$CASES"/*/ "$CASES"_fused/*/; do
  [[ -f $dir/case.json ]] || continue
  n=$(basename "$dir")
  mapfile -t lines < <(case_flags "$dir")
  flags=("${lines[@]:0:${#lines[@]}-1}")
  read -r -a runs <<<"${lines[-1]#KERNELS }"
  for run in "${runs[@]}"; do
    IFS=: read -r kernel shard mesh <<<"$run"
    extra=()
    [[ -n $shard ]] && extra=(--shard="$shard" --mesh="$mesh")
    out="$WORK/$n-${run//:/-}"
    run_cmd 0 "$n/$run" -- run --kernel=$kernel "${flags[@]}" "${extra[@]}" "${RUN_FLAGS[@]}" \
      --inputs="$dir" \
      --outputs="$out" || continue
    if msg=$(compare_outputs "$dir" "$out"); then
      pass "$n/$run"
    else
      fail "$n/$run: $msg (flags: ${flags[*]} ${extra[*]})"
    fi
  done
done
finish
