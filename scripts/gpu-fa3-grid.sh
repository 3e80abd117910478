#!/usr/bin/env bash
# The fa3-grid rows (ANCHORS.md: bf16, B*S = 16k tokens, H*D = 2048, S = 512..16k, both
# masks) of the head dims given, against the peers, in one `evoattn bench` run per call so
# every ratio is same-run; the record goes to $OUT/fa3-grid-d<dims>.json.
# usage: PEERS=sdpa-cudnn,fa4 scripts/gpu-fa3-grid.sh [BIN] 64 128
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=${1:-.gpu/evoattn}
shift
OUT=${OUT:-out}
PEERS=${PEERS:-sdpa-cudnn,fa4}
REPS=${REPS:-30}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
shapes=()
for d in "$@"; do
    for s in 512 1024 2048 4096 8192 16384; do shapes+=(--shape "$((16384 / s)),$((2048 / d)),$s,$d"); done
done
name="fa3-grid-d$(IFS=-; echo "$*")"
"$BIN" bench "${shapes[@]}" --dtype bf16 --causal none,top-left --peers "$PEERS" --reps "$REPS" \
    --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.txt" | grep -vE '^\[[0-9]+/'
