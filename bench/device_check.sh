#!/usr/bin/env bash
# One short visit to a GPU machine, everything the project checks there in one go:
#   1. the kernel figures a GPU profile holds, measured (bench/gpu_kernels.py), while
#   2. shardrun and shardplan build against that machine's CUDA LibTorch (scripts/gpu-run.sh,
#      the CPU build's libraries from DEPS_DEBS .deb files when the machine lacks them);
#   3. the plan -> real run -> predicted vs measured loop on one GPU with the shipped profile, and
#      the layouts of the last visit (bench/results/gpu-2026-11-26/plan_*.json) run again;
#   4. a per-op trace of two layouts (`shardrun --trace` on CUDA: each op's host time and its
#      device time between CUDA events), where the step's time goes;
#   5. `shardrun profile --device cuda` (a measured profile of this GPU) and the same plan
#      simulated on it, then run again: predicted vs measured with the measured profile.
# Every step writes its log and JSON under out-device/ as it goes and packs the folder into
# $OUT/device-check.tgz after each step (when OUT is set), so a step that fails or runs out of
# time leaves the earlier ones' figures.
#
#   DEPS_DEBS=.devdeps bash bench/device_check.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
O=out-device
mkdir -p "$O"
pack() { [[ -n "${OUT:-}" ]] && tar czf "$OUT/device-check.tgz.tmp" "$O" && mv "$OUT/device-check.tgz.tmp" "$OUT/device-check.tgz"; }
MODEL="${MODEL:-tinyllama-1.1b}"
HARDWARE="${HARDWARE:-p5.48xlarge}"
STEPS="${STEPS:-20}"
t0=$(date +%s)
stamp() { echo "device_check: [$(($(date +%s) - t0)) s] $*"; pack; }

nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.sm,power.limit,driver_version --format=csv \
  | tee "$O/nvidia-smi.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'

# 1 + 2: kernels on the GPU while the build uses most of the cores (niced, 4 cores left free).
stamp "building shardrun against the CUDA LibTorch (log: $O/build.log)"
export BUILD=build/gpu
(nice -n 19 bash -c 'GPU_RUN_BUILD_ONLY=1 bash scripts/gpu-run.sh' > "$O/build.log" 2>&1;
 echo "rc=$?" >> "$O/build.log") &
build_pid=$!
stamp "kernel figures (log: $O/gpu_kernels.log)"
PYTHONUNBUFFERED=1 timeout "${KERNELS_S:-300}" python3 bench/gpu_kernels.py --out "$O/gpu_kernels.json" > "$O/gpu_kernels.log" 2>&1
stamp "kernels: rc=$?"
wait "$build_pid"
stamp "build: $(tail -n 1 "$O/build.log")"
grep -q "^rc=0" "$O/build.log" || { tail -n 40 "$O/build.log"; tail -n 30 "$O/gpu_kernels.log"; exit 1; }
# What gpu-run.sh exports for the unpacked libraries, for the shardrun calls made here directly.
if [[ -d build/gpu/deps/usr ]]; then
  P="$PWD/build/gpu/deps/usr"; L="$P/lib/x86_64-linux-gnu"
  export OPAL_PREFIX="$P" LD_LIBRARY_PATH="$L:$L/openmpi/lib:${LD_LIBRARY_PATH:-}" PATH="$PATH:$P/bin"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# 3: the loop with the shipped profile.
stamp "plan -> run -> predicted vs measured, shipped profile $HARDWARE"
MODEL="$MODEL" HARDWARE="$HARDWARE" STEPS="$STEPS" OUT=build/gpu/run-shipped timeout 240 bash scripts/gpu-run.sh \
  > "$O/run-shipped.log" 2>&1
stamp "run (shipped): rc=$?"
cp build/gpu/run-shipped/plan.json "$O/plan-shipped.json" 2> /dev/null
cp build/gpu/run-shipped/run/report.json "$O/report-shipped.json" 2> /dev/null
tail -n 12 "$O/run-shipped.log"

# 3b: the layouts measured before (bench/results/gpu-2026-11-26/plan_*.json), run again: the same
# plans, so the reports compare with that visit's and with the shipped profile's predictions.
for plan in bench/results/gpu-2026-11-26/plan_*.json; do
  name=$(basename "$plan" .json); name=${name#plan_}
  [[ "$name" == tl-mb8 ]] && continue  # step 3 ran it
  stamp "layout $name"
  timeout 90 build/gpu/executor/shardrun --plan "$plan" --device cuda --steps 10 --data synthetic \
    --out-dir "$O/runs/$name" > "$O/runs-$name.log" 2>&1
  grep -E "step time error|peak memory" "$O/runs-$name.log" | tail -2
done

# 4: per-op traces (host and CUDA-event device time per op) of the default layout and of the
# one predicted furthest off on the last visit (tl-mb2), the steps after the first.
for name in tl-mb8 tl-mb2; do
  stamp "trace $name"
  timeout 90 build/gpu/executor/shardrun --plan "bench/results/gpu-2026-11-26/plan_$name.json" --device cuda \
    --steps 6 --data synthetic --trace "$O/trace-$name.json" --out-dir "$O/trace-runs/$name" > "$O/trace-$name.log" 2>&1
  echo "trace $name: rc=$?"
done

# 5: a measured profile of this GPU, the same layout re-simulated on it and run again.
stamp "shardrun profile --device cuda"
timeout 200 build/gpu/executor/shardrun profile --device cuda --base "$HARDWARE" --name "$(hostname)-gpu-measured" \
  --out "$O/gpu-measured.json" > "$O/profile.log" 2>&1
stamp "profile: rc=$?"
if [[ -f "$O/gpu-measured.json" && -f "$O/plan-shipped.json" ]]; then
  HARDWARE="$O/gpu-measured.json" MODEL="$MODEL" STEPS="$STEPS" OUT=build/gpu/run-measured timeout 200 \
    bash scripts/gpu-run.sh > "$O/run-measured.log" 2>&1
  stamp "run (measured profile): rc=$?"
  cp build/gpu/run-measured/run/report.json "$O/report-measured.json" 2> /dev/null
  tail -n 12 "$O/run-measured.log"
fi
tail -n 60 "$O/gpu_kernels.log"
stamp "done"
