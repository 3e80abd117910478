# Session 40, device call 7 (the session's last ~130 s): the hybrids' first GPU run. gpu_library
# (cublas, hybrid-qk, hybrid-pv against float64: GQA, BSHD, masks, no-key rows, Sk = 1, hd256,
# chunks, both score dtypes), then `check` of each hybrid on the small preset.
# Prediction: all pass (our GEMM accumulates in fp32 as cuBLASLt does).
# Carry: [".gpu"].
set -u
BUDGET_S=60
source scripts/lib-step.sh
step "gpu_library" 30 gpu-library.txt .gpu/gpu_library --test-threads 1 --nocapture
step "check hybrid-qk" 12 check-hqk.txt "$BIN" check --preset small --impl hybrid-qk
step "check hybrid-pv" 12 check-hpv.txt "$BIN" check --preset small --impl hybrid-pv
print_rows | cut -c1-110
grep -h -E "^(ok|FAIL) |passed, |test result" $OUT/*.txt | cut -c1-140 | grep -E "FAIL|passed|result" | head -30
