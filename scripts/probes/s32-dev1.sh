# Session 32, first device call (#36): what session 31 could not run once its device time was
# spent. The FP8 library test with the planner's E4M3 cases on static persistent blocks (Sk <=
# 512), memcheck, racecheck (claimed tiles apart); 16-bit `check --preset sanitize` under memcheck
# (the launch path changed: tensor maps built per dtype); the Python wheel built from a clean tree
# and its GPU tests; the 512-key rows against cuDNN FP8 in one call (grid vs persistent vs cuDNN).
set -u
BUDGET_S=580
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "fp8 test" 60 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "fp8 memcheck" 70 fp8-memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1
step "fp8 racecheck" 70 fp8-racecheck.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1 --skip claimed
step "16-bit sanitize memcheck" 90 check-sanitize.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize
step "python install+tests" 100 python.txt env OUT=$OUT/py scripts/gpu-python.sh install tests
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
CUDNN_LIB=$(python3 -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) + '/lib')" 2>/dev/null)
step "cudnn fp8 512" 30 cudnn-fp8-512.txt env LD_LIBRARY_PATH="$CUDNN_LIB:${LD_LIBRARY_PATH:-}" PYTHONPATH=/tmp/site python3 scripts/probes/cudnn-fp8-sdpa.py --shape 32,16,512,128 --shape 32,8,512,256 --shape 32,32,512,64
for c in schedule=grid ""; do
  step "512 ${c:-planner}" 70 bench-512-${c:-planner}.txt "$BIN" bench --shape 32,16,512,128 --shape 32,8,512,256 --shape 32,32,512,64 --dtype e4m3 --impl wgmma ${c:+--config-on-plan --config $c} --peers none --reps 15
done
print_rows | cut -c1-90
grep -E "^FAIL|test result" $OUT/fp8-test.txt | cut -c1-200
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/fp8-memcheck.txt $OUT/fp8-racecheck.txt $OUT/check-sanitize.txt
tail -n 4 $OUT/check-sanitize.txt
tail -n 4 $OUT/python.txt; tail -n 3 $OUT/py/pytest.txt
for f in $OUT/bench-512-*.txt $OUT/cudnn-fp8-512.txt; do echo "== $(basename $f)"; grep -E "^[0-9]+,[0-9]+," $f | sed -E 's/ +/ /g' | cut -c1-110; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s32-dev1.tar.xz)
