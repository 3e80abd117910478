# Session 27, device call 6: main after the fuzz branch's overflow-proof arithmetic and closed-pipe
# handling merged: the correctness grid and the Python GPU tests once more.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
scripts/gpu-python.sh install tests > $OUT/gpu-python.txt 2>&1
timeout 200 $B check --preset grid > $OUT/check-grid.txt 2>&1; echo "check grid exit $?" >> $OUT/check-grid.txt
grep "==" $OUT/gpu-python.txt; tail -2 $OUT/check-grid.txt
