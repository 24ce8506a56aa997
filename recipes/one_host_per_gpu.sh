#!/bin/bash
# One fuzzing campaign over one host's GPUs, one shard per device, then merged:
#   PORT="python3 -m ctxscore.port my_kernel:scores" SEED=7 GPUS=8 CAMPAIGN_DIR=campaign recipes/one_host_per_gpu.sh
# Shard K sees GPU K-1 alone (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES).
set -euo pipefail
mkdir -p "$CAMPAIGN_DIR/shards" "$CAMPAIGN_DIR/failures"
for k in $(seq 1 "$GPUS"); do
  CUDA_VISIBLE_DEVICES=$((k - 1)) HIP_VISIBLE_DEVICES=$((k - 1)) \
    ctxscore gate --port "$PORT" --seed "$SEED" --shard "$k/$GPUS" --json --failures "$CAMPAIGN_DIR/failures" \
    > "$CAMPAIGN_DIR/shards/$k.json" &
done
wait  # a failing shard is a verdict; merge refuses a shard that gave none
exec ctxscore merge "$CAMPAIGN_DIR"/shards/*.json --junit "$CAMPAIGN_DIR/merged.xml"
