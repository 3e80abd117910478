# Session 34's fourth device call (#37 part 1): the fa3-grid half of geomean against composite.
# In s34-dev3 (115 s each) an evaluation of the hd128 2k+8k pair took about 11 s (geomean) and
# 14 s (composite, ncu on each), so neither got past generation 1; here 3 generations each, under
# a 270 s wall cap, fresh stores, seed 1, one worker. Carry: [".gpu"].
set -u
BUDGET_S=585
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
GRID="--shape 8,16,2048,128 --shape 2,16,8192,128 --dtype bf16"
for fit in geomean composite; do
  step "tune grid $fit" 285 tune-grid-$fit.txt "$BIN" tune $GRID --gpus 0 --generations 3 --budget 270s --seed 1 --fitness $fit \
    --store $OUT/grid-$fit.sqlite --json $OUT/grid-$fit.json
  "$BIN" tune --show --store $OUT/grid-$fit.sqlite --json $OUT/grid-$fit-show.json > $OUT/grid-$fit-show.txt 2>&1
done
print_rows | cut -c1-90
for f in $OUT/tune-*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9] |evaluations in|generation [0-9]" $f | cut -c1-150; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s34-dev4.tar.xz)
