# Session 29, device call 6 (#35): `resident` with four consumers in series (overlap=0, 128
# registers), so eight tiles make two even rounds, against three pipelined consumers and the
# planner's wgmma kernel; correctness of the serial step first.
set -u
BUDGET_S=400
source scripts/lib-step.sh
R="--impl resident"
step "check ov0" 60 check-ov0.txt "$BIN" check $R --config-on-plan --config overlap=0 --shape 2,4,300,64 --shape 2,8,200,64,2,450 \
  --shape 2,4,100,128,4,250 --causal all --dtype all
step "check wg4" 60 check-wg4.txt "$BIN" check $R --config-on-plan --config consumer_warpgroups=4,overlap=0 --shape 8,16,512,64 \
  --shape 4,16,500,64 --shape 2,5,510,64,5,333 --causal all --dtype all
step "memcheck wg4" 60 memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check $R --config-on-plan \
  --config consumer_warpgroups=4,overlap=0 --shape 4,16,500,64 --shape 2,5,510,64,5,333 --causal all
export EVOATTN_BIN=$BIN
IMPL=resident ON_PLAN=1 REPS=40 CONFIGS="consumer_warpgroups=3 consumer_warpgroups=4,overlap=0 consumer_warpgroups=3,overlap=0 default consumer_warpgroups=4,overlap=0 consumer_warpgroups=3" \
  timeout 150 scripts/gpu-config-sweep.sh big --shape 4,16,512,64 --shape 8,16,512,64 --dtype f16 --causal all > $OUT/sweep-big.txt 2>&1
IMPL=wgmma REPS=40 CONFIGS="default" timeout 60 scripts/gpu-config-sweep.sh wgmma --shape 4,16,512,64 --shape 8,16,512,64 --dtype f16 --causal all > $OUT/sweep-wgmma.txt 2>&1
print_rows
tail -n 2 $OUT/check-ov0.txt; tail -n 2 $OUT/check-wg4.txt; tail -n 9 $OUT/sweep-big.txt; tail -n 7 $OUT/sweep-wgmma.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s29-dev6.tar.xz)
