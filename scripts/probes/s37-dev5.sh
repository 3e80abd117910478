# Session 37's fifth device call (#36): the E4M3 plan with V transposed in the kernel up to hd128 and 4k keys
# (docs/decisions/wgmma.md#fp8-vt-producer) against cuDNN's FP8 SDPA on the fa3 grid
# in E4M3, same run (session 36, H100: geomean 0.997, hd128 0.86/0.97).
# Prediction: the 512-4k rows up by the A/Bs' 1-28% (dev3, dev4), the geomean ~1.04-1.06.
# Carry: [".gpu", ".whl"] (.whl: nvidia-cudnn-frontend 1.32.0, the device README's pip download).
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export PYTHONPATH="${PYTHONPATH:-}:/tmp/site"
step "check e4m3" 30 check-e4m3.txt "$BIN" check --preset small --dtype e4m3
step "fp8 grid" 540 fp8-grid.txt "$BIN" bench --preset fa3-grid --dtype e4m3 --reps 20 --peers cudnn-fp8 --no-history \
  --json $OUT/fp8-grid.json
print_rows | cut -c1-100
grep -h "passed, " $OUT/check-e4m3.txt
grep -E "^SM clock|geomean|ratio|^ *[0-9]+,[0-9]+,[0-9]+,(64|128|256)" $OUT/fp8-grid.txt | cut -c1-150 | tail -50
cat $OUT/gpu.txt
