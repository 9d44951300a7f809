"""Prints the Triton kernels torch.compile generates for three small normalize problems of the
benchmark (standardize f32 1024x128 and 8192x512, rmsnorm f16 262144x32), to compare their design
with kvtune's. Run on the GPU machine:

    TORCH_LOGS=output_code python3 bench/peers/torch_compile_kernels.py 2> kernels.log
"""
import torch
import torch.nn.functional as F


def standardize(x):
    return (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-5)


def rmsnorm(x, w):
    return F.rms_norm(x, (x.shape[1],), w, 1e-5)


for rows, cols, dtype, op in [(1024, 128, torch.float32, standardize), (8192, 512, torch.float32, standardize),
                              (262144, 32, torch.float16, rmsnorm)]:
    torch._dynamo.reset()
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    compiled = torch.compile(op, dynamic=False)
    compiled(x) if op is standardize else compiled(x, torch.randn(cols, device="cuda", dtype=dtype))
    torch.cuda.synchronize()
