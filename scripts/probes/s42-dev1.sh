# Prepared in session 41 for session 42's first device call (#38's last items). (1) The Python
# GPU suite with this tree's wheel, whose new test runs each library path on two streams at
# once (per-stream cuBLASLt handles and scratch). (2) `gate` measuring the library paths live:
# `cublas` and `hybrid-pv` on the seed preset against sdpa-math (100 samples a side: five
# blocks, so the bootstrap interval is an interval; the session-41 records' 10 samples were
# one block, whose re-gate intervals are points). Predictions: the suite passes; both gates
# pass against sdpa-math (2-10x) and fail against sdpa-cudnn.
# (0) gpu_library on the Operand::address refactor (22ece06).
# Carry: [".gpu", "target/wheels"] (.gpu/evoattn, .gpu/gpu_library from this tree).
set -u
BUDGET_S=590
source scripts/lib-step.sh
OUT_PY=$OUT/py; mkdir -p $OUT_PY
step "gpu_library" 90 gpu-library.txt .gpu/gpu_library --test-threads 1 --nocapture
step "python" 200 python.txt env OUT=$OUT_PY EVOATTN_BIN=$BIN scripts/gpu-python.sh install tests
for imp in cublas hybrid-pv; do
  step "gate $imp sdpa-math" 120 gate-$imp.txt "$BIN" gate --no-history --preset seed --impl $imp \
    --peers sdpa-math,sdpa-cudnn --against sdpa-math --reps 100
done
print_rows | cut -c1-120
grep -h -E "^gate:|passed|failed" $OUT/*.txt | cut -c1-140 | head
(cd $OUT && tar cJf ../r.tar.xz . && rm -rf ./* && mv ../r.tar.xz s42-dev1-logs.tar.xz)
