# Session 40, device call 2. (1) #38: the cublas GPU test again under the kernel's own tolerance
# (`reference::tolerance_of`: scores rounded to bf16 widen the LSE bound by u(1 + ln Sk)), the
# grid of `check --impl cublas` with both score dtypes, racecheck on the row kernel; the Python
# package's whole GPU suite from the wheel of this tree (owed since session 39). (2) #36: the
# sanitizers on hd64 E4M3 2k-4k with O from registers and V transposed in the kernel, and A/Bs
# on the rows ci-regate flags, against session 32's best H200 kernels (persistent, O from
# registers, the transpose kernel): 2k unmasked, 4k unmasked with O through its tile, 8k causal.
# Predictions: gpu_library passes; the A/Bs: 4k vt_producer=0 with O in its tile slower than
# with O from registers (-5.4% of dev1); 2k: O from registers with vt_producer=0 -1..-2%;
# 8k causal persistent with O from registers -3..-4% (session 32's record 955 µs).
# Carry: [".gpu", "target/wheels"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
step "gpu_library" 60 gpu-library.txt .gpu/gpu_library --test-threads 1 --nocapture
step "check cublas input" 60 check-cublas-input.txt "$BIN" check --preset small --shape 1,4,130,128,2,300 \
  --shape 3,6,513,64,3,900 --shape 2,4,257,64,4,1 --dtype f16,bf16 --causal all --layout all --impl cublas \
  --config scores=input
step "racecheck cublas" 90 racecheck-cublas.txt "$SANITIZER" --tool racecheck --error-exitcode 9 "$BIN" check \
  --preset sanitize --impl cublas
step "memcheck e4m3 2k-4k" 90 memcheck-e4m3.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check \
  --shape 1,4,2100,64 --shape 1,4,4096,64,2 --shape 1,2,3000,64,1,2500 --dtype e4m3 --causal none
step "racecheck e4m3 2k-4k" 90 racecheck-e4m3.txt "$SANITIZER" --tool racecheck --error-exitcode 9 "$BIN" check \
  --shape 1,4,2100,64 --shape 1,2,4096,64,2 --dtype e4m3 --causal none
step "python" 150 python.txt env EVOATTN_BIN="$BIN" OUT="$OUT" scripts/gpu-python.sh install tests
export ROUNDS=1 REPS=20 A=$BIN B=$BIN A_ARGS=""
export B_ARGS="--impl wgmma --config-on-plan --config o_staging=registers,vt_producer=0"
step "ab 2k rg vp0" 40 ab-2k-rg-vp0.txt scripts/gpu-ab.sh k2rgvp0 --shape 8,32,2048,64 --dtype e4m3
export B_ARGS="--impl wgmma --config-on-plan --config vt_producer=0"
step "ab 2k vp0" 40 ab-2k-vp0.txt scripts/gpu-ab.sh k2vp0 --shape 8,32,2048,64 --dtype e4m3
export B_ARGS="--impl wgmma --config-on-plan --config o_staging=tile,vt_producer=0"
step "ab 4k tile vp0" 40 ab-4k-tile-vp0.txt scripts/gpu-ab.sh k4tlvp0 --shape 4,32,4096,64 --dtype e4m3
export B_ARGS="--impl wgmma --config-on-plan --config schedule=persistent,o_staging=registers"
step "ab 8k causal pe rg" 50 ab-8kc-pe-rg.txt scripts/gpu-ab.sh k8cperg --shape 2,32,8192,64 --dtype e4m3 --causal top-left
print_rows | cut -c1-110
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, |test result|^FAIL" $OUT/gpu-library.txt $OUT/check-*.txt $OUT/*check-*.txt 2>/dev/null | cut -c1-150
grep -h "==" $OUT/python.txt | cut -c1-150
for f in 2k-rg-vp0 2k-vp0 4k-tile-vp0 8kc-pe-rg; do grep -A2 "== A/B" $OUT/ab-$f.txt | tail -1; done
# One file back (the device returns eight at most).
(cd $OUT && tar cJf ../s40-dev2.tar.xz . && rm -rf ./* && mv ../s40-dev2.tar.xz .)
