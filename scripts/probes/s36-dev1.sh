# Session 36's first device call (H100: name nvidia-h100-x1). #37's last item and session 35's
# offline changes: the Python package's GPU tests with a wheel from the clean tree (f16 O into
# a float16 out= for float8 inputs), the oracle's selfcheck (the profiler's event latency now
# measured in every session, on 16 empty launches after the timed ones), the timer controls on
# the seed preset and the hd128 fa3 rows (prediction: the profiler's seed column within ±0.3 µs
# of ours, as events are; s35-dev5 had it +0.42..+0.67 µs), and e4m3f16 (E4M3 inputs, O in f16)
# against float64 and under memcheck; the FP8 error table again (wgmma, both O dtypes). Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=570
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "python package" 120 python.txt scripts/gpu-python.sh install tests
step "oracle selfcheck" 60 selfcheck.txt python3 -m evoattn_oracle.selfcheck
PEERS=sdpa-cudnn,self-torch-events,self-do-bench,self-torch-profiler
step "timers seed" 70 timers-seed.txt "$BIN" bench --preset seed --reps 40 --block 5 --peers $PEERS --json $OUT/timers-seed.json
step "timers fa3 hd128" 150 timers-fa3-128.txt "$BIN" bench $(fa3_rows 128) --dtype bf16 --causal none,top-left --reps 30 \
  --block 5 --peers $PEERS --json $OUT/timers-fa3-128.json
step "check e4m3f16" 60 check-e4m3f16.txt "$BIN" check --preset small --preset sanitize --dtype e4m3f16
step "memcheck e4m3f16" 60 memcheck-e4m3f16.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize \
  --dtype e4m3f16
# What FP8 costs in accuracy, with the wgmma kernels and both O dtypes (docs/fp8-error.md's table
# is mma8's, session 30); built here: cp target/release/examples/fp8_error .gpu/.
step "fp8 error" 90 fp8-error.md .gpu/fp8_error
print_rows | cut -c1-100
cat $OUT/fp8-error.md
grep -h "^==" $OUT/python.txt
for f in $OUT/timers-*.txt; do echo "== $(basename $f)"; grep -E "^SM clock|^flagged|^not measured" $f | cut -c1-200; done
python3 scripts/timer-agreement.py $OUT/timers-*.json | tail -12
grep -h -E "ERROR SUMMARY|passed, " $OUT/check-e4m3f16.txt $OUT/memcheck-e4m3f16.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s36-dev1.tar.xz)
