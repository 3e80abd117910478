# Session 37's second device call (#36): why vt_producer=1 slows long rows (dev1: hd128 4k
# +12.8%, 16k +16.1%, hd64 16k +7.0%; 512-key rows -10%). Traces of both at 4,16,4096,128
# (consumer waits on V: a latency problem; or a longer softmax/GEMM: contention), Nsight
# Compute's counters and stall samples of both (shared-memory wavefronts, bank conflicts, issue),
# and vt_producer with 3 stages (more slack before each Vᵀ stage is needed). Carry: [".gpu"].
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
S=4,16,4096,128
VP="--impl wgmma --config-on-plan --config vt_producer=1"
# The end of the transposes is now a barrier (dev1's racecheck flagged the shared flag it was).
step "check vp" 40 check-vp.txt "$BIN" check --shape 1,4,130,128,2,300 --shape 3,6,513,64,3,900 --shape 1,2,5,128,2,1 \
  --shape 2,32,2048,64,8 --dtype e4m3 --causal all $VP
step "check vp claimed" 30 check-vp-cl.txt "$BIN" check --shape 1,4,130,128,2,300 --shape 3,6,513,64,3,900 --dtype e4m3 \
  --causal top-left --impl wgmma --config-on-plan --config vt_producer=1,schedule=claimed,stages=3
step "racecheck vp" 60 racecheck-vp.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" \
  check --shape 1,4,130,128,2,300 --shape 1,2,200,64 --dtype e4m3 $VP
step "trace default" 30 trace-default.txt "$BIN" trace --shape $S --dtype e4m3 --impl wgmma --config-on-plan --config trace=1
step "trace vp" 30 trace-vp.txt "$BIN" trace --shape $S --dtype e4m3 --impl wgmma --config-on-plan --config trace=1,vt_producer=1
for v in default vp; do
  cfg=""; [ $v = vp ] && cfg="--impl wgmma --config-on-plan --config vt_producer=1"
  step "ncu $v" 120 ncu-$v.txt "$NCU" --set full --import-source yes --section SourceCounters -k regex:evoattn_wgmma \
    --launch-count 2 -f -o $OUT/ncu-$v "$BIN" bench --shape $S --dtype e4m3 --reps 2 --peers none --no-history $cfg
  "$NCU" -i $OUT/ncu-$v.ncu-rep --page details --csv > $OUT/ncu-$v-details.csv 2>&1
  "$NCU" -i $OUT/ncu-$v.ncu-rep --page raw --csv > $OUT/ncu-$v-raw.csv 2>&1
  "$NCU" -i $OUT/ncu-$v.ncu-rep --page source --csv --print-source sass > $OUT/ncu-$v-sass.csv 2> $OUT/ncu-$v-sass.err
  python3 scripts/ncu-stalls.py $OUT/ncu-$v-sass.csv > $OUT/stalls-$v.txt 2>&1
done
export A=$BIN B=$BIN ROUNDS=1 REPS=20 B_ARGS="--impl wgmma --config-on-plan --config vt_producer=1,stages=3"
step "ab vp s3" 120 ab-vp-s3.txt scripts/gpu-ab.sh vps3 --shape 4,16,4096,128 --shape 32,16,512,128 --dtype e4m3
print_rows | cut -c1-110
grep -h -E "RACECHECK SUMMARY|passed, " $OUT/check-vp*.txt $OUT/racecheck-vp.txt
for v in default vp; do echo "== $v"; grep -E "key block|softmax|wait|P.V|turn" $OUT/trace-$v.txt | head -14
  grep -E "Tensor|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Shared|Bank|Duration|SM Frequency" $OUT/ncu-$v-details.csv | grep -v _vt | cut -c1-170 | head -16
  head -30 $OUT/stalls-$v.txt; done
tail -4 $OUT/ab-vp-s3.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s37-dev2.tar.xz)
