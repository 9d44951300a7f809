#!/usr/bin/env python3
"""Training steps of small models built from torch.nn layers: torch eager, torch.compile, and the
same model after kvtune.nn.patch() (eager, and compiled), on synthetic tasks.

Models (sizes that train in seconds):
  convnext  a ConvNeXt-style stack: 4x4 stride-4 stem, blocks of 7x7 depthwise Conv2d ->
            LayerNorm (channels last) -> Linear 4C -> GELU -> Linear, residual; pool; classifier.
            Input 32 x 3 x 64 x 64, C = 96, 4 blocks; 10 classes of a fixed random teacher.
  mamba     a Mamba-style stack: RMSNorm -> Linear D->2D -> causal depthwise Conv1d K=4 (padding
            K-1, sliced, as PyTorch users write it) + SiLU, gated by SiLU(z) -> Linear; residual.
            x [8, 512, 256], 4 blocks; regression onto a fixed random teacher of the same shape.
  s4convd   an S4ConvD-style stack of long 1D depthwise convolutions: LayerNorm over D ->
            depthwise Conv1d K=63 'same' along L -> GELU -> Linear D->D; residual.
            x [8, 2048, 128], 4 blocks; regression.
Variants: eager; compile (torch.compile); kvtune (kvtune.nn.patch(): LayerNorm, RMSNorm and depthwise
Conv1d/Conv2d swapped; the mamba conv becomes a DepthwiseConv1d computing L + K - 1 outputs that
PyTorch slices and passes to SiLU, as written); kvtune-fused (mamba only: kvtune, then each
MambaBlock's conv replaced by kvtune.nn.CausalConv1d(D, K, activation='silu') with the same weights,
so the block calls the fused causal conv + SiLU forward and backward, as Mamba's causal_conv1d(x, w,
b, activation="silu"); other models skip it, since it would be the kvtune variant again); and each
kvtune variant + torch.compile (kvtune+compile, kvtune-fused+compile).
Every variant starts from a deep copy of the same initialized model.
Per variant: step time (forward + backward + AdamW step; CUDA events; median over --steps after
--warmup), peak memory, and the loss every --log-every steps from the same initialization and data.

usage: python3 bench/python/train_step.py [--models convnext,mamba,s4convd] [--steps 300]
       [--variants eager,compile,kvtune,kvtune+compile,kvtune-fused,kvtune-fused+compile]
       [--size small|large]
       [--profile STEPS] [--json OUT] [--markdown OUT]
"""

import argparse
import copy
import json
import os
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kvtune  # noqa: E402
import kvtune.nn as knn  # noqa: E402


class ConvNeXtBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dwconv = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.pw1 = nn.Linear(c, 4 * c)
        self.pw2 = nn.Linear(4 * c, c)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, c=96, depth=4, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, stride=4)
        self.blocks = nn.Sequential(*[ConvNeXtBlock(c) for _ in range(depth)])
        self.norm = nn.LayerNorm(c)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(self.norm(x.mean((2, 3))))


class MambaBlock(nn.Module):
    def __init__(self, d, k=4):
        super().__init__()
        self.norm = nn.RMSNorm(d)
        self.in_proj = nn.Linear(d, 2 * d)
        self.conv = nn.Conv1d(d, d, k, padding=k - 1, groups=d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x):  # [B, L, D]
        u, z = self.in_proj(self.norm(x)).chunk(2, dim=-1)
        if isinstance(self.conv, knn.CausalConv1d) and self.conv.activation == "silu":
            u = self.conv(u.transpose(1, 2)).transpose(1, 2)  # causal conv + SiLU, fused (kvtune-fused)
        else:
            u = F.silu(self.conv(u.transpose(1, 2))[..., :x.shape[1]]).transpose(1, 2)
        return x + self.out_proj(u * F.silu(z))


class S4ConvDBlock(nn.Module):
    def __init__(self, d, k=63):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.conv = nn.Conv1d(d, d, k, padding="same", groups=d)
        self.mix = nn.Linear(d, d)

    def forward(self, x):  # [B, L, D]
        y = self.conv(self.norm(x).transpose(1, 2)).transpose(1, 2)
        return x + self.mix(F.gelu(y))


def fuse_causal_convs(model):
    """Replaces each MambaBlock's conv (nn.Conv1d(D, D, K, padding=K-1, groups=D), or the
    kvtune.nn.DepthwiseConv1d patch() made of it) by kvtune.nn.CausalConv1d(D, K, activation='silu')
    holding the same weights (loaded from its state_dict, on its device and dtype), which makes
    MambaBlock.forward call the fused causal conv + SiLU. Returns the names of the swapped convs."""
    fused = []
    for name, block in model.named_modules():
        if not isinstance(block, MambaBlock) or isinstance(block.conv, knn.CausalConv1d):
            continue
        conv = block.conv
        d, (k,), (dil,) = conv.in_channels, conv.kernel_size, conv.dilation
        if (type(conv) not in (nn.Conv1d, knn.DepthwiseConv1d) or conv.groups != d or conv.out_channels != d
                or conv.stride != (1,) or conv.padding != ((k - 1) * dil,) or conv.padding_mode != "zeros"):
            raise ValueError(f"{name}.conv is not a causal depthwise Conv1d: {conv}")
        w = conv.weight
        # CausalConv1d's own (discarded) initialization runs on a forked RNG: the random streams
        # after the swap are those of the other variants
        with torch.random.fork_rng(devices=[w.device] if w.is_cuda else []):
            new = knn.CausalConv1d(d, k, dilation=dil, bias=conv.bias is not None, device=w.device, dtype=w.dtype,
                                   activation="silu")
        new.load_state_dict(conv.state_dict())
        new.train(conv.training)
        block.conv = new
        fused.append(f"{name}.conv")
    return fused


def stack(block, d, depth):
    return nn.Sequential(*[block(d) for _ in range(depth)], nn.LayerNorm(d))


MODELS = {
    "convnext": (lambda: ConvNeXt(), (32, 3, 64, 64), "classify"),
    "mamba": (lambda: stack(MambaBlock, 256, 4), (8, 512, 256), "regress"),
    "s4convd": (lambda: stack(S4ConvDBlock, 128, 4), (8, 2048, 128), "regress"),
}
# --size large: the same models at sizes where the GPU, not Python's per-op dispatch, sets the step
# time (ImageNet-like 56 x 56 maps; Mamba-130M-like width and sequence length)
MODELS_LARGE = {
    "convnext": (lambda: ConvNeXt(), (64, 3, 224, 224), "classify"),
    "mamba": (lambda: stack(MambaBlock, 768, 4), (8, 2048, 768), "regress"),
    "s4convd": (lambda: stack(S4ConvDBlock, 256, 4), (16, 4096, 256), "regress"),
}


def make_data(name, shape, task, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, device="cuda", generator=g)
    torch.manual_seed(seed + 1)
    teacher = MODELS[name][0]().cuda()
    with torch.no_grad():
        t = teacher(x)
    target = t.argmax(-1) if task == "classify" else t
    return x, target


def loss_fn(task, out, target):
    return F.cross_entropy(out, target) if task == "classify" else F.mse_loss(out, target)


VARIANTS = ("eager", "compile", "kvtune", "kvtune+compile", "kvtune-fused", "kvtune-fused+compile")
FUSED_MODELS = ("mamba",)  # the models kvtune-fused applies to; the others skip the fused variants


def make_step(variant, base, x, target, task, lr):
    """A deep copy of `base` as `variant` makes it (patched, fused, compiled) and its training step
    (forward, loss, backward, AdamW). Returns (step, patch report or None, fused convs or None)."""
    model = copy.deepcopy(base)
    kind, _, suffix = variant.partition("+")  # "kvtune-fused+compile" -> "kvtune-fused", "compile"
    report = fused = None
    if kind.startswith("kvtune"):
        report = knn.patch(model)
    if kind == "kvtune-fused":
        fused = fuse_causal_convs(model)
    fwd = torch.compile(model) if "compile" in (kind, suffix) else model
    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(task, fwd(x), target)
        loss.backward()
        opt.step()
        return loss
    return step, report, fused


def run_variant(name, variant, base, x, target, task, args):
    step, report, fused = make_step(variant, base, x, target, task, args.lr)

    losses, times = [], []
    torch.cuda.reset_peak_memory_stats()
    for i in range(args.warmup + args.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = step()
        end.record()
        if i >= args.warmup:
            end.synchronize()
            times.append(start.elapsed_time(end))
            k = i - args.warmup
            if k % args.log_every == 0 or k == args.steps - 1:
                losses.append((k, loss.item()))
    if args.profile and report is not None:
        import cProfile
        import pstats
        torch.cuda.synchronize()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.profile):
            step()
        torch.cuda.synchronize()
        profile.disable()
        print(f"--- {name} {variant}: cProfile of {args.profile} steps", file=sys.stderr)
        pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(22)
    return {
        "step_ms": statistics.median(times),
        "step_ms_min": min(times),
        "step_ms_max": max(times),
        "peak_mib": torch.cuda.max_memory_allocated() / 2**20,
        "losses": losses,
        "patch": None if report is None else {"swapped": [s[0] for s in report.swapped],
                                               "left": [(n, why) for n, _, why in report.left]},
        "fused": fused,  # the convs made kvtune.nn.CausalConv1d(activation='silu') (kvtune-fused variants)
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="convnext,mamba,s4convd")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated, of " + ", ".join(VARIANTS) + " (kvtune-fused*: mamba only)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", choices=("small", "large"), default="small")
    parser.add_argument("--profile", type=int, default=0,
                        help="after timing, run this many steps of each kvtune variant under cProfile and print "
                             "the top Python functions by own time (where the host time goes)")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    if args.size == "large":
        MODELS.update(MODELS_LARGE)

    device = torch.cuda.get_device_name()
    results = {}
    for name in models:
        make, shape, task = MODELS[name]
        x, target = make_data(name, shape, task, args.seed)
        torch.manual_seed(args.seed + 2)
        base = make().cuda()
        results[name] = {}
        for variant in variants:
            if variant.startswith("kvtune-fused") and name not in FUSED_MODELS:
                print(f"{name:9s} {variant:20s} skipped: {name} has no causal conv + SiLU to fuse", file=sys.stderr)
                continue
            torch._dynamo.reset()
            r = run_variant(name, variant, base, x, target, task, args)
            results[name][variant] = r
            print(f"{name:9s} {variant:20s} {r['step_ms']:8.3f} ms/step  loss {r['losses'][0][1]:.4f} -> "
                  f"{r['losses'][-1][1]:.4f}  peak {r['peak_mib']:.0f} MiB", file=sys.stderr, flush=True)

    lines = [f"# Training steps ({device}, torch {torch.__version__}, kvtune {kvtune.version()})", "",
             "| model | variant | ms/step | vs eager | vs compile | first loss | last loss | peak MiB |",
             "|---|---|---|---|---|---|---|---|"]
    for name, by_variant in results.items():
        eager = by_variant.get("eager", {}).get("step_ms")
        comp = by_variant.get("compile", {}).get("step_ms")
        for variant, r in by_variant.items():
            ms = r["step_ms"]
            vs_eager = f"{eager / ms:.2f}x" if eager else ""
            vs_compile = f"{comp / ms:.2f}x" if comp else ""
            lines.append(f"| {name} | {variant} | {ms:.3f} | {vs_eager} | {vs_compile} | {r['losses'][0][1]:.4f} | "
                         f"{r['losses'][-1][1]:.4f} | {r['peak_mib']:.0f} |")
    markdown = "\n".join(lines)
    print(markdown)
    summary = {"schema": "kvtune-python-train-step/1", "device": device, "torch": torch.__version__,
               "kvtune": kvtune.version(), "args": vars(args), "results": results, "counters": kvtune.counters()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown + "\n")


if __name__ == "__main__":
    main()
