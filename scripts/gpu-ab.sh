#!/usr/bin/env bash
# Same-machine A/B of two evoattn builds on one problem set: ROUNDS rounds of A then B then B
# then A (ABBA, so drift over the run cancels), graph mode (MODE=eager for launches as a caller
# sees them), no peers; then per case the median
# of each side's per-round medians and B's change. A kernel-only comparison for screening a
# change; a claim against a peer needs a same-run bench with peers.
# usage: A=.gpu/evoattn-base B=.gpu/evoattn [ROUNDS=2] [REPS=20] scripts/gpu-ab.sh NAME [bench args...]
# A_ARGS / B_ARGS add bench arguments to one side, e.g. one binary against itself with a lever:
#   A=.gpu/evoattn B=.gpu/evoattn B_ARGS="--config-on-plan --config cross_tile=1" scripts/gpu-ab.sh ...
set -u
OUT=${OUT:-out}
name=$1; shift
rounds=${ROUNDS:-2}
runs=()
failed=0
for r in $(seq 1 "$rounds"); do
  for side in A B B A; do
    bin=${!side}
    side_args=${side}_ARGS
    tag="$name-$side-$r-${#runs[@]}"
    # shellcheck disable=SC2086 # the side's extra arguments split on spaces
    "$bin" bench "$@" ${!side_args:-} --mode "${MODE:-graph}" --reps "${REPS:-20}" --peers none --no-history --json "$OUT/$tag.json" \
      > "$OUT/$tag.txt" 2>&1
    rc=$?
    if ((rc != 0)); then
      # Say why in the output itself: the run's log may not come back from the device.
      echo "$side round $r: exit $rc ($tag.txt): $(grep -m1 -i 'error' "$OUT/$tag.txt" || tail -1 "$OUT/$tag.txt")"
      failed=1
    fi
    runs+=("$side:$OUT/$tag.json")
  done
done
python3 - "$name" "${runs[@]}" <<'PY'
import json, os, statistics, sys
name, runs = sys.argv[1], sys.argv[2:]
med = {}  # case -> side -> [median per run]
bad = set()
for run in runs:
    side, path = run.split(":", 1)
    if not os.path.exists(path):
        continue
    for r in json.load(open(path))["results"]:
        c = r["case"]
        key = f'{c["b"]},{c["h"]},{c["sq"]},{c["d"]},{c["hkv"]},{c["sk"]} {c["dtype"]} {c["causal"]}'
        if not r["ours"]["correct"]:
            bad.add((key, side))
        s = r["ours"].get("samples_us") or []
        if s:
            med.setdefault(key, {}).setdefault(side, []).append(statistics.median(s))
print(f"== A/B {name}: median of per-run medians (us); change = B/A - 1; runs per side in brackets")
print(f'{"case":36}{"A":>10}{"B":>10}{"change":>9}  spread A, B')
for key, sides in med.items():
    a, b = sides.get("A", []), sides.get("B", [])
    if not a or not b:
        print(f"{key:36} missing a side")
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    flags = "".join(f" INCORRECT({s})" for s in "AB" if (key, s) in bad)
    print(f"{key:36}{ma:10.2f}{mb:10.2f}{100 * (mb / ma - 1):+8.1f}%  {min(a):.2f}-{max(a):.2f}, {min(b):.2f}-{max(b):.2f} [{len(a)},{len(b)}]{flags}")
PY
exit "$failed"
