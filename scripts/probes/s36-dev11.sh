# Session 36's eleventh device call (#36): the E4M3 default with O through its own staging tile
# (docs/decisions/wgmma.md#fp8-o-staging) against float64 and cuDNN's FP8 SDPA on the fa3 grid
# in E4M3, same run (session 32's table, hd128 0.86/0.90, geomean 0.947, was an H200's).
# Prediction: the 512-2k rows up by the A/B's 2-25%, the geomean toward ~0.97-1.0.
# Carry: [".gpu", ".whl"] (.whl: nvidia-cudnn-frontend 1.32.0, the device README's pip download).
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export PYTHONPATH="${PYTHONPATH:-}:/tmp/site"
step "check e4m3" 60 check-e4m3.txt "$BIN" check --preset small --preset sanitize --dtype e4m3,e4m3f16
step "fp8 grid" 500 fp8-grid.txt "$BIN" bench --preset fa3-grid --dtype e4m3 --reps 20 --peers cudnn-fp8 --no-history \
  --json $OUT/fp8-grid.json
print_rows | cut -c1-100
grep -h "passed, " $OUT/check-e4m3.txt
grep -E "^SM clock|geomean|^ *[0-9]+,16," $OUT/fp8-grid.txt | cut -c1-160 | tail -45
cat $OUT/gpu.txt
