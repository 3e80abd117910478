# Session 31, device call 4 (#36): the E4M3 `wgmma` defaults (hd128 with Q in registers) on the
# fa3 grid, same call: ours E4M3 (the planner's choice), ours bf16 with cuDNN bf16 interleaved,
# cuDNN FP8 (the probe, O in E4M3: Hopper's only choice). Before that: the library test and its
# racecheck (claimed tiles apart, see the test), check --dtype e4m3 on the seed preset, and the
# 16-bit small preset (the launch path changed: tensor maps per dtype, the transpose kernel).
set -u
BUDGET_S=595
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "fp8 test" 60 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "fp8 racecheck" 60 fp8-racecheck.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1 --skip claimed
step "check e4m3 seed" 60 check-e4m3-seed.txt "$BIN" check --preset seed --dtype e4m3 --seeds 1
step "check 16-bit small" 40 check-small.txt "$BIN" check --preset small
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
CUDNN_LIB=$(python3 -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) + '/lib')" 2>/dev/null)
for d in 128 64 256; do
  step "cudnn fp8 hd$d" 40 cudnn-fp8-$d.txt env LD_LIBRARY_PATH="$CUDNN_LIB:${LD_LIBRARY_PATH:-}" PYTHONPATH=/tmp/site python3 scripts/probes/cudnn-fp8-sdpa.py $(fa3_rows $d | sed 's/--shape/--shape/g')
  step "bench e4m3 hd$d" 150 bench-e4m3-$d.txt "$BIN" bench $(fa3_rows $d) --dtype e4m3 --peers none --reps 15 --json $OUT/bench-e4m3-$d.json
  step "bench bf16 hd$d" 60 bench-bf16-$d.txt "$BIN" bench $(fa3_rows $d) --dtype bf16 --peers sdpa-cudnn --reps 15 --json $OUT/bench-bf16-$d.json
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows | cut -c1-70
grep -E "^FAIL|test result" $OUT/fp8-test.txt | cut -c1-200
grep -E "RACECHECK SUMMARY" $OUT/fp8-racecheck.txt
tail -n 1 $OUT/check-e4m3-seed.txt $OUT/check-small.txt
for d in 128 64 256; do for f in $OUT/bench-e4m3-$d.txt $OUT/bench-bf16-$d.txt $OUT/cudnn-fp8-$d.txt; do echo "== $(basename $f)"; grep -E "^[0-9]+,[0-9]+," $f | sed -E 's/ +/ /g' | cut -c1-110; done; done
cat $OUT/gpu.txt
