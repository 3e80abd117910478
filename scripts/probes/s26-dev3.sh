# Session 26, device call 3: where does the Python path's long-row gap in the lab come from?
set -u
OUT=${OUT:-out}; B=.gpu/evoattn; S=2,16,8192,128
scripts/gpu-python.sh install > $OUT/install-log.txt 2>&1
export PYTHONPATH=/tmp/evoattn-site:$PWD/python
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 100 > $OUT/clocks.txt &
SMI=$!
run() { echo "== $*"; date +%T.%N; "$@" 2>&1 | grep -E "^(shape|$S|[0-9],)" ; }
{
run $B bench --shape $S --dtype bf16 --peers evoattn-torch
run $B bench --shape $S --dtype bf16 --peers self,evoattn-torch
run $B bench --shape $S --dtype bf16 --peers evoattn-torch,self
run $B bench --shape $S --dtype bf16 --peers evoattn-torch --block 100
echo "== standalone probe"; date +%T.%N
python3 scripts/probes/py-path-kernel-duration.py $S
echo "== standalone probe beside an idle CUDA process"; date +%T.%N
python3 -c "import torch, time; torch.zeros(1, device='cuda'); torch.cuda.synchronize(); time.sleep(40)" &
sleep 8; python3 scripts/probes/py-path-kernel-duration.py $S; wait $!
echo "== rust path alone"; date +%T.%N
$B bench --shape $S --dtype bf16 --peers self 2>&1 | grep -E "^($S|shape)"
} > $OUT/dev3.txt 2>&1
kill $SMI
cat $OUT/dev3.txt
