# Session 28, device call 4: on the two decode rows the planner gives schedule=split-tail
# (8,32,{1,4},128,32,8192 bf16), the planner's config against the same config with
# schedule=persistent, ABBA in one process each, graph mode (kernel time) and eager.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
shapes=(--shape 8,32,1,128,32,8192 --shape 8,32,4,128,32,8192 --dtype bf16)
split="block_n=176,consumer_warpgroups=2,pipeline=pingpong,schedule=split-tail,o_staging=half-tile"
pers="block_n=176,consumer_warpgroups=2,pipeline=pingpong,schedule=persistent,o_staging=half-tile"
for mode in graph eager; do
  i=0
  for cfg in $split $pers $pers $split; do
    i=$((i+1))
    timeout 90 $B bench "${shapes[@]}" --impl wgmma --config $cfg --mode $mode --peers sdpa-cudnn --json $OUT/ab-$mode-$i.json > $OUT/ab-$mode-$i.txt 2>&1
    echo "$mode $i ${cfg#*schedule=}: $(grep -E '^8,32' $OUT/ab-$mode-$i.txt | awk '{print $1, $4, $9}' | tr '\n' ' ')"
  done
done
