# Session 35's third device call (#37 part 4): at the power cap (s35-dev2: NVML's SM clock
# 1155-1980 MHz on the 4k-16k rows, block medians 4-22% apart, and a block's time not following
# the clock), do four times the blocks bring the controls' medians within 3% of ours? The fa3
# rows at 4k, 8k, 16k of every head dim, non-causal and causal, 120 samples a side in blocks
# of 5 (24 blocks; s35-dev2 had 6). Carry: [".gpu"].
set -u
BUDGET_S=540
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
PEERS=sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler
for d in 128 64 256; do
  step "timers long hd$d" 175 timers-long-$d.txt "$BIN" bench $(fa3_rows $d 4096 8192 16384) --dtype bf16 --causal none,top-left \
    --reps 120 --block 5 --peers $PEERS --json $OUT/timers-long-$d.json
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> $OUT/gpu.txt 2>&1
print_rows | cut -c1-90
for f in $OUT/timers-*.txt; do echo "== $(basename $f)"; grep -E "^SM clock|^flagged|^not measured" $f | cut -c1-220; done
python3 scripts/timer-agreement.py $OUT/timers-*.json
cat $OUT/gpu.txt
