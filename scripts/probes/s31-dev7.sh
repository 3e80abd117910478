# Session 31, device call 7 (#36): E4M3 `wgmma` at 512 keys (fa3 rows, hd128/256/64) under the
# persistent schedules, same call as the default grid schedule (ours alone, 15 samples).
set -u
BUDGET_S=280
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $OUT/gpu.txt 2>&1
for c in "" schedule=persistent schedule=claimed; do
  step "512 ${c:-default}" 80 short-${c:-default}.txt "$BIN" bench --shape 32,16,512,128 --shape 32,8,512,256 --shape 32,32,512,64 --dtype e4m3 --impl wgmma ${c:+--config $c} --peers none --reps 15
done
print_rows | cut -c1-70
for f in $OUT/short-*.txt; do echo "== $(basename $f)"; grep -E "^[0-9]+,[0-9]+," $f | sed -E 's/ +/ /g' | cut -c1-110; done
cat $OUT/gpu.txt
