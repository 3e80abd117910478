# Session 29, device call 8 (#35): is `resident` (three consumers, one head a block) faster than
# the planner's wgmma kernel beyond the one seed shape? The fa3 grid's hd64 512 rows (32 x 32
# heads: eight rounds of blocks), 16,16 (two rounds) and 8,16 (one), both masks, ABAB in graph mode.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
S="--shape 32,32,512,64 --shape 16,16,512,64 --shape 8,16,512,64 --dtype bf16 --causal none,top-left"
R="--impl resident --config-on-plan --config consumer_warpgroups=3"
for side in A B A B; do
  if [ $side = A ]; then args=$R; else args=$"--impl wgmma"; fi
  $B bench $S $args --mode graph --reps 30 --peers none --no-history 2>&1 | grep -E "^[0-9]+,[0-9]+,512" | sed "s/^/$side /" | cut -c1-90
done | sort -s -k2,2 -k4,4
