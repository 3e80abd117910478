#!/usr/bin/env bash
# Screens lever sets of one kernel (IMPL, default wgmma) on a problem set: one graph-mode bench per config (no peers), then a
# table of medians per case with the fastest config marked. Lever screening only: a claim
# against a peer needs a same-run bench.
# usage: [IMPL=splitkv] [REPS=20] CONFIGS="default block_n=64 consumer_warpgroups=1,pingpong=0" \
#          scripts/gpu-config-sweep.sh NAME [bench args...]
# A config the kernel refuses for one case (validate) aborts that config's whole bench: sweep
# problems one head dim at a time. ON_PLAN=1 applies each config on top of the planner's
# per-problem config (`--config-on-plan`) instead of the head dim's default.
set -u
BIN=${EVOATTN_BIN:-target/release/evoattn}
OUT=${OUT:-out}
name=$1; shift
i=0
failed=0
for cfg in ${CONFIGS:?CONFIGS lists lever sets, default for none}; do
  extra=(); [ "$cfg" != default ] && extra=(--config "$cfg")
  [ "${ON_PLAN:-0}" = 1 ] && [ "$cfg" != default ] && extra+=(--config-on-plan)
  $BIN bench "$@" --impl "${IMPL:-wgmma}" "${extra[@]}" --mode graph --reps "${REPS:-20}" --peers none --no-history \
    --json "$OUT/$name-$i.json" > "$OUT/$name-$i.txt" 2>&1
  rc=$?
  if ((rc != 0)); then
    echo "config $cfg: exit $rc ($name-$i.txt): $(grep -m1 -i 'error' "$OUT/$name-$i.txt" || tail -1 "$OUT/$name-$i.txt")"
    failed=1
  fi
  i=$((i + 1))
done
python3 - "$OUT" "$name" $CONFIGS <<'PY'
import json, os, statistics, sys
out, name, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = {}
for i, cfg in enumerate(configs):
    path = f"{out}/{name}-{i}.json"
    if not os.path.exists(path):
        continue
    for r in json.load(open(path))["results"]:
        c = r["case"]
        key = f'{c["b"]},{c["h"]},{c["sq"]},{c["d"]},{c["hkv"]},{c["sk"]} {c["dtype"]} {c["causal"]}'
        s = r["ours"].get("samples_us") or []
        rows.setdefault(key, {})[i] = statistics.median(s) if s and r["ours"]["correct"] else None
print(f"== {name}: median us per config; * = fastest")
for i, cfg in enumerate(configs):
    print(f"  c{i}: {cfg}")
print(f'{"case":34}' + "".join(f"{'c%d' % i:>9}" for i in range(len(configs))))
for key, meds in rows.items():
    ok = [m for m in meds.values() if m is not None]
    best = min(ok) if ok else None
    cells = []
    for i in range(len(configs)):
        m = meds.get(i)
        cells.append(f"{'-' if m is None else ('%.1f' % m) + ('*' if m == best else ' '):>9}")
    print(f"{key:34}" + "".join(cells))
PY
exit "$failed"
