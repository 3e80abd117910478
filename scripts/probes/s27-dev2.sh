# Session 27, device call 2 (issue 32): the host cost of a cached Python call against SDPA's
# (ABBA batches), the seed shapes in graph mode with the Python path beside the Rust path, and
# the long rows in eager mode with the blocks of the interleaving cut from 20 samples to 5
# (ABBA: 5, 20, 20, 5), to see whether finer interleaving evens out the GPU's clock plateaus.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
scripts/gpu-python.sh install host seed-graph > $OUT/gpu-python.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PWD/python
i=0
for blk in 5 20 20 5; do
  i=$((i+1))
  timeout 100 $B bench --shape 2,16,8192,128 --shape 2,32,8192,64 --dtype bf16 --peers sdpa-cudnn,evoattn-torch \
    --block $blk --json $OUT/long-$i-b$blk.json > $OUT/long-$i-b$blk.txt 2>&1
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader >> $OUT/long-$i-b$blk.txt
done
grep "==" $OUT/gpu-python.txt
grep -E "^(shape|[0-9]+,)" $OUT/bench-seed-graph.txt
for f in $OUT/long-*.txt; do echo "$f"; grep -E "^[0-9]+," "$f"; tail -1 "$f"; done
