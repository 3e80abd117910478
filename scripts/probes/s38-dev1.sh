# Session 38's first device call (#36): E4M3 with V given transposed ([B, Hkv, D, Sk], keys
# contiguous; `vt_given`: TMA loads the caller's Vᵀ tiles into the Vᵀ stages, the producer's
# idle warps put each 16 keys in P's order in place), and the transposer's addresses through
# `swizzled_offset` (vt_producer; SASS: 16 fewer instructions at hd64, 8 at hd128).
# Checks against float64 (tails, Sk = 1, GQA, hd64/128/256, both masks, E4M3 and e4m3f16),
# memcheck and racecheck, then A/B/B/A of V given transposed against V in rows (the plan's
# transpose: in the kernel up to 4k keys at hd <= 128, a kernel of its own past them).
# Prediction: vg at least as fast as rows everywhere; -5..-15% at hd256 512 (the transpose
# kernel's ~18% of that row), -1..-3% at 16k (no transpose kernel, ~22 us of ~1.5 ms).
# Carry: [".gpu"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
SH="--shape 1,4,130,128,2,300 --shape 2,8,1000,128,2,1000 --shape 3,6,513,64,3,900 --shape 1,2,77,128 \
  --shape 2,4,257,64,4,1 --shape 1,16,4096,128 --shape 2,32,2048,64,8 --shape 1,4,300,256,2,700 --shape 1,8,2048,256"
step "check vg" 100 check-vg.txt "$BIN" check $SH --dtype e4m3,e4m3f16 --causal all --v-layout bhds
step "check vg claimed s3" 40 check-vg-cl.txt "$BIN" check --shape 1,4,130,128,2,300 --shape 3,6,513,64,3,900 \
  --dtype e4m3 --causal top-left --v-layout bhds --impl wgmma --config-on-plan --config schedule=claimed,stages=3
step "check vp" 60 check-vp.txt "$BIN" check --shape 1,4,130,128,2,300 --shape 2,8,1000,128,2,1000 \
  --shape 3,6,513,64,3,900 --shape 1,2,77,128 --shape 2,4,257,64,4,1 --shape 1,16,4096,128 --shape 2,32,2048,64,8 \
  --dtype e4m3,e4m3f16 --causal all --impl wgmma --config-on-plan --config vt_producer=1
step "racecheck vp" 50 racecheck-vp.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" \
  check --shape 1,4,130,128,2,300 --shape 1,2,200,64 --dtype e4m3 --impl wgmma --config-on-plan --config vt_producer=1
step "racecheck vg" 60 racecheck-vg.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" \
  check --shape 1,4,130,128,2,300 --shape 1,2,200,64 --shape 1,2,150,256 --dtype e4m3 --v-layout bhds
step "memcheck vg" 80 memcheck-vg.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" \
  check --preset sanitize --dtype e4m3 --v-layout bhds
export A=$BIN B=$BIN ROUNDS=1 REPS=20 B_ARGS="--v-layout bhds"
step "ab vg" 200 ab-vg.txt scripts/gpu-ab.sh vg --shape 32,16,512,128 --shape 1,16,16384,128 --shape 32,8,512,256 \
  --shape 1,8,16384,256 --shape 1,32,16384,64 --dtype e4m3
print_rows | cut -c1-110
grep -h -E "RACECHECK SUMMARY|ERROR SUMMARY|passed, " $OUT/check-*.txt $OUT/racecheck-*.txt $OUT/memcheck-*.txt
grep -h -B2 -A6 "FAIL\|rror" $OUT/check-vg.txt | head -30
tail -8 $OUT/ab-vg.txt
cat $OUT/gpu.txt
