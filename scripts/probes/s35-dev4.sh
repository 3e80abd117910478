# Session 35's fourth device call (#37 part 4, the closing run): the Python package's GPU tests
# with a wheel from the clean tree, then the timer controls on the seed preset and every fa3
# grid row (three head dims, non-causal and causal) at the bench's own sampling: 30 samples a
# side in blocks of 5, four times as many where our block medians spread more than 5% (the
# power cap). Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=570
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "python package" 120 python.txt scripts/gpu-python.sh install tests
PEERS=sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler
step "timers seed" 70 timers-seed.txt "$BIN" bench --preset seed --reps 40 --block 5 --peers $PEERS --json $OUT/timers-seed.json
for d in 128 64 256; do
  step "timers fa3 hd$d" 150 timers-fa3-$d.txt "$BIN" bench $(fa3_rows $d) --dtype bf16 --causal none,top-left --reps 30 --block 5 \
    --peers $PEERS --json $OUT/timers-fa3-$d.json
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> $OUT/gpu.txt 2>&1
print_rows | cut -c1-100
grep -h "^==" $OUT/python.txt
for f in $OUT/timers-*.txt; do echo "== $(basename $f)"; grep -E "^SM clock|^flagged|^not measured|spread" $f | cut -c1-200; done
python3 scripts/timer-agreement.py $OUT/timers-*.json | tail -1
cat $OUT/gpu.txt
