scripts/gpu-python.sh install > /dev/null; export PYTHONPATH=/tmp/evoattn-site:$PWD/python
python3 crates/evoattn-py/examples/graph_kernel_time.py 4,8,512,64 8,16,512,64
python3 crates/evoattn-py/examples/graph_kernel_time.py --side-stream 4,8,512,64 8,16,512,64
for s in 2,16,8192,128 1,8,16384,256; do .gpu/evoattn check --shape $s --dtype bf16 2>&1 | grep -o "evoattn_[a-z0-9_]*" | head -1; python3 -c "import torch,evoattn; b,h,s_,d=map(int,'$s'.split(',')); q=torch.randn(b,h,s_,d,device='cuda',dtype=torch.bfloat16); print(evoattn.kernel(q,q,q))"; done
.gpu/evoattn bench --shape 2,16,8192,128 --shape 1,8,16384,256 --dtype bf16 --peers evoattn-torch 2>&1 | grep -E "^[0-9]"
.gpu/evoattn bench --shape 2,16,8192,128 --shape 1,8,16384,256 --dtype bf16 --peers sdpa-cudnn,evoattn-torch 2>&1 | grep -E "^[0-9]"
.gpu/evoattn bench --shape 2,16,8192,128 --shape 1,8,16384,256 --dtype bf16 --peers self,evoattn-torch 2>&1 | grep -E "^[0-9]"
