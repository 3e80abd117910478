# Session 29, device call 10 (#35): one wgmma lever at a time on the planner's configs of the
# failing seed rows (graph, 40 samples, same machine), for the next session's short list.
set -u
OUT=${OUT:-out}
export EVOATTN_BIN=.gpu/evoattn
ON_PLAN=1 REPS=40 CONFIGS="default schedule=grid o_staging=registers ring_test=0 lazy_rescale=1 exp2_poly=8 q_in_regs=1 default" \
  timeout 400 scripts/gpu-config-sweep.sh levers --shape 4,8,512,64 --shape 4,16,512,64 --shape 8,16,512,64 --dtype f16 --causal none,top-left > $OUT/levers.txt 2>&1
tail -n 18 $OUT/levers.txt
