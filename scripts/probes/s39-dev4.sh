# Session 39's fourth device call: dev3 found O from registers -6.7% at hd64 8k E4M3 (persistent
# blocks, V transposed by its own kernel), -2.0% at 4k, no change at 16k (grid blocks), +3.3% at
# 4k causal (grid). The rest of the persistent range: hd64 1k and 2k, and 8k at hd128 and
# hd256 (non-causal: persistent up to 8k keys), same A/B/B/A.
# Prediction: hd64 1k/2k between session 36's 512 (+2.1%: the tile better) and 4k (-2.0%);
# hd128 and hd256 8k: within 2% (their epilogue is a smaller share of a tile).
# Carry: [".gpu"].
set -u
BUDGET_S=300
source scripts/lib-step.sh
export ROUNDS=1 REPS=20 A=$BIN B=$BIN A_ARGS=""
export B_ARGS="--impl wgmma --config-on-plan --config o_staging=registers"
step "ab osrg2" 280 ab-osrg2.txt scripts/gpu-ab.sh osrg2 --shape 16,32,1024,64 --shape 8,32,2048,64 \
  --shape 2,16,8192,128 --shape 2,8,8192,256 --dtype e4m3
print_rows | cut -c1-110
grep -A12 "== A/B" $OUT/ab-osrg2.txt
(cd $OUT && tar cJf ../x.tar.xz ./osrg2-* 2>/dev/null; rm -f ./osrg2-*; mv ../x.tar.xz s39-dev4-runs.tar.xz)
