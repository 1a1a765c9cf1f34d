#!/usr/bin/env bash
# Create or reuse a Python venv holding exactly the pins of a requirements file.
#
#   tools/scripts/pinned_venv.sh REQUIREMENTS VENV_DIR "MODULE..." ["FILE..."]
#       -> last stdout line: path of the venv's python
#
# Used by tools/xla_check/setup_venv.sh (jax/jaxlib for the XLA harness),
# tools/reference/setup_venv.sh (numpy for the float64 reference) and
# tools/pjrt/setup_plugins.sh (the PJRT plugin wheels).
# FILE...: paths relative to the venv's site-packages that must exist after the install.
# Env: TPUOFF_PYTHON interpreter to build the venv from (default python3; needs >= 3.11)
#      TPUOFF_PIP_NO_DEPS=1 install the pins without their dependencies (wheels that
#      are data, such as the plugins)
# Reuse rule: the venv is reused when its stamp file holds the sha256 of the
# requirements + the interpreter version, every pin is installed at its version,
# MODULE... import and FILE... exist; otherwise the pinned requirements are
# (re)installed.  Any failure exits non-zero with a message on stderr: this script
# never silently skips the install.
set -euo pipefail

[ $# -eq 3 ] || [ $# -eq 4 ] || {
  echo "usage: pinned_venv.sh REQUIREMENTS VENV_DIR \"MODULE...\" [\"FILE...\"]" >&2; exit 2; }
REQ="$1"
VENV="$2"
IMPORTS="$3"
FILES="${4:-}"
BASE_PY="${TPUOFF_PYTHON:-python3}"
STAMP="$VENV/.tpuoff-requirements.sha256"
NAME="${TPUOFF_VENV_SCRIPT:-$(basename "$(dirname "$REQ")")/setup_venv.sh}"
NO_DEPS=()
[ "${TPUOFF_PIP_NO_DEPS:-0}" = 1 ] && NO_DEPS=(--no-deps)

die() { echo "$NAME: ERROR: $*" >&2; exit 1; }
log() { echo "$NAME: $*" >&2; }

[ -f "$REQ" ] || die "missing $REQ"
command -v "$BASE_PY" >/dev/null 2>&1 || die "interpreter '$BASE_PY' not found (set TPUOFF_PYTHON)"
"$BASE_PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "$BASE_PY is $("$BASE_PY" -V 2>&1); need Python >= 3.11"
PYVER="$("$BASE_PY" -c 'import sys, platform; print(sys.version.split()[0], platform.machine())')"
WANT="$( { cat "$REQ"; echo "python $PYVER"; } | sha256sum | cut -d' ' -f1)"

mkdir -p "$(dirname "$VENV")"
# Serialise concurrent setups of the same venv (CI jobs, parallel test runners).
exec 9>"$VENV.lock"
flock -w 900 9 || die "timed out waiting for lock $VENV.lock"

venv_ok() {
  [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] \
    && "$VENV/bin/python" - "$REQ" "$IMPORTS" "$FILES" <<'PY' >/dev/null 2>&1
import importlib, os, sys, sysconfig, importlib.metadata as md
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, ver = line.split("==")
    if md.version(name) != ver:
        sys.exit(1)
for module in sys.argv[2].split():
    importlib.import_module(module)
site = sysconfig.get_paths()["purelib"]
for path in sys.argv[3].split():
    if not os.path.isfile(os.path.join(site, path)):
        sys.exit(1)
PY
}

if venv_ok; then
  log "reusing $VENV (requirements unchanged)"
else
  if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
    die "$VENV exists but is not a venv; refusing to touch it"
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
  log "installing pinned requirements into $VENV"
  start=$(date +%s)
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input --only-binary=:all: \
      "${NO_DEPS[@]}" -r "$REQ" >&2 || die "pip install -r $REQ failed"
  echo "$WANT" > "$STAMP"
  venv_ok || { rm -f "$STAMP"; die "installed venv does not satisfy $REQ (version mismatch, import failure or missing file)"; }
  log "installed in $(( $(date +%s) - start ))s"
fi
echo "$VENV/bin/python"
