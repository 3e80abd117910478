# Session 40, device call 5. (1) #36: the new hd64 E4M3 causal plan (claimed tiles at every
# length, O from registers past 2k keys) against float64 / the reference kernel, both causal
# alignments, tails and GQA, and memcheck on it. (2) #38: where the fused kernel's advantage
# comes from: DRAM bytes and time per kernel (ncu) of `--impl cublas` and of the fused plan on
# 4,16,4096,128 bf16 and 8,32,2048,64 bf16.
# Predictions: checks pass, memcheck 0. cublas bytes at 4,16,4096,128: S f32 written by Q·Kᵀ
# (4.3 GB), read and P written by the row kernel (4.3 + 2.1 GB), P read by P·V (2.1 GB): ~13 GB
# against the fused kernel's ~0.1 GB (Q, K, V, O: 4 x 33.5 MB).
# Carry: [".gpu"].
set -u
BUDGET_S=400
source scripts/lib-step.sh
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
step "check e4m3 causal" 60 check-e4m3-causal.txt "$BIN" check --shape 1,4,4096,64 --shape 1,2,8192,64 \
  --shape 2,4,3000,64,2,3100 --shape 1,4,2100,64,2,2000 --dtype e4m3,e4m3f16 --causal top-left,bottom-right
step "memcheck e4m3 causal" 90 memcheck-e4m3-causal.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check \
  --shape 1,4,4096,64 --shape 2,4,3000,64,2,3100 --dtype e4m3 --causal top-left,bottom-right
for imp in cublas auto; do
  for shp in 4,16,4096,128 8,32,2048,64; do
    step "ncu $imp $shp" 60 ncu-$imp-${shp//,/x}.csv "$NCU" --clock-control none --csv --print-units base \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      "$BIN" bench --shape $shp --dtype bf16 --impl $imp --peers none --reps 2 --no-history
  done
done
print_rows | cut -c1-110
grep -h -E "ERROR SUMMARY|passed, " $OUT/check-*.txt $OUT/memcheck-*.txt | cut -c1-150
python3 - $OUT <<'PY'
import csv, glob, os, sys, collections
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu-*.csv"))):
    rows = [l for l in open(f) if l.startswith('"')]
    agg = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in csv.DictReader(rows):
        agg[r["Kernel Name"][:60]][r["Metric Name"]].append(float(r["Metric Value"].replace(",", "")))
    print("==", os.path.basename(f))
    for k, m in agg.items():
        n = len(m["gpu__time_duration.sum"])
        rd, wr, t = (sum(m[x]) / n for x in ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"))
        print(f"  {n:3d}x {k:60s} read {rd/1e9:8.3f} GB write {wr/1e9:8.3f} GB  {t/1e3:9.1f} us")
PY
