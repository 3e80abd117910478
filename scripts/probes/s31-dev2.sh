# Session 31, device call 2 (#36): the E4M3 `wgmma` kernel's correctness after the LSE bound
# (FP8 tensor-core accumulation) and the test's configs: library test, memcheck and racecheck
# over it, check --dtype e4m3 small+sanitize; then one lever at a time off the E4M3 default at
# hd128 and hd64, 16k keys (the fa3 grid's 1,16,16384,D), each a bench run of its own.
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "fp8 test" 100 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "check e4m3" 60 check-e4m3.txt "$BIN" check --preset small --preset sanitize --dtype e4m3
step "fp8 memcheck" 100 fp8-memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1
step "fp8 racecheck" 100 fp8-racecheck.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1
for c in "" stages=3 q_in_regs=1 schedule=persistent pipeline=overlap ring_test=1 exp2_poly=4 exp2_poly=8; do
  step "hd128 ${c:-default}" 25 sweep128-${c:-default}.txt "$BIN" bench --shape 1,16,16384,128 --dtype e4m3 --impl wgmma ${c:+--config $c} --peers none --reps 15
done
for c in "" consumer_warpgroups=2 block_n=256,consumer_warpgroups=2 exp2_poly=4 schedule=persistent; do
  step "hd64 ${c:-default}" 25 sweep64-${c:-default}.txt "$BIN" bench --shape 1,32,16384,64 --dtype e4m3 --impl wgmma ${c:+--config $c} --peers none --reps 15
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows
grep -E "^FAIL " $OUT/fp8-test.txt | cut -c1-300
grep -E "test result" $OUT/fp8-test.txt
tail -n 2 $OUT/check-e4m3.txt
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" $OUT/fp8-memcheck.txt $OUT/fp8-racecheck.txt
for f in $OUT/sweep*.txt; do printf "%s " "$(basename $f)"; grep -E "^[0-9]+,[0-9]+," $f | cut -c1-90; done
cat $OUT/gpu.txt
