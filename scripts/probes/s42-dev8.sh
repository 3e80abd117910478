# Session 42, last: Attention::check_given (the forward's and the backward's checks of a
# caller's plan, one method) on the GPU: the forward through a given plan (`check` small +
# tails) and the backward (gpu_backward). Prediction: as s42-dev7.
# Carry: [".gpu"].
set -u
BUDGET_S=300
source scripts/lib-step.sh
step "gpu_backward" 60 gpu-backward.txt .gpu/gpu_backward --test-threads 1
step "check small" 60 check-small.txt "$BIN" check --preset small --shape 1,4,130,128,2,300 --dtype f16,bf16 --causal all
step "check both" 60 check-both.txt "$BIN" check --pass both --shape 2,8,300,64,2 --causal all --dtype f16,bf16
print_rows | cut -c1-120
