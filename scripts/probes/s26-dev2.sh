# Session 26, device call 2: the oracle's timer on its own stream with a memset flush (the Rust
# timer's method), checked against the Rust path through two controls (evoattn-torch: the Python
# package; self-torch-events: our CUBIN launched by the oracle); the host cost, ABBA.
set -u
export EVOATTN_BIN=.gpu/evoattn OUT=${OUT:-out}
B=.gpu/evoattn
scripts/gpu-python.sh install > $OUT/install-log.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PWD/python
python3 -c "import cuda.bindings; print('cuda-bindings', cuda.bindings.__version__)" > $OUT/env.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv >> $OUT/env.txt
P=sdpa-cudnn,evoattn-torch,self-torch-events
timeout 150 $B bench --preset seed --mode graph --peers $P --json $OUT/seed-graph.json > $OUT/seed-graph.txt 2>&1
timeout 150 $B bench --preset seed --peers $P --json $OUT/seed-eager.json > $OUT/seed-eager.txt 2>&1
timeout 200 $B bench --shape 2,16,8192,128 --shape 2,32,8192,64 --dtype bf16 --causal none,top-left --peers $P --json $OUT/long-eager.json > $OUT/long-eager.txt 2>&1
timeout 150 python3 crates/evoattn-py/examples/host_cost.py --json $OUT/host-cost.json > $OUT/host-cost.txt 2>&1
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> $OUT/env.txt
cat $OUT/env.txt
for f in seed-graph seed-eager long-eager; do grep -E "^(shape|[0-9]+,)" $OUT/$f.txt | awk "{print \$1,\$2,\$3,\$4,\$(NF-5),\$(NF-4),\$(NF-3),\$(NF-2)}"; done
tail -12 $OUT/host-cost.txt
