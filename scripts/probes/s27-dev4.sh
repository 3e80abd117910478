# Session 27, device call 4 (issue 32): the transformers example (logits against sdpa, prefill
# timed against sdpa in the same run) and the fa3 grid in eager mode with the Python path beside
# the Rust path and cuDNN, on this session's build.
set -u
OUT=${OUT:-out}; B=.gpu/evoattn
export EVOATTN_BIN=$B
scripts/gpu-python.sh install transformers > $OUT/gpu-python.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PWD/python
timeout 420 $B bench --preset fa3-grid --peers sdpa-cudnn,evoattn-torch --json $OUT/fa3-eager.json > $OUT/fa3-eager.txt 2>&1
echo "fa3 exit $?" >> $OUT/fa3-eager.txt
tail -12 $OUT/transformers.txt; grep -E "^(shape|[0-9]+,)|exit" $OUT/fa3-eager.txt | head -50
