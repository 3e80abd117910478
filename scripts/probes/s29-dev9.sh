# Session 29, device call 9 (#35): `resident` with each tile's keys split over a pair of
# consumers (key_split=2), for the seed rows that are one round of tiles (1,8 2,8 4,8):
# correctness (a part with no key block included), sanitizers, then screens against wgmma.
set -u
BUDGET_S=420
source scripts/lib-step.sh
R="--impl resident --config-on-plan"
step "check ks2 wg2" 45 check-ks2.txt "$BIN" check $R --config consumer_warpgroups=2,key_split=2,pingpong=1 --shape 2,4,300,64 \
  --shape 2,8,200,64,2,450 --shape 1,2,700,64,1,64 --shape 2,4,100,128,4,250 --shape 1,8,512,64 --causal all --dtype all
step "check ks2 wg4" 45 check-ks2-wg4.txt "$BIN" check $R --config consumer_warpgroups=4,key_split=2,overlap=0 --shape 4,8,512,64 \
  --shape 4,8,500,64,8,300 --shape 8,16,512,64 --causal all --dtype all
step "memcheck" 60 memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check $R --config consumer_warpgroups=4,key_split=2,overlap=0 \
  --shape 4,8,500,64,8,300 --shape 1,8,130,64,8,70 --causal all
step "racecheck" 100 racecheck.txt "$SANITIZER" --tool racecheck --error-exitcode 9 "$BIN" check $R --config consumer_warpgroups=4,key_split=2,overlap=0 \
  --shape 4,8,500,64,8,300 --causal all
export EVOATTN_BIN=$BIN
IMPL=resident ON_PLAN=1 REPS=40 CONFIGS="default consumer_warpgroups=2,key_split=2,pingpong=1 consumer_warpgroups=2,key_split=2,pingpong=0" \
  timeout 80 scripts/gpu-config-sweep.sh one --shape 1,8,512,64 --shape 2,8,512,64 --dtype f16 --causal none,top-left > $OUT/sweep-one.txt 2>&1
IMPL=resident ON_PLAN=1 REPS=40 CONFIGS="default consumer_warpgroups=4,key_split=2,overlap=0 consumer_warpgroups=4,key_split=2,overlap=0,pingpong=0" \
  timeout 80 scripts/gpu-config-sweep.sh two --shape 4,8,512,64 --dtype f16 --causal none,top-left > $OUT/sweep-two.txt 2>&1
IMPL=wgmma REPS=40 CONFIGS="default" timeout 60 scripts/gpu-config-sweep.sh wgmma --shape 1,8,512,64 --shape 2,8,512,64 --shape 4,8,512,64 --dtype f16 --causal none,top-left > $OUT/sweep-wgmma.txt 2>&1
print_rows
for f in check-ks2 check-ks2-wg4; do tail -n 2 $OUT/$f.txt; grep -m3 -A1 FAIL $OUT/$f.txt; done
tail -n 6 $OUT/sweep-one.txt; tail -n 4 $OUT/sweep-two.txt; tail -n 8 $OUT/sweep-wgmma.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s29-dev9.tar.xz)
