# Session 36's sixth device call (#36): the softmax's dependency chains. Nsight Compute's
# samples of hd128 E4M3 (dev5) put a quarter of the softmax in the row max's FMNMX chain
# (~360 of the trace's 1289 cycles) and the exponentials' section at ~800 cycles against
# MUFU's 512 (64 MUFU a thread at 8 cycles a warp), the row sum's FADD chain stalling between
# them. max_tree=1 (a pairwise tree: the same 62 FMNMX at depth 5, not 17) and sum_chains=1
# (four partial sums) are checked, traced, then each A/B/B/A against the planner's kernel.
# Prediction: softmax 1289 -> ~900-1000 cycles with both, hd128 16k E4M3 +10-25% (period
# 2470 -> ~2000-2200); bf16 hd128 less (its softmax hides under longer GEMMs). Carry: [".gpu"].
set -u
BUDGET_S=575
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
BOTH="--impl wgmma --config-on-plan --config max_tree=1,sum_chains=1"
step "check both" 60 check-both.txt "$BIN" check --preset small --preset sanitize --dtype e4m3,bf16 $BOTH
step "trace both" 40 trace-both.txt "$BIN" trace --shape 1,16,16384,128 --dtype e4m3 $BOTH --out $OUT/trace-both.json
step "racecheck both" 40 racecheck-both.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" \
  check --shape 1,4,130,128,2,300 --dtype e4m3,bf16 $BOTH
SHAPES="--shape 1,16,16384,128 --shape 4,16,4096,128 --shape 32,16,512,128"
export A=$BIN B=$BIN ROUNDS=1 REPS=20
for v in max_tree=1 sum_chains=1 max_tree=1,sum_chains=1; do
  tag=$(echo $v | sed 's/=1//g; s/,/-/')
  dt=e4m3; [ "$v" = max_tree=1,sum_chains=1 ] && dt=e4m3,bf16
  step "ab $v" 170 ab-$tag.txt env B_ARGS="--impl wgmma --config-on-plan --config $v" scripts/gpu-ab.sh $tag $SHAPES --dtype $dt
done
print_rows | cut -c1-100
grep -E "key block|S done +softmax|turn came +GEMMs|P·V done +P packed" $OUT/trace-both.txt
grep -h -E "RACECHECK SUMMARY|passed, " $OUT/check-both.txt $OUT/racecheck-both.txt
for f in $OUT/ab-*.txt; do echo "== $f"; tail -6 $f; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s36-dev6.tar.xz)
