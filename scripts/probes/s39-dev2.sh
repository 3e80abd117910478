# Session 39's second device call (#36's close): (1) the two 16k E4M3 profiles taken in dev1
# (carried as .gpu/ncu-hd64.ncu-rep, .gpu/ncu-hd128.ncu-rep) read out under names the device
# tool returns; (2) a profile of exp2_poly=8 at hd64 16k, which dev1 measured +9.5% slower
# (predicted -3..-8%): which pipe or issue limit the polynomial's FMAs hit; (3) ours in E4M3
# against ours in bf16 on the fa3 grid's 8k and 16k rows, one run (#36's >= 1.5x target).
# Carry: [".gpu"].
set -u
BUDGET_S=400
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
step "ncu xp8" 90 ncu-xp8.txt "$NCU" --clock-control none --set full -k regex:evoattn_wgmma --launch-count 1 -f \
  -o .gpu/ncu-hd64-xp8 "$BIN" bench --shape 1,32,16384,64 --dtype e4m3 --reps 2 --peers none --no-history \
  --impl wgmma --config-on-plan --config exp2_poly=8
for r in hd64 hd128 hd64-xp8; do
  "$NCU" -i .gpu/ncu-$r.ncu-rep --page raw --csv > $OUT/ncu-$r-raw.csv 2>&1
  "$NCU" -i .gpu/ncu-$r.ncu-rep --page details --csv > $OUT/ncu-$r-details.csv 2>&1
done
ROWS="$(fa3_rows 64 8192 16384) $(fa3_rows 128 8192 16384) $(fa3_rows 256 8192 16384)"
step "e4m3 vs bf16" 250 fp8-bf16.txt "$BIN" bench $ROWS --causal none,top-left --dtype e4m3,bf16 --reps 20 --peers none \
  --no-history --json $OUT/fp8-bf16.json
print_rows | cut -c1-110
grep -E "^SM clock|^ *[0-9]+,[0-9]+,[0-9]+,(64|128|256)" $OUT/fp8-bf16.txt | cut -c1-150 | tail -30
for r in hd64 hd128 hd64-xp8; do echo "== $r"
  grep -E '"(Duration|SM Frequency|Issue Slots Busy|Executed Ipc Active|Compute \(SM\) Throughput)"' $OUT/ncu-$r-details.csv | cut -d, -f15- | head -8; done
cat $OUT/gpu.txt
