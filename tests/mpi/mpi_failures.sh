#!/bin/bash
# A run across MPI ranks that goes wrong ends the whole job with an error
# naming the rank and the device, within bounded time, never a hang:
#   - a device of rank 1 fails (a loop limit) while rank 0's devices wait for
#     it at a collective: rank 1 aborts the job;
#   - rank 1's devices skip a collective rank 0's devices wait at: rank 0's
#     exchange deadline (--collective-timeout) ends the job.
#   mpi_failures.sh TPUOFF SRC MPIEXEC
TPUOFF=$1 SRC=$2 MPIEXEC=$3
source "$SRC/tests/cli/data/helpers.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
DATA="$SRC/tests/mpi/data"

# ends_within SECONDS DESC ARGS...: mpirun -np 2 fails (not 0) before the
# bound; stderr in $WORK/merr.
ends_within() {
  local bound=$1 desc=$2
  shift 2
  local t0=$SECONDS
  timeout "$bound" "$MPIEXEC" --oversubscribe -np 2 "$TPUOFF" "$@" >"$WORK/mout" 2>"$WORK/merr"
  local got=$?
  if [[ $got -eq 124 ]]; then
    fail "$desc: still running after ${bound}s (a hang)"
    return 1
  fi
  if [[ $got -eq 0 ]]; then
    fail "$desc: exit 0, want a failure"
    return 1
  fi
  echo "$desc: exit $got after $((SECONDS - t0))s"
}

if ends_within 120 "a failing device on rank 1" run "$DATA/rank_fails.hlo" --random-inputs \
     --max-loop-iterations=25; then
  expect_in "$WORK/merr" "[rank 1 of 2]: device 3: while loop %w" "failing device" &&
    expect_in "$WORK/merr" "rank 1 of 2 failed (exit 1): ending every rank" "failing device" &&
    pass "a failing device on rank 1 ends the job naming rank 1 and device 3"
fi
# The same program without the limit runs (and matches one process).
run_cmd 0 "rank_fails.hlo without the limit" -- run "$DATA/rank_fails.hlo" --random-inputs
cp "$WORK/out" "$WORK/one.txt"
if timeout 120 "$MPIEXEC" --oversubscribe -np 2 "$TPUOFF" run "$DATA/rank_fails.hlo" \
     --random-inputs >"$WORK/mout" 2>"$WORK/merr" &&
   diff <(grep -v wall "$WORK/one.txt") <(grep -v wall "$WORK/mout") >/dev/null; then
  pass "rank_fails.hlo without the limit: as one process"
else
  fail "rank_fails.hlo without the limit on 2 ranks: $(head -c 600 "$WORK/merr")"
fi

if ends_within 120 "a collective rank 1 never joins" run "$DATA/skipped_collective.hlo" \
     --random-inputs --collective-timeout=2; then
  expect_in "$WORK/merr" "[rank 0 of 2]: collective %ar (ar#1@0) over devices {0,1,2,3} did not complete in 2s: rank 0 (devices {0,1}) waited for rank 1 (devices {2,3}), which never sent its part" \
    "skipped collective" && pass "a collective never completed ends the job naming ranks and devices"
fi
finish
