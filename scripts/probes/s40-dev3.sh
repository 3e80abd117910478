# Session 40, device call 3: #36's hd64 E4M3 plan. The new rule (O from registers from 2k keys
# unmasked, V then transposed by its own kernel) on the fa3 grid's hd64 rows against cudnn-fp8
# in one run; A/B/B/A where session 32's best H200 kernels beat the plan elsewhere: causal
# 4k/8k/16k on persistent blocks with O from registers (dev2: 8k -3.2%), grid with O from
# registers at 8k causal (which of the two changes pays), 1k unmasked O from registers with the
# transpose kernel (dev2: 2k -2.6%). A is the plan in each.
# Predictions: hd64 rows: 2k ~517 µs, 4k ~946 µs; 8k causal persistent+regs -3%, grid+regs
# about even with the plan; 4k causal -1..-3%; 16k causal -2..-4%; 1k -1..+2%.
# Carry: [".gpu", ".whl"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
step "grid hd64 e4m3" 200 grid-hd64.txt "$BIN" bench $(fa3_rows 64) --dtype e4m3 --causal none,top-left --peers cudnn-fp8 \
  --reps 20 --no-history --json $OUT/s40-h200-fp8-hd64-grid-cudnn.json
export ROUNDS=1 REPS=20 A=$BIN B=$BIN A_ARGS=""
export B_ARGS="--impl wgmma --config-on-plan --config o_staging=registers,vt_producer=0"
step "ab 1k rg vp0" 40 ab-1k.txt scripts/gpu-ab.sh k1 --shape 16,32,1024,64 --dtype e4m3
export B_ARGS="--impl wgmma --config-on-plan --config schedule=persistent,o_staging=registers"
step "ab 4k causal pe rg" 40 ab-4kc.txt scripts/gpu-ab.sh k4c --shape 4,32,4096,64 --dtype e4m3 --causal top-left
step "ab 16k causal pe rg" 60 ab-16kc.txt scripts/gpu-ab.sh k16c --shape 1,32,16384,64 --dtype e4m3 --causal top-left
export A_ARGS="--impl wgmma --config-on-plan --config schedule=persistent,o_staging=registers"
export B_ARGS="--impl wgmma --config-on-plan --config o_staging=registers"
step "ab 8k causal pe-rg vs gr-rg" 50 ab-8kc.txt scripts/gpu-ab.sh k8c --shape 2,32,8192,64 --dtype e4m3 --causal top-left
print_rows | cut -c1-110
grep -E "^ *[0-9]+,[0-9]+,[0-9]+,64" $OUT/grid-hd64.txt | cut -c1-150
for f in 1k 4kc 16kc 8kc; do grep -A2 "== A/B" $OUT/ab-$f.txt | tail -1; done
(cd $OUT && mkdir -p ../keep && mv s40-h200-fp8-hd64-grid-cudnn.json grid-hd64.txt ../keep/ && tar cJf ../r.tar.xz . && rm -rf ./* && mv ../r.tar.xz s40-dev3-runs.tar.xz && mv ../keep/* .)
