#!/usr/bin/env python3
"""Row-by-row comparison of two kvtune-bench Markdown reports (report.md) of the same suites.

    bench/compare_reports.py BEFORE/report.md AFTER/report.md

Per section and problem: kvtune's time before and after and their ratio (after / before), then per
section the geometric mean of the ratios and of each report's geomean lines. Rows present in one
report only are listed. Prints Markdown.
"""
import math
import sys


def rows(path):
    """{(section, problem): (variant, microseconds)} and {section: [geomean lines]}."""
    table, geomeans, section = {}, {}, ""
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("## "):
                section = line[3:].strip()
            elif line.startswith("Geometric-mean"):
                geomeans.setdefault(section, []).append(line)
            elif line.startswith("| ") and not line.startswith("| problem") and not line.startswith("|---"):
                cells = [c.strip() for c in line.strip("|").split("|")]
                if len(cells) < 3:
                    continue
                try:
                    micros = float(cells[2].replace(",", ""))
                except ValueError:
                    continue
                table[(section, cells[0])] = (cells[1], micros)
    return table, geomeans


def main():
    before, geo_before = rows(sys.argv[1])
    after, geo_after = rows(sys.argv[2])
    sections = []
    for key in list(before) + list(after):
        if key[0] not in sections:
            sections.append(key[0])
    for section in sections:
        print(f"### {section}\n")
        print("| problem | before µs | after µs | after / before | variant changed |")
        print("|---|---|---|---|---|")
        logs = []
        for key in [k for k in before if k[0] == section]:
            if key not in after:
                print(f"| {key[1]} | {before[key][1]} | – | only before | |")
                continue
            (vb, tb), (va, ta) = before[key], after[key]
            logs.append(math.log(ta / tb))
            print(f"| {key[1]} | {tb} | {ta} | {ta / tb:.3f} | {'' if vb == va else vb + ' → ' + va} |")
        for key in [k for k in after if k[0] == section and k not in before]:
            print(f"| {key[1]} | – | {after[key][1]} | only after | |")
        if logs:
            print(f"\nGeomean after / before: {math.exp(sum(logs) / len(logs)):.3f} over {len(logs)} rows.")
        for label, geo in (("before", geo_before), ("after", geo_after)):
            for line in geo.get(section, []):
                print(f"\n{label}: {line}")
        print()


if __name__ == "__main__":
    main()
