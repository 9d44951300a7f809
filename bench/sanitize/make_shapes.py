#!/usr/bin/env python3
"""Writes bench/sanitize/sweep-shapes.json: odd-sized problems covering every dtype, mode, layout,
direction and optional tensor of both families, for compute-sanitizer (bench/run_sanitizers.sh)."""
import json
import os

problems = []
for dtype in ("f32", "f16", "bf16"):
    for mode in ("standardize", "layernorm", "rmsnorm"):
        for rows, cols in ((7, 1), (5, 3), (7, 37), (3, 130), (2, 1000), (3, 4097)):
            p = {"op": "normalize", "rows": rows, "cols": cols, "dtype": dtype, "mode": mode}
            if cols in (37, 4097):
                p["gamma"] = True
                if mode != "rmsnorm":
                    p["beta"] = True
            if cols in (3, 130) and mode != "rmsnorm":
                p["mean"] = True
                p["rstd"] = True
            problems.append(p)
for dtype in ("f32", "bf16"):
    for direction in ("forward", "backward_data", "backward_weight"):
        for layout in ("nchw", "nhwc"):
            for n, c, h, w, k, stride, pad in ((2, 5, 9, 11, 3, 1, 1), (1, 12, 13, 14, 7, 2, 3), (2, 3, 6, 5, 1, 1, 0)):
                p = {"op": "dwconv", "direction": direction, "layout": layout, "dtype": dtype, "n": n, "c": c,
                     "h": h, "w": w, "kernel": [k, k], "stride": stride, "padding": pad}
                if direction != "backward_data" and k == 3:
                    p["bias"] = True
                problems.append(p)
        for layout in ("ncl", "nlc"):
            for n, c, l, k, dil, causal in ((2, 6, 33, 4, 1, True), (1, 4, 40, 31, 1, True), (2, 5, 17, 7, 2, False)):
                p = {"op": "dwconv", "direction": direction, "layout": layout, "dtype": dtype, "n": n, "c": c, "l": l,
                     "kernel": k, "dilation": dil}
                if causal:
                    p["causal"] = True
                else:
                    p["padding"] = [6, 6]
                problems.append(p)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweep-shapes.json")
with open(out, "w") as f:
    json.dump({"problems": problems}, f, indent=0)
print(f"{len(problems)} problems -> {out}")
