# Session 31, device call 1 (#36): the first E4M3 `wgmma` kernel (QGMMA, V transposed by a
# kernel of its own into the launch's scratch). The library test against float64 on dequantized
# inputs (the planner's choice, now wgmma on sm_90a, and every E4M3 lever of wgmma off its
# default); check --dtype e4m3 on the small and sanitize presets; the SASS (QGMMA?); then the
# same-run speed at hd128: ours E4M3, ours bf16 with cuDNN bf16 interleaved, cuDNN FP8 (probe).
set -u
BUDGET_S=580
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "fp8 test" 150 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "check e4m3" 120 check-e4m3.txt "$BIN" check --preset small --preset sanitize --dtype e4m3
step "sass" 30 sass.txt bash -c '"$0" compile --impl wgmma --arch sm_90a --dtype e4m3 --cubin-dir /tmp/cub >/dev/null; for f in /tmp/cub/*.cubin; do echo "== $f"; cuobjdump --dump-sass $f | grep -oE "(HMMA|QMMA|HGMMA|QGMMA)[.A-Z0-9_]*" | sort | uniq -c; done' "$BIN"
step "bench e4m3 hd128" 90 bench-e4m3-128.txt "$BIN" bench $(fa3_rows 128 1024 4096 16384) --dtype e4m3 --peers none --reps 30 --json $OUT/bench-e4m3-128.json
step "bench bf16 hd128" 90 bench-bf16-128.txt "$BIN" bench $(fa3_rows 128 1024 4096 16384) --dtype bf16 --peers sdpa-cudnn --reps 30 --json $OUT/bench-bf16-128.json
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
CUDNN_LIB=$(python3 -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) + '/lib')" 2>/dev/null)
step "cudnn fp8 hd128" 90 cudnn-fp8-128.txt env LD_LIBRARY_PATH="$CUDNN_LIB:${LD_LIBRARY_PATH:-}" PYTHONPATH=/tmp/site python3 scripts/probes/cudnn-fp8-sdpa.py --shape 16,16,1024,128 --shape 4,16,4096,128 --shape 1,16,16384,128
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows
grep -E "^(pass|FAIL|skipped) " $OUT/fp8-test.txt | cut -c1-220
grep -E "test result" $OUT/fp8-test.txt
tail -n 4 $OUT/check-e4m3.txt
grep -E "FAIL" $OUT/check-e4m3.txt | head -5
cat $OUT/sass.txt
for f in $OUT/bench-e4m3-*.txt $OUT/bench-bf16-*.txt; do echo "== $f"; grep -E "^[0-9]+,[0-9]+," $f | cut -c1-150; done
tail -n 5 $OUT/cudnn-fp8-128.txt
cat $OUT/gpu.txt
