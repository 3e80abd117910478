# Session 41's seventh device call (#38). (1) `bench --preset seed --preset fa3-grid --impl
# hybrid-pv` against sdpa-math and our fused plan through PyTorch (evoattn-torch), as
# s41-dev2 did hybrid-qk. (2) The correctness grid (`check --preset grid`: f16/bf16 x hd
# 64/128/256 x every mask x lengths 1..4097 x Sq != Sk x GQA 4:1 x both layouts, normal and wide
# inputs) for the three library paths. (3) `tune --impl any` on the seed shapes with every
# family's start evaluated first and the per-shape winners table (cuTENSOR is not installed in
# this call: the tuner says it leaves gemm=cutensor out). Predictions: hybrid-pv near cublas
# (our Q·Kᵀ writes f32 S like cuBLASLt); the grid passes (504 each); wgmma wins every seed
# shape, the library paths 3-5x slower there.
# Carry: .gpu target/wheels.
set -u
BUDGET_S=590
source scripts/lib-step.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site target/wheels/evoattn-*.whl \
  && export PYTHONPATH=/tmp/site:$PYTHONPATH
step "bench hybrid-pv" 240 bench-hybrid-pv.txt "$BIN" bench --preset seed --preset fa3-grid --impl hybrid-pv \
  --peers sdpa-math,evoattn-torch --reps 10 --no-history --json $OUT/s41-h200-hybrid-pv-seed-fa3.json
for imp in cublas hybrid-qk hybrid-pv; do
  step "grid $imp" 65 grid-$imp.txt "$BIN" check --preset grid --impl $imp
done
step "tune any seed" 140 tune-any.txt "$BIN" tune --preset seed --impl any --generations 4 --budget 120s \
  --store $OUT/tune-any.sqlite --json $OUT/s41-h200-tune-any-seed.json
print_rows | cut -c1-120
grep -h -E "^FAIL|passed, |test result" $OUT/*.txt | cut -c1-140 | head -30
grep -A12 "winner" $OUT/tune-any.txt | cut -c1-150
(cd $OUT && mkdir -p ../keep && mv s41-h200-*.json ../keep/ && tar cJf ../r.tar.xz . && rm -rf ./* && mv ../r.tar.xz s41-dev3-logs.tar.xz && mv ../keep/* .)
