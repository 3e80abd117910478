# Session 31, device call 6 (#36): the V transpose rewritten (4 x 4 byte blocks by byte
# permutes instead of single-byte gathers): the library test and memcheck over it, ncu of the
# launch pair at 512 keys (the transpose's time), and the short rows same call with cuDNN FP8.
set -u
BUDGET_S=330
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "fp8 test" 40 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "fp8 memcheck" 40 fp8-memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1
step "fp8 racecheck" 40 fp8-racecheck.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1 --skip claimed
step "profile hd128 512" 60 profile-512.txt "$BIN" profile --shape 32,16,512,128 --dtype e4m3 --impl wgmma --launches 2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
CUDNN_LIB=$(python3 -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) + '/lib')" 2>/dev/null)
step "cudnn fp8" 30 cudnn-fp8.txt env LD_LIBRARY_PATH="$CUDNN_LIB:${LD_LIBRARY_PATH:-}" PYTHONPATH=/tmp/site python3 scripts/probes/cudnn-fp8-sdpa.py --shape 32,16,512,128 --shape 32,8,512,256 --shape 32,32,512,64
step "bench 512" 60 bench-512.txt "$BIN" bench --shape 32,16,512,128 --shape 32,8,512,256 --shape 32,32,512,64 --dtype e4m3 --peers none --reps 15
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows | cut -c1-70
grep -E "^FAIL|test result" $OUT/fp8-test.txt | cut -c1-200
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/fp8-memcheck.txt $OUT/fp8-racecheck.txt
grep -E "launch|duration|tensor pipe" $OUT/profile-512.txt
grep -E "^[0-9]+,[0-9]+," $OUT/bench-512.txt | sed -E 's/ +/ /g' | cut -c1-110
grep -E "^[0-9]+,[0-9]+," $OUT/cudnn-fp8.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s31-dev6.tar.xz)
