# Session 42: `check --pass backward|both` on the GPU (the CLI's backward rows through
# GpuBackend::backward: the planner's forward with LSE, then mma-bwd, against float64 on the
# CPU). Shapes: hd64/128, both dtypes, every mask and layout, GQA, Sq != Sk both ways, odd
# lengths; then the seed preset in both passes (float64 up to 2^32 multiply-adds).
# Prediction: every row passes, rel_l2 ~0.6u as gpu_backward measured.
# Carry: [".gpu"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
step "check backward" 200 check-bwd.txt "$BIN" check --pass backward --shape 1,4,130,128,2,300 --shape 3,6,513,64,3,900 \
  --shape 2,4,257,64,4,1 --shape 1,8,300,128,2,77 --shape 2,2,64,64 --dtype f16,bf16 --causal all --layout all --seeds 2
step "check both seed" 300 check-both-seed.txt "$BIN" check --pass both --preset seed --seeds 1 --cpu-limit 4294967296
print_rows | cut -c1-120
grep -h -E "passed|FAIL|worst" $OUT/*.txt | cut -c1-150 | head -20
