# Session 32, seventh device call (#36): call 6 ran causal E4M3 rows from 1k keys on persistent
# blocks (the 8192-key limit) and several got slower than call 4's grid: causal grid against
# persistent in one call at hd64 and hd256 (hd128 was call 5's), 1k-8k keys, 20 samples.
set -u
BUDGET_S=250
source scripts/lib-step.sh
for s in grid persistent; do
  step "$s" 110 causal-$s.txt "$BIN" bench $(fa3_rows 64 1024 2048 4096 8192) $(fa3_rows 256 1024 2048 4096 8192) $(fa3_rows 128 8192) --causal top-left --dtype e4m3 --impl wgmma --config-on-plan --config schedule=$s --peers none --reps 20 --no-history
done
print_rows | cut -c1-100
for s in grid persistent; do echo "== $s"; grep -E "^[0-9]+,[0-9]+," $OUT/causal-$s.txt | sed -E 's/ +/ /g' | cut -c1-110; done
