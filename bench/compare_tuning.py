#!/usr/bin/env python3
"""Budgeted vs exhaustive tuning of the same suites (two `kvtune-cache export` files of one GPU).

Per problem: the budgeted winner's measured time over the exhaustive winner's (each measured in its
own run, so run-to-run noise of about 1 % is included), and the tuning time each spent (from the
tuning runs when the export has them, else the trials' count). Prints Markdown.
"""
import json
import sys


def load(path):
    with open(path) as f:
        doc = json.load(f)
    return {e["problem_key"]: e for e in doc["entries"] if e.get("origin") == "tuned"}


def main():
    exhaustive, budgeted = load(sys.argv[1]), load(sys.argv[2])
    rows, within, spent_b, spent_e, tried_b, tried_e = [], 0, 0.0, 0.0, 0, 0
    for key in sorted(exhaustive):
        if key not in budgeted:
            continue
        e, b = exhaustive[key], budgeted[key]
        ratio = b["median_ms"] / e["median_ms"]
        within += ratio <= 1.03
        te, tb = len(e.get("trials", [])), len(b.get("trials", []))
        tried_e += te
        tried_b += tb
        run_e = (e.get("runs") or [{}])[-1].get("wall_seconds")
        run_b = (b.get("runs") or [{}])[-1].get("wall_seconds")
        if run_e is not None and run_b is not None:
            spent_e += run_e
            spent_b += run_b
        rows.append((key, e["label"], e["median_ms"] * 1e3, b["label"], b["median_ms"] * 1e3, ratio, te, tb, run_e, run_b))
    n = len(rows)
    print("# Budgeted vs exhaustive search\n")
    print(f"{within} of {n} problems ({100 * within / max(n, 1):.0f} %) within 3 % of the exhaustive winner; "
          f"variants timed {tried_b} vs {tried_e} ({100 * tried_b / max(tried_e, 1):.0f} %)"
          + (f"; tuning wall time {spent_b:.1f} s vs {spent_e:.1f} s ({100 * spent_b / spent_e:.0f} %)" if spent_e else "")
          + "\n")
    print("| problem | exhaustive winner | us | budgeted winner | us | ratio | variants (exh/bud) | tuning s (exh/bud) |")
    print("|---|---|---|---|---|---|---|---|")
    for key, le, te, lb, tb, ratio, ve, vb, re_, rb in rows:
        secs = f"{re_:.2f} / {rb:.2f}" if re_ is not None and rb is not None else "-"
        mark = "" if ratio <= 1.03 else " (miss)"
        print(f"| {key} | {le} | {te:.2f} | {lb} | {tb:.2f} | {ratio:.3f}{mark} | {ve} / {vb} | {secs} |")


if __name__ == "__main__":
    main()
