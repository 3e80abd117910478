# Session 29, device call 5 (#35): the record of this session's build. The seed gate against the
# best SDPA backend in eager and graph mode (the planner unchanged), `resident` on the seed preset
# against cuDNN, the smallest launch of each Hopper kernel (the launch term of the floor), and
# the GPU tests: the new resident one and the wgmma lever tests session 28 did not reach.
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
P="--peers sdpa-cudnn,sdpa-flash --reps 60"
step "gate eager" 90 gate-eager.txt "$BIN" gate --preset seed --against best $P --record $OUT/gate-eager.json
step "gate graph" 90 gate-graph.txt "$BIN" gate --preset seed --against best $P --mode graph --record $OUT/gate-graph.json
step "resident seed" 60 resident-seed.txt "$BIN" bench --preset seed --impl resident --peers sdpa-cudnn --reps 60 --json $OUT/resident-seed.json
for m in eager graph; do
  step "tiny $m" 40 tiny-$m.txt bash -c "$BIN bench --shape 1,1,64,64 --dtype f16 --impl resident --peers sdpa-cudnn --mode $m --reps 100 && \
    $BIN bench --shape 1,1,64,64 --dtype f16 --impl wgmma --peers none --mode $m --reps 100"
done
step "gpu tests" 300 gpu-tests.txt "$TESTS" --test-threads 1 resident_passes ring_test rowsum_mma split_tail o_in_q
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows
grep -E "^test |test result" $OUT/gpu-tests.txt
grep -E "^[0-9]+,[0-9]+,|pass|fail" $OUT/gate-eager.txt | cut -c1-150 | tail -n 14
grep -E "^[0-9]+,[0-9]+,|pass|fail" $OUT/gate-graph.txt | cut -c1-150 | tail -n 14
grep -E "^[0-9]+,[0-9]+,512" $OUT/resident-seed.txt | cut -c1-140
grep -hE "^1,1,64" $OUT/tiny-*.txt | cut -c1-140
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s29-dev5.tar.xz)
