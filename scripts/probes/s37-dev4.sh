# Session 37's fourth device call (#36): the planner now transposes E4M3's V in the kernel up to
# hd128 and 4k keys (vt_producer, FP8_VT_PRODUCER_MAX_KEYS; dev3's unmasked A/B). Checks of the
# new defaults against float64 (small, sanitize; both O dtypes), memcheck and racecheck over
# the E4M3 sanitize preset, then the causal rows' A/B/B/A (A: the new plan, B: vt_producer=0),
# which dev3 did not measure. Prediction: causal 512 -10..-15% as unmasked, 4k about even.
# Carry: [".gpu"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "check e4m3" 90 check-e4m3.txt "$BIN" check --preset small --preset sanitize --dtype e4m3,e4m3f16
step "memcheck e4m3" 90 memcheck-e4m3.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize \
  --dtype e4m3
step "racecheck e4m3" 120 racecheck-e4m3.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" \
  check --preset sanitize --dtype e4m3
export A=$BIN B=$BIN ROUNDS=1 REPS=20 B_ARGS="--impl wgmma --config-on-plan --config vt_producer=0"
step "ab causal" 240 ab-causal.txt scripts/gpu-ab.sh causal --shape 32,16,512,128 --shape 8,16,2048,128 \
  --shape 4,16,4096,128 --shape 32,32,512,64 --shape 8,32,2048,64 --shape 4,32,4096,64 --dtype e4m3 --causal top-left
print_rows | cut -c1-110
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, " $OUT/check-e4m3.txt $OUT/memcheck-e4m3.txt $OUT/racecheck-e4m3.txt
grep -c "vp=1" $OUT/check-e4m3.txt
tail -8 $OUT/ab-causal.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s37-dev4.tar.xz)
