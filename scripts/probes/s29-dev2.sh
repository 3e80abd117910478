# Session 29, device call 2 (#35): the first `resident` kernel. Correctness on the seed shapes and
# on odd lengths, GQA, both causal alignments and hd128; then the seed preset with it against
# cuDNN, the planner's wgmma kernel in the same way, and a screen of its levers.
set -u
BUDGET_S=500
source scripts/lib-step.sh
R="--impl resident"
step "check seed" 60 check-seed.txt "$BIN" check --preset seed $R -v
step "check odd" 60 check-odd.txt "$BIN" check $R --shape 2,4,300,64 --shape 2,8,200,64,2,450 --shape 3,5,129,64,5,512 \
  --shape 2,4,256,128 --shape 2,4,100,128,4,250 --shape 1,2,700,64,1,64 --causal all --dtype all -v
step "memcheck" 90 memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check $R --shape 2,8,200,64,2,450 --shape 4,8,512,64 --causal all
step "racecheck" 90 racecheck.txt "$SANITIZER" --tool racecheck --error-exitcode 9 "$BIN" check $R --shape 2,8,200,64,2,450 --shape 4,8,512,64 --causal all
step "seed resident" 60 seed-resident.txt "$BIN" bench --preset seed $R --peers sdpa-cudnn --reps 60 --json $OUT/seed-resident.json
step "seed auto" 60 seed-auto.txt "$BIN" bench --preset seed --peers sdpa-cudnn --reps 60 --json $OUT/seed-auto.json
export EVOATTN_BIN=$BIN
IMPL=resident ON_PLAN=1 REPS=30 CONFIGS="default consumer_warpgroups=1 consumer_warpgroups=3 q_tiles=4" \
  timeout 150 scripts/gpu-config-sweep.sh sweep --shape 4,16,512,64 --shape 8,16,512,64 --dtype f16 --causal all > $OUT/sweep.txt 2>&1
print_rows
tail -n 3 $OUT/check-seed.txt; tail -n 3 $OUT/check-odd.txt; grep -i "fail\|error" $OUT/check-odd.txt | head -5
tail -n 9 $OUT/sweep.txt
grep -E "^[0-9]+,[0-9]+,512" $OUT/seed-resident.txt | cut -c1-130
grep -E "^[0-9]+,[0-9]+,512" $OUT/seed-auto.txt | cut -c1-130
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s29-dev2.tar.xz)
