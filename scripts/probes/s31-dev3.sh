# Session 31, device call 3 (#36): lever combinations of the E4M3 `wgmma` kernel, one bench run
# each (ours alone, 15 samples): hd128 at 4k and 16k keys, hd64 and hd256 at 16k (fa3 rows).
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
sweep() {
  local d=$1 tag=$2 budget=$3; shift 3
  for c in "$@"; do
    step "hd$d $tag ${c:-default}" $budget "sweep$d-$tag-${c:-default}.txt" "$BIN" bench $SHAPES --dtype e4m3 --impl wgmma ${c:+--config $c} --peers none --reps 15
  done
}
SHAPES="--shape 4,16,4096,128 --shape 1,16,16384,128"
sweep 128 long 40 "" pipeline=overlap pipeline=overlap,q_in_regs=1 q_in_regs=1 pipeline=overlap,q_in_regs=1,exp2_poly=8 q_in_regs=1,exp2_poly=8 pipeline=overlap,q_in_regs=1,stages=3
SHAPES="--shape 1,32,16384,64"
sweep 64 16k 30 "" q_in_regs=1 exp2_poly=4 schedule=persistent,q_in_regs=1
SHAPES="--shape 1,8,16384,256"
sweep 256 16k 35 "" pipeline=overlap schedule=persistent stages=3
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows | cut -c1-60
for f in $OUT/sweep*.txt; do echo "$(basename $f .txt)"; grep -E "^[0-9]+,[0-9]+," $f | sed -E 's/ +/ /g' | cut -c1-120; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s31-dev3.tar.xz)
