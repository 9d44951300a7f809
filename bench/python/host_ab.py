#!/usr/bin/env python3
"""Host time of a cached kt.layer_norm (64 x 128 f32, affine, no grad) against F.layer_norm, from a
given copy of the Python package: for A/B runs of two package trees in alternating processes.

Each side: the best of 9 rounds, each host_overhead.host_us (100 warm-up calls, the median of 5 timed
runs of 5,000 calls), rounds interleaved with F.layer_norm's.

usage: KVTUNE_LIBRARY=<libkvtune.so> python3 bench/python/host_ab.py <folder holding kvtune/> <label>
  e.g. (a previous commit's package) mkdir old && git archive HEAD~1 python/kvtune | tar -x -C old
       python3 bench/python/host_ab.py old/python before; python3 bench/python/host_ab.py python after
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, sys.argv[1])
import kvtune.torch as kt  # noqa: E402  (first: host_overhead's own import then finds this package)

sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
from host_overhead import host_us  # noqa: E402


def main():
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, device="cuda")
    b = torch.randn(128, device="cuda")
    with torch.no_grad():
        ours = theirs = float("inf")
        for _ in range(9):
            ours = min(ours, host_us(lambda: kt.layer_norm(x, 128, w, b), 5000))
            theirs = min(theirs, host_us(lambda: F.layer_norm(x, (128,), w, b), 5000))
    print(f"{sys.argv[2]}: kt.layer_norm {ours:.2f} us, F.layer_norm {theirs:.2f} us, difference {ours - theirs:+.2f} us")


if __name__ == "__main__":
    main()
