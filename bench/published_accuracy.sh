#!/usr/bin/env bash
# Benchmark (not a test): how well the shipped profiles predict the public record.
#   1. `shardplan validate --suite published`: every recorded run of runs/published.json simulated
#      with the shipped profiles, throughput predicted vs measured, per source and overall, and
#      whether every run that really ran is predicted to fit (headroom 0).
#   2. `shardplan calibrate --frameworks --leave-one-framework-out`: the shipped fit (each profile's
#      compute term with each framework's compute_efficiency), and each framework's runs predicted
#      at compute_efficiency 1 by a fit to the other frameworks' runs (step-time errors).
#   3. `shardplan calibrate --leave-one-source-out` per GPU family, and for H100's FP8 term: each
#      source predicted by a refit of the profile's term to the other sources only.
#   bash bench/published_accuracy.sh [out-dir]      (after scripts/test.sh or demo.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${1:-build/bench-published}"
SP=build/release/cli/shardplan
mkdir -p "$OUT"

echo "==> shardplan validate --suite published (shipped profiles)"
"$SP" validate --suite published --json "$OUT/validate.json" --plot "$OUT/validate.svg"

# Held out: NeMo 24.07 table rows nothing is fitted to (runs/heldout-nemo-24.07.json).
echo
echo "==> shardplan validate --runs runs/heldout-nemo-24.07.json (held out)"
"$SP" validate --runs runs/heldout-nemo-24.07.json --json "$OUT/heldout.json" | sed -n '/^source/,/^all/p'

# The shipped fit (hardware_profiles/*.json "fitted", frameworks/fitted_efficiency.cpp).
echo
echo "==> shardplan calibrate --suite published --frameworks --leave-one-framework-out"
"$SP" calibrate --suite published --frameworks --leave-one-framework-out --out "$OUT/framework-fit.json"

# Per GPU family: compute_scale refitted on top of the shipped terms to every 16-bit run but one
# source's (the FP8 runs, MLPerf and NeMo, have their own term, below).
for family in "A100:p4d.24xlarge:p4d.24xlarge,p4de.24xlarge:" "H100:p5.48xlarge:p5.48xlarge:mlperf-training,nemo-perf"; do
  IFS=: read -r name base profiles exclude <<< "$family"
  echo
  echo "==> ${name}: leave-one-source-out (compute_scale refitted without each source)"
  "$SP" calibrate --suite published --only "$profiles" ${exclude:+--exclude "$exclude"} --hardware "$base" \
    --fit compute_scale --leave-one-source-out --out "$OUT/${name}-refit.json" --json "$OUT/${name}-refit-report.json" |
    sed -n '/leave-one-source-out/,/mean over sources/p'
done

# The FP8 GEMM term of p5.48xlarge (fitted.fp8_compute_efficiency_scale), fitted to the FP8 runs
# on top of the 16-bit term, by the same protocol.
echo
echo "==> H100 FP8: leave-one-source-out (fp8_compute_scale refitted without each source)"
"$SP" calibrate --suite published --only mlperf-training,nemo-perf --hardware p5.48xlarge \
  --fit fp8_compute_scale --leave-one-source-out --out "$OUT/H100-fp8-refit.json" --json "$OUT/H100-fp8-refit-report.json" |
  sed -n '/leave-one-source-out/,/mean over sources/p'

# Plan regret: plan --framework <the run's> on each published run's cluster and batch.
echo
echo "==> build/release/bench/plan_regret (published layout vs the planner's best, in its framework)"
build/release/bench/plan_regret | tail -2
