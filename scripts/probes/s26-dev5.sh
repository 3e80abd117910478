# Session 26, device call 5: the final build (families, lever tables, rule-table planner, lazy
# space) on the H100: the correctness grid, the seed shapes against cuDNN, the Python tests.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
scripts/gpu-python.sh install tests > $OUT/gpu-python.txt 2>&1
timeout 200 $B check --preset grid > $OUT/check-grid.txt 2>&1; echo "check grid exit $?" >> $OUT/check-grid.txt
timeout 150 $B bench --preset seed --mode graph --peers sdpa-cudnn > $OUT/seed-graph.txt 2>&1
tail -3 $OUT/gpu-python.txt; tail -3 $OUT/check-grid.txt; grep -E "^(shape|[0-9]+,)" $OUT/seed-graph.txt
