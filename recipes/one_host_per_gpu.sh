#!/bin/bash
# One fuzzing campaign over one host's GPUs, one shard per device, then merged:
#   PORT="python3 -m ctxscore.port my_kernel:scores" SEED=7 GPUS=8 OUT=campaign recipes/one_host_per_gpu.sh
# Shard K sees GPU K-1 alone (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES).
set -euo pipefail
mkdir -p "$OUT/shards" "$OUT/failures"
for k in $(seq 1 "$GPUS"); do
  CUDA_VISIBLE_DEVICES=$((k - 1)) HIP_VISIBLE_DEVICES=$((k - 1)) \
    ctxscore gate --port "$PORT" --seed "$SEED" --shard "$k/$GPUS" --json --failures "$OUT/failures" \
    > "$OUT/shards/$k.json" &
done
wait  # a failing shard is a verdict; merge refuses a shard that gave none
exec ctxscore merge "$OUT"/shards/*.json --junit "$OUT/merged.xml"
