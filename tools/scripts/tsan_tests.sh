#!/usr/bin/env bash
# ThreadSanitizer build and test run.
#   bash tools/scripts/tsan_tests.sh [ctest arguments...]
#     every ctest test the ASan build runs (not the XLA/PJRT/MPI ones labelled
#     no_sanitizer, nor the long value checks labelled release_only): ~22
#     minutes on a 2-core machine, a 7-minute build and 15 minutes of tests;
#   bash tools/scripts/tsan_tests.sh --threaded
#     what run_tests.sh (CI) runs: the library and the test programs whose
#     code runs on several threads (the loop pool, the host memory's
#     populating threads, device threads and their collectives, row-chunked
#     while loops, JIT-compiled loops on the pool, the parallel random fill,
#     sharded and unsharded kernels end to end), each program run whole:
#     about 4 minutes of tests on 2 cores after the build.
# Builds build-tsan/ with clang -fsanitize=thread (-O1, debug info). A test
# fails when its process reports a data race, a lock-order inversion or a
# misuse of a lock (ThreadSanitizer then exits with 66).
#
# What it does not see: the OpenMP runtime (libomp, loaded with LLVM's Archer
# tool so that TSan knows its barriers and tasks), the loops the LLVM JIT
# compiles, and the shared Debian libraries (absl, protobuf, LLVM, oneDNN;
# Eigen is header-only, compiled into our objects and checked) are not
# instrumented: their own accesses are not checked, and reports that only
# involve them are dropped (ignore_noninstrumented_modules). A mutation check
# (the loop pool's done_ counter made relaxed) gave 10 race reports and exit
# 66 in parallel_test.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
JOBS="$(nproc)"
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1

bash tools/scripts/install_deps.sh
ARCHER="$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | sort -V | tail -n 1 || true)"
if [ -z "$ARCHER" ]; then
  echo "tsan_tests.sh: libarcher.so (Debian libomp-dev) not found" >&2
  exit 1
fi

cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" \
      -DCMAKE_CXX_COMPILER=clang++ -DTPUOFF_TSAN=ON -DTPUOFF_BENCH_TOOLS=OFF \
      -DTPUOFF_XLA_PYTHON="" -DTPUOFF_REF_PYTHON="" -DTPUOFF_PJRT_PLUGINS="" >/dev/null
# The threaded subset (--threaded): test programs, not ctest names (each
# program's gtest cases are discovered under their own names).
THREADED=(parallel_test host_memory_test executor_collectives_test executor_memory_test
          row_while_test row_chain_test loop_jit_test random_inputs_test bench_cold_test
          grpo_kernels_test sharded_kernels_test mesh_kernels_test)
if [ "${1:-}" = "--threaded" ]; then
  ninja -C build-tsan -j"$JOBS" "${THREADED[@]}"
else
  ninja -C build-tsan -j"$JOBS"
fi

export OMP_TOOL_LIBRARIES="$ARCHER"
export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:ignore_noninstrumented_modules=1"
if [ "${1:-}" = "--threaded" ]; then
  failed=()
  for t in "${THREADED[@]}"; do
    s=$(date +%s)
    log="build-tsan/$t.tsan.log"
    rc=0
    (cd build-tsan && timeout 1800 "./$t") >"$log" 2>&1 || rc=$?
    races=$(grep -c 'WARNING: ThreadSanitizer' "$log" || true)
    echo "tsan: $t exit $rc, $races reports, $(( $(date +%s) - s ))s ($(tail -n 1 "$log"))"
    if [ "$rc" -ne 0 ] || [ "$races" -ne 0 ]; then
      failed+=("$t")
      grep -A 30 'WARNING: ThreadSanitizer' "$log" | head -n 120 || tail -n 40 "$log"
    fi
  done
  if [ "${#failed[@]}" -ne 0 ]; then
    echo "tsan_tests.sh: failed under ThreadSanitizer: ${failed[*]} (logs: build-tsan/<test>.tsan.log)" >&2
    exit 1
  fi
  exit 0
fi
ctest --test-dir build-tsan -j"$JOBS" --output-on-failure --timeout 1800 \
      -LE 'no_sanitizer|release_only' "$@"
