#!/usr/bin/env bash
# ThreadSanitizer build and test run (a developer check, not part of
# run_tests.sh: ~22 minutes on a 2-core machine, a 7-minute build and 15
# minutes of tests).
#   bash tools/scripts/tsan_tests.sh [ctest arguments...]
# Builds build-tsan/ with clang -fsanitize=thread (-O1, debug info) and runs
# every ctest test the ASan build runs (not the XLA/PJRT/MPI ones labelled
# no_sanitizer, nor the long value checks labelled release_only). A test
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
ninja -C build-tsan -j"$JOBS"

export OMP_TOOL_LIBRARIES="$ARCHER"
export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:ignore_noninstrumented_modules=1"
ctest --test-dir build-tsan -j"$JOBS" --output-on-failure --timeout 1800 \
      -LE 'no_sanitizer|release_only' "$@"
