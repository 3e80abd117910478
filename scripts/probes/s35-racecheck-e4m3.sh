# #36's sanitizer target, unfinished in session 34 (racecheck over `check --preset sanitize
# --dtype e4m3` ended no case in 80 s): the same 18 cases one shape and head dim at a time, so
# each step reports on its own and a slow one does not hide the others; memcheck over the whole
# preset after. Carry: [".gpu"].
set -u
BUDGET_S=${BUDGET_S:-580}
source scripts/lib-step.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
RACE=("$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9)
for d in 64 128 256; do
  for shape in 1,2,17,$d 1,4,130,$d,1,77; do
    step "racecheck e4m3 $shape" 80 race-$shape.txt "${RACE[@]}" "$BIN" check --shape $shape --dtype e4m3 --causal all --layout bshd
  done
done
step "memcheck e4m3 sanitize" 90 memcheck-e4m3.txt "$SANITIZER" --tool memcheck --error-exitcode 9 "$BIN" check --preset sanitize --dtype e4m3
print_rows | cut -c1-100
grep -h -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/race-*.txt $OUT/memcheck-e4m3.txt
cat $OUT/gpu.txt
(cd $OUT && tar cJf ../x.tar.xz . && rm -rf ./* && mv ../x.tar.xz s35-racecheck-e4m3.tar.xz)
