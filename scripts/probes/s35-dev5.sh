# Session 35's fifth device call: s35-dev4.sh's seed and hd64 records came back too many files
# to carry, so again, tarred: the timer controls on the seed preset and the hd64 fa3 rows.
# Carry: [".gpu"].
set -u
BUDGET_S=250
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
PEERS=sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler
step "timers seed" 70 timers-seed.txt "$BIN" bench --preset seed --reps 40 --block 5 --peers $PEERS --json $OUT/timers-seed.json
step "timers fa3 hd64" 150 timers-fa3-64.txt "$BIN" bench $(fa3_rows 64) --dtype bf16 --causal none,top-left --reps 30 --block 5 \
  --peers $PEERS --json $OUT/timers-fa3-64.json
print_rows | cut -c1-100
for f in $OUT/timers-*.txt; do echo "== $(basename $f)"; grep -E "^SM clock|^flagged|^not measured" $f | cut -c1-200; done
python3 scripts/timer-agreement.py $OUT/timers-*.json
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s35-dev5.tar.xz)
