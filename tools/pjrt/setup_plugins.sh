#!/usr/bin/env bash
# Create or reuse the venv holding the pinned PJRT plugins (requirements.txt):
# the XLA CPU plugin with the PJRT C API header, and libtpu.
#
#   tools/pjrt/setup_plugins.sh   -> last stdout line: the venv's site-packages
#                                    directory (give it to CMake as
#                                    -DTPUOFF_PJRT_PLUGINS=...)
#
# Below it: xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h,
# xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so and libtpu/libtpu.so.
# Env: TPUOFF_PJRT_VENV venv dir (default $HOME/.cache/tpuoff/pjrt-venv)
#      TPUOFF_PYTHON    interpreter to build the venv from (default python3)
# The venv is reused while its stamp holds the sha256 of requirements.txt +
# the interpreter version and the pinned versions are installed; otherwise
# the pins are (re)installed. Any failure exits non-zero with a message: this
# script never silently skips the install.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REQ="$HERE/requirements.txt"
VENV="${TPUOFF_PJRT_VENV:-$HOME/.cache/tpuoff/pjrt-venv}"
BASE_PY="${TPUOFF_PYTHON:-python3}"
STAMP="$VENV/.tpuoff-requirements.sha256"

die() { echo "setup_plugins.sh: ERROR: $*" >&2; exit 1; }
log() { echo "setup_plugins.sh: $*" >&2; }

[ -f "$REQ" ] || die "missing $REQ"
command -v "$BASE_PY" >/dev/null 2>&1 || die "interpreter '$BASE_PY' not found (set TPUOFF_PYTHON)"
PYVER="$("$BASE_PY" -c 'import sys, platform; print(sys.version.split()[0], platform.machine())')"
WANT="$( { cat "$REQ"; echo "python $PYVER"; } | sha256sum | cut -d' ' -f1)"

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock -w 900 9 || die "timed out waiting for lock $VENV.lock"

site_dir() { "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

venv_ok() {
  [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] || return 1
  "$VENV/bin/python" - "$REQ" <<'PY' >/dev/null 2>&1 || return 1
import sys, importlib.metadata as md
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, ver = line.split("==")
        if md.version(name) != ver:
            sys.exit(1)
PY
  local site; site="$(site_dir)" || return 1
  [ -f "$site/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h" ] \
    && [ -f "$site/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" ] \
    && [ -f "$site/libtpu/libtpu.so" ]
}

if venv_ok; then
  log "reusing $VENV (requirements unchanged)"
else
  if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
    die "$VENV exists but is not a venv; refusing to touch it (set TPUOFF_PJRT_VENV)"
  fi
  if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.version.split()[0] == "'"${PYVER%% *}"'" else 1)'; then
    log "interpreter changed: recreating $VENV"
    rm -rf "$VENV"
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating venv $VENV with $BASE_PY ($PYVER)"
    "$BASE_PY" -m venv "$VENV" || die "python -m venv failed (on Debian: apt-get install python3-venv)"
  fi
  rm -f "$STAMP"
  log "installing pinned plugins into $VENV (~330 MB of wheels)"
  start=$(date +%s)
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input --only-binary=:all: \
      --no-deps -r "$REQ" >&2 || die "pip install -r $REQ failed"
  echo "$WANT" > "$STAMP"
  venv_ok || { rm -f "$STAMP"; die "installed venv does not satisfy $REQ (version mismatch or missing plugin file)"; }
  log "installed in $(( $(date +%s) - start ))s"
fi
site_dir
