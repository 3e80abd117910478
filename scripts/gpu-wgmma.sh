#!/usr/bin/env bash
# The `wgmma` kernel on one Hopper GPU, in one device call: correctness (every pipeline, the
# grid, negative and non-default scales), compute-sanitizer, an A/B against a base build, a
# lever sweep on the seed shapes, and same-run benches against SDPA. Logs and JSON go to $OUT;
# a short table is printed last.
#
# usage (on the GPU machine, from the repo root; no Rust needed):
#   OUT=/some/dir [BUDGET_S=560] scripts/gpu-wgmma.sh [steps...]
# steps: correct scale sanitize ab seedsweep shortsweep bench fa3 gputests (default: correct scale sanitize)
# expects .gpu/evoattn; ab also .gpu/evoattn-base (the build to compare against); gputests
# .gpu/gpu-tests. SEED_CONFIGS overrides the seedsweep's lever sets; PEERS the bench steps' peers
# (default sdpa-cudnn,sdpa-flash; add fa4 after scripts/gpu-fa4-install.sh, its PYTHONPATH exported);
# FA3_DIMS the fa3 step's head dims (default 64 128 256).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUDGET_S=${BUDGET_S:-560}
source scripts/lib-step.sh
steps=${*:-correct scale sanitize}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv > "$OUT/gpu.txt" 2>&1

seed_big=(--shape 4,8,512,64 --shape 4,16,512,64 --shape 8,16,512,64)
PEERS=${PEERS:-sdpa-cudnn,sdpa-flash}

for step_name in $steps; do
  case $step_name in
    correct)
      step check-wgmma 300 check-wgmma.txt scripts/check-wgmma "$BIN"
      step grid 240 grid-wgmma.txt "$BIN" check --preset grid --impl wgmma --quiet ;;
    scale)
      # The kernels reduce raw scores and scale inside the exponent: a negative scale turns the
      # max into a min. Every kernel, the non-warp-specialised wgmma loop too.
      for scale in -0.3 0.7; do
        step "scale $scale wgmma" 60 "scale$scale-wgmma.txt" "$BIN" check --preset sanitize --impl wgmma --scale "$scale" --quiet
        step "scale $scale wgmma tma-loop" 60 "scale$scale-wgmma-loop.txt" \
          "$BIN" check --preset sanitize --impl wgmma --config "pipeline=tma" --scale "$scale" --quiet
        for imp in mma splitkv; do
          step "scale $scale $imp" 60 "scale$scale-$imp.txt" "$BIN" check --preset sanitize --impl $imp --scale "$scale" --quiet
        done
      done ;;
    sanitize)
      for tool in memcheck racecheck; do
        step "$tool wgmma" 150 "sanitize-$tool.txt" "$SANITIZER" --tool $tool --error-exitcode 9 \
          "$BIN" check --preset sanitize --impl wgmma --seeds 1 --quiet
      done ;;
    ab)
      # hd64 (the MUFU-heavy head dim) and the seed shapes, where a softmax change shows most;
      # hd128 at 4k and 16k as the check that the compute-bound rows do not lose.
      A=.gpu/evoattn-base B=$BIN step ab-hd64 320 ab-hd64.txt scripts/gpu-ab.sh ab-hd64 $(fa3_rows 64) \
        --dtype bf16 --causal none,top-left --impl wgmma
      A=.gpu/evoattn-base B=$BIN step ab-seed 120 ab-seed.txt scripts/gpu-ab.sh ab-seed --preset seed --impl wgmma
      A=.gpu/evoattn-base B=$BIN step ab-hd128 120 ab-hd128.txt scripts/gpu-ab.sh ab-hd128 \
        --shape 4,16,4096,128 --shape 1,16,16384,128 --dtype bf16 --causal none,top-left --impl wgmma ;;
    seedsweep)
      # The seed shapes with B*H >= 32 (one or more full waves of 128-row tiles), where the
      # planner's default trails cuDNN; lever sets written out in full (an override applies to
      # the head dim's default, not to the planner's choice).
      P="block_n=128,stages=3,schedule=persistent"
      W1="consumer_warpgroups=1,pipeline=overlap,block_n=128"
      configs=${SEED_CONFIGS:-"default schedule=persistent schedule=grid $P block_n=128,schedule=persistent $W1 $W1,schedule=persistent $W1,stages=3,schedule=persistent block_n=64,schedule=persistent"}
      CONFIGS=$configs step seedsweep 200 seedsweep.txt scripts/gpu-config-sweep.sh seedsweep "${seed_big[@]}" \
        --dtype f16 --causal none,top-left ;;
    shortsweep)
      # Unmasked fa3-grid rows at 512 and 1k keys (hd64, hd128): does the seed sweep's 128-key
      # block on persistent blocks carry over to many heads?
      configs="default block_n=128,schedule=persistent block_n=128,stages=3,schedule=persistent block_n=192,schedule=persistent"
      for d in 64 128; do
        CONFIGS=$configs step "shortsweep hd$d" 120 "shortsweep-d$d.txt" scripts/gpu-config-sweep.sh "shortsweep-d$d" \
          $(fa3_rows $d 512 1024) --dtype bf16
      done ;;
    bench)
      step "bench seed eager" 120 bench-seed-eager.txt "$BIN" bench --preset seed --mode eager --reps 60 \
        --peers "$PEERS" --json "$OUT/seed-eager.json"
      step "bench seed graph" 120 bench-seed-graph.txt "$BIN" bench --preset seed --mode graph --reps 60 \
        --peers "$PEERS" --json "$OUT/seed-graph.json"
      step "bench fa3 hd64" 200 bench-fa3-hd64.txt "$BIN" bench $(fa3_rows 64) --dtype bf16 --causal none,top-left \
        --reps 30 --peers "$PEERS" --json "$OUT/fa3-hd64.json" ;;
    fa3)
      # The whole fa3 grid (36 shapes) against the peers in one bench run: issue 4's table.
      step "bench fa3 grid" 560 bench-fa3-grid.txt scripts/gpu-fa3-grid.sh "$BIN" ${FA3_DIMS:-64 128 256} ;;
    gputests)
      step gputests 300 gputests.txt "$TESTS" --test-threads 1 ;;
    *)
      echo "unknown step $step_name (correct scale sanitize ab seedsweep shortsweep bench fa3 gputests)"
      exit 2 ;;
  esac
done

for f in "$OUT"/ab-*.txt "$OUT"/seedsweep.txt "$OUT"/shortsweep-d*.txt; do
  [ -f "$f" ] && grep -h -A40 '^==' "$f"
done
echo
print_rows
