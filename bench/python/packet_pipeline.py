#!/usr/bin/env python3
"""Packet pipeline from Python: kvtune.torch.standardize against the PyTorch baseline of the seed
study (/work/shared/seeds/000_*: "x_norm = (x - mean) / (std + eps)", eps = 1e-5, torch.std's
unbiased estimate), on batches of 1,024-16,384 packets x 41 and 128 features, plus the seed's own
table shapes (1024x128, 4096x256, 8192x512, 16384x1024) beside its published times.

Per problem and implementation (f32):
  eager_us  per-call time of a loop of calls from Python (host overhead included): CUDA events
            around --calls calls, median of --repeats;
  graph_us  device time per call: the same calls captured in one CUDA graph and replayed;
  packets/s rows / eager time.
Implementations: "torch" (the baseline, eager), "torch.compile" (the baseline compiled),
"kvtune" (kvtune.torch.standardize(x, 1e-5, ddof=1), which computes the same numbers). Every
kvtune result is checked against the baseline first. Inputs rotate over enough sets to exceed
the L2 (--rotate-mib) so that no run reads a cached batch.

usage: python3 bench/python/packet_pipeline.py [--json OUT.json] [--markdown OUT.md]
       (KVTUNE_LIBRARY or an installed kvtune; KVTUNE_POLICY / KVTUNE_CACHE as usual: the first
       call of each shape tunes it, outside the timed region)
"""

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kvtune  # noqa: E402
import kvtune.torch as kt  # noqa: E402

EPS = 1e-5
# The seed's table (ms): PyTorch baseline, its first CUDA kernel, its optimized kernel (GPU unnamed
# there; its text mentions a GB200).
SEED_PUBLISHED = {
    (1024, 128): (0.0636, 0.0082, 0.0085),
    (4096, 256): (0.0632, 0.0178, 0.0103),
    (8192, 512): (0.0658, 0.0330, 0.0186),
    (16384, 1024): (0.1872, 0.0882, 0.0611),
}


def baseline(x):
    return (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + EPS)


def ours(x):
    return kt.standardize(x, EPS, 1)


def eager_us(fn, inputs, calls, repeats):
    for i in range(3):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(calls):
            fn(inputs[i % len(inputs)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times), min(times), max(times)


def graph_us(fn, inputs, calls, repeats):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for x in inputs[:3]:
            fn(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(inputs[i % len(inputs)])
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1024,2048,4096,8192,16384")
    parser.add_argument("--features", default="41,128")
    parser.add_argument("--no-seed-shapes", action="store_true", help="skip the seed table's shapes")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--rotate-mib", type=float, default=256, help="input sets total at least this much")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()

    shapes = [(r, f) for f in map(int, args.features.split(",")) for r in map(int, args.rows.split(","))]
    if not args.no_seed_shapes:
        shapes += [s for s in SEED_PUBLISHED if s not in shapes]
    compiled = None if args.no_compile else torch.compile(baseline)
    impls = [("torch", baseline), ("kvtune", ours)] + ([("torch.compile", compiled)] if compiled else [])
    device = torch.cuda.get_device_name()
    results = []
    for rows, cols in shapes:
        bytes_per = rows * cols * 4
        sets = max(2, min(64, int(args.rotate_mib * 2**20 / bytes_per)))
        inputs = [torch.randn(rows, cols, device="cuda") * 4 + 10 for _ in range(sets)]
        expected = baseline(inputs[0])
        got = ours(inputs[0])  # tunes (or loads) this shape outside the timed region
        error = (got - expected).abs().max().item()
        if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
            raise SystemExit(f"kvtune differs from the baseline at {rows}x{cols}: max abs error {error}")
        row = {"rows": rows, "cols": cols, "max_abs_error": error, "device": device}
        for name, fn in impls:
            median, low, high = eager_us(fn, inputs, args.calls, args.repeats)
            row[name] = {"eager_us": median, "eager_min_us": low, "eager_max_us": high,
                         "graph_us": graph_us(fn, inputs, args.calls, max(3, args.repeats // 3)),
                         "packets_per_s": rows / (median * 1e-6)}
        row["speedup_eager"] = row["torch"]["eager_us"] / row["kvtune"]["eager_us"]
        row["speedup_graph"] = row["torch"]["graph_us"] / row["kvtune"]["graph_us"]
        if (rows, cols) in SEED_PUBLISHED:
            row["seed_published_ms"] = dict(zip(("pytorch", "cuda", "optimized"), SEED_PUBLISHED[(rows, cols)]))
        results.append(row)
        print(f"{rows:6d} x {cols:5d}: torch {row['torch']['eager_us']:8.2f} us, kvtune {row['kvtune']['eager_us']:8.2f} us"
              f" (graph {row['kvtune']['graph_us']:.2f} us), x{row['speedup_eager']:.2f}", file=sys.stderr, flush=True)

    summary = {"schema": "kvtune-python-packet-pipeline/1", "device": device, "torch": torch.__version__,
               "kvtune": kvtune.version(), "eps": EPS, "ddof": 1, "results": results,
               "counters": kvtune.counters()}
    lines = [f"# Packet pipeline ({device}, torch {torch.__version__}, kvtune {kvtune.version()})", "",
             "| rows x features | torch eager us | torch graph us | compile eager us | kvtune eager us | kvtune graph us "
             "| speedup eager | speedup graph | kvtune Mpackets/s | seed published ms (torch / cuda / opt) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        comp = r.get("torch.compile", {}).get("eager_us")
        seed = r.get("seed_published_ms")
        lines.append(
            f"| {r['rows']} x {r['cols']} | {r['torch']['eager_us']:.2f} | {r['torch']['graph_us']:.2f} | "
            f"{'' if comp is None else f'{comp:.2f}'} | {r['kvtune']['eager_us']:.2f} | {r['kvtune']['graph_us']:.2f} | "
            f"{r['speedup_eager']:.2f} | {r['speedup_graph']:.2f} | {r['kvtune']['packets_per_s'] / 1e6:.1f} | "
            f"{'' if seed is None else '{pytorch} / {cuda} / {optimized}'.format(**seed)} |")
    markdown = "\n".join(lines)
    print(markdown)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown + "\n")


if __name__ == "__main__":
    main()
