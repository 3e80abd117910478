# Session 26, device call 4: the DLPack eager path (one crossing into Rust, no Python-side key)
# and the family/lever-table refactor of the library, on the H100.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
scripts/gpu-python.sh install tests > $OUT/gpu-python.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PWD/python
timeout 120 python3 crates/evoattn-py/examples/host_breakdown.py > $OUT/host-breakdown.txt 2>&1
timeout 150 python3 crates/evoattn-py/examples/host_cost.py --json $OUT/host-cost.json > $OUT/host-cost.txt 2>&1
timeout 200 $B check --preset grid > $OUT/check-grid.txt 2>&1; echo "check grid exit $?" >> $OUT/check-grid.txt
EVOATTN_TEST_HEAD_DIMS=64 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q \
  -p no:cacheprovider crates/evoattn-py/tests/test_gpu.py -k "float64 or flash_attn_func or two_streams or bad_inputs" \
  > $OUT/memcheck-py.txt 2>&1; echo "memcheck exit $?" >> $OUT/memcheck-py.txt
tail -3 $OUT/gpu-python.txt; cat $OUT/host-breakdown.txt; tail -12 $OUT/host-cost.txt; tail -3 $OUT/check-grid.txt
grep -E "ERROR SUMMARY|passed|failed|exit" $OUT/memcheck-py.txt | tail -3
