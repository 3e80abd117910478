# Session 41 (#38): where the hybrids' time goes beside cublas's, ncu of each path's three
# kernels a chunk (Q·Kᵀ, the row kernel, P·V) on 4,16,4096,128 bf16 (f32 scores): the
# hybrids measured 1.06-1.71x cublas's time (s41-dev2/3): predicted from our mma.sync GEMM
# (128x64 tiles, two cp.async stages) against cuBLASLt's wgmma kernels (nvjet, 256x128).
# Carry: .gpu.
set -u
BUDGET_S=100
source scripts/lib-step.sh
for imp in cublas hybrid-qk hybrid-pv; do
  step "profile $imp" 30 profile-$imp.txt "$BIN" profile --shape 4,16,4096,128 --dtype bf16 --impl $imp --launches 3 --out $OUT/profile-$imp
done
print_rows | cut -c1-120
grep -h -E "^[a-zA-Z_].*\(launch|duration|DRAM throughput|tensor pipe" $OUT/profile-*.txt | cut -c1-140
(cd $OUT && tar cJf ../r.tar.xz . && rm -rf ./* && mv ../r.tar.xz s41-dev6-logs.tar.xz)
