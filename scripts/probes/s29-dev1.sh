# Session 29, device call 1 (#35 count first): compute-sanitizer over the GPU input draw (s28's
# open check), the seed preset against cuDNN and FA2 (eager), the planner kernel's timeline and
# counters at 4,8 and 8,16 (S=512 hd64 f16), and lever screens on the B*H >= 32 seed shapes.
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "memcheck sanitize" 120 memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize
step "racecheck sanitize" 150 racecheck.txt "$SANITIZER" --tool racecheck --error-exitcode 9 "$BIN" check --preset sanitize
step "seed eager" 90 seed-eager.txt "$BIN" bench --preset seed --peers sdpa-cudnn,sdpa-flash --reps 60 --json $OUT/seed-eager.json
for s in 4,8 8,16; do
  step "trace $s" 40 trace-$s.txt "$BIN" trace --shape $s,512,64 --dtype f16
  step "profile $s" 60 profile-$s.txt "$BIN" profile --shape $s,512,64 --dtype f16 --out $OUT/prof-$s
done
export EVOATTN_BIN=$BIN
ON_PLAN=1 REPS=30 CONFIGS="default stages=3 stages=4 schedule=claimed schedule=grid consumer_warpgroups=2 consumer_warpgroups=3" \
  timeout 200 scripts/gpu-config-sweep.sh sweep --shape 4,8,512,64 --shape 4,16,512,64 --shape 8,16,512,64 --dtype f16 > $OUT/sweep.txt 2>&1
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows
cat $OUT/sweep.txt | tail -n 12
grep -E "^[0-9]+,[0-9]+,512" $OUT/seed-eager.txt
for s in 4,8 8,16; do echo "== trace $s"; head -n 30 $OUT/trace-$s.txt; echo "== profile $s"; tail -n 25 $OUT/profile-$s.txt; done
(cd $OUT && tar cJf ../s29-dev1.tar.xz . && rm -rf ./* && mv ../s29-dev1.tar.xz .)
