# Session 35's second device call (#37 part 4): the timer controls after the lab reads the SM
# clock (NVML, every ms) while each block runs and compares the controls with our timer at equal
# clocks (s35-dev1: the H100's clock moved 1770-1980 MHz between blocks on the 4k-16k rows,
# block medians 4-16% apart, six controls past 3%). The seed preset, then the fa3 grid's rows
# of every head dim, non-causal and causal. Carry: [".gpu"].
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
PEERS=sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler
step "timers seed" 70 timers-seed.txt "$BIN" bench --preset seed --reps 40 --block 5 --peers $PEERS --json $OUT/timers-seed.json
for d in 128 64 256; do
  step "timers fa3 hd$d" 160 timers-fa3-$d.txt "$BIN" bench $(fa3_rows $d) --dtype bf16 --causal none,top-left --reps 30 --block 5 \
    --peers $PEERS --json $OUT/timers-fa3-$d.json
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> $OUT/gpu.txt 2>&1
print_rows | cut -c1-90
for f in $OUT/timers-*.txt; do echo "== $(basename $f)"; grep -E "^SM clock|^flagged|^not measured" $f | cut -c1-220; done
python3 scripts/timer-agreement.py $OUT/timers-*.json
cat $OUT/gpu.txt
