# Session 32, second device call (#36): the cudnn-fp8 oracle peer and E4M3 in the Python package,
# then the first same-run E4M3 table with cuDNN's FP8 SDPA as a lab peer. The oracle's selfcheck
# (every peer, two drawn E4M3 cases against float32), its GPU draw tests (E4M3 bits = evoattn's),
# the package's GPU tests (E4M3 included), bench of the hd128 fa3-grid rows in E4M3 against
# cudnn-fp8, and the per-warp timeline of hd128 16k E4M3.
set -u
BUDGET_S=585
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export PYTHONPATH="$PYTHONPATH:/tmp/site"
step "oracle selfcheck" 170 selfcheck.txt python3 -m evoattn_oracle.selfcheck
step "oracle draw tests" 40 oracle-draw.txt python3 -m pytest -q -p no:cacheprovider python/tests/test_draw.py
step "python pkg tests" 120 python.txt env OUT=$OUT/py scripts/gpu-python.sh install tests
step "bench e4m3 hd128" 190 bench-hd128.txt "$BIN" bench $(fa3_rows 128) --dtype e4m3 --reps 30 --no-history --json $OUT/bench-hd128.json
step "trace hd128 16k" 50 trace-16k.txt "$BIN" trace --shape 1,16,16384,128 --dtype e4m3 --out $OUT/trace-16k.json
print_rows | cut -c1-100
grep -E "^(oracle|  |-- |small|large|gqa|fp8|FAIL|selfcheck)" $OUT/selfcheck.txt | cut -c1-160
tail -n 2 $OUT/oracle-draw.txt; tail -n 6 $OUT/python.txt; grep -E "FAILED|Error" $OUT/py/pytest.txt | head -20
grep -E "^[0-9]+,[0-9]+," $OUT/bench-hd128.txt | sed -E 's/ +/ /g' | cut -c1-150
grep -iE "faster|slower|peer|refused|missing" $OUT/bench-hd128.txt | head -8
tail -n 25 $OUT/trace-16k.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s32-dev2.tar.xz)
