# Prepared in session 38 for session 39's first device call (#36's close): (1) the GPU checks
# owed from session 38 (the permute kernel's final CUBIN, `--v-layout bhds` with vt_producer=0,
# memcheck; the library's new Vᵀ test if its binary is carried as .gpu/gpu_fp8); (2) Nsight
# Compute at the two missed 16k rows in E4M3 (hd64: MUFU against tensor pipe, the count says
# 2:1; hd128: the tensor pipe's utilisation as a counter); (3) `exp2_poly` 8 and 4 on E4M3 hd64,
# never measured with E4M3 (prediction: -3..-8% at 16k, where the MUFU binds twice over).
# Carry: [".gpu"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
SH="--shape 1,4,130,128,2,300 --shape 2,8,1000,128,2,1000 --shape 3,6,513,64,3,900 --shape 1,2,77,128 \
  --shape 2,4,257,64,4,1 --shape 1,16,4096,128 --shape 2,32,2048,64,8 --shape 1,4,300,256,2,700 --shape 1,8,2048,256"
step "check vg kernel" 70 check-vg-k.txt "$BIN" check $SH --dtype e4m3,e4m3f16 --causal all --v-layout bhds \
  --impl wgmma --config-on-plan --config vt_producer=0
step "memcheck vg kernel" 40 memcheck-vg-k.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" \
  check --preset sanitize --shape 1,4,130,128,2,300 --shape 2,4,257,64,4,1 --dtype e4m3 --v-layout bhds \
  --impl wgmma --config-on-plan --config vt_producer=0
[ -x .gpu/gpu_fp8 ] && step "gpu_fp8" 90 gpu-fp8.txt .gpu/gpu_fp8 --test-threads 1 --nocapture
for s in 1,32,16384,64 1,16,16384,128; do
  step "ncu $s" 90 ncu-$s.txt "$NCU" --clock-control none --set full -k regex:evoattn_wgmma --launch-count 1 -f -o $OUT/ncu-$s \
    "$BIN" bench --shape $s --dtype e4m3 --reps 2 --peers none --no-history
  "$NCU" -i $OUT/ncu-$s.ncu-rep --page raw --csv > $OUT/ncu-$s-raw.csv 2>&1
  "$NCU" -i $OUT/ncu-$s.ncu-rep --page details --csv > $OUT/ncu-$s-details.csv 2>&1
done
export ROUNDS=1 REPS=20 A=$BIN B=$BIN A_ARGS=""
for x in 8 4; do
  export B_ARGS="--impl wgmma --config-on-plan --config exp2_poly=$x"
  step "ab xp$x" 90 ab-xp$x.txt scripts/gpu-ab.sh xp$x --shape 1,32,16384,64 --shape 4,32,4096,64 --dtype e4m3
done
print_rows | cut -c1-110
grep -h -E "ERROR SUMMARY|passed, |test result" $OUT/check-*.txt $OUT/memcheck-*.txt $OUT/gpu-fp8.txt 2>/dev/null
for s in 1,32,16384,64 1,16,16384,128; do echo "== $s"
  grep -E "Tensor|XU|Issue Slots Busy|Pipe|SM Frequency|Duration" $OUT/ncu-$s-details.csv | cut -c1-170 | head -20; done
for x in 8 4; do grep -A4 "== A/B" $OUT/ab-xp$x.txt; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz ./*.ncu-rep ./xp* 2>/dev/null; rm -f ./*.ncu-rep ./xp*; mv ../x.tar.xz s39-dev1-runs.tar.xz)
