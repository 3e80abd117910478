# Session 41's last device call (#38), after four calls stashed cuTENSOR's first parts
# (scripts/gpu-cutensor-install.sh). (1) The founding documents' CUTENSOR candidate against
# cuBLASLt, same run, ABBA (scripts/gpu-ab.sh, eager): `cublas scores=input` with gemm=cublaslt
# (A) and gemm=cutensor (B), and `hybrid-pv` (f32 scores, cuTENSOR's P·V) the same, on a seed
# shape and two fa3 rows. (2) The correctness grid of the two cuTENSOR paths (cublas with
# scores=input on normal inputs: its wide inputs fail by design). (3) The Python package's GPU
# suite with this tree's wheel. Predictions: cuTENSOR within 10% of cuBLASLt on the large
# rows (both run near the HBM rate on these GEMMs; session 40's ncu), slower on the seed shape
# (its plans carry more host cost); the grids pass; the suite passes.
# Carry: .ct/part.04 .ct/sha .gpu target/wheels.
set -u
BUDGET_S=560
source scripts/lib-step.sh
export $(scripts/gpu-cutensor-install.sh 2> $OUT/cutensor-install.txt | tail -1)
echo "EVOATTN_CUTENSOR=${EVOATTN_CUTENSOR:-unset}; $(cat $OUT/cutensor-install.txt)"
export ROUNDS=1 REPS=10 MODE=eager A=$BIN B=$BIN
for run in "cublas scores=input" "hybrid-pv scores=f32"; do
  set -- $run
  export A_ARGS="--impl $1 --config $2" B_ARGS="--impl $1 --config $2,gemm=cutensor"
  step "ab $1 lt-ct" 90 ab-$1.txt scripts/gpu-ab.sh ab-$1 --shape 4,16,512,64 --shape 4,16,4096,128 --shape 1,32,16384,64 --dtype bf16
done
step "grid hybrid-pv ct" 70 grid-hybrid-pv-ct.txt "$BIN" check --preset grid --impl hybrid-pv --config gemm=cutensor
step "grid cublas ct" 70 grid-cublas-ct.txt "$BIN" check --preset grid --impl cublas --config scores=input,gemm=cutensor --seeds 1
OUT_PY=$OUT/py; mkdir -p $OUT_PY
step "python" 150 python.txt env OUT=$OUT_PY EVOATTN_BIN=$BIN scripts/gpu-python.sh install tests
print_rows | cut -c1-120
grep -h -E "passed, |test result" $OUT/*.txt | cut -c1-140 | head
tail -8 $OUT/ab-*.txt | cut -c1-150
tail -4 $OUT/python.txt | cut -c1-200
(cd $OUT && tar cJf ../r.tar.xz . && rm -rf ./* && mv ../r.tar.xz s41-dev4-logs.tar.xz)
