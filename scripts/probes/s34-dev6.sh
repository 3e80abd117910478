# Session 34's sixth device call (#37 part 4): the cross-bench columns after the oracle learned
# to launch TMA kernels (tensor maps encoded over its tensors) and kernels with scratch (claim
# counters, split-tail pieces), and the profiler timer's second session when one loses its
# records: the seed preset, then the fa3 grid one head dim at a time (non-causal and causal).
# Carry: [".gpu"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
PEERS=sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler
step "timers seed" 70 timers-seed.txt "$BIN" bench --preset seed --reps 40 --peers $PEERS --json $OUT/timers-seed.json
for d in 128 64 256; do
  step "timers fa3 hd$d" 170 timers-fa3-$d.txt "$BIN" bench $(fa3_rows $d) --dtype bf16 --causal none,top-left --reps 30 \
    --peers $PEERS --json $OUT/timers-fa3-$d.json
done
print_rows | cut -c1-90
for f in $OUT/timers-*.txt; do echo "== $(basename $f)"; grep -E "^flagged|^not measured" $f | cut -c1-200; done
python3 scripts/timer-agreement.py $OUT/timers-*.json
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s34-dev6.tar.xz)
