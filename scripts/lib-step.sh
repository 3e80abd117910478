# Sourced by the device scripts from the repo root, after they set BUDGET_S. Sets their common
# environment: BIN (.gpu/evoattn), TESTS (.gpu/gpu-tests), OUT, SANITIZER, PYTHONPATH for the
# oracle. Then `step NAME BUDGET_S LOG CMD...` runs CMD with stdout+stderr to
# $OUT/LOG, cut at BUDGET_S or at the run's deadline (BUDGET_S seconds after sourcing, the
# caller's BUDGET_S), whichever is first, and records "NAME | exit | seconds | last line" in
# `rows` for the caller's summary table. `fa3_rows D [S...]` prints the bench flags of the
# fa3-grid rows of head dim D (bf16 grid: B*S = 16k tokens, H*D = 2048), at lengths S (default
# all six, 512..16k).
BIN=${EVOATTN_BIN:-.gpu/evoattn}
TESTS=${EVOATTN_GPU_TESTS:-.gpu/gpu-tests}
OUT=${OUT:-out}
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export EVOATTN_BIN="$BIN"
start=$(date +%s)
rows=()

fa3_rows() {
    local d=$1
    shift
    for s in ${*:-512 1024 2048 4096 8192 16384}; do printf -- '--shape %s ' "$((16384 / s)),$((2048 / d)),$s,$d"; done
}

step() {
    local name=$1 budget=$2 log=$3
    shift 3
    local left=$((BUDGET_S - ($(date +%s) - start)))
    if ((left < 10)); then
        rows+=("$name | skipped | 0 s | run deadline reached")
        return
    fi
    ((budget > left)) && budget=$left
    echo "== $name (budget ${budget} s): $*"
    local t0=$(date +%s)
    timeout --kill-after=5 "$budget" "$@" > "$OUT/$log" 2>&1
    local rc=$?
    local took=$(($(date +%s) - t0))
    local status="exit $rc"
    ((rc == 124 || rc == 137)) && status="CUT at ${budget} s"
    local last
    last=$(grep -v '^\s*$' "$OUT/$log" | tail -1 | cut -c1-110)
    rows+=("$name | $status | ${took} s | $last")
    echo "   $status in ${took} s: $last"
}

# The summary table of every step run so far.
print_rows() {
    printf '%s\n' "${rows[@]}" | (column -t -s '|' 2>/dev/null || cat)
}
