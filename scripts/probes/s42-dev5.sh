# Session 42: mma-bwd v2 (red.v2 dQ adds on sm_90, LSE/delta by cp.async, masks only on edge
# steps): gpu_backward (correctness, every config), memcheck/racecheck, then backward_time on
# the fa3 rows against SDPA flash/cuDNN (same run; v1's ratios are s42-dev3's, judged through
# the peers), and ncu's stall reasons for the next step. Prediction: 5-12% faster (v1: flash/ours
# 0.44-0.67, cudnn/ours 0.25-0.42).
# Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/evoattn-site target/wheels/evoattn-*.whl > $OUT/install.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PYTHONPATH
step "gpu_backward" 60 gpu-backward.txt .gpu/gpu_backward --test-threads 1 --nocapture
step "memcheck bwd" 60 memcheck-bwd.txt "$SANITIZER" --tool memcheck --error-exitcode 9 .gpu/gpu_backward --test-threads 1 gradients_match
step "racecheck bwd" 90 racecheck-bwd.txt "$SANITIZER" --tool racecheck --error-exitcode 9 .gpu/gpu_backward --test-threads 1 gradients_match
step "bwd time" 200 bwd-time.txt python3 crates/evoattn-py/examples/backward_time.py --reps 30 --blocks 3 --json $OUT/bwd-time.json
step "ncu bwd" 150 ncu-bwd.txt ncu --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --print-details all \
  --kernel-name regex:'mma_bwd_bf16_d128_bm32_bn128_s2$' --launch-skip 1 --launch-count 1 python3 scripts/probes/s42-bwd-ncu.py
print_rows | cut -c1-120
grep -h -E "test result|SUMMARY" $OUT/*.txt | cut -c1-140
cat $OUT/bwd-time.txt | cut -c1-140
grep -E "Stall|Warp Cycles|Issue Slots|Tensor|stall" $OUT/ncu-bwd.txt | cut -c1-150 | head -40
