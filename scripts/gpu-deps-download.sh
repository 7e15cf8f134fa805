#!/usr/bin/env bash
# Download (not install) the Debian 12 packages of the CPU build's libraries that a GPU machine
# without them and without a package mirror needs to build shardrun there:
#   bash scripts/gpu-deps-download.sh .devdeps      # here, where apt reaches a mirror (~12 MB)
#   DEPS_DEBS=.devdeps bash scripts/gpu-run.sh      # there: unpacked under build/gpu/deps
# Libraries only (Open MPI and what it loads, sentencepiece, the header-only and CMake-package
# dependencies, pkgconf); the compiler, CMake, CUDA and LibTorch come from the GPU machine.
set -euo pipefail
DIR="${1:?usage: gpu-deps-download.sh DIR}"
PACKAGES=(
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
  libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libpsm-infinipath1 libpsm2-2 libnl-3-200 libnl-route-3-200
  libmunge2 libnuma1 libltdl7 libxnvctrl0 libpciaccess0 libgfortran5
  libsentencepiece-dev libsentencepiece0 zlib1g-dev
  nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libtomlplusplus3 libyaml-cpp-dev libyaml-cpp0.7
  libeigen3-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libsleef-dev libsleef3
  pkgconf pkgconf-bin libpkgconf3
)
mkdir -p "$DIR"
cd "$DIR"
apt-get download "${PACKAGES[@]}"
echo "gpu-deps-download: $(ls ./*.deb | wc -l) packages in $DIR ($(du -sh . | cut -f1))"
