#!/usr/bin/env bash
# Create or reuse the Python venv of the float64 reference (numpy only, pinned).
#
#   tools/reference/setup_venv.sh            -> last stdout line: path of the venv's python
#
# Env: TPUOFF_REF_VENV venv dir (default $HOME/.cache/tpuoff/ref-venv)
#      TPUOFF_PYTHON   interpreter to build the venv from (default python3; needs >= 3.11)
# Reuse rule and failures: tools/scripts/pinned_venv.sh.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$HERE/../scripts/pinned_venv.sh" "$HERE/requirements.txt" \
  "${TPUOFF_REF_VENV:-$HOME/.cache/tpuoff/ref-venv}" "numpy"
