#!/usr/bin/env bash
# One device call for `wgmma` variants (issue 4). VARIANTS lists "HEAD_DIM:LEVERS" entries; for
# each: correctness (small preset plus multi-tile shapes over every dtype/mask/layout), the SASS
# (HGMMA count, no local memory), and a same-run timing against cuDNN in graph mode on the
# fa3-grid shapes of that head dim (B*S = 16k, H*D = 2048) at each S of SEQS, both masks. Then
# the sanitizers on SANITIZE. Every command runs under a timeout: a pipeline deadlock is a
# failure, not a hang. Logs and bench records (time-*.json) go to $OUT/logs.tar.gz (the device
# tool returns few files); a summary is printed last.
# usage (GPU machine, repo root): VARIANTS="128:block_n=176" scripts/gpu-wgmma-pipelines.sh [BIN]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=${1:-.gpu/evoattn}
OUT=${OUT:-out}
LOGS="$OUT/logs"
mkdir -p "$LOGS"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export EVOATTN_CACHE_DIR=${EVOATTN_CACHE_DIR:-$OUT/cache}
VARIANTS=${VARIANTS:-"128:pipeline=pingpong"}
SANITIZE=${SANITIZE:-"pipeline=pingpong"}
STEPS=${STEPS:-"check sass time sanitize"}
REPS=${REPS:-30}
SEQS=${SEQS:-"4096 16384"}
summary=()
note() { summary+=("$1"); echo "== $1"; }
tag() { echo "d${1%%:*}-$(echo "${1#*:}" | tr '=,' '_-')"; }

for step in $STEPS; do
  case $step in
    check)
      for v in $VARIANTS; do
        d=${v%%:*} cfg=${v#*:} log="$LOGS/check-$(tag "$v").txt"
        timeout 300 "$BIN" check --impl wgmma --config "$cfg" --preset small --quiet > "$log" 2>&1
        rc=$?
        timeout 300 "$BIN" check --impl wgmma --config "$cfg" --quiet --dtype all --causal all --layout all \
          --shape "2,4,1000,$d,2,1023" --shape "1,8,257,$d,2,700" --shape "1,2,300,$d,1,129" --shape "1,4,64,$d,4,4097" >> "$log" 2>&1
        note "check $v: exit $rc/$?, $(grep -E 'passed|failed' "$log" | tail -2 | tr '\n' ' ')"
      done ;;
    sass)
      for v in $VARIANTS; do
        dir="$OUT/cubin/$(tag "$v")"
        "$BIN" compile --impl wgmma --arch sm_90a --dtype bf16 --head-dim "${v%%:*}" --config "${v#*:}" --cubin-dir "$dir" > /dev/null 2>&1
        for f in "$dir"/*.cubin; do
          cuobjdump --dump-sass "$f" > "$LOGS/sass-$(basename "$f" .cubin).txt" 2>&1
          note "sass $(basename "$f" .cubin): HGMMA $(grep -c HGMMA "$LOGS/sass-$(basename "$f" .cubin).txt"), LDL/STL $(grep -cE '(LDL|STL)' "$LOGS/sass-$(basename "$f" .cubin).txt")"
        done
      done
      rm -rf "$OUT/cubin" ;;
    time)
      for v in $VARIANTS; do
        d=${v%%:*} h=$((2048 / d)) name=$(tag "$v")
        timeout 400 "$BIN" bench --impl wgmma --config "${v#*:}" $(for s in $SEQS; do echo --shape "$((16384 / s)),$h,$s,$d"; done) \
          --dtype bf16 --causal none,top-left --mode graph --reps "$REPS" --peers sdpa-cudnn \
          --json "$LOGS/time-$name.json" > "$LOGS/time-$name.txt" 2>&1
        note "time $v: exit $?"
        summary+=("$(grep -E '^[0-9]+,' "$LOGS/time-$name.txt" | sed 's/^/   /')")
      done ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN" check --impl wgmma --config "$SANITIZE" \
          --preset sanitize --seeds 1 --quiet > "$LOGS/sanitize-$tool.txt" 2>&1
        note "sanitizer $tool ($SANITIZE): exit $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed' "$LOGS/sanitize-$tool.txt" | tr '\n' ' ')"
      done ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
rm -rf "$EVOATTN_CACHE_DIR"
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
printf '\n######## summary\n'
printf '%s\n' "${summary[@]}"
