# Session 36's seventh device call (#36): the H100's MUFU.EX2 rate as one warp per SMSP sees it
# (the ping-pong's softmax runs one consumer warp per SMSP at a time), against two and four
# warps (scripts/probes/mufu-rate.cu). Prediction: 8 cycles a warp MUFU (16 ex2 a clock an SM)
# with 2 or more warps; if one warp alone gets much less, the E4M3 softmax's 1289 cycles for 64
# ex2 a thread (vs 512 at 8 cycles) are the lone warp's MUFU rate. Carry: none.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
/usr/local/cuda/bin/nvcc -arch=sm_90a -O3 -o /tmp/mufu scripts/probes/mufu-rate.cu && /tmp/mufu | tee $OUT/mufu-rate.md
/usr/local/cuda/bin/cuobjdump -sass /tmp/mufu | grep -c MUFU.EX2
