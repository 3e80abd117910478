"""One backward of 4,16,4096,128 bf16 (unmasked) through evoattn's autograd: the launch ncu
profiles (s42-dev4.sh). A first call compiles and warms up; the second is profiled."""
import torch
import evoattn

q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
g = torch.randn_like(q)
for _ in range(2):
    o = evoattn.attention(q, k, v)
    torch.autograd.grad(o, (q, k, v), g)
torch.cuda.synchronize()
