# Session 36's fourth device call (#37 part 1 on the H100; session 34 ran it on an H200): geomean
# against composite tuning on the same shapes with the same evaluation budget (5 generations,
# seed 1, fresh stores, one worker, a 115 s wall cap each), the seed preset's unmasked shapes and
# two fa3-grid rows (hd128 2k and 8k). Same commands as s34-dev3. Carry: [".gpu"].
set -u
BUDGET_S=580
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
SEED="--shape 1,8,512,64 --shape 2,8,512,64 --shape 4,8,512,64 --shape 4,16,512,64 --shape 8,16,512,64 --dtype f16"
GRID="--shape 8,16,2048,128 --shape 2,16,8192,128 --dtype bf16"
for fit in geomean composite; do
  step "tune seed $fit" 118 tune-seed-$fit.txt "$BIN" tune $SEED --gpus 0 --generations 5 --budget 115s --seed 1 --fitness $fit \
    --store $OUT/seed-$fit.sqlite --json $OUT/seed-$fit.json
  step "tune grid $fit" 118 tune-grid-$fit.txt "$BIN" tune $GRID --gpus 0 --generations 5 --budget 115s --seed 1 --fitness $fit \
    --store $OUT/grid-$fit.sqlite --json $OUT/grid-$fit.json
done
for s in seed grid; do for fit in geomean composite; do
  "$BIN" tune --show --store $OUT/$s-$fit.sqlite --json $OUT/$s-$fit-show.json > $OUT/$s-$fit-show.txt 2>&1
done; done
print_rows | cut -c1-90
for f in $OUT/tune-*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9] |evaluations in" $f | cut -c1-150; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s36-dev4.tar.xz)
