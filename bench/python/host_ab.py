#!/usr/bin/env python3
"""Host time of a cached kt.layer_norm (64 x 128 f32, affine, no grad) against F.layer_norm, from a
given copy of the Python package: for A/B runs of two package trees in alternating processes.

Each side: 200 warm-up calls, then the best of 9 rounds of 5,000 calls (time.perf_counter over the
loop, synchronized before and after), rounds interleaved with F.layer_norm's.

usage: KVTUNE_LIBRARY=<libkvtune.so> python3 bench/python/host_ab.py <folder holding kvtune/> <label>
  e.g. (a previous commit's package) mkdir old && git archive HEAD~1 python/kvtune | tar -x -C old
       python3 bench/python/host_ab.py old/python before; python3 bench/python/host_ab.py python after
"""

import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, sys.argv[1])
import kvtune.torch as kt  # noqa: E402


def host_us(fn, calls=5000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def main():
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, device="cuda")
    b = torch.randn(128, device="cuda")
    with torch.no_grad():
        ours = theirs = float("inf")
        for _ in range(9):
            ours = min(ours, host_us(lambda: kt.layer_norm(x, 128, w, b)))
            theirs = min(theirs, host_us(lambda: F.layer_norm(x, (128,), w, b)))
    print(f"{sys.argv[2]}: kt.layer_norm {ours:.2f} us, F.layer_norm {theirs:.2f} us, difference {ours - theirs:+.2f} us")


if __name__ == "__main__":
    main()
