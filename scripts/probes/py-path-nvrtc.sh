# Which NVRTC each path compiles with, and the long rows' Python-path gap with both on one NVRTC.
scripts/gpu-python.sh install > /dev/null; export PYTHONPATH=/tmp/evoattn-site:$PWD/python
.gpu/evoattn info 2>&1 | grep -i nvrtc
python3 -c "import torch, evoattn; print('python path NVRTC:', evoattn._evoattn.nvrtc())"
lib=$(.gpu/evoattn info 2>&1 | grep -i nvrtc | grep -o '/[^ )]*libnvrtc[^ )]*' | head -1); echo "pinning EVOATTN_NVRTC=$lib"
EVOATTN_NVRTC=$lib python3 -c "import torch, evoattn; print('pinned:', evoattn._evoattn.nvrtc())"
EVOATTN_NVRTC=$lib .gpu/evoattn bench --shape 2,16,8192,128 --shape 1,8,16384,256 --dtype bf16 --peers self,evoattn-torch 2>&1 | grep -E "^[0-9]"
.gpu/evoattn bench --shape 2,16,8192,128 --shape 1,8,16384,256 --dtype bf16 --peers self,evoattn-torch 2>&1 | grep -E "^[0-9]"
