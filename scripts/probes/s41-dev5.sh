# Session 41's verification call (#38): which kernels cuTENSOR runs for gemm=cutensor, and their
# times beside cuBLASLt's (s41-dev4's ABBA measured the two providers within 0.4% of each other
# on every shape: predicted because both GEMMs write S at the HBM rate). `profile` (ncu) of
# `cublas scores=input` with each provider on 4,16,4096,128 bf16.
# Carry: .ct/part.04 .ct/sha .gpu.
set -u
BUDGET_S=150
source scripts/lib-step.sh
export $(scripts/gpu-cutensor-install.sh 2> $OUT/cutensor-install.txt | tail -1)
for g in cublaslt cutensor; do
  step "profile $g" 60 profile-$g.txt "$BIN" profile --shape 4,16,4096,128 --dtype bf16 --impl cublas \
    --config scores=input,gemm=$g --out $OUT/profile-$g
done
print_rows | cut -c1-120
grep -h -E "^[a-zA-Z_].*\(launch|duration|DRAM throughput|tensor pipe" $OUT/profile-*.txt | cut -c1-140
(cd $OUT && tar cJf ../r.tar.xz . && rm -rf ./* && mv ../r.tar.xz s41-dev5-logs.tar.xz)
