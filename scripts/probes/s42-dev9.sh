# Session 42, after the review mends (de652cd, a clean tree): the wheel built from it through the
# Python GPU suite; gpu_backward; check --pass both (GpuBackend::backward now uploads through
# DeviceInputs) and the forward's check small (plan_family). Prediction: as s42-dev7/dev8.
# Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=400
source scripts/lib-step.sh
step "gpu_backward" 60 gpu-backward.txt .gpu/gpu_backward --test-threads 1
step "check small" 60 check-small.txt "$BIN" check --preset small --dtype f16,bf16 --causal all
step "check both" 90 check-both.txt "$BIN" check --pass both --shape 2,8,300,64,2 --shape 1,4,130,128,2,300 --causal all --dtype f16,bf16 --layout all
OUT_PY=$OUT/py; mkdir -p $OUT_PY
step "python" 200 python.txt env OUT=$OUT_PY EVOATTN_BIN=$BIN scripts/gpu-python.sh install tests
print_rows | cut -c1-120
