#!/usr/bin/env bash
# Issue 6 on a host with several GPUs: one tuning run with a worker per GPU, while nvidia-smi
# samples each GPU's utilisation every 500 ms; prints evaluations per worker and the mean
# utilisation of each GPU over the run.
# usage (GPU machine, repo root): scripts/gpu-tune-multi.sh [IMPL] [BUDGET]   (wgmma, 3m)
set -uo pipefail
BIN=${EVOATTN_BIN:-.gpu/evoattn}
OUT=${OUT:-out}
IMPL=${1:-wgmma}
BUDGET=${2:-3m}
mkdir -p "$OUT"
EVOATTN_CACHE_DIR=$(mktemp -d)
export EVOATTN_CACHE_DIR
trap 'rm -rf "$EVOATTN_CACHE_DIR"' EXIT
unset EVOATTN_BACKEND EVOATTN_NO_TUNED EVOATTN_IMPL
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee "$OUT/gpus.txt"
nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader,nounits -lms 500 > "$OUT/util.csv" &
sampler=$!
# bf16 hd128 causal, 512 to 4k keys (one problem bucket group): where the hand default is least
# settled (short causal tiles measured faster with 64-key blocks and persistent blocks).
timeout 420 "$BIN" tune --impl "$IMPL" --dtype bf16 --causal top-left --gpus all --budget "$BUDGET" \
  --shape 8,16,512,128 --shape 4,16,1024,128 --shape 2,16,2048,128 --shape 1,16,4096,128 \
  --json "$OUT/elite.json" > "$OUT/tune.txt" 2>&1
rc=$?
kill $sampler
"$BIN" tune --show --json "$OUT/store.json" > "$OUT/store.txt" 2>&1
grep -E "^tune:|^baseline|^ *rank|^ +[0-9]+  " "$OUT/tune.txt"
echo "tune exit $rc; stored evaluations: $(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$OUT/store.json")"
python3 - "$OUT/util.csv" <<'PY'
import collections, sys
util = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 3 and parts[2].isdigit():
        util[parts[1]].append(int(parts[2]))
for gpu, u in sorted(util.items()):
    busy = sum(1 for x in u if x > 0)
    print(f"GPU {gpu}: {len(u)} samples, mean utilisation {sum(u) / len(u):.0f}%, busy in {100 * busy / len(u):.0f}% of samples")
PY
