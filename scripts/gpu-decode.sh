#!/usr/bin/env bash
# Decoding on one GPU, in one device call: `splitkv` correctness (compute-sanitizer, the grid,
# the key-warp variants), a lever sweep on decode shapes, and same-run benches against SDPA.
# Logs and JSON go to $OUT; a short table is printed last.
#
# usage (on the GPU machine, from the repo root; no Rust needed):
#   OUT=/some/dir scripts/gpu-decode.sh [steps...]
# steps: correct sweep ncu bench full gputests (default: correct sweep)
# expects .gpu/evoattn (the release binary); gputests also .gpu/gpu-tests.
# SPLITKV_CONFIG (e.g. loads=tma) is added to every splitkv config the correct step checks;
# SKIP_MMA=1 leaves out the mma grid (when the shared main loop did not change).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUDGET_S=${BUDGET_S:-560}
source scripts/lib-step.sh
steps=${*:-correct sweep}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv > "$OUT/gpu.txt" 2>&1

# Decode shapes whose inputs the host draws in seconds (the preset's B=8 no-GQA cases take
# 10-45 s each): GQA 8:1 at B=1 over every Sk, Sq=4, B=8, and no GQA at 1k and 8k.
sweep_shapes=()
for sk in 1024 8192 32768 131072; do sweep_shapes+=(--shape "1,32,1,128,4,$sk"); done
sweep_shapes+=(--shape 1,32,4,128,4,32768 --shape 8,32,1,128,4,8192 --shape 8,32,1,128,4,32768)
sweep_shapes+=(--shape 1,32,1,128,32,8192 --shape 8,32,1,128,32,1024)

for step_name in $steps; do
  case $step_name in
    correct)
      base=${SPLITKV_CONFIG:-}
      with_base=(); [ -n "$base" ] && with_base=(--config "$base")
      # Key warps 4 (the default), 2 and 1 (the v1 layout), with the new combine.
      for tool in memcheck racecheck; do
        step "sanitizer $tool ${base}" 60 "sanitize-$tool.txt" "$SANITIZER" --tool "$tool" --error-exitcode 9 \
          "$BIN" check --impl splitkv "${with_base[@]}" --preset sanitize --shape 1,8,1,128,2,1000 \
          --shape 1,4,3,64,1,300 --causal all --dtype all --seeds 1 --quiet
      done
      for cfg in key_warps=2,block_m=32 key_warps=1,block_m=64,stages=2 combine=kernel; do
        cfg=${base:+$base,}$cfg
        step "check sanitize ($cfg)" 40 "check-sanitize-${cfg//[=,]/_}.txt" "$BIN" check --impl splitkv --config "$cfg" \
          --preset sanitize --shape 1,8,1,128,2,1000 --shape 1,4,3,64,1,300 --causal all --dtype all --seeds 1 --quiet
      done
      [ "${SKIP_MMA:-0}" = 1 ] || step "check grid (mma, 1 seed)" 100 check-grid-mma.txt "$BIN" check --preset grid \
        --impl mma --seeds 1 --quiet
      step "check grid (splitkv ${base}, 1 seed)" 150 check-grid-splitkv.txt "$BIN" check --preset grid --impl splitkv \
        "${with_base[@]}" --seeds 1 --quiet
      step "check decode subset (auto)" 60 check-decode-auto.txt "$BIN" check "${sweep_shapes[@]}" --dtype bf16 \
        --seeds 1 ;;
    sweep)
      step "bench decode subset (auto, planner of this build)" 60 sweep-auto.txt "$BIN" bench "${sweep_shapes[@]}" \
        --dtype bf16 --peers none --mode graph --reps 15 --no-history --json "$OUT/sweep-auto.json"
      export IMPL=splitkv REPS=15
      export CONFIGS=${SWEEP_CONFIGS:-"default stages=3 stages=2 key_warps=2 block_n=128,stages=2 combine=kernel
        block_m=64,key_warps=1,stages=2"}
      step "lever sweep (splitkv)" 330 sweep.txt scripts/gpu-config-sweep.sh sweep "${sweep_shapes[@]}" --dtype bf16 ;;
    ncu)
      # Nsight Compute on the default splitkv (its caches flushed clean, unlike the bench's
      # memset, which leaves L2 dirty): DRAM bytes and throughput, occupancy, warp stalls.
      for shape in ${NCU_SHAPES:-1,32,1,128,4,32768 1,32,1,128,32,8192}; do
        step "ncu splitkv $shape" 60 "ncu-${shape//,/x}.txt" ncu --clock-control none --section SpeedOfLight \
          --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
          --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,smsp__inst_executed.sum -k regex:evoattn_splitkv -c 1 \
          "$BIN" bench --shape "$shape" --dtype bf16 --impl splitkv --peers none --reps 1 --warmup 1 --no-history
        grep -E "Duration|DRAM Throughput|dram__bytes|lts__t|inst_executed|Achieved Occupancy|Grid Size|Registers Per|Warp Cycles Per Issued|Memory Throughput" "$OUT/ncu-${shape//,/x}.txt" | head -30
      done ;;
    bench)
      for mode in eager graph; do
        step "bench decode ($mode)" 120 "bench-decode-$mode.txt" "$BIN" bench "${sweep_shapes[@]}" --dtype bf16 \
          --peers sdpa-cudnn,sdpa-flash --mode "$mode" --reps 50 --json "$OUT/decode-$mode.json"
      done ;;
    full)
      # The whole decode preset (30 shapes, B=8 no-GQA inputs take the host 10-45 s each), eager.
      step "bench decode preset (eager)" 420 bench-decode-full-eager.txt "$BIN" bench --preset decode --dtype bf16 \
        --peers sdpa-cudnn,sdpa-flash --mode eager --reps 30 --json "$OUT/decode-full-eager.json" ;;
    gputests)
      step "gpu tests (splitkv, host cost, mma)" 120 gpu-tests.txt \
        "$TESTS" --test-threads 1 --nocapture ${GPU_TESTS:-splitkv five_microseconds mma_passes non_default_mma} ;;
  esac
done

echo
for f in "$OUT"/sweep.txt "$OUT"/sweep-auto.txt "$OUT"/bench-decode-*.txt; do
  [ -f "$f" ] || continue
  echo "-- $(basename "$f" .txt)"
  grep -E '^(==|  c[0-9]|case|[0-9]+,)' "$f"
done
[ -f "$OUT/check-grid-splitkv.txt" ] && tail -3 "$OUT/check-grid-splitkv.txt"
echo
echo "==== summary (logs in $OUT, $(($(date +%s) - start)) s in all)"
print_rows
