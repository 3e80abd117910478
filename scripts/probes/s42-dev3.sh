# Session 42: the backward pass from PyTorch. (1) The Python GPU suite with this tree's wheel:
# gradients against float64 and PyTorch's own 16-bit error (eager, flash_attn_func's layout,
# a compiled training step), a gradient through lse refused. (2) examples/backward_time.py: the
# backward against SDPA's flash and cuDNN backends, same process and inputs, interleaved, on the
# fa3 grid's hd64/hd128 rows. Predictions: the suite passes; mma-bwd (FA2's algorithm on
# mma.sync, no wgmma) reaches ~40-50% of FA2-class speed on Hopper: 0.4-0.7x cuDNN's backward.
# Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
OUT_PY=$OUT/py; mkdir -p $OUT_PY
step "python" 240 python.txt env OUT=$OUT_PY EVOATTN_BIN=$BIN scripts/gpu-python.sh install tests
export PYTHONPATH=/tmp/evoattn-site:$PYTHONPATH
step "bwd time" 300 bwd-time.txt python3 crates/evoattn-py/examples/backward_time.py --reps 30 --blocks 3 \
  --json $OUT/bwd-time.json
print_rows | cut -c1-120
grep -h -E "passed|failed|Error" $OUT/py/pytest.txt | tail -15 | cut -c1-200
cat $OUT/bwd-time.txt | cut -c1-140
