#!/usr/bin/env bash
# Install the Debian packages shardplan needs to build and test.
# Idempotent: asks dpkg which packages are missing and only then touches apt.
# Usage: bash scripts/install-deps.sh   (works from any directory, no stdin needed)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Needed now: the simulator, the headless `shardplan` CLI, tests and benchmarks.
PACKAGES=(
  build-essential     # g++ (C++20), make, libc headers
  cmake               # build system (presets need >= 3.25)
  ninja-build         # generator used by every CMake preset
  ccache              # compiler cache; CMakeLists.txt uses it when present
  pkg-config          # library discovery (.pc files) for CMake
  nlohmann-json3-dev  # JSON: model cards, hardware profiles, --json output
  libcli11-dev        # command-line parsing for `shardplan`
  libtomlplusplus-dev # TOML: torchtitan job configs (interop export and import)
  libyaml-cpp-dev     # YAML: Hugging Face Accelerate FSDP configs (interop export and import)
  libgtest-dev        # GoogleTest: unit and CLI tests
  libgmock-dev        # GoogleMock: matchers and mocks for the tests
  libbenchmark-dev    # Google Benchmark: bench/bench_simulator
  libspdlog-dev       # logging library
  libfmt-dev          # string formatting (also spdlog's backend)
  libeigen3-dev       # linear algebra (header-only)
  libsleef-dev        # executor: SLEEF vectorised expf for the fused CPU softmax and cross-entropy
  libtorch-dev        # executor: LibTorch C++ frontend (CPU build, 1.13)
  libopenblas0-pthread # executor: fast BLAS for LibTorch on CPU (switches libblas.so.3)
  libblas-dev         # executor: cblas.h + libblas.so for the attention GEMMs (model/attention_gemms.hpp)
  libdnnl-dev         # executor: oneDNN sgemm for the fp32 CPU GEMMs (model/cpu_gemm.hpp)
  libopenmpi-dev      # executor: MPI collectives between ranks
  openmpi-bin         # executor: mpirun
  libsentencepiece-dev # executor: tokenizer (train/load tokenizer.model)
  zlib1g-dev          # executor: CRC-32 checksums of checkpoint shards
  python3-torch       # bench only: the PyTorch reference loop for the shardrun benchmark
  qt6-base-dev        # GUI: Qt 6 Core, Gui, Widgets, Test (shardplan-gui, gui_tests)
  qt6-charts-dev      # GUI: Qt Charts (memory, step-time and scatter charts)
  libqt6opengl6-dev   # GUI: Qt6OpenGL CMake package, which Qt6Charts' CMake config requires
  libgl-dev           # GUI: OpenGL headers that Qt6Gui's CMake config looks for
  slurm-wlm           # resilience tests: a real single-node Slurm (slurmctld, slurmd, sbatch, srun --mpi=pmix)
  munge               # resilience tests: Slurm's authentication daemon (munged, mungekey)
  clang-format        # scripts/format.sh: the code style (.clang-format)
  clang               # fuzzing: the `fuzz` preset's compiler (libFuzzer, -fsanitize=fuzzer)
  libclang-rt-14-dev  # fuzzing: clang's libFuzzer, ASan and UBSan runtimes
)

# Added by later issues, NOT installed yet -- move entries into PACKAGES
# when the component that needs them lands.
# shellcheck disable=SC2034  # kept as the documented place for later issues
LATER_PACKAGES=(
)

echo "install-deps: checking ${#PACKAGES[@]} packages with dpkg-query"
missing=()
for pkg in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages already installed, nothing to do"
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: missing packages (${missing[*]}) and not root, and sudo is not available" >&2
    exit 1
  fi
  SUDO=(sudo)
fi

echo "install-deps: missing: ${missing[*]}"
echo "install-deps: running apt-get update"
"${SUDO[@]}" apt-get update
echo "install-deps: running apt-get install -y --no-install-recommends ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
echo "install-deps: done"
