# Session 42, the backward pass's first GPU run (`mma-bwd`, kernels/bwd/bwd.cu). gpu_backward
# (every mask, layout, dtype, hd64/128, GQA, Sq != Sk both ways, no-key rows, Sk = 1, and every
# config of the space on one problem, against float64), then memcheck and racecheck on its
# first test. Predictions: errors of about 1u rms (rel_l2 ~4e-3 bf16, ~5e-4 f16), inside
# grad_tolerance; no sanitizer errors (dQ's atomics are `red`, outside racecheck's shared-memory scope).
# Carry: [".gpu"] (.gpu/gpu_backward = target/release/deps/gpu_backward-*).
set -u
BUDGET_S=590
source scripts/lib-step.sh
step "gpu_backward" 120 gpu-backward.txt .gpu/gpu_backward --test-threads 1 --nocapture
step "memcheck bwd" 200 memcheck-bwd.txt "$SANITIZER" --tool memcheck --error-exitcode 9 .gpu/gpu_backward \
  --test-threads 1 gradients_match
step "racecheck bwd" 200 racecheck-bwd.txt "$SANITIZER" --tool racecheck --error-exitcode 9 .gpu/gpu_backward \
  --test-threads 1 gradients_match
print_rows | cut -c1-110
grep -h -E "test result|ERROR SUMMARY|RACECHECK SUMMARY|panicked|failed:" $OUT/*.txt | cut -c1-160 | head -20
grep -h -E "rel_l2" $OUT/gpu-backward.txt | awk '{print}' | cut -c1-230 | head -80
