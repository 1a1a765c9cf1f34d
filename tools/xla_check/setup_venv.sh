#!/usr/bin/env bash
# Create or reuse the Python venv with the pinned real XLA (jax/jaxlib, CPU).
#
#   tools/xla_check/setup_venv.sh            -> last stdout line: path of the venv's python
#
# Env: TPUOFF_VENV   venv dir (default $HOME/.cache/tpuoff/xla-venv)
#      TPUOFF_PYTHON interpreter to build the venv from (default python3; needs >= 3.11)
# Reuse rule and failures: tools/scripts/pinned_venv.sh (reused when requirements.txt and
# the interpreter are unchanged and the pins import; never silently skips the install).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$HERE/../scripts/pinned_venv.sh" "$HERE/requirements.txt" \
  "${TPUOFF_VENV:-$HOME/.cache/tpuoff/xla-venv}" "jax jaxlib numpy ml_dtypes"
