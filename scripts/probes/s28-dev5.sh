# Session 28, device call 5: the final build (drawn inputs, help tour, property-test fixes,
# tables, the split-tail rule): the decode preset (its two split-tail rows now persistent), the
# correctness grid, then the GPU test suite in the time left (wgmma_o_in_q, the longest, skipped).
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
start=$(date +%s)
timeout 120 $B bench --preset decode --peers sdpa-cudnn,sdpa-flash --json $OUT/decode.json > $OUT/decode.txt 2> $OUT/decode.err
echo "decode exit $? in $(( $(date +%s) - start )) s" >> $OUT/decode.err
timeout 150 $B check --preset grid > $OUT/check-grid.txt 2>&1; echo "check grid exit $?" >> $OUT/check-grid.txt
timeout 280 .gpu/gpu-tests --test-threads 1 --skip wgmma_o_in_q > $OUT/gpu-tests.txt 2>&1; echo "gpu tests exit $?" >> $OUT/gpu-tests.txt
echo "== summary"
grep "8,32,[14],128,32,8192" $OUT/decode.txt | head -n 4
grep "outside" $OUT/decode.err | sed 's/.*\] \([^ ]*\) .* in \([0-9.]*\) s, \([0-9.]*\) s of it.*/\1 \3/' | sort -k2 -n -r | head -n 2
tail -n 1 $OUT/decode.err; tail -n 2 $OUT/check-grid.txt; grep -E "^test |test result|exit" $OUT/gpu-tests.txt | tail -n 30
