#!/usr/bin/env python3
"""The best timed normalize variant of each form, per problem, from a `kvtune-cache export --runs` file.

Forms (from the label): one block ("block": no split=), split rows in phases ("phased"), in row
chunks ("chunked"), one pass in a cooperative launch ("coop") or in thread-block clusters
("cluster"). Per problem: each form's best median (us) and label, and each form's best against the
best of the others. Run an exhaustive tuning first (`kvtune-tune --exhaustive`) so that every form
is timed. Prints Markdown; exit status 0.

usage: best_by_form.py EXPORT.json
"""
import argparse
import json

FORMS = ("block", "phased", "chunked", "coop", "cluster")


def form(label):
    fields = label.split(",")
    if "cluster" in fields:
        return "cluster"
    if "coop" in fields:
        return "coop"
    if not any(f.startswith("split=") for f in fields):
        return "block"
    return "chunked" if any(f.startswith("chunk=") for f in fields) else "phased"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export")
    args = parser.parse_args()
    with open(args.export) as f:
        doc = json.load(f)
    print("| problem | " + " | ".join(f"{name} us" for name in FORMS) + " | best form | its best / next form's best |")
    print("|---|" + "---|" * (len(FORMS) + 2))
    for entry in doc["entries"]:
        if not entry["problem_key"].startswith("normalize,"):
            continue
        best = {}
        for t in entry.get("trials", []):
            if t.get("status") != "ok" or not t.get("median_ms"):
                continue
            name = form(t["label"])
            if name not in best or t["median_ms"] < best[name][0]:
                best[name] = (t["median_ms"], t["label"])
        if not best:
            continue
        ranked = sorted(best.items(), key=lambda item: item[1][0])
        cells = [f"{best[name][0] * 1000:.1f}" if name in best else "–" for name in FORMS]
        ratio = f"{ranked[0][1][0] / ranked[1][1][0]:.3f}" if len(ranked) > 1 else "–"
        print(f"| {entry['problem_key']} | " + " | ".join(cells) + f" | {ranked[0][0]} (`{ranked[0][1][1]}`) | {ratio} |")


if __name__ == "__main__":
    main()
