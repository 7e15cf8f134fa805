#!/usr/bin/env bash
# shardplan test suite: install dependencies, build + test the release preset,
# build + test the asan preset (ASan + UBSan), smoke-run the fuzz targets and the benchmark.
#
#   SHARDPLAN_SKIP_ASAN=1 bash scripts/test.sh   # skip the sanitizer pass (local only; CI must not set it)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

JOBS="$(nproc)"
summary=()
current=""
phase_start=0
script_start=$SECONDS

begin() {
  current="$1"
  phase_start=$SECONDS
  echo "==> $current"
}
end() {
  local took=$((SECONDS - phase_start))
  echo "==> $current: ok (${took}s)"
  summary+=("$current ${took}s")
  current=""
}
joined() {
  local out="" item
  for item in "${summary[@]}"; do out+="${out:+, }$item"; done
  echo "${out:-none}"
}
on_exit() {
  local rc=$?
  local total=$((SECONDS - script_start))
  if ((rc != 0)); then
    echo "test.sh: FAILED in phase '${current:-?}' (exit $rc) after ${total}s; passed before it: $(joined)" >&2
  fi
}
trap on_exit EXIT

begin "install-deps"
bash scripts/install-deps.sh
end

begin "release: configure + build"
cmake --preset release
cmake --build --preset release -j"$JOBS"
end

begin "release: ctest"
ctest --preset release --output-on-failure -j2
end

if [[ "${SHARDPLAN_SKIP_ASAN:-0}" == "1" ]]; then
  echo "==> asan: skipped (SHARDPLAN_SKIP_ASAN=1)"
  summary+=("asan SKIPPED")
else
  begin "asan: configure + build"
  cmake --preset asan
  cmake --build --preset asan -j"$JOBS"
  end

  begin "asan: ctest"
  ASAN_OPTIONS=detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset asan --output-on-failure -j2
  end
fi

# The NCCL backend and the CUDA statistics (caching allocator, events) only build against CUDA;
# where its headers and NCCL's are installed (no GPU needed), compile them so they cannot rot
# on CPU-only machines.
if [[ -f /usr/local/cuda/include/nccl.h && -f /usr/local/cuda/include/cuda_runtime_api.h ]]; then
  begin "nccl backend: compile check"
  # Per-file objects (no unity units): only these four files are compiled.
  cmake -S . -B build/nccl-check -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDPLAN_WITH_NCCL=ON -DSHARDPLAN_UNITY_BUILD=OFF \
    -DSHARDPLAN_BUILD_TESTS=OFF -DSHARDPLAN_BUILD_BENCH=OFF > /dev/null
  ninja -C build/nccl-check executor/CMakeFiles/shardplan_executor.dir/comm/nccl_communicator.cpp.o \
    executor/CMakeFiles/shardplan_executor.dir/comm/process_groups.cpp.o \
    executor/CMakeFiles/shardplan_cuda_check.dir/metrics/cuda_stats.cpp.o \
    executor/CMakeFiles/shardplan_cuda_check.dir/run/device.cpp.o
  end
else
  echo "==> nccl backend: compile check skipped (no CUDA/NCCL headers under /usr/local/cuda)"
  summary+=("nccl-check SKIPPED")
fi

# Smoke run of every fuzz target (the libFuzzer build; a few seconds each): a finding fails the
# suite. Long runs: bash scripts/fuzz.sh 600. The corpora are replayed by ctest above as well.
begin "fuzz smoke run"
bash scripts/fuzz.sh 5
end

# Smoke check only: the benchmark must still run; its figures are not judged here.
begin "bench smoke run"
build/release/bench/bench_simulator --benchmark_min_time=0.05
build/release/bench/bench_planner --benchmark_min_time=0.05
bash bench/shardrun_vs_reference.sh tiny-llama 8 1
end

echo "test.sh: ALL PASSED in $((SECONDS - script_start))s ($(joined))"
