#!/usr/bin/env bash
# One device call for the Python package: install the wheel built here (dist/, carried), then
# its GPU tests, compute-sanitizer through Python, the host cost against SDPA, the transformers
# example, and the lab's same-run comparison of the Python path (peer evoattn-torch) with the
# Rust path. Full logs go to $OUT; a short summary is printed last.
# usage (on the GPU machine, from the repo root): scripts/gpu-python.sh [steps...]
# steps: install tests sanitize host transformers graph-kernel seed seed-graph fa3 (default: install tests sanitize host transformers)
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
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" target/wheels/evoattn-*.whl > "$OUT/install.txt" 2>&1
      rc=$?
      end=$(date +%s.%N)
      size=$(du -k target/wheels/evoattn-*.whl | cut -f1)
      note "install: exit $rc, wheel ${size} KiB, $(python3 -c "print(f'{$end - $start:.1f}')") s; $(python3 -c 'import evoattn, torch; print("evoattn", evoattn.__file__, "torch", torch.__version__)' 2>&1 | tail -1)" ;;
    tests)
      python3 -m pytest -q -p no:cacheprovider -rs crates/evoattn-py/tests > "$OUT/pytest.txt" 2>&1
      note "pytest: exit $?, $(tail -1 "$OUT/pytest.txt")" ;;
    sanitize)
      # memcheck over the float64 grid at hd64, both calls and two streams; racecheck (slower by
      # far) on the small problems.
      EVOATTN_TEST_HEAD_DIMS=64 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q \
        -p no:cacheprovider crates/evoattn-py/tests/test_gpu.py -k "float64 or flash_attn_func or two_streams" \
        > "$OUT/sanitize-py-memcheck.txt" 2>&1
      note "sanitizer memcheck through Python: exit $?, $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-py-memcheck.txt" | tail -1) $(tail -1 "$OUT/sanitize-py-memcheck.txt")"
      # cuDNN's own SDPA kernel (the comparison in test_attentions_causal_true_is_sdpas_top_left)
      # reports hazards of its own; ours are the ones checked.
      timeout 300 compute-sanitizer --tool racecheck --kernel-name-exclude kns=cudnn --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider \
        crates/evoattn-py/tests/test_gpu.py -k "causal_true or scale_and_out" > "$OUT/sanitize-py-racecheck.txt" 2>&1
      note "sanitizer racecheck through Python: exit $?, $(grep -E 'ERROR SUMMARY' "$OUT/sanitize-py-racecheck.txt" | tail -1) $(tail -1 "$OUT/sanitize-py-racecheck.txt")" ;;
    host)
      python3 crates/evoattn-py/examples/host_cost.py --json "$OUT/host-cost.json" 2>&1 | tee "$OUT/host-cost.txt"
      note "host cost: exit ${PIPESTATUS[0]}" ;;
    transformers)
      python3 crates/evoattn-py/examples/transformers_llama.py 2>&1 | tee "$OUT/transformers.txt"
      note "transformers example: exit ${PIPESTATUS[0]}" ;;
    graph-kernel)
      # The same method as the Rust lab's graph mode, for the Python path; then the Rust path.
      python3 crates/evoattn-py/examples/graph_kernel_time.py 2>&1 | tee "$OUT/graph-kernel-python.txt"
      $BIN bench --preset seed --mode graph --peers none 2>&1 | tee "$OUT/graph-kernel-rust.txt"
      note "graph-mode kernel time, Python and Rust paths: exit ${PIPESTATUS[0]}" ;;
    seed)
      $BIN bench --preset seed --peers sdpa-cudnn,sdpa-flash,evoattn-torch --host-cost --json "$OUT/seed-eager.json" 2>&1 | tee "$OUT/bench-seed.txt"
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
