#!/usr/bin/env bash
# The README screenshot: shardplan-gui plans Llama-2-70B LoRA fine-tuning on Gaudi2 HLS-2 nodes,
# selects the best row and saves the 1280x800 window as docs/gui-main.png. Builds nothing: it
# runs the built binary (default build/release/gui/shardplan-gui; or pass its path) on Qt's
# offscreen platform, with a throw-away session file.
# Usage: bash scripts/gui-screenshot.sh [path/to/shardplan-gui] [out.png]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
gui="${1:-build/release/gui/shardplan-gui}"
out="${2:-docs/gui-main.png}"
if [[ ! -x "$gui" ]]; then
  echo "gui-screenshot: $gui not found; build first (cmake --preset release && cmake --build --preset release)" >&2
  exit 2
fi
mkdir -p "$(dirname "$out")"
settings="$(mktemp --suffix=.ini)"
trap 'rm -f "$settings"' EXIT
QT_QPA_PLATFORM=offscreen SHARDPLAN_DATA_DIR="$PWD" "$gui" --settings "$settings" \
  --model llama2-70b --hardware gaudi2-hls2 --nodes 1-4 \
  --seq-len 4096 --global-batch-size 64 --train-tokens 2e9 \
  --lora-rank 16 --lora-alpha 32 --lora-targets q_proj,k_proj,v_proj,o_proj \
  --scatter throughput-memory --size 1280x800 --screenshot "$out"
