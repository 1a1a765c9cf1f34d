#!/bin/bash
# A tpuoff built without MPI, started as one of several MPI ranks (the
# launcher's environment says so), refuses with exit 2 instead of running
# identical copies; as a single rank it runs as usual.
#   no_mpi_refuses.sh TPUOFF
TPUOFF=$1
out=$(OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 "$TPUOFF" run --kernel=grpo_tiled --batch=2 \
        --seq=8 --vocab=64 --random-inputs 2>&1)
rc=$?
if [[ $rc -ne 2 || $out != *"built without MPI"* ]]; then
  echo "FAIL: exit $rc, want 2 with 'built without MPI': $out"
  exit 1
fi
if ! OMPI_COMM_WORLD_SIZE=1 "$TPUOFF" run --kernel=grpo_tiled --batch=2 --seq=8 --vocab=64 \
       --random-inputs >/dev/null; then
  echo "FAIL: a single rank should run"
  exit 1
fi
echo "1 passed, 0 failed"
