# Session 28, device call 2: where the decode preset's time outside the samples goes (checking
# ours, checking the peers), with a cold kernel cache (first run) and a warm one (second run).
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
for run in cold warm; do
  start=$(date +%s)
  timeout 200 $B bench --preset decode --peers sdpa-cudnn,sdpa-flash --json $OUT/decode-$run.json > $OUT/decode-$run.txt 2> $OUT/decode-$run.err
  echo "decode $run exit $? in $(( $(date +%s) - start )) s" >> $OUT/decode-$run.err
done
echo "== slowest cases"
for run in cold warm; do grep -h "outside the timed" $OUT/decode-$run.err | sort -t, -k2 -n | tail -n 3; tail -n 1 $OUT/decode-$run.err; done
