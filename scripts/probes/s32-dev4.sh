# Session 32, fourth device call (#36): the fa3 grid in E4M3, non-causal and causal, against
# cuDNN's FP8 SDPA as a lab peer (cudnn-fp8) in the same run, with the lazy-rescale defaults; the
# FP8 library test (the planner's cases now take lazy_rescale up to hd128); which masks and head
# layouts cudnn-fp8 refuses (GQA, bottom-right), with its reasons.
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
export PYTHONPATH="$PYTHONPATH:/tmp/site"
step "fp8 test" 40 fp8-test.txt .gpu/gpu-fp8 --nocapture --test-threads 1
step "cudnn-fp8 refusals" 40 refusals.txt "$BIN" bench --shape 2,16,512,128,4,1536 --shape 2,16,512,128,16,1536 --shape 2,16,1024,128,4,1024 --causal none,bottom-right --dtype e4m3 --reps 5 --no-history --json $OUT/refusals.json
step "fa3 grid e4m3" 470 grid.txt "$BIN" bench --preset fa3-grid --dtype e4m3 --reps 30 --no-history --json $OUT/grid.json
print_rows | cut -c1-100
grep -E "^FAIL|test result" $OUT/fp8-test.txt | cut -c1-200
python3 - <<'PY'
import json, os
out = os.environ.get("OUT", "out")
r = json.load(open(f"{out}/refusals.json"))
for c in r["results"]:
    for p in c["peers"]:
        print(c["case"], p["name"], p["status"], (p.get("reason") or "")[:400])
PY
grep -E "^[0-9]+,[0-9]+," $OUT/grid.txt | sed -E 's/ +/ /g' | cut -c1-120
cat $OUT/gpu.txt; nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s32-dev4.tar.xz)
