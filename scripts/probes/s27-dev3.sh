# Session 27, device call 3 (issue 32): the Python path against our own CUBIN launched and timed
# by the same oracle process (self-torch-events): one timer, one process, so what is left is the
# package itself. Seed shapes in graph mode; the long rows in eager mode with 5-sample blocks.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
scripts/gpu-python.sh install > $OUT/gpu-python.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PWD/python
timeout 200 $B bench --preset seed --mode graph --peers self-torch-events,evoattn-torch --json $OUT/seed-graph.json > $OUT/seed-graph.txt 2>&1
timeout 150 $B bench --shape 2,16,8192,128 --shape 2,32,8192,64 --dtype bf16 --peers self-torch-events,evoattn-torch \
  --block 5 --json $OUT/long-b5.json > $OUT/long-b5.txt 2>&1
timeout 150 $B bench --preset seed --peers self-torch-events,evoattn-torch --json $OUT/seed-eager.json > $OUT/seed-eager.txt 2>&1
grep -E "^(shape|[0-9]+,)" $OUT/seed-graph.txt $OUT/long-b5.txt $OUT/seed-eager.txt
