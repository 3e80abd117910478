# Session 38's second device call (#36): (1) the Python package's E4M3 GPU tests with the new
# one for a V held transposed (`v = vt.transpose(-1, -2)`: same bits as V in rows); (2) A/B/B/A
# of V given transposed against V in rows (dev1's was cut at its step budget); (3) the
# transposer's addresses through `swizzled_offset`: A/B/B/A of e3f4d5d's binary against this
# one on the planner's vt_producer rows (prediction: within noise, +-1%); (4) vt_producer at 8k
# keys, which the planner leaves to the transpose kernel (session 37's dev6 A/B was cut).
# Prediction for (4): hd128 +2..4%, hd64 -1..+1% (between 4k's -1.1% and 16k's +7.5%).
# Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
SITE=/tmp/evoattn-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  target/wheels/evoattn-*.whl > $OUT/pip.txt 2>&1
step "pytest e4m3" 90 pytest-e4m3.txt env PYTHONPATH="$SITE:$PYTHONPATH" python3 -m pytest -q -p no:cacheprovider -rs \
  crates/evoattn-py/tests/test_gpu.py -k "e4m3"
export ROUNDS=1 REPS=20
export A=$BIN B=$BIN B_ARGS="--v-layout bhds"
step "ab vg" 230 ab-vg.txt scripts/gpu-ab.sh vg --shape 32,16,512,128 \
  --shape 1,16,16384,128 --shape 32,8,512,256 --shape 1,8,16384,256 --dtype e4m3
export A=.gpu/evoattn-old B=$BIN B_ARGS=""
step "ab swizzle" 130 ab-swz.txt scripts/gpu-ab.sh swz --shape 32,16,512,128 \
  --shape 4,16,4096,128 --shape 32,32,512,64 --shape 8,32,2048,64 --dtype e4m3
export A=$BIN B=$BIN B_ARGS="--impl wgmma --config-on-plan --config vt_producer=1"
step "ab vp 8k" 120 ab-vp8k.txt \
  scripts/gpu-ab.sh vp8k --shape 2,16,8192,128 --shape 2,32,8192,64 --dtype e4m3
print_rows | cut -c1-110
tail -3 $OUT/pytest-e4m3.txt
for f in ab-vg ab-swz ab-vp8k; do grep -A8 "== A/B" $OUT/$f.txt; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz ./*.json ./vg-* ./swz-* ./vp8k-* 2>/dev/null; rm -f ./*.json ./vg-* ./swz-* ./vp8k-*; mv ../x.tar.xz s38-dev2-runs.tar.xz)
