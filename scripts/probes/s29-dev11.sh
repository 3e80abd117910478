# Session 29, device call 11: the final build's correctness and sanitizers (the planner's kernels
# on the grid, the sanitize preset; `resident` on the seed preset and odd shapes with every lever).
set -u
BUDGET_S=560
source scripts/lib-step.sh
R="--impl resident"
step "check grid" 240 check-grid.txt "$BIN" check --preset grid
step "memcheck sanitize" 120 memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize
step "racecheck sanitize" 150 racecheck.txt "$SANITIZER" --tool racecheck --error-exitcode 9 "$BIN" check --preset sanitize
step "resident seed" 40 resident-seed.txt "$BIN" check --preset seed $R
step "resident memcheck" 60 resident-memcheck.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check $R \
  --shape 2,8,200,64,2,450 --shape 4,8,512,64 --shape 2,4,100,128,4,250 --causal all
print_rows
