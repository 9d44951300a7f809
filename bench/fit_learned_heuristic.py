#!/usr/bin/env python3
"""Fits a family's learned heuristic (normalize, dwconv) from recorded exhaustive trials.

Reads the exports (kvtune-cache export format) of exhaustive tuning runs and writes, per recorded
problem of the family (normalize: forward or backward; dwconv: every direction) and GPU model (the export's device; a problem recorded twice on one model:
the first export's), the variants that ran within CAP of that problem's winner, as
time / winner time. kernel_templates/<family>/<family>_learned.cpp ranks a new problem's variants
by these ratios on its nearest comparable recorded problems of its GPU model (all models' for a
model the table lacks there) (tuner/learned_rankings.h). A variant absent from a neighbour (slower
than CAP there, or not in its space) counts as CAP.

usage: bench/fit_learned_heuristic.py [--op normalize|dwconv] EXPORT.json [EXPORT.json ...] ARCH OUT.json
  e.g. (the shipped normalize table) bench/fit_learned_heuristic.py \\
           tests/data/trials/2026-11-22-h200-exhaustive/export.json \\
           tests/data/trials/2026-11-27-h100-affine-narrow/export-recorded.json \\
           tests/data/trials/2026-11-27-h100-affine-narrow/export-affine.json \\
           tests/data/trials/2026-12-04-h200-backward-exhaustive/export-train-shard0.json \\
           tests/data/trials/2026-12-04-h200-backward-exhaustive/export-train-shard1.json \\
           tests/data/trials/2026-12-04-h200-backward-exhaustive/export-bench.json \\
           sm_90 kernel_templates/normalize/normalize_learned_sm90.json
  (the shipped dwconv table: the NHWC rows re-recorded with the shape constants first, so that
  their rows are those) bench/fit_learned_heuristic.py --op dwconv \\
           tests/data/trials/2026-12-03-h200-nhwc-shape-constants/export-nhwc-bench.json \\
           tests/data/trials/2026-12-03-h200-nhwc-shape-constants/export-nhwc-train.json \\
           tests/data/trials/2026-12-01-h200-dwconv-exhaustive/export-bench.json \\
           tests/data/trials/2026-12-01-h200-dwconv-exhaustive/export-train-shard0.json \\
           tests/data/trials/2026-12-01-h200-dwconv-exhaustive/export-train-shard1.json \\
           tests/data/trials/2026-12-01-h200-dwconv-exhaustive/export-train-shard2.json \\
           sm_90 kernel_templates/dwconv/dwconv_learned_sm90.json
"""
import json
import sys

CAP = 1.3


def main():
    args = sys.argv[1:]
    op = "normalize"
    if args[:1] == ["--op"] and len(args) > 1:
        op, args = args[1], args[2:]
    if op not in ("normalize", "dwconv") or len(args) < 3:
        sys.exit(__doc__)
    *sources, arch, out = args
    problems, devices, seen = [], [], set()
    for source in sources:
        with open(source) as f:
            doc = json.load(f)
        names = {d.get("id"): d["name"] for d in doc.get("devices", [])}
        if len(names) != 1:
            sys.exit(f"{source}: one device per export, found {len(names)}")
        device = next(iter(names.values()))
        devices.append({"name": device})
        for e in doc["entries"]:
            if e["op"] != op or (device, e["problem_key"]) in seen:
                continue
            times = {t["label"]: t["median_ms"] for t in e["trials"] if t["status"] == "ok"}
            if not times:
                continue
            seen.add((device, e["problem_key"]))
            best = min(times.values())
            ratios = {label: round(ms / best, 4) for label, ms in sorted(times.items()) if ms / best <= CAP}
            problems.append({"key": e["problem_key"], "device": device, "variants": len(times), "ratios": ratios})
    problems.sort(key=lambda p: (p["device"], p["key"]))
    doc_out = {"schema": f"kvtune-{op}-learned/1", "arch": arch, "cap": CAP, "source": " + ".join(sources),
               "devices": devices, "problems": problems}
    with open(out, "w") as f:  # one line a problem
        head = {k: v for k, v in doc_out.items() if k != "problems"}
        f.write(json.dumps(head)[:-1] + ', "problems": [\n')
        f.write(",\n".join(json.dumps(p, separators=(",", ":")) for p in problems))
        f.write("\n]}\n")
    print(f"{out}: {len(problems)} problems, {sum(len(p['ratios']) for p in problems)} ratios")


if __name__ == "__main__":
    main()
