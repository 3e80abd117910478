# Session 28, device call 6: the GPU test suite on the final build, its check runs with -v (the
# tables name kernels by family; the tests read the symbols) and the host-cost table parsed.
set -u
OUT=${OUT:-out}
export EVOATTN_BIN=.gpu/evoattn
timeout 450 .gpu/gpu-tests --test-threads 1 --skip wgmma_o_in_q > $OUT/gpu-tests.txt 2>&1; echo "gpu tests exit $?" >> $OUT/gpu-tests.txt
grep -E "^test |test result|exit|panicked" $OUT/gpu-tests.txt | tail -n 30
