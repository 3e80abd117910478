# Prepared in session 40 for session 41's first device call (#38). (1) The hybrids' first GPU
# run: gpu_library (cublas, hybrid-qk, hybrid-pv against float64: GQA folded and head by head,
# every mask, no-key rows, Sk = 1, hd64-hd256, chunks, both score dtypes), `check` of each hybrid
# on the small preset and tails, memcheck and racecheck on the sanitize preset. (2) `tune --impl
# any` on the seed shapes (the family a gene; the store records which family wins each bucket),
# its JSON kept. Predictions: the hybrids pass (fp32 accumulation as cuBLASLt); the tune run's
# elites are wgmma/resident configs (the library paths 3-14x slower, session 40).
# Carry: [".gpu"] (.gpu/evoattn, .gpu/gpu_library = target/release/deps/gpu_library-*).
set -u
BUDGET_S=590
source scripts/lib-step.sh
step "gpu_library" 60 gpu-library.txt .gpu/gpu_library --test-threads 1 --nocapture
for imp in hybrid-qk hybrid-pv; do
  step "check $imp" 40 check-$imp.txt "$BIN" check --preset small --shape 1,4,130,128,2,300 --shape 3,6,513,64,3,900 \
    --shape 2,4,257,64,4,1 --shape 1,8,300,256,2,700 --dtype f16,bf16 --causal all --layout all --impl $imp
  step "memcheck $imp" 60 memcheck-$imp.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize --impl $imp
  step "racecheck $imp" 60 racecheck-$imp.txt "$SANITIZER" --tool racecheck --error-exitcode 9 "$BIN" check --preset sanitize --impl $imp
done
step "tune any seed" 200 tune-any.txt "$BIN" tune --preset seed --impl any --generations 4 --budget 180s \
  --store $OUT/tune-any.sqlite --json $OUT/tune-any-seed.json
print_rows | cut -c1-110
grep -h -E "^FAIL|passed, |test result|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/*.txt | cut -c1-140 | head -30
grep -E "^tune: any|rank|^ +[0-9] " $OUT/tune-any.txt | head -20
(cd $OUT && mkdir -p ../keep && mv tune-any-seed.json ../keep/ && tar cJf ../r.tar.xz . && rm -rf ./* && mv ../r.tar.xz s41-dev1-logs.tar.xz && mv ../keep/* .)
