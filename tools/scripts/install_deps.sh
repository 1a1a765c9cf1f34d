#!/usr/bin/env bash
# Installs the Debian packages tpuoff builds with (idempotent; skips apt when
# everything is present already).
set -euo pipefail
PKGS=(cmake ninja-build ccache g++ clang libclang-rt-14-dev libomp-dev
      libprotobuf-dev protobuf-compiler libabsl-dev libeigen3-dev
      libgtest-dev libgmock-dev libbenchmark-dev python3 python3-venv python3-dev
      nlohmann-json3-dev libdnnl-dev
      # fft (FFTW3) and jaxlib's LAPACK custom-calls (reference LAPACK/BLAS)
      libfftw3-dev liblapack-dev libblas-dev pkg-config
      # LLVM's ORC JIT: the emulator compiles large fused loops to machine code
      llvm-14-dev
      # MPI: `mpirun -np P tpuoff run` spreads the simulated devices over ranks
      libopenmpi-dev openmpi-bin
      # tools/bench only: the exp/log candidates simd_math is measured against
      libhwy-dev libsleef-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
