# Session 36's twelfth device call (#36): does tensor work beside the softmax slow it? Prediction
# if the hypothesis holds (perf log session 36): warpgroup 1's round ~750 cycles with warpgroup 0
# idle, ~1000+ with wgmma running beside it. Carry: none.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
/usr/local/cuda/bin/nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o /tmp/beside scripts/probes/wgmma-beside.cu 2>&1 | tail -5 && /tmp/beside | tee $OUT/wgmma-beside.md
