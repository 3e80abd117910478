# Session 27, device call 1: the build after issue 33's plan-once API, CLI by role and exporters
# (the Python package now calls Attention::call_external): the Python GPU tests, memcheck and
# racecheck through Python, the correctness grid, and the seed shapes in graph mode against
# cuDNN with the Python path (evoattn-torch) beside the Rust path.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $OUT/env.txt 2>&1
scripts/gpu-python.sh install tests sanitize > $OUT/gpu-python.txt 2>&1
timeout 200 $B check --preset grid > $OUT/check-grid.txt 2>&1; echo "check grid exit $?" >> $OUT/check-grid.txt
timeout 200 $B bench --preset seed --mode graph --peers sdpa-cudnn,evoattn-torch --json $OUT/seed-graph.json > $OUT/seed-graph.txt 2>&1
grep "==" $OUT/gpu-python.txt; tail -2 $OUT/check-grid.txt; grep -E "^(shape|[0-9]+,)" $OUT/seed-graph.txt
