# The second device call after session 33 (#37 parts 3 and 4, never run on a GPU): the invert
# map of the planner's kernel at hd128 16k and at a seed shape (and of `mma` at that seed shape,
# where the load pathologies apply), with Nsight Compute's counters; our kernel timed by Triton's
# do_bench and PyTorch's profiler beside our timer on the seed preset and hd128 fa3-grid rows.
# Carry: [".gpu"].
set -u
BUDGET_S=575
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "invert hd128 16k" 150 invert-hd128-16k.txt "$BIN" invert --shape 1,16,16384,128 --dtype bf16 --counters \
  --json $OUT/invert-hd128-16k.json --svg $OUT/invert-hd128-16k.svg
step "invert seed" 90 invert-seed.txt "$BIN" invert --shape 4,16,512,64 --dtype f16 --counters \
  --json $OUT/invert-seed.json --svg $OUT/invert-seed.svg
step "invert seed mma" 90 invert-seed-mma.txt "$BIN" invert --shape 4,16,512,64 --dtype f16 --impl mma --counters \
  --json $OUT/invert-seed-mma.json --svg $OUT/invert-seed-mma.svg
step "timers seed" 120 timers-seed.txt "$BIN" bench --preset seed --reps 60 \
  --peers sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler --json $OUT/timers-seed.json
step "timers fa3 hd128" 120 timers-fa3-128.txt "$BIN" bench $(fa3_rows 128 512 2048 16384) --dtype bf16 --reps 40 \
  --peers sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler --json $OUT/timers-fa3-128.json
print_rows | cut -c1-90
for f in $OUT/invert-*.txt; do echo "== $(basename $f)"; grep -E "^ +[-0-9]+ +[a-z-]+ " $f | cut -c1-150; done
for f in $OUT/timers-*.txt; do echo "== $(basename $f)"; grep -E "^flagged|^[0-9]+,[0-9]+," $f | cut -c1-150 | head -20; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s34-dev2.tar.xz)
