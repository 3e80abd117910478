# Session 39's sixth device call (#36's close): the fa3 grid in E4M3 against cuDNN's FP8 SDPA,
# same run, on an H200, with the planner as it now stands: O from registers on unmasked
# persistent blocks at hd64 past 2k keys, at hd128 past 4k (dev5 had hd128 4k too: 0.79).
# Prediction: dev5's rows (geomean 1.034 on this H200) with hd128 4k back to ~0.87 (its
# figure with O through the tile, 659 µs on the H100): geomean ~1.037.
# Carry: [".gpu", ".whl"] (.whl: nvidia-cudnn-frontend 1.32.0).
set -u
BUDGET_S=540
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export PYTHONPATH="${PYTHONPATH:-}:/tmp/site"
step "fp8 grid" 520 fp8-grid.txt "$BIN" bench --preset fa3-grid --dtype e4m3 --reps 20 --peers cudnn-fp8 --no-history \
  --json $OUT/fp8-grid.json
print_rows | cut -c1-100
grep -E "^SM clock|geomean|ratio|^ *[0-9]+,[0-9]+,[0-9]+,(64|128|256)" $OUT/fp8-grid.txt | cut -c1-150 | tail -50
cat $OUT/gpu.txt
