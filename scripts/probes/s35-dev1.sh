# Session 35's first device call: the Python package's GPU tests with a wheel built from the
# clean tree (target/wheels), then s34-dev8.sh (oracle selfcheck, the timer controls on the seed
# preset and the hd128 fa3 rows), then as much of s35-racecheck-e4m3.sh as the call has left.
# Carry: [".gpu", "target/wheels"].
set -u
t0=$(date +%s)
OUT=${OUT:-out}
timeout 150 scripts/gpu-python.sh install tests 2>&1 | tail -3
bash scripts/probes/s34-dev8.sh
left=$((580 - ($(date +%s) - t0)))
echo "== racecheck with ${left} s left"
((left > 40)) && BUDGET_S=$left bash scripts/probes/s35-racecheck-e4m3.sh
