#!/usr/bin/env bash
# Benchmark (not a test): tokens/s of single-rank shardrun against a bare LibTorch loop and the
# Debian python3-torch loop on the same model (bench/reference/), one thread each, synthetic
# data, seq 128, micro-batch 4, fp32, no dropout (the reference loops have none). Prints each
# figure and the ratios. shardrun runs twice: with its default fp32 GEMMs (oneDNN's sgemm when
# built with libdnnl-dev: executor/model/cpu_gemm.hpp) and with SHARDRUN_CPU_GEMM=blas, the BLAS
# both reference loops go through (LibTorch's at::mm), so that the second ratio compares
# everything but the GEMM kernels.
#   bash bench/shardrun_vs_reference.sh [model] [steps] [repeats]    (after scripts/test.sh or demo.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODEL="${1:-tiny-llama}"
STEPS="${2:-30}"
REPEATS="${3:-3}"
WARMUP=5
B=build/release
OUT=build/bench-shardrun
mkdir -p "$OUT"

"$B/cli/shardplan" plan --model "$MODEL" --hardware local-cpu-2core --nodes 1 --devices-per-node 1 \
  --global-batch-size 4 --micro-batch-sizes 4 --seq-len 128 --precision fp32 --zero-stages 0 --attention eager \
  --forbid pp,recompute,offload --quiet --top 1 --out "$OUT/plan.json" > /dev/null

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

shardrun_tps() {  # [env assignments...]
  env "$@" "$B/executor/shardrun" --plan "$OUT/plan.json" --steps "$STEPS" --threads 1 --quiet --data synthetic --dropout 0 \
    --out-dir "$OUT/run" > /dev/null
  # Median over the steps after the warm-up, as the reference loops do.
  tail -n +$((WARMUP + 1)) "$OUT/run/metrics.jsonl" | sed 's/.*"step_seconds":\([0-9.e-]*\).*/\1/' | median |
    awk '{printf "%.1f\n", 4 * 128 / $1}'
}
json_tps() { sed 's/.*"tokens_per_second": *\([0-9.e+-]*\).*/\1/'; }

declare -a S L C P
for ((i = 0; i < REPEATS; ++i)); do
  S+=("$(shardrun_tps)")
  L+=("$(shardrun_tps SHARDRUN_CPU_GEMM=blas)")
  C+=("$("$B/bench/reference/bare_libtorch_loop" --model "models/$MODEL.json" --seq-len 128 --micro-batch 4 \
        --steps "$STEPS" --warmup "$WARMUP" --threads 1 --json | json_tps)")
  P+=("$(/usr/bin/python3 bench/reference/torch_loop.py --model "models/$MODEL.json" --seq-len 128 --micro-batch 4 \
        --steps "$STEPS" --warmup "$WARMUP" --threads 1 --json | json_tps)")
done
s=$(printf '%s\n' "${S[@]}" | median)
l=$(printf '%s\n' "${L[@]}" | median)
c=$(printf '%s\n' "${C[@]}" | median)
p=$(printf '%s\n' "${P[@]}" | median)
echo "model $MODEL, seq 128, micro-batch 4, 1 thread, $STEPS steps ($WARMUP warm-up), median of $REPEATS runs"
printf '  shardrun (1 rank)      %8.0f tokens/s   (runs: %s)\n' "$s" "${S[*]}"
printf '  shardrun, BLAS GEMMs   %8.0f tokens/s   (runs: %s)\n' "$l" "${L[*]}"
printf '  bare LibTorch loop     %8.0f tokens/s   (runs: %s)\n' "$c" "${C[*]}"
printf '  python3-torch loop     %8.0f tokens/s   (runs: %s)\n' "$p" "${P[*]}"
awk -v s="$s" -v l="$l" -v c="$c" -v p="$p" 'BEGIN {
  printf "  shardrun / bare LibTorch = %.2f, shardrun / python3-torch = %.2f\n", s / c, s / p
  printf "  with the same BLAS GEMMs: shardrun / bare LibTorch = %.2f, shardrun / python3-torch = %.2f\n", l / c, l / p}'
