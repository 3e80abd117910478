# Session 27, device call 5: the final build of issue 33 (typed wgmma axes, families' launch
# needs, plan once) on the H100: the correctness grid, the Python GPU tests, and the seed shapes
# and a few long rows against cuDNN (the same kernels, renamed).
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
scripts/gpu-python.sh install tests > $OUT/gpu-python.txt 2>&1
timeout 200 $B check --preset grid > $OUT/check-grid.txt 2>&1; echo "check grid exit $?" >> $OUT/check-grid.txt
timeout 120 $B check --preset decode --quiet > $OUT/check-decode.txt 2>&1; echo "check decode exit $?" >> $OUT/check-decode.txt
timeout 150 $B bench --preset seed --mode graph --peers sdpa-cudnn --json $OUT/seed-graph.json > $OUT/seed-graph.txt 2>&1
grep "==" $OUT/gpu-python.txt; tail -2 $OUT/check-grid.txt; tail -2 $OUT/check-decode.txt; grep -E "^(shape|[0-9]+,)" $OUT/seed-graph.txt
