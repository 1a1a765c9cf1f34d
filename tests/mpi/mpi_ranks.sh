#!/bin/bash
# `mpirun -np P tpuoff run|compare` on this host (oversubscribed, shared
# memory): the mesh's devices spread over P ranks must give byte-identical
# output files (every .npy and manifest.json) and the same report (but the
# wall time) as the single-process run, and the test vectors' expected
# values. Batch-, vocab- and 2-D (batch,vocab; seq,vocab) sharded kernels on
# 2 and 4 ranks, every collective (tests/mpi/data/all_collectives.hlo) on
# 2, 4 and 8 ranks, compare across ranks, and the usage errors.
#   mpi_ranks.sh TPUOFF SRC MPIEXEC
TPUOFF=$1 SRC=$2 MPIEXEC=$3
source "$SRC/tests/cli/data/helpers.bash"
source "$SRC/tests/cli/data/vectors.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_rmaps_base_oversubscribe=1
DATA="$SRC/tests/mpi/data"

# mpi NP DESC WANT_EXIT -- ARGS: mpirun -np NP tpuoff ARGS (out/err in $WORK).
mpi() {
  local np=$1 desc=$2 want=$3
  shift 4
  timeout 300 "$MPIEXEC" --oversubscribe -np "$np" "$TPUOFF" "$@" >"$WORK/mout" 2>"$WORK/merr"
  local got=$?
  if [[ $got -ne $want ]]; then
    fail "$desc: mpirun -np $np exit $got, want $want (tpuoff $*); stderr: $(grep -v '^\[' "$WORK/merr" | head -c 800)"
    return 1
  fi
}

# same_run DESC NP ARGS...: single-process run vs the same on NP ranks.
same_run() {
  local desc=$1 np=$2
  shift 2
  local one="$WORK/one" many="$WORK/many"
  rm -rf "$one" "$many"
  run_cmd 0 "$desc (one process)" -- run "$@" --outputs="$one" || return 1
  grep -v '^wall time' "$WORK/out" >"$WORK/one.txt"
  mpi "$np" "$desc" 0 -- run "$@" --outputs="$many" || return 1
  grep -v '^wall time' "$WORK/mout" >"$WORK/many.txt"
  if ! diff -q "$WORK/one.txt" "$WORK/many.txt" >/dev/null; then
    fail "$desc on $np ranks: report differs: $(diff "$WORK/one.txt" "$WORK/many.txt" | head -c 600)"
    return 1
  fi
  local f n=0
  for f in "$one"/*; do
    n=$((n + 1))
    if ! cmp -s "$f" "$many/$(basename "$f")"; then
      fail "$desc on $np ranks: $(basename "$f") differs from the single-process run"
      return 1
    fi
  done
  [[ $(ls "$many" | wc -l) -eq $n && $n -gt 1 ]] || { fail "$desc: $n files vs $(ls "$many" | wc -l)"; return 1; }
  return 0
}

# Kernels on the test vectors: one process vs 2 and 4 ranks, then the
# vectors' expected values (the ranks' files are the single process's).
for n in medium_vocab bf16_logits tiny_offpolicy; do
  dir="$SRC/tests/testdata/grpo/$n"
  mapfile -t lines < <(case_flags "$dir")
  flags=("${lines[@]:0:${#lines[@]}-1}")
  for run in grpo_tiled:vocab:4:2 grpo_tiled:vocab:4:4 grpo_reference:batch:2:2 \
             grpo_tiled:batch,vocab:2x4:2 grpo_tiled:batch,vocab:2x4:4 \
             grpo_tiled:seq,vocab:2x4:4; do
    IFS=: read -r kernel shard mesh np <<<"$run"
    desc="$n/$kernel --shard=$shard --mesh=$mesh"
    same_run "$desc" "$np" --kernel="$kernel" "${flags[@]}" --shard="$shard" --mesh="$mesh" \
      --inputs="$dir" || continue
    if msg=$(compare_outputs "$dir" "$WORK/many"); then
      pass "$desc on $np ranks: identical to one process and within the vector's tolerance"
    else
      fail "$desc on $np ranks: $msg"
    fi
  done
done

# Random global inputs (made whole on every rank, each keeping its pieces).
same_run "grpo_tiled random inputs --shard=vocab --mesh=4" 2 --kernel=grpo_tiled \
  --mode=fwd_bwd --batch=2 --seq=8 --vocab=300 --block-size=64 --logits-dtype=bf16 \
  --random-inputs --seed=3 --shard=vocab --mesh=4 && pass "random inputs on 2 ranks"

# Every collective kind (all-reduce f32/bf16, all-gather, reduce-scatter,
# all-to-all, collective-permute) with groups inside and across ranks.
for np in 2 4 8; do
  same_run "all_collectives.hlo" "$np" "$DATA/all_collectives.hlo" --random-inputs --seed=5 &&
    pass "every collective on $np ranks: identical to one process"
done

# compare across ranks: the same report as in one process (but wall times).
cmp_flags=(compare --kernel=grpo_tiled --mode=fwd_bwd --batch=4 --seq=8 --vocab=300
           --block-size=64 --seed=2)
for extra in "--shard=vocab --mesh=4" "--shard=batch,vocab --mesh=2x4 --against-shard=vocab --against-mesh=4"; do
  read -r -a ex <<<"$extra"
  if run_cmd 0 "compare $extra (one process)" -- "${cmp_flags[@]}" "${ex[@]}" &&
     mpi 2 "compare $extra" 0 -- "${cmp_flags[@]}" "${ex[@]}"; then
    if diff <(grep -v 'wall time' "$WORK/out") <(grep -v 'wall time' "$WORK/mout") >/dev/null &&
       grep -q '^PASS' "$WORK/mout"; then
      pass "compare $extra on 2 ranks"
    else
      fail "compare $extra on 2 ranks: $(diff <(grep -v 'wall time' "$WORK/out") <(grep -v 'wall time' "$WORK/mout") | head -c 600)"
    fi
  fi
done

# Usage: what cannot spread over the ranks says so (exit 2 or 1), never
# runs P copies.
mpi 2 "dump on 2 ranks" 2 -- dump --kernel=grpo_tiled --batch=2 --seq=8 --vocab=64 &&
  expect_in "$WORK/merr" "does not run across MPI ranks" "dump on 2 ranks" && pass "dump refused on 2 ranks"
mpi 2 "--trace on 2 ranks" 2 -- run "$DATA/all_collectives.hlo" --random-inputs \
  --trace="$WORK/t.json" && expect_in "$WORK/merr" "--trace does not apply" "--trace" &&
  pass "--trace refused on 2 ranks"
mpi 3 "8 devices on 3 ranks" 1 -- run "$DATA/all_collectives.hlo" --random-inputs &&
  expect_in "$WORK/merr" "3 MPI ranks cannot share evenly" "8 on 3" && pass "8 devices on 3 ranks refused"
mpi 2 "one device on 2 ranks" 1 -- run --kernel=grpo_tiled --batch=2 --seq=8 --vocab=64 \
  --random-inputs && expect_in "$WORK/merr" "1 device(s), which 2 MPI ranks cannot share" "1 on 2" &&
  pass "a one-device module refused on 2 ranks"
finish
