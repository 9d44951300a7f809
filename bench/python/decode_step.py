#!/usr/bin/env python3
"""The Mamba decode step from Python: kvtune.torch.causal_conv1d_update against the same step written
in PyTorch (eager, and torch.compile), bf16, K = 4, bias, SiLU, one new token per row, state slots
picked by conv_state_indices (continuous batching).

The PyTorch step (what a model without a fused kernel writes):
    s = conv_state[idx]                                     # [B, C, K-1]
    u = torch.cat([s, x.unsqueeze(-1)], -1)                 # [B, C, K]
    y = silu((u * weight).sum(-1) + bias)
    conv_state[idx] = u[..., 1:]
Per implementation: the step's device time under CUDA-graph replay (--graph-steps steps a graph,
median of --repeats replays; host work excluded) and an eager loop's time per step (host included),
next to an empty kernel's graph time. kvtune's output is checked against the PyTorch step first.

usage: python3 bench/python/decode_step.py [--shapes 1x2048,8x4096,64x4096,64x8192,256x8192]
       [--json OUT] [--markdown OUT]
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kvtune  # noqa: E402
import kvtune.torch as kt  # noqa: E402


def torch_step(x, conv_state, weight, bias, idx):
    u = torch.cat([conv_state[idx], x.unsqueeze(-1)], -1)
    y = F.silu((u * weight).sum(-1) + bias)
    conv_state[idx] = u[..., 1:]
    return y


def graph_us(fn, steps, repeats):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(steps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / steps)
    return statistics.median(times)


def eager_us(fn, calls):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="1x2048,8x4096,64x4096,64x8192,256x8192")
    parser.add_argument("--graph-steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    torch.manual_seed(0)
    k = 4
    one = torch.zeros(1, device="cuda")
    empty_us = graph_us(lambda: one.add_(1), args.graph_steps, args.repeats)  # a one-element kernel: a launch
    compiled_step = None if args.no_compile else torch.compile(torch_step)
    rows = []
    for shape in args.shapes.split(","):
        b, c = (int(v) for v in shape.split("x"))
        slots = 2 * b
        x = torch.randn(b, c, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(c, k, device="cuda", dtype=torch.bfloat16) * 0.5
        bias = torch.randn(c, device="cuda", dtype=torch.bfloat16)
        idx = torch.randperm(slots, device="cuda")[:b].to(torch.int32)
        state = torch.randn(slots, c, k - 1, device="cuda", dtype=torch.bfloat16)
        ref_state = state.clone()
        want = torch_step(x, ref_state, w, bias, idx.long())
        got = kt.causal_conv1d_update(x, state, w, bias, activation="silu", conv_state_indices=idx)
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(state, ref_state, rtol=0, atol=0)
        kvtune.get_context().wait_background()
        idx_long = idx.long()
        impls = {
            "kvtune": lambda: kt.causal_conv1d_update(x, state, w, bias, activation="silu", conv_state_indices=idx),
            "torch": lambda: torch_step(x, ref_state, w, bias, idx_long),
        }
        if compiled_step is not None:
            impls["torch.compile"] = lambda: compiled_step(x, ref_state, w, bias, idx_long)
        row = {"batch": b, "channels": c, "empty_us": empty_us}
        for name, fn in impls.items():
            row[name] = {"graph_us": graph_us(fn, args.graph_steps, args.repeats), "eager_us": eager_us(fn, args.calls)}
        rows.append(row)
        print(shape, {n: round(row[n]["graph_us"], 2) for n in impls}, file=sys.stderr, flush=True)
    names = [n for n in ("kvtune", "torch", "torch.compile") if n in rows[0]]
    lines = [f"# Decode step, bf16, K = {k}, SiLU, bias, state indices ({torch.cuda.get_device_name()}, "
             f"torch {torch.__version__}, kvtune {kvtune.version()}); empty kernel {empty_us:.2f} us (graph)", "",
             "| batch x channels | " + " | ".join(f"{n} graph us" for n in names) + " | kvtune x empty | "
             + " | ".join(f"vs {n} (graph)" for n in names[1:]) + " | " + " | ".join(f"{n} eager us" for n in names) + " |",
             "|---|" + "---|" * (2 * len(names) + len(names))]
    for r in rows:
        kv = r["kvtune"]["graph_us"]
        cells = [f"{r[n]['graph_us']:.2f}" for n in names] + [f"{kv / empty_us:.2f}"]
        cells += [f"{r[n]['graph_us'] / kv:.2f}x" for n in names[1:]] + [f"{r[n]['eager_us']:.1f}" for n in names]
        lines.append(f"| {r['batch']} x {r['channels']} | " + " | ".join(cells) + " |")
    markdown = "\n".join(lines)
    print(markdown)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "kvtune-python-decode-step/1", "device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "rows": rows}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown + "\n")


if __name__ == "__main__":
    main()
