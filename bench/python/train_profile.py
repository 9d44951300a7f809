#!/usr/bin/env python3
"""Where a training step's GPU time goes: the models and variants of train_step.py under
torch.profiler, kernel time per step by kind (GEMM, kvtune, Triton, norm, conv, elementwise, copy,
optimizer, ...) and the top kernels. Answers "which share of the step can kvtune's ops change?".

usage: python3 bench/python/train_profile.py [--models mamba,s4convd] [--size large]
       [--variants eager,compile,kvtune,kvtune+compile] [--steps 5] [--warmup 8] [--top 12]
       [--markdown OUT]
"""

import argparse
import os
import re
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_step as ts  # noqa: E402

# first match wins; names are CUDA kernel names as the profiler reports them
KINDS = (
    ("kvtune", r"^(void )?kvt_"),
    ("gemm", r"gemm|gemv|sm90_xmma|sm80_xmma|cutlass|cublas|nvjet|splitKreduce"),
    ("triton", r"^triton_"),
    ("optimizer", r"multi_tensor_apply|foreach|adam"),
    ("norm", r"layer_norm|rms_norm|LayerNorm|RowwiseMoments|ComputeInternalGradients|GammaBeta"),
    ("conv", r"conv|cudnn|depthwise|winograd|implicit"),
    ("copy", r"copy|Memcpy|memcpy|Memset|memset|cat_|CatArray"),
    ("reduce", r"reduce|Reduce"),
    ("elementwise", r"elementwise|vectorized|unrolled|Elementwise"),
)


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name):
            return kind
    return "other"


def device_time_us(evt):
    for attr in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(evt, attr):
            return getattr(evt, attr)
    return 0.0


def profile_variant(variant, base, x, target, task, args):
    step = ts.make_step(variant, base, x, target, task, 1e-3)[0]
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.steps):
        step()
    end.record()
    end.synchronize()
    step_ms = start.elapsed_time(end) / args.steps
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    kernels = []
    for evt in prof.key_averages():
        t = device_time_us(evt)
        if t > 0 and str(getattr(evt, "device_type", "")).endswith("CUDA"):
            kernels.append((evt.key, t / args.steps / 1000.0, evt.count / args.steps))
    return step_ms, kernels


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mamba,s4convd")
    parser.add_argument("--variants", default="eager,compile,kvtune,kvtune+compile")
    parser.add_argument("--size", choices=("small", "large"), default="large")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown")
    args = parser.parse_args()
    if args.size == "large":
        ts.MODELS.update(ts.MODELS_LARGE)
    lines = [f"# Kernel time per training step ({torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"--size {args.size}, {args.steps} profiled steps after {args.warmup})", ""]
    for name in args.models.split(","):
        make, shape, task = ts.MODELS[name]
        x, target = ts.make_data(name, shape, task, args.seed)
        torch.manual_seed(args.seed + 2)
        base = make().cuda()
        by_variant = {}
        for variant in args.variants.split(","):
            if variant.startswith("kvtune-fused") and name not in ts.FUSED_MODELS:
                continue
            torch._dynamo.reset()
            by_variant[variant] = profile_variant(variant, base, x, target, task, args)
        kinds = [k for k, _ in KINDS] + ["other"]
        lines += [f"## {name} {list(shape)}", "",
                  "| variant | step ms (events) | kernels ms | " + " | ".join(kinds) + " |",
                  "|---|---|---|" + "---|" * len(kinds)]
        for variant, (step_ms, kernels) in by_variant.items():
            per_kind = defaultdict(float)
            for key, ms, _ in kernels:
                per_kind[kind_of(key)] += ms
            total = sum(per_kind.values())
            lines.append(f"| {variant} | {step_ms:.3f} | {total:.3f} | " +
                         " | ".join(f"{per_kind[k]:.3f}" for k in kinds) + " |")
        for variant, (step_ms, kernels) in by_variant.items():
            lines += ["", f"### {name} {variant}: top kernels (ms and calls per step)", ""]
            for key, ms, calls in sorted(kernels, key=lambda k: -k[1])[:args.top]:
                lines.append(f"- {ms:7.3f} ms  {calls:5.1f}×  [{kind_of(key)}] {key[:150]}")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
