#!/usr/bin/env python3
"""Where cold tuning spent its time, from `kvtune-cache export --runs` (one row a problem).

    kvtune-tune --suite ... --cache EMPTY.sqlite
    kvtune-cache --cache EMPTY.sqlite export --runs OUT.json
    bench/cold_split.py OUT.json [--over 3] > split.md

Prints a markdown table (wall seconds, then the tuning run's split: harness, compile wait, verify,
timing, finalists, and the overlapped compile pipeline), then the median, the maximum and the
problems over `--over` seconds. The newest run of each problem counts.
"""
import argparse
import json
import statistics
import sys


def entries(node):
    """Every exported winner entry that carries tuning runs."""
    if isinstance(node, dict):
        if "problem_key" in node and isinstance(node.get("runs"), list):
            yield node
        for value in node.values():
            yield from entries(value)
    elif isinstance(node, list):
        for value in node:
            yield from entries(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", help="kvtune-cache export --runs JSON")
    parser.add_argument("--over", type=float, default=3.0, help="list problems slower than this (s)")
    args = parser.parse_args()
    with open(args.export) as f:
        data = json.load(f)
    rows = []
    for entry in entries(data):
        if not entry["runs"]:
            continue
        run = entry["runs"][-1]
        split = (run.get("extra") or {}).get("seconds") or {}
        rows.append((entry["problem_key"], run["wall_seconds"], split, run.get("compile_seconds", 0),
                     f'{run.get("variants_timed", 0)}/{run.get("variants_total", 0)}'))
    if not rows:
        sys.exit(f"{args.export}: no tuning runs (export with --runs)")
    print("| problem | wall s | harness | compile wait | verify | time | final | compile (overlapped) | variants |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, wall, split, compile_s, variants in rows:
        parts = " | ".join(f'{split.get(k, float("nan")):.2f}' for k in ("harness", "compile_wait", "verify", "time", "final"))
        print(f"| {key} | {wall:.2f} | {parts} | {compile_s:.2f} | {variants} |")
    walls = [r[1] for r in rows]
    total = sum(walls)
    print()
    print(f"{len(rows)} problems, {total:.1f} s in all: median {statistics.median(walls):.2f} s, "
          f"max {max(walls):.2f} s, {sum(w > args.over for w in walls)} over {args.over:g} s")
    for name in ("harness", "compile_wait", "verify", "time", "final"):
        part = sum(r[2].get(name, 0) for r in rows)
        print(f"- {name}: {part:.1f} s ({100 * part / total:.0f} %)")
    for key, wall, *_ in sorted(rows, key=lambda r: -r[1]):
        if wall > args.over:
            print(f"- over {args.over:g} s: {key} {wall:.2f} s")


if __name__ == "__main__":
    main()
