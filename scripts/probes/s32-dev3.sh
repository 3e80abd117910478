# Session 32, third device call (#36): lazy_rescale for E4M3 (slack 2^0.75, ptx_fp8.cuh). The FP8
# library test with its new lazy cases, memcheck over it; A/B/B/A of lazy_rescale=1 against the
# planner's E4M3 kernel on four 16k/4k rows (one machine, alternating runs); the SASS opcode
# counts of the hd128 E4M3 kernel with and without it (what the softmax issues per key block).
set -u
BUDGET_S=585
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "fp8 test" 60 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "fp8 memcheck" 70 fp8-memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1
ROWS="--shape 1,16,16384,128 --shape 4,16,4096,128 --shape 1,32,16384,64 --shape 1,8,16384,256"
for run in A B B2 A2; do
  case $run in A*) cfg="";; B*) cfg="--config-on-plan --config lazy_rescale=1";; esac
  step "ab $run" 110 ab-$run.txt "$BIN" bench $ROWS --dtype e4m3 --impl wgmma $cfg --peers none --reps 30 --no-history --json $OUT/ab-$run.json
done
for v in def lr; do
  f=$(ls .gpu/cubins/$v/*.cubin)
  cuobjdump -sass "$f" > $OUT/sass-$v.txt 2>&1 || nvdisasm "$f" > $OUT/sass-$v.txt 2>&1
  grep -oE "^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+" $OUT/sass-$v.txt | awk '{print $2}' | sed -E 's/\..*//' | sort | uniq -c | sort -rn | head -30 > $OUT/ops-$v.txt
done
print_rows | cut -c1-100
grep -E "^FAIL|test result" $OUT/fp8-test.txt | cut -c1-200
grep -E "ERROR SUMMARY" $OUT/fp8-memcheck.txt
for r in A B B2 A2; do echo "== $r"; grep -E "^[0-9]+,[0-9]+," $OUT/ab-$r.txt | sed -E 's/ +/ /g' | cut -c1-110; done
paste $OUT/ops-def.txt $OUT/ops-lr.txt | head -30
cat $OUT/gpu.txt; nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s32-dev3.tar.xz)
