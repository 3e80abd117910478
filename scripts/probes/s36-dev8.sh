# Session 36's eighth device call (#36): is the softmax slow because GEMMs run beside it? A lone
# warp does 64 ex2 a thread, softmax-style, in 566 cycles (mufu-rate.cu, dev7); inside the
# kernel the same work takes ~1290 (E4M3 and bf16 at 128 keys alike, dev5). Traces at hd128 16k
# with one consumer: pipeline=specialized (no GEMM in flight during the softmax) against
# overlap (its own S(j+1) in flight) and two consumers (the other's GEMMs too). Prediction if
# the tensor pipe's register traffic slows the softmax: ~600 cycles alone, more with GEMMs.
# Carry: [".gpu"].
set -u
BUDGET_S=200
source scripts/lib-step.sh
T="$BIN trace --shape 1,16,16384,128 --impl wgmma --config-on-plan --config"
step "bf16 wg1 specialized" 30 t-bf16-wg1-ws.txt $T block_n=128,consumer_warpgroups=1,pipeline=specialized,schedule=grid,o_staging=tile --dtype bf16
step "bf16 wg1 overlap" 30 t-bf16-wg1-ov.txt $T block_n=128,consumer_warpgroups=1,pipeline=overlap,schedule=grid,o_staging=tile --dtype bf16
step "bf16 wg2 overlap" 30 t-bf16-wg2-ov.txt $T block_n=128,consumer_warpgroups=2,pipeline=overlap --dtype bf16
step "e4m3 wg1 overlap" 30 t-e4m3-wg1-ov.txt $T consumer_warpgroups=1,pipeline=overlap,schedule=grid --dtype e4m3
print_rows | cut -c1-100
for f in $OUT/t-*.txt; do echo "== $(basename $f)"; grep -E "key block|S done +softmax|GEMMs issued +S done|turn came +GEMMs" $f; done
