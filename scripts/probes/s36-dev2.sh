# Session 36's second device call (#36): softmax_turns=1 (ping-pong consumers take turns at
# their softmax too) checked, then A/B against itself without the lever. Prediction from the
# session-32 trace of hd128 16k E4M3 (a key block 2713 cycles, softmax 1452 of them where it
# takes ~530 alone, the two consumers' softmaxes overlapping on the MUFU): the softmax back
# toward ~600 cycles, the key block to 1700-2200 (+20-40% at hd128 16k E4M3); less at 16-bit
# hd128 (softmax shorter against the GEMMs), little at hd256 (GEMM-bound). Carry: [".gpu"].
set -u
BUDGET_S=570
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
# Each head dim's default (ping-pong) with the lever: the planner's small-grid rule picks one
# consumer for the small presets' problems, where the lever does not apply.
TURNS="--impl wgmma --config softmax_turns=1"
step "check turns e4m3" 90 check-turns-e4m3.txt "$BIN" check --preset small --preset sanitize --dtype e4m3 $TURNS
step "check turns 16-bit" 90 check-turns-16.txt "$BIN" check --preset small --preset sanitize --dtype f16,bf16 $TURNS
step "synccheck turns" 90 synccheck-turns.txt "$SANITIZER" --tool synccheck --error-exitcode 9 "$BIN" check \
  --shape 1,4,130,128,2,300 --shape 2,8,200,64 --dtype e4m3,bf16 --causal all $TURNS
step "racecheck turns" 90 racecheck-turns.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" \
  check --shape 1,4,130,128,2,300 --dtype e4m3,bf16 --causal none $TURNS
export A=$BIN B=$BIN B_ARGS="--impl wgmma --config-on-plan --config softmax_turns=1" ROUNDS=1 REPS=20
step "ab turns" 200 ab-turns.txt scripts/gpu-ab.sh turns --shape 1,16,16384,128 --shape 4,16,4096,128 \
  --dtype e4m3,bf16
print_rows | cut -c1-100
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, " $OUT/check-turns-*.txt $OUT/synccheck-turns.txt $OUT/racecheck-turns.txt
tail -8 $OUT/ab-turns.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s36-dev2.tar.xz)
