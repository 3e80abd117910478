# Session 29, device call 7 (#35): where a seed row's time goes, by varying one dimension of
# 8,16,512,64 at a time (keys 128..512, then query rows 128..512) for `resident` (three
# consumers), the planner's wgmma kernel and cuDNN in the same run: the slope is the cost of a
# key block (or of a query tile) across the GPU, the intercept what no work removes.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
K="--shape 8,16,512,64,16,128 --shape 8,16,512,64,16,256 --shape 8,16,512,64,16,384 --shape 8,16,512,64"
Q="--shape 8,16,128,64 --shape 8,16,256,64 --shape 8,16,384,64"
for imp in "--impl resident --config-on-plan --config consumer_warpgroups=2" "--impl wgmma"; do
  $B bench $K $Q --dtype f16 $imp --peers sdpa-cudnn --mode graph --reps 40 --no-history 2>&1 | grep -E "^8,16" | cut -c1-140
done
