#!/usr/bin/env bash
# One device call for the Python package: install the wheel built here (dist/, carried), then
# its GPU tests, compute-sanitizer through Python, the host cost against SDPA, the transformers
# example, and the lab's same-run comparison of the Python path (peer evoattn-torch) with the
# Rust path. Full logs go to $OUT; a short summary is printed last.
# usage (on the GPU machine, from the repo root): scripts/gpu-python.sh [steps...]
# steps: install tests sanitize host transformers seed seed-graph fa3 (default: install tests sanitize host transformers)
set -uo pipefail
BIN=${EVOATTN_BIN:-target/release/evoattn}
OUT=${OUT:-out}
mkdir -p "$OUT"
steps=${*:-install tests sanitize host transformers}
SITE=/tmp/evoattn-site
export PYTHONPATH="$SITE:$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
summary=()
note() { summary+=("$1"); echo "== $1"; }
for step in $steps; do
  case $step in
    install)
      start=$(date +%s.%N)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" dist/evoattn-*.whl > "$OUT/install.txt" 2>&1
      rc=$?
      end=$(date +%s.%N)
      size=$(du -k dist/evoattn-*.whl | cut -f1)
      note "install: exit $rc, wheel ${size} KiB, $(python3 -c "print(f'{$end - $start:.1f}')") s; $(python3 -c 'import evoattn, torch; print("evoattn", evoattn.__file__, "torch", torch.__version__)' 2>&1 | tail -1)" ;;
    tests)
      python3 -m pytest -q -p no:cacheprovider -rs crates/evoattn-py/tests > "$OUT/pytest.txt" 2>&1
      note "pytest: exit $?, $(tail -1 "$OUT/pytest.txt")" ;;
    sanitize)
      for tool in memcheck racecheck; do
        EVOATTN_TEST_HEAD_DIMS=64 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider \
          crates/evoattn-py/tests/test_gpu.py -k "float64 or flash_attn_func or two_streams" > "$OUT/sanitize-py-$tool.txt" 2>&1
        note "sanitizer $tool through Python: exit $?, $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-py-$tool.txt" | tail -1) $(tail -1 "$OUT/sanitize-py-$tool.txt")"
      done ;;
    host)
      python3 crates/evoattn-py/examples/host_cost.py --json "$OUT/host-cost.json" 2>&1 | tee "$OUT/host-cost.txt"
      note "host cost: exit ${PIPESTATUS[0]}" ;;
    transformers)
      python3 crates/evoattn-py/examples/transformers_llama.py 2>&1 | tee "$OUT/transformers.txt"
      note "transformers example: exit ${PIPESTATUS[0]}" ;;
    seed)
      $BIN bench --preset seed --peers sdpa-cudnn,sdpa-flash,evoattn-torch --json "$OUT/seed-eager.json" 2>&1 | tee "$OUT/bench-seed.txt"
      note "bench seed eager: exit ${PIPESTATUS[0]}" ;;
    seed-graph)
      $BIN bench --preset seed --mode graph --peers sdpa-cudnn,evoattn-torch --json "$OUT/seed-graph.json" 2>&1 | tee "$OUT/bench-seed-graph.txt"
      note "bench seed graph: exit ${PIPESTATUS[0]}" ;;
    fa3)
      $BIN bench --preset fa3-grid --peers sdpa-cudnn,evoattn-torch --json "$OUT/fa3-eager.json" 2>&1 | tee "$OUT/bench-fa3.txt"
      note "bench fa3-grid eager: exit ${PIPESTATUS[0]}" ;;
    *) note "unknown step $step" ;;
  esac
done
echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
