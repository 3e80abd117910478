#!/usr/bin/env bash
# One device call: info, correctness grid, sanitizers, compile times and a same-run timing
# against PyTorch SDPA. Full logs go to $OUT; a short summary is printed last.
# usage (on the GPU machine, from the repo root): scripts/gpu-session.sh [steps...]
# steps: info small grid sanitize compile bench (default: all)
set -uo pipefail
BIN=${EVOATTN_BIN:-target/release/evoattn}
OUT=${OUT:-out}
mkdir -p "$OUT"
steps=${*:-info small grid sanitize compile bench}
summary=()
note() { summary+=("$1"); echo "== $1"; }
for step in $steps; do
  case $step in
    info)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
      $BIN info 2>&1 | tee "$OUT/info.txt"; note "info: exit ${PIPESTATUS[0]}" ;;
    small)
      $BIN check --preset small --preset mission 2>&1 | tee "$OUT/check-small.txt"
      note "check small: exit ${PIPESTATUS[0]}, $(tail -1 "$OUT/check-small.txt")" ;;
    grid)
      $BIN check --preset grid --quiet 2>&1 | tee "$OUT/check-grid.txt"
      note "check grid: exit ${PIPESTATUS[0]}, $(grep -E '^(f16|bf16):' "$OUT/check-grid.txt" | tr '\n' ' ') $(tail -1 "$OUT/check-grid.txt")" ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 9 $BIN check --preset sanitize --seeds 1 --quiet > "$OUT/sanitize-$tool.txt" 2>&1
        note "sanitizer $tool: exit $?, $(grep -E 'ERROR SUMMARY|passed' "$OUT/sanitize-$tool.txt" | tr '\n' ' ')"
      done ;;
    compile)
      dir=$(mktemp -d)
      EVOATTN_CACHE_DIR=$dir $BIN compile --impl all --arch sm_90a --dtype all --head-dim all > "$OUT/compile-cold.txt" 2>&1
      EVOATTN_CACHE_DIR=$dir $BIN compile --impl all --arch sm_90a --dtype all --head-dim all > "$OUT/compile-warm.txt" 2>&1
      note "compile cold: $(tail -1 "$OUT/compile-cold.txt"); warm: $(tail -1 "$OUT/compile-warm.txt")" ;;
    bench)
      for causal in 0 1; do
        flag=""; [ $causal = 1 ] && flag="--causal"
        $BIN bench --shape 4,16,4096,128 --dtype bf16 $flag --impl mma 2>&1 | tee -a "$OUT/bench.txt"
        python3 scripts/sdpa_time.py 4 16 4096 128 bf16 $causal 2>&1 | tee -a "$OUT/bench.txt"
        $BIN bench --shape 4,16,4096,128 --dtype bf16 $flag --impl mma 2>&1 | tail -1 | tee -a "$OUT/bench.txt"
      done
      note "bench: $(grep -cE 'mma|sdpa' "$OUT/bench.txt") rows" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo; echo "==== summary"; printf '%s\n' "${summary[@]}"
[ -f "$OUT/bench.txt" ] && grep -E "evoattn_|sdpa" "$OUT/bench.txt"
