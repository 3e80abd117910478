set -u
export EVOATTN_BIN=.gpu/evoattn OUT=${OUT:-out}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt
scripts/gpu-python.sh install tests > $OUT/gpu-python-1.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PWD/python
timeout 200 python3 scripts/probes/graph-method.py > $OUT/graph-method.txt 2>&1; echo "graph-method exit $?" >> $OUT/graph-method.txt
timeout 150 python3 crates/evoattn-py/examples/host_cost.py --json $OUT/host-cost.json > $OUT/host-cost.txt 2>&1
timeout 120 .gpu/gpu-tests --include-ignored wgmma_o_in_q --nocapture > $OUT/o-in-q.txt 2>&1; echo "exit $?" >> $OUT/o-in-q.txt
tail -4 $OUT/gpu-python-1.txt; cat $OUT/graph-method.txt; cat $OUT/host-cost.txt | tail -13; tail -5 $OUT/o-in-q.txt
