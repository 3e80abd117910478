# Session 32, sixth device call (#36): the fa3 grid in E4M3 against cudnn-fp8 in one run again,
# now that E4M3 problems up to 8192 keys run persistent blocks (call 5); the FP8 library test and
# racecheck over it (the claimed-tiles case apart, as before).
set -u
BUDGET_S=470
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export PYTHONPATH="$PYTHONPATH:/tmp/site"
step "fp8 test" 40 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "fp8 racecheck" 60 fp8-racecheck.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1 --skip claimed
step "fa3 grid e4m3" 420 grid.txt "$BIN" bench --preset fa3-grid --dtype e4m3 --reps 20 --no-history --json $OUT/grid.json
print_rows | cut -c1-100
grep -E "^FAIL|test result" $OUT/fp8-test.txt | cut -c1-200
grep -E "RACECHECK SUMMARY" $OUT/fp8-racecheck.txt
grep -E "^[0-9]+,[0-9]+," $OUT/grid.txt | sed -E 's/ +/ /g' | cut -c1-120
cat $OUT/gpu.txt; nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s32-dev6.tar.xz)
