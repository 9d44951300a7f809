#!/usr/bin/env python3
"""Variant by variant A/B of two tunings of the same problems (two `kvtune-cache export` files).

Joins the trials of A and B on (problem, variant label) and prints, per kernel kind (the label's
first field: tiled, direct, wgrad, mma; normalize labels count as "normalize"), how many variants
were timed in both, the geometric mean of B / A, its 5th-95th percentiles, and how many are slower
than A by more than THRESHOLD (default 5 %). Kinds whose code did not change between A and B give
the run-to-run noise to read the changed kinds against. Then the slowest ratios of CHANGED (default
tiled). Prints Markdown; exit status 0.

usage: compare_trials.py A.json B.json [--changed tiled] [--threshold 0.05]
"""
import argparse
import json
import math
from collections import defaultdict


def trials(path):
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for e in doc["entries"]:
        for t in e.get("trials", []):
            if t.get("status") == "ok" and t.get("median_ms"):
                out[(e["problem_key"], t["label"])] = t["median_ms"]
    return out


def kind(label):
    first = label.split(",")[0]
    return first if first in ("tiled", "direct", "wgrad", "mma") else "normalize"


def quantile(sorted_values, q):
    i = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--changed", default="tiled")
    ap.add_argument("--threshold", type=float, default=0.05)
    args = ap.parse_args()
    a, b = trials(args.a), trials(args.b)
    ratios = defaultdict(list)
    for key in a.keys() & b.keys():
        ratios[kind(key[1])].append((b[key] / a[key], key))
    print(f"| kernel | variants in both | geomean B/A | p5 | p95 | slower > {args.threshold:.0%} |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in sorted(ratios):
        values = sorted(r for r, _ in ratios[k])
        geo = math.exp(sum(math.log(v) for v in values) / len(values))
        slower = sum(v > 1 + args.threshold for v in values)
        print(f"| {k}{' (changed)' if k == args.changed else ''} | {len(values)} | {geo:.3f} | "
              f"{quantile(values, 0.05):.3f} | {quantile(values, 0.95):.3f} | {slower} |")
    worst = sorted(ratios.get(args.changed, []), reverse=True)[:10]
    if worst:
        print(f"\nSlowest {args.changed} variants, B / A (A and B times in us):\n")
        for r, (problem, label) in worst:
            print(f"- {r:.3f}  {a[(problem, label)] * 1e3:.2f} -> {b[(problem, label)] * 1e3:.2f}  {problem}  {label}")


if __name__ == "__main__":
    main()
