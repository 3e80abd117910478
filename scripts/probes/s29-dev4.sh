# Session 29, device call 4 (#35): ABBA of `resident` (three consumers, the block's eight tiles)
# against the planner's wgmma kernel on the largest seed shape, graph mode, no peers, then both
# against cuDNN in eager mode.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
S="--shape 8,16,512,64 --shape 4,16,512,64 --dtype f16 --causal none,top-left"
R="--impl resident --config-on-plan --config consumer_warpgroups=3"
W="--impl wgmma"
for side in A B B A A B B A; do
  if [ $side = A ]; then args=$R; else args=$W; fi
  $B bench $S $args --mode graph --reps 40 --peers none --no-history 2>&1 | grep -E "^[48],16,512" | cut -c1-60 | sed "s/^/$side /" >> $OUT/abba.txt
done
$B bench $S $R --peers sdpa-cudnn --reps 60 > $OUT/eager-resident.txt 2>&1
$B bench $S $W --peers sdpa-cudnn --reps 60 > $OUT/eager-wgmma.txt 2>&1
sort -s -k2,2 -k4,4 $OUT/abba.txt
grep -E "^[48],16,512" $OUT/eager-resident.txt $OUT/eager-wgmma.txt | cut -c1-150
