# Session 39's third device call: ci-regate found the hd64 8k E4M3 row 7.3% slower than session
# 32's record on an H200 (1825 against 1701 µs, eager); the kernels differ in one lever, O
# through a staging tile of its own (session 36's E4M3 default, A/B'd at hd64 only at 512
# keys). A/B/B/A: the planner's kernel against the same plan with o_staging=registers, hd64
# E4M3 at 4k, 8k (persistent blocks) and 16k (grid blocks), and 8k causal.
# Prediction: if the staging tile is the cause, B -5..-7% at 8k; else within 1%.
# Carry: [".gpu"].
set -u
BUDGET_S=300
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
export ROUNDS=1 REPS=20 A=$BIN B=$BIN A_ARGS=""
export B_ARGS="--impl wgmma --config-on-plan --config o_staging=registers"
step "ab osrg" 280 ab-osrg.txt scripts/gpu-ab.sh osrg --shape 4,32,4096,64 --shape 2,32,8192,64 \
  --shape 1,32,16384,64 --dtype e4m3 --causal none,top-left
print_rows | cut -c1-110
grep -A12 "== A/B" $OUT/ab-osrg.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz ./osrg-* 2>/dev/null; rm -f ./osrg-*; mv ../x.tar.xz s39-dev3-runs.tar.xz)
