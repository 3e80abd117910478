# Session 36's third device call (#37 on the H100, which its "done when" names; session 34 ran
# these on an H200, the card lent then): the planted cheats through the real backend, and the
# invert maps at hd128 16k (bf16, wgmma) and at the seed shape 4,16,512,64 (f16; wgmma and mma).
# Same commands as s34-dev1/-dev2. Carry: [".gpu"].
set -u
BUDGET_S=570
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "info (ceilings)" 40 info.txt "$BIN" info
step "cheats" 130 cheats.txt "$BIN" tune --impl mma --shape 1,2,128,64 --shape 1,2,300,64 --generations 6 --gpus 0 \
  --store $OUT/cheats.sqlite --proposer "sh crates/evoattn-cli/tests/fixtures/planted-cheats-proposer.sh $OUT/calls"
step "cheats show" 20 cheats-show.txt "$BIN" tune --show --store $OUT/cheats.sqlite
step "invert hd128 16k" 150 invert-hd128-16k.txt "$BIN" invert --shape 1,16,16384,128 --dtype bf16 --counters \
  --json $OUT/invert-hd128-16k.json --svg $OUT/invert-hd128-16k.svg
step "invert seed" 90 invert-seed.txt "$BIN" invert --shape 4,16,512,64 --dtype f16 --counters \
  --json $OUT/invert-seed.json --svg $OUT/invert-seed.svg
step "invert seed mma" 90 invert-seed-mma.txt "$BIN" invert --shape 4,16,512,64 --dtype f16 --impl mma --counters \
  --json $OUT/invert-seed-mma.json --svg $OUT/invert-seed-mma.svg
print_rows | cut -c1-100
grep -E "integrity|cheat|failed" $OUT/cheats.txt | cut -c1-160 | head -20
for f in $OUT/invert-*.txt; do echo "== $(basename $f)"; grep -E "×|x " $f | cut -c1-150 | head -12; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s36-dev3.tar.xz)
