#!/usr/bin/env bash
# Where the time of a tiny problem goes (seed shape B=1,H=8,S=512,D=64 f16): our kernel and
# cuDNN's under Nsight Compute, with caches flushed (ncu's default) and warm, plus the SM clock
# and the stall breakdown. usage: scripts/gpu-seed-probe.sh [shape]
set -u
BIN=${EVOATTN_BIN:-target/release/evoattn}
OUT=${OUT:-out}
SHAPE=${1:-1,8,512,64}
IFS=, read -r B H S D <<< "$SHAPE"
M=gpu__time_duration.sum,gpc__cycles_elapsed.avg.per_second,sm__cycles_active.max,gpc__cycles_elapsed.max,sm__warps_active.avg.pct_of_peak_sustained_active
for cache in all none; do
  ncu --clock-control none --cache-control $cache --metrics $M -k regex:evoattn_wgmma -c 3 \
    "$BIN" bench --shape "$SHAPE" --dtype f16 --impl wgmma --peers none --reps 3 --warmup 1 > "$OUT/seed-ours-cache-$cache.txt" 2>&1
  echo "ours, cache $cache:"; grep -E "gpu__time|per_second|cycles_active|cycles_elapsed.max" "$OUT/seed-ours-cache-$cache.txt" | tail -5
done
ncu --clock-control none --section WarpStateStats --section SpeedOfLight --section LaunchStats -k regex:evoattn_wgmma -c 1 \
  "$BIN" bench --shape "$SHAPE" --dtype f16 --impl wgmma --peers none --reps 1 --warmup 1 > "$OUT/seed-ours-sections.txt" 2>&1
cat > "$OUT/cudnn.py" <<PY
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn($B, $H, $S, $D, device="cuda", dtype=torch.half) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(4):
        F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
ncu --clock-control none --metrics $M python3 "$OUT/cudnn.py" > "$OUT/seed-cudnn.txt" 2>&1
echo "cudnn (every kernel of the script, last ones are attention):"
grep -E "^  [a-zA-Z_]|gpu__time" "$OUT/seed-cudnn.txt" | tail -8
