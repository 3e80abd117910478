# Session 40, device call 4. (1) #38: `--impl cublas` on the seed and fa3-grid presets against
# sdpa-math (the same unfused algorithm in PyTorch), sdpa-cudnn and our fused kernel through the
# Python package (evoattn-torch, the planner's fused kernel), one run. (2) #36: hd64 E4M3 causal
# past 2k keys: claimed tiles with O from registers against the plan at 4k (grid; persistent
# +66.7% in dev3) and against persistent blocks with O from registers at 8k/16k (dev2/dev3:
# -3.2% / -0.9% against the plan).
# Predictions: cublas 3-10x slower than the fused kernel (S in f32 written, read, P written and
# read again: at 8k hd128 ~17 GB of traffic against ~0.1 GB); 4-5x faster than sdpa-math
# (which upcasts to f32 in separate ops). Claimed+regs: 4k -1..-3% vs grid, 8k/16k even with
# persistent+regs (+-1%).
# Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site target/wheels/evoattn-*.whl \
  && export PYTHONPATH=/tmp/site:$PYTHONPATH
step "bench cublas" 420 bench-cublas.txt "$BIN" bench --preset seed --preset fa3-grid --impl cublas \
  --peers sdpa-math,sdpa-cudnn,evoattn-torch --reps 10 --no-history --json $OUT/s40-h200-cublas-seed-fa3.json
export ROUNDS=1 REPS=20 A=$BIN B=$BIN A_ARGS=""
export B_ARGS="--impl wgmma --config-on-plan --config schedule=claimed,o_staging=registers"
step "ab 4k causal cl rg" 35 ab-4kc.txt scripts/gpu-ab.sh c4 --shape 4,32,4096,64 --dtype e4m3 --causal top-left
export A_ARGS="--impl wgmma --config-on-plan --config schedule=persistent,o_staging=registers"
step "ab 8k causal pe-rg vs cl-rg" 35 ab-8kc.txt scripts/gpu-ab.sh c8 --shape 2,32,8192,64 --dtype e4m3 --causal top-left
step "ab 16k causal pe-rg vs cl-rg" 45 ab-16kc.txt scripts/gpu-ab.sh c16 --shape 1,32,16384,64 --dtype e4m3 --causal top-left
print_rows | cut -c1-110
grep -E "^ *[0-9]+,[0-9]+,[0-9]+,[0-9]+ " $OUT/bench-cublas.txt | cut -c1-150
for f in 4kc 8kc 16kc; do grep -A2 "== A/B" $OUT/ab-$f.txt | tail -1; done
(cd $OUT && mkdir -p ../keep && mv s40-h200-cublas-seed-fa3.json bench-cublas.txt ../keep/ && tar cJf ../r.tar.xz . && rm -rf ./* && mv ../r.tar.xz s40-dev4-runs.tar.xz && mv ../keep/* .)
