# Session 37's third device call (#36): vt_producer=1 with the transposer's addressing cut to
# one add a unit (dev2: its general swizzle arithmetic added 37% instructions to the kernel;
# MUFU's MIO-throttle stalls went from 12% to 34% of its samples). Correctness, racecheck, the
# transposer's SASS, then A/B/B/A against the default over lengths. Prediction: 512-key rows
# -10% as before, 4k from +12.8% to +3..5% (what stays: the shared-memory traffic, 32 KB a key
# block), 16k +3..5%. Carry: [".gpu"].
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
VP="--impl wgmma --config-on-plan --config vt_producer=1"
step "check vp" 60 check-vp.txt "$BIN" check --shape 1,4,130,128,2,300 --shape 2,8,1000,128,2,1000 --shape 3,6,513,64,3,900 \
  --shape 1,2,77,128 --shape 2,4,257,64,4,1 --shape 1,16,4096,128 --shape 2,32,2048,64,8 --dtype e4m3,e4m3f16 --causal all $VP
step "check vp claimed" 30 check-vp-cl.txt "$BIN" check --shape 1,4,130,128,2,300 --shape 3,6,513,64,3,900 --dtype e4m3 \
  --causal top-left --impl wgmma --config-on-plan --config vt_producer=1,schedule=claimed,stages=3
step "racecheck vp" 60 racecheck-vp.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" \
  check --shape 1,4,130,128,2,300 --shape 1,2,200,64 --dtype e4m3 $VP
for f in .gpu/vpcub/*.cubin; do cuobjdump --dump-sass "$f" > $OUT/$(basename $f .cubin).sass 2>&1; done
export A=$BIN B=$BIN ROUNDS=1 REPS=20 B_ARGS="$VP"
step "ab vp" 330 ab-vp.txt scripts/gpu-ab.sh vp --shape 32,16,512,128 --shape 16,16,1024,128 --shape 8,16,2048,128 \
  --shape 4,16,4096,128 --shape 1,16,16384,128 --shape 32,32,512,64 --shape 8,32,2048,64 --shape 1,32,16384,64 --dtype e4m3
print_rows | cut -c1-110
grep -h -E "RACECHECK SUMMARY|passed, " $OUT/check-vp*.txt $OUT/racecheck-vp.txt
for f in $OUT/*.sass; do echo "$f: LDSM $(grep -c LDSM $f) STSM $(grep -c STSM $f)"; grep -n -B3 -A12 "LDSM.16.MT88.4" $f | head -60; done
tail -10 $OUT/ab-vp.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s37-dev3.tar.xz)
