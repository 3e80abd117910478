# Session 28, device call 3: after the CPU reference's input limit (2^24 elements) and the help
# tour's merge: the decode preset with a cold kernel cache, the correctness grid, and the seed
# preset (f16: the oracle's f16 draw judged through the peers' correctness) in eager mode.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
start=$(date +%s)
timeout 200 $B bench --preset decode --peers sdpa-cudnn,sdpa-flash --json $OUT/decode.json > $OUT/decode.txt 2> $OUT/decode.err
echo "decode exit $? in $(( $(date +%s) - start )) s" >> $OUT/decode.err
timeout 200 $B check --preset grid > $OUT/check-grid.txt 2>&1; echo "check grid exit $?" >> $OUT/check-grid.txt
timeout 150 $B bench --preset seed --peers sdpa-cudnn,sdpa-flash --json $OUT/seed.json > $OUT/seed.txt 2> $OUT/seed.err
echo "seed exit $?" >> $OUT/seed.err
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> $OUT/gpu.txt 2>&1
echo "== summary"
grep "outside" $OUT/decode.err | sed 's/.*\] \([^ ]*\) .* in \([0-9.]*\) s, \([0-9.]*\) s of it.*ours \([0-9.]*\) s, the peers \([0-9.]*\) s)/\1 total \2 outside \3 ours \4 peers \5/' | sort -k5 -n -r | head -n 4
tail -n 1 $OUT/decode.err; tail -n 3 $OUT/check-grid.txt; tail -n 14 $OUT/seed.txt | head -n 12; tail -n 1 $OUT/seed.err
