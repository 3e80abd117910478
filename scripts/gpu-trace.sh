#!/usr/bin/env bash
# One device call for `evoattn trace`: its GPU test, memcheck of a traced launch, the timeline of
# the planner's kernel on the given rows (tables to $OUT/trace-tables.txt, marks to
# $OUT/traces.tar.xz), and what the marks cost (bench, graph, trace=0 against trace=1 on the
# same binary). Prints the summary table and the trace tables last.
# usage: BUDGET_S=300 scripts/gpu-trace.sh "32,32,512,64" "1,32,16384,64:causal" ...
set -u
BUDGET_S=${BUDGET_S:-300}
source scripts/lib-step.sh
mkdir -p "$OUT/traces"
step "gpu test: wgmma_trace" 120 test-trace.txt "$TESTS" --exact wgmma_trace_marks_every_key_block_on_hopper --nocapture
step "memcheck: trace" 90 memcheck-trace.txt "$SANITIZER" --tool memcheck --error-exitcode 9 \
  "$BIN" trace --impl wgmma --shape 2,4,1024,64 --warmup 0
: > "$OUT/trace-tables.txt"
for row in "$@"; do
  shape=${row%%:*}
  causal=none
  [[ $row == *:* ]] && causal=${row##*:}
  tag="${shape//,/x}-$causal"
  step "trace $tag" 60 "trace-$tag.txt" "$BIN" trace --shape "$shape" --dtype bf16 --causal "$causal" \
    --out "$OUT/traces/$tag.json"
  cat "$OUT/trace-$tag.txt" >> "$OUT/trace-tables.txt"
  step "cost $tag" 90 "cost-$tag.txt" bash -c "for c in trace=0 trace=1 trace=1 trace=0; do \
    $BIN bench --shape $shape --dtype bf16 --causal $causal --impl wgmma --config-on-plan --config \$c --mode graph \
    --reps 20 --peers none --no-history 2>&1 | grep -E \"^$shape \" | sed \"s/^/\$c /\"; done"
done
tar cJf "$OUT/traces.tar.xz" -C "$OUT" traces && rm -rf "$OUT/traces"
print_rows
echo
cat "$OUT/trace-tables.txt"
