#!/usr/bin/env bash
# The whole test suite, as CI runs it on a fresh machine:
#   1. Debian packages, the pinned jax venv of the XLA conformance harness
#      (tools/xla_check/setup_venv.sh), the pinned numpy venv of the float64
#      reference (tools/reference/setup_venv.sh) and the pinned PJRT plugins
#      (XLA CPU plugin + libtpu, tools/pjrt/setup_plugins.sh): cached between
#      runs, fail loudly;
#   2. release build + every ctest test, the XLA conformance, the reference's
#      and the PJRT tests included (every kernel on the CPU plugin against the
#      emulator and the vectors; every kernel compiled for TPU v6e:2x4 with
#      libtpu, offline; report: build/xla_conformance.md);
#   3. the Python package: `pip install .` into a pinned venv, pytest
#      python/tests (tools/scripts/python_tests.sh);
#   4. a clang AddressSanitizer + UndefinedBehaviorSanitizer build (-O1, line
#      tables): every ctest test again except the XLA/PJRT ones and the long
#      value checks labelled release_only, then a bounded smoke run of each
#      libFuzzer target;
#   5. a clang ThreadSanitizer build of the library and the test programs
#      whose code runs on several threads, each run whole
#      (tools/scripts/tsan_tests.sh --threaded; the script without arguments
#      runs every sanitizer test under TSan, a longer developer check).
# ccache (a Debian package of install_deps.sh) lets step 3's `pip install .`
# reuse step 2's objects: both compile with g++, -fPIC, one directory below
# the source (build/, build-python/).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
FUZZ_SECONDS="${TPUOFF_FUZZ_SECONDS:-30}"
JOBS="$(nproc)"
t0=$(date +%s)
stage() { echo; echo "=== [$(( $(date +%s) - t0 ))s] $*"; }
export CXX="${CXX:-g++}"
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1

stage "dependencies"
bash tools/scripts/install_deps.sh

stage "XLA harness venv"
XLA_PYTHON="$(bash tools/xla_check/setup_venv.sh | tail -n 1)"
echo "xla python: $XLA_PYTHON"

stage "reference venv"
REF_PYTHON="$(bash tools/reference/setup_venv.sh | tail -n 1)"
echo "reference python: $REF_PYTHON"

stage "PJRT plugins venv"
PJRT_PLUGINS="$(bash tools/pjrt/setup_plugins.sh | tail -n 1)"
echo "pjrt plugins: $PJRT_PLUGINS"

stage "release build"
command -v ccache >/dev/null && ccache --zero-stats >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
      -DTPUOFF_XLA_PYTHON="$XLA_PYTHON" -DTPUOFF_REF_PYTHON="$REF_PYTHON" \
      -DTPUOFF_PJRT_PLUGINS="$PJRT_PLUGINS" >/dev/null
ninja -C build -j"$JOBS"

stage "release tests"
ctest --test-dir build -j"$JOBS" --output-on-failure --timeout 900

stage "python package (pip install ., pytest)"
bash tools/scripts/python_tests.sh

stage "sanitizer build (clang, ASan+UBSan, fuzz targets)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
      -DCMAKE_CXX_COMPILER=clang++ -DTPUOFF_SANITIZE=ON -DTPUOFF_FUZZ=ON -DTPUOFF_BENCH_TOOLS=OFF \
      -DTPUOFF_XLA_PYTHON="" -DTPUOFF_REF_PYTHON="" -DTPUOFF_PJRT_PLUGINS="$PJRT_PLUGINS" >/dev/null
ninja -C build-asan -j"$JOBS"

stage "sanitizer tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j"$JOBS" --output-on-failure --timeout 1800 \
        -LE 'no_sanitizer|release_only'

stage "fuzz smoke runs (${FUZZ_SECONDS}s each)"
for fuzzer in build-asan/*_fuzzer; do
  [ -x "$fuzzer" ] || continue
  name="$(basename "$fuzzer")"
  # Seeds: tests/fuzz/corpus_<target>* or corpus_<first word> (corpus_text
  # for text_parser, corpus_proto for proto_import); a <target>.dict beside.
  base="${name%_fuzzer}"
  seeds=()
  for d in tests/fuzz/corpus_${base}* "tests/fuzz/corpus_${base%%_*}"; do
    [ -d "$d" ] && [[ " ${seeds[*]} " != *" $d "* ]] && seeds+=("$d")
  done
  dict=()
  [ -f "tests/fuzz/$base.dict" ] && dict=(-dict="tests/fuzz/$base.dict")
  work="$(mktemp -d)"
  echo "--- $name (seeds: ${seeds[*]:-none}${dict:+; ${dict[*]}})"
  "$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=4096 \
            -print_final_stats=1 "${dict[@]}" "$work" "${seeds[@]}" 2>&1 | tail -n 12
  rm -rf "$work"
done

stage "thread sanitizer (clang TSan: the threaded test programs)"
bash tools/scripts/tsan_tests.sh --threaded

stage "done in $(( $(date +%s) - t0 ))s"
