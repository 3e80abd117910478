# Session 36's fifth device call (#36, what limits hd128 E4M3): the per-warp traces of the
# planner's kernel at hd128 16k in E4M3 (session 32's was an H200's), with Q·Kᵀ from shared
# memory instead of registers (q_in_regs=0: do the RS wgmma's register reads slow the other
# consumer's softmax?), and in bf16 (the same 64 exponentials a thread and key block: is the
# E4M3 softmax slower than bf16's?); then Nsight Compute's full set with source counters on the
# E4M3 and bf16 kernels at 4,16,4096,128: warp stall reasons per SASS instruction.
# Carry: [".gpu"].
set -u
BUDGET_S=570
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step "trace e4m3" 60 trace-e4m3.txt "$BIN" trace --shape 1,16,16384,128 --dtype e4m3 --out $OUT/trace-e4m3.json
step "trace e4m3 qr0" 60 trace-e4m3-qr0.txt "$BIN" trace --shape 1,16,16384,128 --dtype e4m3 --impl wgmma \
  --config-on-plan --config q_in_regs=0 --out $OUT/trace-e4m3-qr0.json
step "trace bf16" 60 trace-bf16.txt "$BIN" trace --shape 1,16,16384,128 --dtype bf16 --impl wgmma \
  --config-on-plan --config block_n=128 --out $OUT/trace-bf16.json
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for dt in e4m3 bf16; do
  step "ncu $dt" 150 ncu-$dt.txt "$NCU" --set full --import-source yes --section SourceCounters -k regex:evoattn_wgmma \
    --launch-count 2 -f -o $OUT/ncu-$dt "$BIN" bench --shape 4,16,4096,128 --dtype $dt --reps 2 --peers none --no-history
  "$NCU" -i $OUT/ncu-$dt.ncu-rep --page details --csv > $OUT/ncu-$dt-details.csv 2>&1
  "$NCU" -i $OUT/ncu-$dt.ncu-rep --page raw --csv > $OUT/ncu-$dt-raw.csv 2>&1
  "$NCU" -i $OUT/ncu-$dt.ncu-rep --page source --csv --print-source sass > $OUT/ncu-$dt-sass.csv 2> $OUT/ncu-$dt-sass.err
done
print_rows | cut -c1-100
for f in $OUT/trace-*.txt; do echo "== $(basename $f)"; grep -E "key block|S done +softmax|turn came +GEMMs|GEMMs issued +S done|P·V done +P packed|P packed +K/V" $f; done
for dt in e4m3 bf16; do echo "== ncu $dt"; grep -E "Tensor|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" $OUT/ncu-$dt-details.csv | cut -c1-160 | head -12; wc -c $OUT/ncu-$dt-sass.csv; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s36-dev5.tar.xz)
