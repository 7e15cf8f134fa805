#!/usr/bin/env bash
# shardplan demo: install dependencies, build the release preset, and ask the
# simulator two realistic questions.
#
# It ends with the full loop on this machine:
#   plan (search the configuration space) -> real run (executor) ->
#   predicted vs measured (memory and step time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "==> Installing dependencies (scripts/install-deps.sh)"
bash scripts/install-deps.sh

echo "==> Configuring and building the release preset"
cmake --preset release
cmake --build --preset release -j"$(nproc)"

SHARDPLAN=build/release/cli/shardplan

echo
echo "==> Will Llama2-70B LoRA fine-tuning fit on one Gaudi2 HLS-2 node with ZeRO-3, and how fast?"
"$SHARDPLAN" simulate \
  --model llama2-70b --hardware gaudi2-hls2 --nodes 1 \
  --tp 1 --pp 1 --zero 3 \
  --micro-batch-size 1 --global-batch-size 32 --seq-len 4096 \
  --recompute full \
  --lora-rank 8 --lora-alpha 16 --lora-targets q_proj,k_proj,v_proj,o_proj \
  --dataset-tokens 20000000 --epochs 3

echo
echo "==> What does TP=8, PP=4 cost for GPT-3 175B on 16 p4de nodes?"
"$SHARDPLAN" simulate \
  --model gpt3-175b --hardware p4de.24xlarge --nodes 16 \
  --tp 8 --pp 4 --zero 1 \
  --micro-batch-size 1 --global-batch-size 1536 --seq-len 2048 \
  --schedule interleaved --virtual-stages 3 \
  --recompute selective --sequence-parallel \
  --train-tokens 300e9

mkdir -p build/demo

echo
echo "==> Plan: Llama2-70B LoRA (r=4, alpha=16, dropout 0.05 on q/k/v/o_proj), ZeRO-3, bf16, one Gaudi2 HLS-2, seq 2048"
"$SHARDPLAN" plan \
  --model llama2-70b --hardware gaudi2-hls2 --nodes 1 \
  --global-batch-size 32 --seq-len 2048 --precision bf16 --require zero3 \
  --lora-rank 4 --lora-alpha 16 --lora-dropout 0.05 --lora-targets q_proj,k_proj,v_proj,o_proj \
  --top 5 --out build/demo/llama2-70b-lora.plan.json
"$SHARDPLAN" explain build/demo/llama2-70b-lora.plan.json

echo
echo "==> Plan: the same node, full fine-tuning (the planner says why nothing fits)"
"$SHARDPLAN" plan \
  --model llama2-70b --hardware gaudi2-hls2 --nodes 1 \
  --global-batch-size 32 --seq-len 2048 --precision bf16 --top 5 || true

echo
echo "==> Plan: GPT-J 6B on one p4d.24xlarge with tensor parallelism, fp16"
"$SHARDPLAN" plan \
  --model gpt-j-6b --hardware p4d.24xlarge --nodes 1 \
  --global-batch-size 64 --seq-len 2048 --precision fp16 --require tp --top 5

for nodes in 8 16 64; do
  echo
  echo "==> Plan: GPT-3 175B on ${nodes} p4de.24xlarge nodes (300 B tokens)"
  "$SHARDPLAN" plan \
    --model gpt3-175b --hardware p4de.24xlarge --nodes "$nodes" \
    --global-batch-size 1536 --seq-len 2048 --train-tokens 300e9 --top 3
done

# ---------------------------------------------------------------------------------------------
# The loop on this machine: plan a tiny model for the local 2-core profile, run the plan for real
# with 2 MPI ranks, and print what was measured beside what was predicted.
MPIRUN=(mpirun -np 2 --oversubscribe --bind-to none)
if [[ "$(id -u)" -eq 0 ]]; then MPIRUN+=(--allow-run-as-root); fi
DEMO=build/demo/tiny-llama

echo
echo "==> Tokenizer: train a 4096-piece BPE tokenizer on the shipped public-domain corpus"
build/release/executor/shardplan-tokenize train \
  --text executor/data/corpus --vocab-size 4096 --out-prefix build/demo/tokenizer

echo
echo "==> Profile this machine: mpirun -np 2 shardrun profile (GEMMs, memory-bound kernels, collectives; ~1 min)"
"${MPIRUN[@]}" build/release/executor/shardrun profile --out build/demo/measured.json > build/demo/profile.log
grep -E "host overhead|machine noise|sync skew" build/demo/profile.log || true
echo "profile written: build/demo/measured.json (fitted curves, raw samples, a source per figure)"

echo
echo "==> Plan: tiny-llama (5 M parameters) on this machine's two cores, fp32, with the measured profile"
echo "    (eager attention: this machine's LibTorch 1.13 has no fused SDPA kernel for shardrun to run)"
"$SHARDPLAN" plan \
  --model tiny-llama --hardware build/demo/measured.json --nodes 1 \
  --global-batch-size 8 --seq-len 128 --precision fp32 --attention eager \
  --forbid offload --top 3 --quiet --out "$DEMO.plan.json"

echo
echo "==> Run: mpirun -np 2 shardrun (20 steps on the corpus, checkpoints, final weights)"
rm -rf "$DEMO"
"${MPIRUN[@]}" build/release/executor/shardrun --plan "$DEMO.plan.json" \
  --data executor/data/corpus --tokenizer build/demo/tokenizer.model --steps 20 --lr 1e-3 \
  --out-dir "$DEMO" --checkpoint-dir "$DEMO/checkpoints" --checkpoint-every 10 \
  --save-final "$DEMO/final.safetensors"
echo "(step metrics: $DEMO/metrics.jsonl; report with predicted vs measured: $DEMO/report.json)"

echo
echo "==> Predicted vs measured: shardplan validate plans and runs five more layouts (6 steps each)"
"$SHARDPLAN" validate --hardware build/demo/measured.json --steps 6 \
  --only tiny-llama-1r,tiny-llama-dp2-z1,tiny-llama-tp2,tiny-llama-lora8-dp2,tiny-llama-pp2-1f1b \
  --out-dir build/demo/validate --json build/demo/validation.json --plot build/demo/validation.svg
echo "(the whole suite: shardplan validate; refit the profile to it: shardplan calibrate --runs ...)"
