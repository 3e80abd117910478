# Prepared in session 39 for session 40's first device call. (1) #38: the cublas path's first
# GPU run: the library's GPU test (carried as .gpu/gpu_library: target/release/deps/gpu_library-*),
# `check --impl cublas` on the small preset and tails/GQA/masks, memcheck, then a first bench
# against our fused kernel (auto) and sdpa-math on a few fa3 rows (what the unfused algorithm
# costs). (2) #36: the three hd64 rows ci-regate flags against session 32's H200 records, one
# A/B/B/A each against the plan: vt_producer=0 at 4k (lead: -6%), the grid at 2k (lead: -2%),
# persistent blocks at 8k causal (lead: -4%); and the check grid on hd64 2k-4k with O from
# registers and V transposed in the kernel (the pair only bench's own check has run).
# Predictions: gpu_library all pass (f32 scores within bf16/f16 tolerance; 16-bit scores too, one
# rounding of 2^-9 of a score below P's own); cublas 3-10x slower than wgmma at 4k+ (S is 4-8x
# the bytes of Q, K, V, O); the A/Bs: the leads' signs.
# Carry: [".gpu"].
set -u
BUDGET_S=590
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
[ -x .gpu/gpu_library ] && step "gpu_library" 90 gpu-library.txt .gpu/gpu_library --test-threads 1 --nocapture
step "check cublas" 90 check-cublas.txt "$BIN" check --preset small --impl cublas
step "check cublas tails" 60 check-cublas-tails.txt "$BIN" check --shape 1,4,130,128,2,300 --shape 3,6,513,64,3,900 \
  --shape 2,4,257,64,4,1 --shape 1,8,300,256,2,700 --dtype f16,bf16 --causal all --layout all --impl cublas
step "memcheck cublas" 60 memcheck-cublas.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check \
  --preset sanitize --impl cublas
step "bench cublas" 90 bench-cublas.txt "$BIN" bench --shape 8,16,2048,128 --shape 2,16,8192,128 --shape 8,32,2048,64 \
  --dtype bf16 --impl cublas --peers sdpa-math,sdpa-cudnn --reps 10 --no-history --json $OUT/bench-cublas.json
step "check o-regs" 60 check-oregs.txt "$BIN" check --shape 3,6,2500,64,3,3000 --shape 2,8,4096,64,2 \
  --shape 1,4,2100,64 --dtype e4m3,e4m3f16 --causal none
export ROUNDS=1 REPS=20 A=$BIN B=$BIN A_ARGS=""
export B_ARGS="--impl wgmma --config-on-plan --config vt_producer=0"
step "ab vp 4k" 60 ab-vp4k.txt scripts/gpu-ab.sh vp4k --shape 4,32,4096,64 --dtype e4m3
export B_ARGS="--impl wgmma --config-on-plan --config schedule=grid"
step "ab grid 2k" 50 ab-grid2k.txt scripts/gpu-ab.sh grid2k --shape 8,32,2048,64 --dtype e4m3
export B_ARGS="--impl wgmma --config-on-plan --config schedule=persistent"
step "ab pe 8k causal" 60 ab-pe8k.txt scripts/gpu-ab.sh pe8k --shape 2,32,8192,64 --dtype e4m3 --causal top-left
print_rows | cut -c1-110
grep -h -E "ERROR SUMMARY|passed, |test result|^ok |^FAIL" $OUT/gpu-library.txt $OUT/check-*.txt $OUT/memcheck-*.txt 2>/dev/null | cut -c1-150
grep -E "^ *[0-9]+,[0-9]+,[0-9]+,(64|128)" $OUT/bench-cublas.txt | cut -c1-150
for f in vp4k grid2k pe8k; do grep -A3 "== A/B" $OUT/ab-$f.txt; done
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz ./vp4k-* ./grid2k-* ./pe8k-* 2>/dev/null; rm -f ./vp4k-* ./grid2k-* ./pe8k-*; mv ../x.tar.xz s40-dev1-runs.tar.xz)
