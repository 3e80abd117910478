# Session 38's third device call (#36): a V given transposed, both ways the kernel prepares it
# after dev2 (in-kernel permute +9..10% at 16k against V in rows): `vt_given` with
# `vt_producer` (the producer's warps permute each tile in place) and without (a kernel of its
# own permutes V into the scratch first, as the transpose kernel does for V in rows).
# Checks against float64 both ways, memcheck (the permute kernel reads the caller's rows, the
# last 16 keys byte by byte), racecheck; A/B/B/A in-kernel against the permute kernel at 4k and
# 8k (sets FP8_VT_PERMUTE_MAX_KEYS, 4096 for now), and V given (the plan: the permute kernel at
# 16k) against V in rows (the transpose kernel) at 16k.
# Prediction: at 16k given = rows within 1% (both kernels move V once, ~22 us of 1.6-2.4 ms);
# in-kernel against the permute kernel: 4k -1..-4%, 8k +3..6% (the rows' transposer: 4k -1.1%,
# 8k +8.4%; the permute is lighter).
# Carry: [".gpu"].
set -u
BUDGET_S=470
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
SH="--shape 1,4,130,128,2,300 --shape 2,8,1000,128,2,1000 --shape 3,6,513,64,3,900 --shape 1,2,77,128 \
  --shape 2,4,257,64,4,1 --shape 1,16,4096,128 --shape 2,32,2048,64,8 --shape 1,4,300,256,2,700 --shape 1,8,2048,256"
step "check vg in-kernel" 70 check-vg-vp.txt "$BIN" check $SH --dtype e4m3,e4m3f16 --causal all --v-layout bhds
step "check vg kernel" 70 check-vg-k.txt "$BIN" check $SH --dtype e4m3,e4m3f16 --causal all --v-layout bhds \
  --impl wgmma --config-on-plan --config vt_producer=0
step "memcheck vg kernel" 40 memcheck-vg-k.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" \
  check --preset sanitize --shape 1,4,130,128,2,300 --shape 2,4,257,64,4,1 --dtype e4m3 --v-layout bhds \
  --impl wgmma --config-on-plan --config vt_producer=0
step "racecheck vg in-kernel" 30 racecheck-vg-vp.txt "$SANITIZER" --tool racecheck --racecheck-report all \
  --error-exitcode 9 "$BIN" check --shape 1,4,130,128,2,300 --shape 1,2,200,64 --shape 1,2,150,256 --dtype e4m3 \
  --v-layout bhds
export ROUNDS=1 REPS=20 A=$BIN B=$BIN
export A_ARGS="--v-layout bhds --impl wgmma --config-on-plan --config vt_producer=0"
export B_ARGS="--v-layout bhds --impl wgmma --config-on-plan --config vt_producer=1"
step "ab permute" 170 ab-perm.txt scripts/gpu-ab.sh perm --shape 4,16,4096,128 --shape 2,16,8192,128 \
  --shape 4,8,4096,256 --shape 2,8,8192,256 --shape 4,32,4096,64 --dtype e4m3
export A_ARGS="" B_ARGS="--v-layout bhds"
step "ab given 16k" 110 ab-g16k.txt scripts/gpu-ab.sh g16k --shape 1,16,16384,128 --shape 1,8,16384,256 --dtype e4m3
print_rows | cut -c1-110
grep -h -E "RACECHECK SUMMARY|ERROR SUMMARY|passed, " $OUT/check-*.txt $OUT/racecheck-*.txt $OUT/memcheck-*.txt
grep -h -B2 -A6 "FAIL" $OUT/check-vg-*.txt | head -30
for f in ab-perm ab-g16k; do grep -A8 "== A/B" $OUT/$f.txt; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz ./*.json ./perm-* ./g16k-* 2>/dev/null; rm -f ./*.json ./perm-* ./g16k-*; mv ../x.tar.xz s38-dev3-runs.tar.xz)
