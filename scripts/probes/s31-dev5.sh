# Session 31, device call 5 (#36): ncu on the E4M3 `wgmma` launch pair (the V transpose kernel,
# then the attention kernel) at hd128 16k and 512 keys: tensor-pipe utilisation, and the
# transpose's share; then the short rows under the persistent schedules, same call as the
# default (ours alone, 15 samples).
set -u
BUDGET_S=560
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "profile hd128 16k" 150 profile-16k.txt "$BIN" profile --shape 1,16,16384,128 --dtype e4m3 --impl wgmma --launches 2 --out $OUT/prof-16k
step "profile hd128 512" 90 profile-512.txt "$BIN" profile --shape 32,16,512,128 --dtype e4m3 --impl wgmma --launches 2 --out $OUT/prof-512
for c in "" schedule=persistent schedule=claimed; do
  step "short ${c:-default}" 45 short-${c:-default}.txt "$BIN" bench --shape 32,16,512,128 --shape 16,16,1024,128 --shape 8,16,2048,128 --dtype e4m3 --impl wgmma ${c:+--config $c} --peers none --reps 15
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt 2>&1
print_rows | cut -c1-70
tail -n 30 $OUT/profile-16k.txt
tail -n 30 $OUT/profile-512.txt
for f in $OUT/short-*.txt; do echo "== $(basename $f)"; grep -E "^[0-9]+,[0-9]+," $f | sed -E 's/ +/ /g' | cut -c1-110; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s31-dev5.tar.xz)
