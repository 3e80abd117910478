#!/usr/bin/env bash
# The fa3-grid rows (ANCHORS.md: bf16, B*S = 16k tokens, H*D = 2048, S = 512..16k, both
# masks) of the head dims given, against the peers, in one `evoattn bench` run per call so
# every ratio is same-run; the record goes to $OUT/fa3-grid-d<dims>.json.
# usage: PEERS=sdpa-cudnn,fa4 scripts/gpu-fa3-grid.sh [BIN] 64 128
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib-step.sh
BIN=${1:-$BIN}
shift
PEERS=${PEERS:-sdpa-cudnn,fa4}
REPS=${REPS:-30}
shapes=()
for d in "$@"; do shapes+=($(fa3_rows "$d")); done
name="fa3-grid-d$(IFS=-; echo "$*")"
"$BIN" bench "${shapes[@]}" --dtype bf16 --causal none,top-left --peers "$PEERS" --reps "$REPS" \
    --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.txt" | grep -vE '^\[[0-9]+/'
