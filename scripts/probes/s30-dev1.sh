# Session 30, device call 1 (#36): the first FP8 kernel (`mma8`, mma.sync m16n8k32 E4M3) against
# float64 on dequantized inputs through the library API (crates/evoattn/tests/gpu_fp8.rs), under
# memcheck and racecheck; the SASS of its CUBINs (is the FP8 mma.sync native on sm_90a?); the
# 16-bit path after the launch changes (descale argument, per-tensor element sizes).
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "fp8 test" 120 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "fp8 memcheck" 150 fp8-memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1
step "fp8 racecheck" 150 fp8-racecheck.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 .gpu/gpu-fp8 --test-threads 1
step "sass" 30 sass.txt bash -c 'for f in .gpu/cubins/*.cubin; do echo "== $f"; cuobjdump --dump-sass $f | grep -oE "(HMMA|QMMA|IMMA|F2FP|HGMMA|QGMMA)[.A-Z0-9_]*" | sort | uniq -c; done'
step "16-bit sanitize" 90 check-sanitize.txt "$BIN" check --preset sanitize
step "16-bit small" 90 check-small.txt "$BIN" check --preset small --impl auto
step "16-bit gpu tests" 120 gpu-tests.txt "$TESTS" --test-threads 1 mma_passes reference_kernel splitkv_passes
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows
grep -E "^(pass|FAIL) " $OUT/fp8-test.txt | cut -c1-200
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" $OUT/fp8-memcheck.txt $OUT/fp8-racecheck.txt
cat $OUT/sass.txt
tail -n 3 $OUT/check-sanitize.txt $OUT/check-small.txt
grep -E "^test |test result" $OUT/gpu-tests.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s30-dev1.tar.xz)
