#!/usr/bin/env python3
"""One normalization backward problem for Nsight Compute: kvtune's tuned backward and PyTorch's
(aten.native_layer_norm_backward for layer_norm), each called --calls times between
cudaProfilerStart and cudaProfilerStop, after a first call that tunes (kvtune) or warms (PyTorch)
outside that window. Inputs are random and rotate over sets that exceed the L2 cache.

usage (on a GPU machine; KVTUNE_LIBRARY names libkvtune.so):
  ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \\
      --section WarpStateStats --section MemoryWorkloadAnalysis \\
      python3 bench/python/profile_norm_backward.py --op layer_norm --dtype bf16 --rows 8192 --cols 4096
"""

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import norm_backward as nb  # noqa: E402  (its helpers: params, saved_stats, kvtune_backward)


def profile_window(calls, n, count):
    """Each of `calls` (fn(i): one call on rotated set i) n times between cudaProfilerStart and
    cudaProfilerStop, on sets 1, 2, ... (mod count): the calls before it tuned and warmed on set 0."""
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for fn in calls:
        for i in range(n):
            fn((i + 1) % count)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="layer_norm", choices=sorted(nb.MODE))
    parser.add_argument("--dtype", default="bf16", choices=sorted(nb.DT))
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--rotate-mib", type=float, default=256)
    args = parser.parse_args()

    dtype = nb.DT[args.dtype]
    per_set = 3 * args.rows * args.cols * torch.tensor([], dtype=dtype).element_size()
    count = max(1, math.ceil(args.rotate_mib * 2**20 / per_set))
    xs = [(torch.randn(args.rows, args.cols, device="cuda") * 2 + 0.5).to(dtype) for _ in range(count)]
    dys = [torch.randn(args.rows, args.cols, device="cuda").to(dtype) for _ in range(count)]
    w, b = nb.params(args.op, args.cols, dtype)
    stats = [nb.saved_stats(args.op, x) for x in xs]
    tstats = [torch.ops.aten.native_layer_norm(x, [args.cols], w, b, nb.EPS)[1:] for x in xs] \
        if args.op == "layer_norm" else None

    def ours(i):
        nb.kvtune_backward(args.op, xs[i], dys[i], w, b, *stats[i])

    def theirs(i):
        mean, rstd = tstats[i]
        torch.ops.aten.native_layer_norm_backward(dys[i], xs[i], [args.cols], mean, rstd, w, b, [True, True, True])

    calls = [ours] + ([theirs] if args.op == "layer_norm" else [])
    for fn in calls:
        fn(0)  # kvtune tunes here, outside the profiled window
    profile_window(calls, args.calls, count)


if __name__ == "__main__":
    main()
