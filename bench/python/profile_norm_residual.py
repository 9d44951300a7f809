#!/usr/bin/env python3
"""One fused residual normalization for Nsight Compute: kvtune's fused kernel (s = x + r written,
y = norm(s)) and torch.compile's of the same two lines, each called --calls times between
cudaProfilerStart and cudaProfilerStop, after calls that tune (kvtune) and compile (torch.compile)
outside that window. Inputs are random and rotate over sets that exceed the L2 cache.

usage (on a GPU machine; KVTUNE_LIBRARY names libkvtune.so):
  ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \\
      --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats \\
      python3 bench/python/profile_norm_residual.py --op layer_norm --dtype bf16 --rows 16384 --cols 1024
"""

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import norm_residual as nr  # noqa: E402  (its helpers: fused, params, norm_ref)
import profile_norm_backward as pnb  # noqa: E402  (profile_window)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="layer_norm", choices=["layer_norm", "rms_norm"])
    parser.add_argument("--dtype", default="bf16", choices=sorted(nr.DT))
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--rotate-mib", type=float, default=256)
    args = parser.parse_args()

    dtype = nr.DT[args.dtype]
    plane = args.rows * args.cols * torch.tensor([], dtype=dtype).element_size()
    count = max(1, math.ceil(args.rotate_mib * 2**20 / (4 * plane)))
    xs = [(torch.randn(args.rows, args.cols, device="cuda") * 2 + 0.5).to(dtype) for _ in range(count)]
    rs = [(torch.randn(args.rows, args.cols, device="cuda") * 4 - 0.25).to(dtype) for _ in range(count)]
    w, b = nr.params(args.op, args.cols, dtype)

    def two_lines(x, r, w_, b_):
        s = x + r
        return nr.norm_ref(args.op, s, w_, b_), s
    compiled = torch.compile(two_lines, dynamic=False)

    calls = [lambda i: nr.fused(args.op, xs[i], rs[i], w, b), lambda i: compiled(xs[i], rs[i], w, b)]
    for fn in calls:
        for i in range(count):
            fn(i)  # kvtune tunes and torch.compile compiles here, outside the profiled window
    pnb.profile_window(calls, args.calls, count)


if __name__ == "__main__":
    main()
