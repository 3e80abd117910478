# Session 34's eighth device call (refused: no device time left; the next session's first): the
# oracle's selfcheck, then the seed preset and the hd128 fa3 rows again, after the controls share
# one output check, the profiler's lead grows with the records CUPTI loses (s34-dev7 lost every
# record of some one-launch checks), its samples add the event pair's latency measured on empty
# launches, and the rule allows 3% or 0.5 us.
# Was: session 34's seventh device call: as s34-dev6.sh (whose header follows), with the profiler's
# lead launches (a session of one launch recorded none), blocks of 5 (twice the turns), and
# graph mode at the smallest seed shape (does the eager gap against the oracle's events come
# from the host?).
# Session 34's sixth device call (#37 part 4): the cross-bench columns after the oracle learned
# to launch TMA kernels (tensor maps encoded over its tensors) and kernels with scratch (claim
# counters, split-tail pieces), and the profiler timer's second session when one loses its
# records: the seed preset, then the fa3 grid one head dim at a time (non-causal and causal).
# Carry: [".gpu"].
set -u
BUDGET_S=220
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
PEERS=sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler
# The oracle's own check first: the profiler timer's latency measurement has not run on a GPU.
step "oracle selfcheck" 60 selfcheck.txt python3 -m evoattn_oracle.selfcheck
step "timers seed" 70 timers-seed.txt "$BIN" bench --preset seed --reps 40 --block 5 --peers $PEERS --json $OUT/timers-seed.json
for d in 128; do
  step "timers fa3 hd$d" 160 timers-fa3-$d.txt "$BIN" bench $(fa3_rows $d) --dtype bf16 --causal none,top-left --reps 30 --block 5 \
    --peers $PEERS --json $OUT/timers-fa3-$d.json
done
print_rows | cut -c1-90
for f in $OUT/timers-*.txt $OUT/graph-*.txt; do echo "== $(basename $f)"; grep -E "^flagged|^not measured" $f | cut -c1-200; done
python3 scripts/timer-agreement.py $OUT/timers-*.json
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s34-dev8.tar.xz)
