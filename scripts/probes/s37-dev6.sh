# Session 37's sixth device call (#36), what the session's device time had left: where the
# vt_producer limit sits between 4k (gains) and 16k (losses) keys, and whether short causal
# hd64 rows (fa3 grid 1k causal 0.86 against cudnn-fp8) gain from claimed tiles now that V is
# transposed in the kernel (they run on the grid past 512 keys: fp8_persistent_max_keys).
# Prediction: 8k within +-3% (hd64 nearer 0); claimed tiles at hd64 1k causal -5..-10%.
# Carry: [".gpu"].
set -u
BUDGET_S=250
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
export A=$BIN B=$BIN ROUNDS=1 REPS=20 B_ARGS="--impl wgmma --config-on-plan --config vt_producer=1"
step "ab vp 8k" 130 ab-vp-8k.txt scripts/gpu-ab.sh vp8k --shape 2,16,8192,128 --shape 2,32,8192,64 --dtype e4m3 \
  --causal none,top-left
export B_ARGS="--impl wgmma --config-on-plan --config schedule=claimed"
step "ab claimed" 100 ab-claimed.txt scripts/gpu-ab.sh claimed --shape 16,32,1024,64 --shape 8,32,2048,64 --dtype e4m3 \
  --causal top-left
print_rows | cut -c1-110
tail -6 $OUT/ab-vp-8k.txt
tail -4 $OUT/ab-claimed.txt
cat $OUT/gpu.txt
