#!/usr/bin/env bash
# The Python package's tests, as run_tests.sh (README command 2) runs them:
#   1. a venv with exactly python/requirements-test.txt (tools/scripts/pinned_venv.sh;
#      TPUOFF_PY_VENV, default ~/.cache/tpuoff/py-venv);
#   2. `pip install .` into it: builds the C++ core and the extension once
#      (build dir build-python/, incremental afterwards; with ccache, the
#      objects of run_tests.sh's release build are reused), installs tpuoff and
#      the tpuoff CLI; with the PJRT backend on the pinned plugins of
#      tools/pjrt/setup_plugins.sh (tpuoff.run(..., backend="pjrt"), as
#      run_tests.sh builds the CLI);
#   3. pytest python/tests (8 host CPU devices for the shard_map tests);
#      reports (XLA memory analysis of the fused loss) in build/python/reports.
# Extra arguments go to pytest (e.g. -k vocab).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
die() { echo "python_tests.sh: ERROR: $*" >&2; exit 1; }
log() { echo "python_tests.sh: $*" >&2; }

PY="$(bash "$ROOT/tools/scripts/pinned_venv.sh" "$ROOT/python/requirements-test.txt" \
        "${TPUOFF_PY_VENV:-$HOME/.cache/tpuoff/py-venv}" \
        "jax jaxlib numpy ml_dtypes pytest scikit_build_core nanobind" | tail -n 1)"

PJRT_PLUGINS="$(bash "$ROOT/tools/pjrt/setup_plugins.sh" | tail -n 1)"

mkdir -p "$ROOT/build"
# ccache (when installed; CMakeLists.txt uses it) keys objects on paths relative
# to the source tree, so build/ and build-python/ share them.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
t0=$(date +%s)
log "pip install . (C++ core + extension, PJRT plugins $PJRT_PLUGINS; build dir build-python)"
"$PY" -m pip install -v --disable-pip-version-check --no-input --no-build-isolation --no-deps \
    --force-reinstall -C "cmake.define.TPUOFF_PJRT_PLUGINS=$PJRT_PLUGINS" \
    "$ROOT" >"$ROOT/build/python-pip.log" 2>&1 \
  || { tail -n 40 "$ROOT/build/python-pip.log" >&2; die "pip install . failed (log: build/python-pip.log)"; }
log "installed in $(( $(date +%s) - t0 ))s"
if command -v ccache >/dev/null; then ccache --show-stats 2>/dev/null | grep -iE 'hits|misses' >&2 || true; fi

cd "$ROOT"
export TPUOFF_PYTEST_REPORTS="$ROOT/build/python/reports"
"$PY" -m pytest -p no:cacheprovider -q --durations=25 "$@" python/tests
