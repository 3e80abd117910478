# Session 34's fifth device call: #37 parts 3 and 4 again after the fixes (invert planned its
# config arms without LSE and checked them with it; the oracle could not launch TMA kernels, so
# the self-* timers were missing on every wgmma row: the launch image now carries the tensor
# maps, which the oracle encodes over its tensors), and ABBA of the tuning comparison's winners
# (seed: pipeline=tma with exp2_poly=4, geomean's, against exp2_poly=0, composite's).
# Carry: [".gpu"].
set -u
BUDGET_S=585
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "timers seed" 70 timers-seed.txt "$BIN" bench --preset seed --reps 60 \
  --peers sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler --json $OUT/timers-seed.json
step "timers fa3 hd128" 100 timers-fa3-128.txt "$BIN" bench $(fa3_rows 128 512 2048 8192 16384) --dtype bf16 --reps 40 \
  --peers sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler --json $OUT/timers-fa3-128.json
step "invert hd128 16k" 140 invert-hd128-16k.txt "$BIN" invert --shape 1,16,16384,128 --dtype bf16 --counters \
  --json $OUT/invert-hd128-16k.json --svg $OUT/invert-hd128-16k.svg
step "invert seed" 80 invert-seed.txt "$BIN" invert --shape 4,16,512,64 --dtype f16 --counters \
  --json $OUT/invert-seed.json --svg $OUT/invert-seed.svg
step "invert seed mma" 80 invert-seed-mma.txt "$BIN" invert --shape 4,16,512,64 --dtype f16 --impl mma --counters \
  --json $OUT/invert-seed-mma.json --svg $OUT/invert-seed-mma.svg
BASE="block_n=128,stages=2,consumer_warpgroups=1,pipeline=tma,schedule=grid,o_staging=tile,lazy_rescale=0,ring_test=0,rowsum_mma=0,half_last=0,multicast=0,q_in_regs=0"
mkdir -p $OUT/ab
step "ABBA seed winners" 100 ab-seed.txt env A=$BIN B=$BIN A_ARGS="--impl wgmma --config $BASE,exp2_poly=4" \
  B_ARGS="--impl wgmma --config $BASE,exp2_poly=0" ROUNDS=2 REPS=30 OUT=$OUT/ab scripts/gpu-ab.sh seed \
  --shape 1,8,512,64 --shape 2,8,512,64 --shape 4,8,512,64 --shape 4,16,512,64 --shape 8,16,512,64 --dtype f16
print_rows | cut -c1-90
for f in $OUT/invert-*.txt; do echo "== $(basename $f)"; grep -E "^ +[-0-9]+ +[a-z-]+ |^rank" $f | cut -c1-150; done
for f in $OUT/timers-*.txt; do echo "== $(basename $f)"; grep -E "^flagged|^not measured|^[0-9]+,[0-9]+,.*(missing|[0-9]\.[0-9]+ +[0-9])" $f | cut -c1-150 | tail -14; done
tail -8 $OUT/ab-seed.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s34-dev5.tar.xz)
