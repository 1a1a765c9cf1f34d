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
# Reuse rule and failures: tools/scripts/pinned_venv.sh (reused while
# requirements.txt, the interpreter and the plugin files are unchanged; never
# silently skips the install). The wheels are installed without dependencies
# (~330 MB: they are the plugins' shared objects and the header).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="$(TPUOFF_PIP_NO_DEPS=1 TPUOFF_VENV_SCRIPT=setup_plugins.sh \
      bash "$HERE/../scripts/pinned_venv.sh" "$HERE/requirements.txt" \
      "${TPUOFF_PJRT_VENV:-$HOME/.cache/tpuoff/pjrt-venv}" "" \
      "xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so libtpu/libtpu.so" \
      | tail -n 1)"
"$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
