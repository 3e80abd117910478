#!/usr/bin/env bash
# Issue 6 on one GPU, in one device call (under 9 minutes): (a) bench the mma kernel on a
# 4-shape set with the hand defaults, (b) tune the mma levers on those shapes, (c) bench again
# (the planner now reads the store), (d) planted faults (out-of-bounds write, infinite loop,
# broken source) through the scripted proposer, (e) kill -9 mid-run + --resume. Logs and
# JSON go to $OUT; a short table is printed last.
# usage (GPU machine, repo root): scripts/gpu-tune-check.sh
#   EVOATTN_BIN (default .gpu/evoattn), GPU_TESTS (default .gpu/gpu-tests), TUNE_BUDGET (4m)
set -uo pipefail
BIN=${EVOATTN_BIN:-.gpu/evoattn}
GPU_TESTS=${GPU_TESTS:-.gpu/gpu-tests}
OUT=${OUT:-out}
BUDGET=${TUNE_BUDGET:-4m}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
# A fresh kernel cache and store, so "before" is the defaults and the store holds this run only.
EVOATTN_CACHE_DIR=$(mktemp -d)
export EVOATTN_CACHE_DIR
trap 'rm -rf "$EVOATTN_CACHE_DIR"' EXIT
unset EVOATTN_BACKEND EVOATTN_NO_TUNED EVOATTN_IMPL
# bf16, D=128, no mask; one shape per Sq bucket (2^10 .. 2^13).
SHAPES=(--shape 4,16,1024,128 --shape 2,16,2048,128 --shape 1,16,4096,128 --shape 1,16,8192,128)
BENCH=(bench --impl mma --dtype bf16 "${SHAPES[@]}" --peers none --reps 100 -v)
summary=()
note() { summary+=("$1"); echo "== $1"; }
started=$SECONDS

nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/gpu.txt"
timeout 120 "$BIN" "${BENCH[@]}" --json "$OUT/before.json" 2>&1 | tee "$OUT/bench-before.txt"
note "(a) bench before: exit ${PIPESTATUS[0]}"

timeout 360 "$BIN" tune --impl mma --dtype bf16 "${SHAPES[@]}" --budget "$BUDGET" --generations 40 \
  --json "$OUT/elite.json" 2>&1 | tee "$OUT/tune.txt"
note "(b) tune ($BUDGET budget): exit ${PIPESTATUS[0]}; $(grep -E '^tune: mma.*generations' "$OUT/tune.txt")"
note "    best: $(grep -A1 '^rank' "$OUT/tune.txt" | tail -1); $(grep '^baseline' "$OUT/tune.txt")"

timeout 120 "$BIN" "${BENCH[@]}" --json "$OUT/after.json" 2>&1 | tee "$OUT/bench-after.txt"
note "(c) bench after: exit ${PIPESTATUS[0]}"
"$BIN" info > "$OUT/info-after.txt" 2>&1
note "planner: $(grep '^configs:' "$OUT/info-after.txt")"
cp "$EVOATTN_CACHE_DIR/tune.sqlite" "$OUT/" 2>/dev/null
"$BIN" tune --show > "$OUT/store.txt" 2>&1

# (d) and (e): the GPU tests, each with its own cache dir and store.
export EVOATTN_BIN="$BIN" EVOATTN_PROPOSER_FIXTURE="$PWD/crates/evoattn-cli/tests/fixtures/planted-faults-proposer.sh"
timeout 150 "$GPU_TESTS" tuning_records_planted_faults --test-threads 1 --nocapture > "$OUT/planted-faults.txt" 2>&1
note "(d) planted faults: exit $?, $(grep -E '^test result' "$OUT/planted-faults.txt")"
timeout 150 "$GPU_TESTS" kill_9_mid_tuning --test-threads 1 --nocapture > "$OUT/kill-resume.txt" 2>&1
note "(e) kill -9 + resume: exit $?, $(grep -E '^test result' "$OUT/kill-resume.txt")"

echo
echo "== gpu-tune-check: $((SECONDS - started)) s; before/after (bench medians, mma, bf16 D=128)"
python3 - "$OUT/before.json" "$OUT/after.json" "$OUT/bench-after.txt" <<'PY'
import json, statistics, sys
def medians(path):
    try:
        record = json.load(open(path))
    except (OSError, ValueError) as e:
        return {}
    out = {}
    for r in record["results"]:
        c = r["case"]
        out[f'{c["b"]},{c["h"]},{c["sq"]},{c["d"]}'] = (statistics.median(r["ours"]["samples_us"]), r["ours"]["name"])
    return out
before, after = medians(sys.argv[1]), medians(sys.argv[2])
origin = {}
for line in open(sys.argv[3], errors="replace"):
    if line.startswith("config of ours for "):
        shape, rest = line[len("config of ours for "):].split(" ", 1)
        # `tuned store (levers...)`: the origin, without the levers (which may wrap).
        origin[shape] = rest.split(": ", 1)[1].split(" (")[0].strip()
print(f'{"shape":<16} {"before_us":>10} {"after_us":>10} {"speedup":>8}  after: config from')
for shape, (b, _) in before.items():
    a = after.get(shape, (float("nan"), ""))[0]
    print(f"{shape:<16} {b:>10.1f} {a:>10.1f} {b / a:>7.3f}×  {origin.get(shape, '?')}")
PY
printf '%s\n' "${summary[@]}"
