#!/usr/bin/env bash
# The GPU path end to end, on a machine with an NVIDIA GPU and a PyTorch install (which ships a
# CUDA LibTorch: headers + share/cmake/Torch): builds shardrun against it (build/gpu, tests and
# benchmarks off), plans a ~1B Llama-style model for one GPU, trains it ~20 steps on synthetic
# data and prints tokens/s, MFU and peak memory, measured vs predicted.
#
#   bash scripts/gpu-run.sh
#   MODEL=tinyllama-1.1b HARDWARE=p5.48xlarge STEPS=20 SEQ=2048 GBS=16 PRECISION=bf16 bash scripts/gpu-run.sh
#   PEAK_TFLOPS=756 bash scripts/gpu-run.sh    # MFU against another peak (e.g. H100 PCIe bf16 dense)
#   GPU_RUN_BUILD_ONLY=1 bash scripts/gpu-run.sh   # configure and build, nothing else
#   GPU_TESTS=1 bash scripts/gpu-run.sh        # also build and run the GPU tests (Device*, Cuda*; needs GTest)
#   DEPS_DEBS=dir bash scripts/gpu-run.sh      # a GPU machine without the CPU build's libraries and without
#                                              # a reachable package mirror: Debian 12 .deb files of them
#                                              # (scripts/gpu-deps-download.sh), unpacked to a private prefix
#
# Needs: nvidia-smi, python3 with torch (CUDA build), a CUDA toolkit (nvcc; the one matching
# torch.version.cuda is preferred), NCCL (the nvidia-nccl wheel torch uses, else the toolkit's),
# and the CPU build's dependencies (scripts/install-deps.sh: OpenMPI, sentencepiece, CLI11, ...).
#
# MFU (model FLOPs utilisation, PaLM, Chowdhery et al. 2022, appendix B): achieved model FLOP/s
# over the device's peak, with 6 N FLOPs per token for N parameters (forward + backward; Kaplan
# et al. 2020, §2.1), and the PaLM form that adds attention's 12 L H Q T per token. Recomputation
# is not counted (that would be hardware FLOPs utilisation).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MODEL="${MODEL:-tinyllama-1.1b}"
HARDWARE="${HARDWARE:-p5.48xlarge}"
STEPS="${STEPS:-20}"
SEQ="${SEQ:-2048}"
GBS="${GBS:-16}"
PRECISION="${PRECISION:-bf16}"
BUILD="${BUILD:-build/gpu}"
OUT="${OUT:-$BUILD/run-$MODEL}"
PYTHON="${PYTHON:-python3}"
GPU_TESTS="${GPU_TESTS:-0}"

die() { echo "gpu-run.sh: $*" >&2; exit 1; }

# 1. A GPU and a CUDA PyTorch.
command -v nvidia-smi > /dev/null || die "no NVIDIA driver here (nvidia-smi not found): this script needs an NVIDIA GPU"
GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -n 1 || true)"
[[ -n "$GPU_NAME" ]] || die "nvidia-smi lists no GPU"
command -v "$PYTHON" > /dev/null || die "$PYTHON not found (set PYTHON=/path/to/python with torch installed)"
read -r TORCH_PREFIX TORCH_VERSION TORCH_CUDA TORCH_ABI CUDA_OK < <("$PYTHON" - << 'PY' 2> /dev/null || true
import torch
print(torch.utils.cmake_prefix_path, torch.__version__, torch.version.cuda or "none",
      int(torch._C._GLIBCXX_USE_CXX11_ABI), int(torch.cuda.is_available()))
PY
) || true
[[ -n "${TORCH_PREFIX:-}" ]] || die "'$PYTHON -c \"import torch\"' failed: install PyTorch (a CUDA build) for this python"
[[ "$TORCH_CUDA" != "none" ]] || die "PyTorch $TORCH_VERSION is a CPU-only build: install a CUDA build (pip install torch)"
[[ "$CUDA_OK" == "1" ]] || die "PyTorch $TORCH_VERSION (CUDA $TORCH_CUDA) sees no usable GPU (driver too old for CUDA $TORCH_CUDA?)"
echo "gpu-run.sh: $GPU_NAME; PyTorch $TORCH_VERSION (CUDA $TORCH_CUDA, C++11 ABI $TORCH_ABI) at $TORCH_PREFIX"

# 2. The CUDA toolkit TorchConfig.cmake needs, preferably the version torch was built with.
CUDA_ROOT="${CUDA_ROOT:-}"
if [[ -z "$CUDA_ROOT" ]]; then
  for c in "/usr/local/cuda-$TORCH_CUDA" /usr/local/cuda "$(dirname "$(dirname "$(command -v nvcc || echo /x/x)")")"; do
    [[ -x "$c/bin/nvcc" ]] && { CUDA_ROOT="$c"; break; }
  done
fi
[[ -n "$CUDA_ROOT" ]] || die "no CUDA toolkit (nvcc) found: install CUDA $TORCH_CUDA or set CUDA_ROOT"
# NCCL: the library torch itself loads (nvidia-nccl wheel), so one NCCL is in the process.
NCCL_ARGS=()
NCCL_DIR="$("$PYTHON" -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2> /dev/null || true)"
if [[ -n "$NCCL_DIR" && -f "$NCCL_DIR/include/nccl.h" ]]; then
  lib="$(ls "$NCCL_DIR"/lib/libnccl.so* 2> /dev/null | head -n 1 || true)"
  [[ -n "$lib" ]] && NCCL_ARGS=(-DNCCL_INCLUDE_DIR="$NCCL_DIR/include" -DNCCL_LIBRARY="$lib")
fi
echo "gpu-run.sh: CUDA toolkit $CUDA_ROOT; NCCL ${NCCL_ARGS[*]:-from the toolkit}"

# 2b. The CPU build's libraries from .deb files (DEPS_DEBS), unpacked under $BUILD/deps: no root,
# nothing written outside the build directory. Open MPI is relocatable through OPAL_PREFIX; the .pc
# files that name /usr are pointed at the prefix (CMake package files find their own).
DEPS_ARGS=()
LINK_EXTRA=""
if [[ -n "${DEPS_DEBS:-}" ]]; then
  DEPS_ROOT="$PWD/$BUILD/deps"
  mkdir -p "$DEPS_ROOT"
  for f in "$DEPS_DEBS"/*.deb; do dpkg -x "$f" "$DEPS_ROOT"; done
  P="$DEPS_ROOT/usr"; L="$P/lib/x86_64-linux-gnu"
  export OPAL_PREFIX="$P" LD_LIBRARY_PATH="$L:$L/openmpi/lib:${LD_LIBRARY_PATH:-}"
  export PATH="$PATH:$P/bin" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  sed -i "s|^prefix=/usr\$|prefix=$P|" "$L"/pkgconfig/*.pc "$P"/share/pkgconfig/*.pc 2> /dev/null || true
  printf '#!/bin/sh\nexec "%s" "$@"\n' "$P/bin/mpicc.openmpi" > "$DEPS_ROOT/mpicc" && chmod +x "$DEPS_ROOT/mpicc"
  printf '#!/bin/sh\nPKG_CONFIG_LIBDIR="%s" exec "%s" "$@"\n' "$L/pkgconfig:$P/share/pkgconfig" "$P/bin/pkgconf" \
    > "$DEPS_ROOT/pkg-config" && chmod +x "$DEPS_ROOT/pkg-config"
  DEPS_ARGS=(-DMPI_C_COMPILER="$DEPS_ROOT/mpicc" -DPKG_CONFIG_EXECUTABLE="$DEPS_ROOT/pkg-config"
             -DZLIB_ROOT="$P")
  LINK_EXTRA=" -Wl,-rpath-link,$L:$L/openmpi/lib"
  echo "gpu-run.sh: dependencies unpacked from $DEPS_DEBS into $DEPS_ROOT"
fi

# 3. Configure and build shardrun against the CUDA LibTorch (separate build directory).
# --no-as-needed keeps libtorch_cuda linked although nothing references it by name.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX${DEPS_ROOT:+;$DEPS_ROOT/usr}" -DTorch_DIR="$TORCH_PREFIX/Torch" \
  -DCUDAToolkit_ROOT="$CUDA_ROOT" -DCUDA_TOOLKIT_ROOT_DIR="$CUDA_ROOT" -DCMAKE_CUDA_COMPILER="$CUDA_ROOT/bin/nvcc" \
  -DSHARDPLAN_WITH_NCCL=ON ${NCCL_ARGS[@]+"${NCCL_ARGS[@]}"} -DSHARDPLAN_BUILD_TESTS="$([[ $GPU_TESTS == 1 ]] && echo ON || echo OFF)" \
  -DSHARDPLAN_BUILD_BENCH=OFF -DSHARDPLAN_BUILD_GUI=OFF ${DEPS_ARGS[@]+"${DEPS_ARGS[@]}"} \
  -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$TORCH_ABI" -DCMAKE_EXE_LINKER_FLAGS="-Wl,--no-as-needed${LINK_EXTRA:-}" \
  > "$BUILD.configure.log" 2>&1 || { tail -n 30 "$BUILD.configure.log"; die "cmake configure failed (log: $BUILD.configure.log)"; }
grep -q "CUDA LibTorch ON" "$BUILD.configure.log" || die "CMake did not find a CUDA LibTorch at $TORCH_PREFIX (log: $BUILD.configure.log)"
grep -q "NCCL backend ON" "$BUILD.configure.log" || die "CMake found no NCCL (log: $BUILD.configure.log)"
cmake --build "$BUILD" --target shardrun shardplan -j "$(nproc)" -- -k 0
if [[ "$GPU_TESTS" == 1 ]]; then
  cmake --build "$BUILD" --target executor_tests -j "$(nproc)"
  "$BUILD/tests/executor_tests" --gtest_filter='Device*:Cuda*' || die "GPU tests failed"
fi
[[ "${GPU_RUN_BUILD_ONLY:-0}" == 1 ]] && { echo "gpu-run.sh: built $BUILD/executor/shardrun"; exit 0; }

# 4. Plan: one GPU of the profile, the planner's best layout for it.
mkdir -p "$OUT"
"$BUILD/cli/shardplan" plan --model "$MODEL" --hardware "$HARDWARE" --nodes 1 --devices-per-node 1 \
  --global-batch-size "$GBS" --seq-len "$SEQ" --precision "$PRECISION" --forbid pp,offload,fp8 --top 1 --quiet \
  --out "$OUT/plan.json" > /dev/null || die "shardplan plan found no feasible plan for $MODEL on one $HARDWARE GPU"

# 5. Train on synthetic data (one rank: mpirun is not needed for a single process).
"$BUILD/executor/shardrun" --plan "$OUT/plan.json" --device cuda --steps "$STEPS" --data synthetic \
  --out-dir "$OUT/run"

# 6. tokens/s, MFU and peak memory, measured vs predicted.
"$PYTHON" - "$OUT/run/report.json" "$OUT/plan.json" "$HARDWARE" "${PEAK_TFLOPS:-}" << 'PY'
import json, os, sys
report, plan = (json.load(open(p)) for p in sys.argv[1:3])
hardware, peak_override = sys.argv[3], sys.argv[4]
m, cfg = plan["model"], plan["config"]
prof = hardware if os.path.exists(hardware) else os.path.join("hardware_profiles", hardware + ".json")
peak = float(peak_override) * 1e12 if peak_override else \
    json.load(open(prof))["device"]["peak_TFLOPs"][cfg.get("precision", "bf16")] * 1e12
n = plan["prediction"]["total_parameters"]
layers, heads, hd = m["num_layers"], m["num_attention_heads"], m.get("head_dim") or m["hidden_size"] // m["num_attention_heads"]
seq = cfg["seq_len"]
meas, pred = report["measured"], report["predicted"]
def mfu(tps, attention):
    flops_per_token = 6 * n + (12 * layers * heads * hd * seq if attention else 0)
    return flops_per_token * tps / peak
gib = 2 ** 30
print(f"\n{m['name']} ({n / 1e9:.2f} B parameters) on {report['device']}, {cfg.get('precision')}, "
      f"seq {seq}, global batch {cfg['global_batch_size']}, micro-batch {cfg['micro_batch_size']}, "
      f"ZeRO-{cfg['zero_stage']}, recompute {cfg.get('recompute', 'none')}; peak {peak / 1e12:.1f} TFLOP/s")
print(f"{'':28s} {'measured':>12s} {'predicted':>12s}")
print(f"{'step time [s]':28s} {meas['step_seconds']:12.4f} {pred['step_seconds']:12.4f}")
print(f"{'tokens/s':28s} {meas['tokens_per_second']:12.0f} {pred['tokens_per_second']:12.0f}")
for label, att in (("MFU, 6N (Kaplan)", False), ("MFU, 6N + 12LHQT (PaLM)", True)):
    print(f"{label:28s} {100 * mfu(meas['tokens_per_second'], att):11.1f}% {100 * mfu(pred['tokens_per_second'], att):11.1f}%")
print(f"{'peak memory [GiB]':28s} {meas['peak_memory_bytes'] / gib:12.2f} {pred['peak_memory_bytes'] / gib:12.2f}"
      f"   ({meas['memory_source']})")
PY
