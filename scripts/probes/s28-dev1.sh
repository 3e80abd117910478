# Session 28, device call 1 (issue 34 item 5): inputs drawn on the GPU. The GPU draw against
# the CPU draw bit for bit, the correctness grid on the new inputs, the decode preset's host
# time per case (this build, and the biggest case with the build before, same machine), the
# Python package's GPU tests on this build. Logs under $OUT; a short table last.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn; OLD=.gpu/before/evoattn
export EVOATTN_BIN=$B
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
timeout 120 .gpu/gpu-tests --test-threads 1 --nocapture the_gpu_draws large_cases_use > $OUT/gpu-tests.txt 2>&1
echo "gpu tests exit $?" >> $OUT/gpu-tests.txt
timeout 200 $B check --preset grid > $OUT/check-grid.txt 2>&1; echo "check grid exit $?" >> $OUT/check-grid.txt
start=$(date +%s)
timeout 330 $B bench --preset decode --peers sdpa-cudnn,sdpa-flash --json $OUT/decode-after.json > $OUT/decode-after.txt 2> $OUT/decode-after.err
echo "decode exit $? in $(( $(date +%s) - start )) s" >> $OUT/decode-after.err
# The build before this session's change, with its own oracle (protocol 1): the case.
EVOATTN_ORACLE_PATH=.gpu/before/python timeout 120 $OLD bench --shape 8,32,1,128,32,32768 --dtype bf16 \
  --peers sdpa-cudnn,sdpa-flash > $OUT/decode-before.txt 2> $OUT/decode-before.err
echo "before exit $?" >> $OUT/decode-before.err
scripts/gpu-python.sh install tests > $OUT/gpu-python.txt 2>&1
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
echo "== summary"; tail -n 3 $OUT/gpu-tests.txt; tail -n 2 $OUT/check-grid.txt
grep -h "outside the timed" $OUT/decode-after.err | sort -t, -k2 -n | tail -n 4; tail -n 1 $OUT/decode-after.err
cat $OUT/decode-before.err | tail -n 3; grep "==" $OUT/gpu-python.txt
