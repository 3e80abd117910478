# Session 37's first device call (#36): vt_producer=1, E4M3's V transposed in shared memory by
# the producer warpgroup's three idle warps (ldmatrix.trans, byte permutes, stmatrix) from a raw
# ring of V's tiles, instead of the transpose kernel (~22 us a fa3-grid row: 32 MB of V read and
# written). Correctness first (hd64/128, tails, GQA, both masks, persistent and claimed schedules,
# 1 and 3 stages), sanitizers, then A/B/B/A against the default. Prediction: 512-key rows -11%
# (hd64) to -15% (hd128), 16k within 1%. Carry: [".gpu"].
set -u
BUDGET_S=580
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
VP="--impl wgmma --config-on-plan --config vt_producer=1"
SHAPES="--shape 1,4,130,128,2,300 --shape 2,8,1000,128,2,1000 --shape 3,6,513,64,3,900 --shape 1,2,77,128 \
 --shape 2,4,257,64,4,1 --shape 1,2,5,128,2,1 --shape 1,16,4096,128 --shape 2,32,2048,64,8"
step "check vp" 90 check-vp.txt "$BIN" check $SHAPES --dtype e4m3,e4m3f16 --causal all $VP
step "check vp persistent" 40 check-vp-pe.txt "$BIN" check $SHAPES --dtype e4m3 --causal none \
  --impl wgmma --config-on-plan --config vt_producer=1,schedule=persistent
step "check vp claimed s3" 40 check-vp-cl.txt "$BIN" check $SHAPES --dtype e4m3 --causal top-left \
  --impl wgmma --config-on-plan --config vt_producer=1,schedule=claimed,stages=3
step "check vp s1" 40 check-vp-s1.txt "$BIN" check $SHAPES --dtype e4m3 --causal bottom-right \
  --impl wgmma --config-on-plan --config vt_producer=1,stages=1
step "memcheck vp" 60 memcheck-vp.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check \
  --shape 1,4,130,128,2,300 --shape 3,6,513,64,3,900 --shape 1,2,77,128 --dtype e4m3 --causal all $VP
step "racecheck vp" 60 racecheck-vp.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" \
  check --shape 1,4,130,128,2,300 --shape 1,2,200,64 --dtype e4m3 $VP
step "synccheck vp" 40 synccheck-vp.txt "$SANITIZER" --tool synccheck --error-exitcode 9 "$BIN" \
  check --shape 1,4,130,128,2,300 --shape 1,2,200,64 --dtype e4m3 $VP
export A=$BIN B=$BIN ROUNDS=1 REPS=20 B_ARGS="$VP"
step "ab vp" 260 ab-vp.txt scripts/gpu-ab.sh vp --shape 32,16,512,128 --shape 16,16,1024,128 \
  --shape 4,16,4096,128 --shape 1,16,16384,128 --shape 32,32,512,64 --shape 4,32,4096,64 --shape 1,32,16384,64 --dtype e4m3
print_rows | cut -c1-110
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, |failed" $OUT/check-*.txt $OUT/memcheck-vp.txt $OUT/racecheck-vp.txt $OUT/synccheck-vp.txt | head -20
tail -10 $OUT/ab-vp.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s37-dev1.tar.xz)
