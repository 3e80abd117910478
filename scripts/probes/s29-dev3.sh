# Session 29, device call 3 (#35): `resident` with ping-pong turns and TMA stores of O (the
# levers the first try lacked against wgmma's seed kernels): correctness, sanitizers, then lever
# screens on the seed shapes and the planner's kernel against cuDNN in the same way.
set -u
BUDGET_S=520
source scripts/lib-step.sh
R="--impl resident"
step "check seed" 60 check-seed.txt "$BIN" check --preset seed $R -v
step "check odd" 60 check-odd.txt "$BIN" check $R --shape 2,4,300,64 --shape 2,8,200,64,2,450 --shape 3,5,129,64,5,512 \
  --shape 2,4,256,128 --shape 2,4,100,128,4,250 --shape 1,2,700,64,1,64 --shape 8,16,512,64 --causal all --dtype all -v
step "check wg3" 60 check-wg3.txt "$BIN" check $R --config-on-plan --config consumer_warpgroups=3 --shape 8,16,512,64 --shape 3,5,1000,64,5,300 --causal all --dtype all
step "memcheck" 90 memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check $R --shape 2,8,200,64,2,450 --shape 4,8,512,64 --shape 3,5,1000,64,5,300 --causal all
step "racecheck" 120 racecheck.txt "$SANITIZER" --tool racecheck --error-exitcode 9 "$BIN" check $R --shape 2,8,200,64,2,450 --shape 4,8,512,64 --causal all
export EVOATTN_BIN=$BIN
IMPL=resident ON_PLAN=1 REPS=40 CONFIGS="default pingpong=0 tma_store=0 consumer_warpgroups=3" \
  timeout 120 scripts/gpu-config-sweep.sh big --shape 4,16,512,64 --shape 8,16,512,64 --dtype f16 --causal all > $OUT/sweep-big.txt 2>&1
IMPL=resident ON_PLAN=1 REPS=40 CONFIGS="default tma_store=0 pingpong=0" \
  timeout 90 scripts/gpu-config-sweep.sh small --shape 1,8,512,64 --shape 2,8,512,64 --shape 4,8,512,64 --dtype f16 --causal all > $OUT/sweep-small.txt 2>&1
IMPL=wgmma REPS=40 CONFIGS="default" \
  timeout 90 scripts/gpu-config-sweep.sh wgmma --preset seed --causal all > $OUT/sweep-wgmma.txt 2>&1
print_rows
tail -n 2 $OUT/check-seed.txt; tail -n 2 $OUT/check-odd.txt; tail -n 2 $OUT/check-wg3.txt
tail -n 8 $OUT/sweep-big.txt; tail -n 10 $OUT/sweep-small.txt; tail -n 16 $OUT/sweep-wgmma.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s29-dev3.tar.xz)
