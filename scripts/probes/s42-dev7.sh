# Session 42, final tree: the host-side refactor of AttnParams (device::kernel_ints and
# kernel_strides, shared with BwdParams) and mma-bwd v2 as committed. gpu_backward (3 tests),
# the forward's `check --preset small` and tails on the planned kernels (every family's
# AttnParams goes through the new conversion), check --pass both on the seed preset, and the
# Python GPU suite (forward and gradients). Prediction: all pass, figures as s42-dev5/dev6.
# Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
step "gpu_backward" 60 gpu-backward.txt .gpu/gpu_backward --test-threads 1
step "check small" 120 check-small.txt "$BIN" check --preset small --shape 1,4,130,128,2,300 --shape 2,4,257,64,4,1 \
  --dtype f16,bf16 --causal all --layout all
step "check both seed" 120 check-both-seed.txt "$BIN" check --pass both --preset seed --seeds 1 --cpu-limit 4294967296
OUT_PY=$OUT/py; mkdir -p $OUT_PY
step "python" 200 python.txt env OUT=$OUT_PY EVOATTN_BIN=$BIN scripts/gpu-python.sh install tests
print_rows | cut -c1-120
grep -h -E "passed|failed" $OUT/*.txt $OUT/py/pytest.txt | cut -c1-140 | tail -8
