# Session 38's fourth device call (#36): the fa3 grid in E4M3 against cuDNN's FP8 SDPA, same
# run, with the planner as it now stands (session 37's dev5 ran before the claimed-tiles rule
# for hd64 causal 513-2048 keys: geomean 1.031). Then, with what budget is left, V given
# transposed at 2k keys: the permute in the kernel against the permute kernel (dev3: 4k +2.9%
# hd128, +1.9% hd256, -1.0% hd64; the planner permutes in the kernel up to 2k).
# Prediction: geomean 1.035-1.045 (the two claimed rows from 0.86/0.98 to ~1.07/1.14).
# Carry: [".gpu", ".whl"].
set -u
BUDGET_S=540
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export PYTHONPATH="${PYTHONPATH:-}:/tmp/site"
step "fp8 grid" 450 fp8-grid.txt "$BIN" bench --preset fa3-grid --dtype e4m3 --reps 20 --peers cudnn-fp8 --no-history \
  --json $OUT/fp8-grid.json
export ROUNDS=1 REPS=20 A=$BIN B=$BIN
export A_ARGS="--v-layout bhds --impl wgmma --config-on-plan --config vt_producer=0"
export B_ARGS="--v-layout bhds --impl wgmma --config-on-plan --config vt_producer=1"
step "ab permute 2k" 80 ab-perm2k.txt scripts/gpu-ab.sh perm2k --shape 8,16,2048,128 --shape 8,8,2048,256 --dtype e4m3
print_rows | cut -c1-100
grep -E "^SM clock|geomean|ratio|^ *[0-9]+,[0-9]+,[0-9]+,(64|128|256)" $OUT/fp8-grid.txt | cut -c1-150 | tail -50
grep -A5 "== A/B" $OUT/ab-perm2k.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz ./perm2k-* 2>/dev/null; rm -f ./perm2k-*; mv ../x.tar.xz s38-dev4-runs.tar.xz)
