# Session 34's first device call (was s33-next-dev1.sh, budgets trimmed, plus memcheck over the
# 16-bit sanitize preset: kernel sources gained the pathology defines in s33).
# The first device call after session 33 (which had no device time): what sessions 32 and 33 left
# unrun on a GPU. #37 part 5: the planted cheats through the real backend (launch counters in a
# module global; the ceilings measured through the oracle on the first run), the tuner's honest
# candidates still passing the integrity gate. #36: the oracle's selfcheck (cudnn-fp8 graph built
# from one scale_o tensor), the package's GPU tests with a wheel from this tree, `check --dtype
# e4m3` presets, racecheck over `check --preset sanitize` after the E4M3 lazy-rescale change.
# Carry: [".gpu", ".whl", "target/wheels"].
set -u
BUDGET_S=570
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.txt 2>&1
CUDNN_LIB=$(python3 -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) + '/lib')" 2>/dev/null)
step "info (ceilings)" 40 info.txt "$BIN" info
step "cheats" 130 cheats.txt "$BIN" tune --impl mma --shape 1,2,128,64 --shape 1,2,300,64 --generations 6 --gpus 0 \
  --store $OUT/cheats.sqlite --proposer "sh crates/evoattn-cli/tests/fixtures/planted-cheats-proposer.sh $OUT/calls"
step "cheats show" 20 cheats-show.txt "$BIN" tune --show --store $OUT/cheats.sqlite
step "oracle selfcheck" 50 selfcheck.txt env LD_LIBRARY_PATH="$CUDNN_LIB:${LD_LIBRARY_PATH:-}" PYTHONPATH=/tmp/site:$PYTHONPATH python3 -m evoattn_oracle.selfcheck
step "python install+tests" 90 python.txt env OUT=$OUT/py scripts/gpu-python.sh install tests
step "check e4m3 small" 45 check-e4m3.txt "$BIN" check --preset small --dtype e4m3
step "racecheck sanitize e4m3" 80 racecheck.txt "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 "$BIN" check --preset sanitize --dtype e4m3
step "memcheck sanitize 16-bit" 90 memcheck16.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize
print_rows | cut -c1-90
grep -E "integrity|proposed|fitness" $OUT/cheats-show.txt | cut -c1-160 | head -30
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/racecheck.txt $OUT/memcheck16.txt
tail -n 3 $OUT/selfcheck.txt $OUT/check-e4m3.txt; tail -n 3 $OUT/py/pytest.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s34-dev1.tar.xz)
