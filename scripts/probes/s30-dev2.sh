# Session 30, device call 2 (#36): E4M3 through the lab. check --dtype e4m3 on the small,
# sanitize and seed presets (float64 on the CPU or, past its limit, the reference kernel's E4M3
# path) and two fa3-grid rows (the reference kernel as oracle); the library test with the
# reference kernel's E4M3 cases; memcheck over check --preset sanitize --dtype e4m3; the first
# E4M3 timings (mma8) beside the bf16 kernel and cuDNN bf16 on the same shapes, same run.
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "fp8 test" 120 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "check e4m3" 150 check-e4m3.txt "$BIN" check --preset small --preset sanitize --preset seed --dtype e4m3
step "check e4m3 fa3 rows" 120 check-e4m3-fa3.txt "$BIN" check $(fa3_rows 128 1024 4096) --dtype e4m3 --causal all --seeds 1
step "memcheck e4m3" 150 memcheck-e4m3.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize --dtype e4m3 --seeds 1 --quiet
for d in 64 128; do
  step "bench e4m3 hd$d" 60 bench-e4m3-$d.txt "$BIN" bench $(fa3_rows $d 1024 4096 16384) --dtype e4m3 --peers none --reps 30 --json $OUT/bench-e4m3-$d.json
  step "bench bf16 hd$d" 60 bench-bf16-$d.txt "$BIN" bench $(fa3_rows $d 1024 4096 16384) --dtype bf16 --peers sdpa-cudnn --reps 30 --json $OUT/bench-bf16-$d.json
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows
grep -E "^(pass|FAIL) " $OUT/fp8-test.txt | grep -E "reference|FAIL" | cut -c1-160
tail -n 4 $OUT/check-e4m3.txt $OUT/check-e4m3-fa3.txt
grep -E "FAIL" $OUT/check-e4m3.txt $OUT/check-e4m3-fa3.txt | head -5
grep -E "ERROR SUMMARY" $OUT/memcheck-e4m3.txt
for f in $OUT/bench-e4m3-*.txt $OUT/bench-bf16-*.txt; do echo "== $f"; grep -E "^[0-9]+,[0-9]+," $f | cut -c1-150; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s30-dev2.tar.xz)
