#!/usr/bin/env bash
# One device call: info, correctness grid, sanitizers, compile times and a same-run timing
# against PyTorch SDPA. Full logs go to $OUT; a short summary is printed last.
# usage (on the GPU machine, from the repo root): scripts/gpu-session.sh [steps...]
# steps: info small grid sanitize compile run bench oracle seed seed-modes fa3 aa profile
#        persistent-causal gputests (default: the first six)
set -uo pipefail
BIN=${EVOATTN_BIN:-target/release/evoattn}
OUT=${OUT:-out}
mkdir -p "$OUT"
steps=${*:-info small grid sanitize compile run}
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
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
    run)
      python3 scripts/run_roundtrip.py "$BIN" 2>&1 | tee "$OUT/run.txt"
      note "run round trip: exit ${PIPESTATUS[0]}" ;;
    oracle)
      python3 -m evoattn_oracle.selfcheck 2>&1 | tee "$OUT/oracle-selfcheck.txt"
      note "oracle selfcheck: exit ${PIPESTATUS[0]}" ;;
    seed)
      $BIN bench --preset seed --peers sdpa-cudnn,sdpa-flash,sdpa-efficient --json "$OUT/seed.json" 2>&1 | tee "$OUT/bench-seed.txt"
      note "bench seed: exit ${PIPESTATUS[0]}" ;;
    fa3)
      $BIN bench --preset fa3-grid --peers sdpa-cudnn,sdpa-flash --json "$OUT/fa3-grid.json" 2>&1 | tee "$OUT/bench-fa3.txt"
      note "bench fa3-grid: exit ${PIPESTATUS[0]}" ;;
    aa)
      # A/A: our kernel against itself, 20 gates on one shape; "faster" must happen at most once.
      faster=0
      for i in $(seq 1 20); do
        $BIN bench --shape 4,16,4096,128 --dtype bf16 --peers self --seed "$i" --json "$OUT/aa.json" > /dev/null 2>&1
        # --speedup 1.0 leaves the bootstrap CI as the only barrier: the strictest A/A.
        $BIN gate --samples "$OUT/aa.json" --against self --speedup 1.0 --format json >> "$OUT/aa-gates.txt" 2>&1 && faster=$((faster + 1))
      done
      note "A/A: faster in $faster of 20 gates" ;;
    profile)
      # Nsight Compute on our kernel alone (the filter skips the correctness check's reference
      # kernel): mma and wgmma at hd128 S=4096 and wgmma at 16k, with the classification.
      for run in "mma 4,16,4096,128" "wgmma 4,16,4096,128" "wgmma 1,16,16384,128"; do
        set -- $run
        $BIN profile --impl "$1" --shape "$2" --dtype bf16 --out "$OUT/profile-$1-${2//,/x}" > "$OUT/profile-$1-${2//,/x}.txt" 2>&1
        note "profile $1 $2: exit $?, $(grep -E 'tensor pipe|bound' "$OUT/profile-$1-${2//,/x}.txt" | tr -s ' ' | tr '\n' ';')"
      done ;;
    seed-modes)
      # The seed shapes in both timing modes against cuDNN and FA2: eager minus graph is the
      # launch path's share of what a caller sees.
      for mode in eager graph; do
        $BIN bench --preset seed --mode $mode --reps 60 --peers sdpa-cudnn,sdpa-flash --json "$OUT/seed-$mode.json" > "$OUT/bench-seed-$mode.txt" 2>&1
        note "bench seed $mode: exit $?"
      done ;;
    persistent-causal)
      # Causal persistent blocks (alternating head order) against the grid scheduler, hd128.
      for pe in 0 1; do
        $BIN bench --shape 16,16,1024,128 --shape 4,16,4096,128 --shape 1,16,16384,128 --dtype bf16 --causal top-left \
          --impl wgmma --config persistent=$pe --mode graph --reps 30 --peers sdpa-cudnn --json "$OUT/persistent-causal-$pe.json" > "$OUT/persistent-causal-$pe.txt" 2>&1
        note "persistent=$pe causal: exit $?"
      done ;;
    gputests)
      # The whole GPU test binary (built here with `cargo test --no-run --test gpu`), passed as GPU_TESTS.
      ${GPU_TESTS:?GPU_TESTS names the test binary} --test-threads 1 > "$OUT/gpu-tests.txt" 2>&1
      note "gpu tests: exit $?, $(grep -E '^test result' "$OUT/gpu-tests.txt")" ;;
    bench)
      $BIN bench --shape 4,16,4096,128 --dtype bf16 --causal none,top-left --peers sdpa-cudnn,sdpa-flash 2>&1 | tee "$OUT/bench.txt"
      note "bench: exit ${PIPESTATUS[0]}" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo; echo "==== summary"; printf '%s\n' "${summary[@]}"
[ -f "$OUT/bench.txt" ] && grep -E "^[0-9]" "$OUT/bench.txt"
for f in "$OUT"/persistent-causal-?.txt "$OUT"/bench-seed-*.txt; do
  [ -f "$f" ] && { echo "-- $(basename "$f")"; grep -E "^ *[0-9]+,[0-9]" "$f"; }
done
exit 0
