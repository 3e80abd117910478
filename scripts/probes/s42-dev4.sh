# Session 42: where mma-bwd's time goes (ncu --set full on the main kernel's second launch,
# 4,16,4096,128 bf16 unmasked), against the arithmetic: smem traffic of each warp reading the
# whole Q and dO tiles is ~2.2x the tensor-core time by the count in the perf log (prediction:
# shared-memory pipe or MIO throttle the top stall, tensor pipe < 40%).
# Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/evoattn-site target/wheels/evoattn-*.whl > $OUT/install.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PYTHONPATH
step "ncu bwd" 400 ncu-bwd.txt ncu --set full --kernel-name regex:'mma_bwd_bf16_d128_bm32_bn128_s2$' --launch-skip 1 \
  --launch-count 1 python3 scripts/probes/s42-bwd-ncu.py
print_rows | cut -c1-120
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L1/TEX Hit|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc A|Shared Memory|No Eligible|One or More|Warp Cycles Per Issued|Pipe|Stall|Bank" $OUT/ncu-bwd.txt | head -60
