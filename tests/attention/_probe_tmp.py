import os, sys
if len(sys.argv) < 2: os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
@triton.jit
def cvt(x_ptr, y_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(y_ptr + o, tl.load(x_ptr + o).to(y_ptr.dtype.element_ty))
dev = "cpu" if len(sys.argv) < 2 else "cuda"
x = torch.tensor([31.6, 1.0625, 17.0, 232.0, 1e-3, 126.3, 0.0009765625*0.75, 448.0, 15.9], device=dev)
x = torch.cat([x, torch.zeros(16 - x.numel(), device=dev)])
y = torch.empty(16, dtype=torch.float8_e4m3fn, device=dev)
cvt[(1,)](x, y, N=16)
print("triton:", y.float()[:9].tolist()); print("torch: ", x.to(torch.float8_e4m3fn).float()[:9].tolist())
