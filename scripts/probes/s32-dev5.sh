# Session 32, fifth device call (#36): the Python package under compute-sanitizer (its E4M3 tests
# included), from the wheel of this tree; then persistent blocks against the grid for E4M3 between
# 512 and 16k keys (the planner's rule stops at 512, the one length measured), non-causal at
# every head dim and hd128 top-left, one run each, planner's other levers as they are.
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "python sanitize" 200 python.txt env OUT=$OUT/py scripts/gpu-python.sh install sanitize
ROWS="$(fa3_rows 64 1024 2048 4096 8192) $(fa3_rows 128 1024 2048 4096 8192) $(fa3_rows 256 1024 2048 4096 8192)"
for s in grid persistent; do
  step "$s" 150 sched-$s.txt "$BIN" bench $ROWS --dtype e4m3 --impl wgmma --config-on-plan --config schedule=$s --peers none --reps 20 --no-history --json $OUT/sched-$s.json
done
step "causal grid" 60 causal-grid.txt "$BIN" bench $(fa3_rows 128 1024 2048 4096) --causal top-left --dtype e4m3 --impl wgmma --config-on-plan --config schedule=grid --peers none --reps 20 --no-history
step "causal persistent" 60 causal-persistent.txt "$BIN" bench $(fa3_rows 128 1024 2048 4096) --causal top-left --dtype e4m3 --impl wgmma --config-on-plan --config schedule=persistent --peers none --reps 20 --no-history
print_rows | cut -c1-100
tail -n 8 $OUT/python.txt
for f in sched-grid sched-persistent causal-grid causal-persistent; do echo "== $f"; grep -E "^[0-9]+,[0-9]+," $OUT/$f.txt | sed -E 's/ +/ /g' | cut -c1-110; done
cat $OUT/gpu.txt; nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s32-dev5.tar.xz)
