# Session 40's sixth device call (#36's close): the fa3 grid in E4M3 against cuDNN's FP8 SDPA,
# same run, on the H200, with the planner as it now stands: unmasked hd64 O from registers
# from 2k keys with V transposed by its own kernel there; causal hd64 claimed tiles at every
# length past 512 keys, O from registers past 2k.
# Prediction: session 39's grid (geomean 1.032) with hd64 2k 528 -> ~517, 4k 998 -> ~946,
# 4k causal 596 -> ~565, 8k causal 992 -> ~961, 16k causal 1804 -> ~1793: geomean ~1.037.
# Carry: [".gpu", ".whl"] (.whl: nvidia-cudnn-frontend 1.32.0).
set -u
BUDGET_S=420
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export PYTHONPATH="${PYTHONPATH:-}:/tmp/site"
step "fp8 grid" 400 fp8-grid.txt "$BIN" bench --preset fa3-grid --dtype e4m3 --reps 20 --peers cudnn-fp8 --no-history \
  --json $OUT/fp8-grid.json
print_rows | cut -c1-100
grep -E "^SM clock|geomean|ratio|^ *[0-9]+,[0-9]+,[0-9]+,(64|128|256)" $OUT/fp8-grid.txt | cut -c1-150 | tail -50
cat $OUT/gpu.txt
