#!/usr/bin/env python3
"""Writes bench/sanitize/changed-shapes.json: odd-sized problems over the kernels added or changed
after the full sweep of 2026-11-26 (sweep-shapes.json), for compute-sanitizer
(bench/run_sanitizers.sh): normalize's fused residual add, backward (folds, staged rows, saved or
recomputed statistics, dgamma/dbeta), split rows (the multi-block phases and the cooperative form);
dwconv's fused activations in every 1D direction and the 2D forward, seq_idx, the tiled
channel-last kernel in parts;
the causal conv1d with states and the decode update."""
import json
import os

problems = []
# normalize: residual forms, every mode and dtype
for dtype in ("f32", "bf16", "f16"):
    for mode in ("standardize", "layernorm", "rmsnorm"):
        p = {"op": "normalize", "rows": 5, "cols": 203, "dtype": dtype, "mode": mode,
             "residual": True, "residual_out": True, "gamma": True}
        if mode == "layernorm":
            p["beta"] = True
        problems.append(p)
# normalize backward: every mode, odd widths (one warp, one block, staged), gradients of gamma/beta
for dtype in ("f32", "bf16"):
    for mode in ("standardize", "layernorm", "rmsnorm"):
        for rows, cols in ((7, 37), (5, 1030), (3, 4099)):
            p = {"op": "normalize", "direction": "backward", "rows": rows, "cols": cols, "dtype": dtype,
                 "mode": mode, "gamma": True, "dgamma": True}
            if mode == "layernorm":
                p["dbeta"] = True
            if cols == 1030:
                p["saved"] = True
            if cols == 37 and dtype == "f32":
                p["dresidual"] = True
            problems.append(p)
# normalize split rows: wider than one block (the phases), and few rows (the cooperative form)
for dtype in ("f32", "bf16"):
    for mode in ("standardize", "layernorm", "rmsnorm"):
        p = {"op": "normalize", "rows": 3, "cols": 300007, "dtype": dtype, "mode": mode}
        if mode != "standardize":
            p["gamma"] = True
        if mode == "layernorm":
            p["beta"] = True
            p["mean"] = True
            p["rstd"] = True
        problems.append(p)
problems.append({"op": "normalize", "direction": "backward", "rows": 2, "cols": 300007, "dtype": "bf16",
                 "mode": "layernorm", "gamma": True, "dgamma": True, "dbeta": True})
# dwconv: fused activations in every 1D direction and layout and the 2D forward, seq_idx on the
# causal 1D forms. (The 2D backward_data entries with an activation run as the gradient prep and the
# plain data gradient: kvtune-tune tunes them as plain problems, duplicates of one another; a shapes
# file cannot name the 2D gradient prep itself.)
for act in ("silu", "gelu_tanh", "gelu_erf", "relu"):
    for direction in ("forward", "backward_data", "backward_weight"):
        for layout in ("ncl", "nlc"):
            p = {"op": "dwconv", "direction": direction, "layout": layout, "dtype": "bf16" if act == "silu" else "f32",
                 "n": 2, "c": 6, "l": 37, "kernel": 4, "causal": True, "activation": act, "bias": direction != "backward_data"}
            if act in ("silu", "gelu_tanh"):
                p["seq_idx"] = True
            problems.append(p)
    for direction in ("forward", "backward_data"):
        for layout in ("nchw", "nhwc"):
            problems.append({"op": "dwconv", "direction": direction, "layout": layout, "dtype": "f32", "n": 2, "c": 5,
                             "h": 9, "w": 11, "kernel": [3, 3], "padding": 1, "activation": act,
                             "bias": direction == "forward"})
# the tiled channel-last kernel (split into parts on 2026-11-27)
for dtype in ("f32", "bf16"):
    problems.append({"op": "dwconv", "direction": "forward", "layout": "nhwc", "dtype": dtype, "n": 1, "c": 24,
                     "h": 13, "w": 15, "kernel": [7, 7], "padding": 3, "bias": True})
# the causal conv1d with states (prefill hands over to decode) and the decode update
states = (("forward", {"initial_state": True, "state_out": True, "activation": "silu", "bias": True}),
          ("forward", {"seq_idx": True, "state_out": True}),
          ("backward_data", {"state_out": True}),
          ("forward", {"gradient_prep": True, "activation": "silu", "bias": True, "initial_state": True}),
          ("backward_weight", {"initial_state": True}))
for direction, options in states:
    p = {"op": "dwconv_states", "direction": direction, "layout": "ncl", "dtype": "bf16", "batch": 2,
         "channels": 6, "width": 37, "k": 4}
    p.update(options)
    problems.append(p)
for circular in (False, True):
    problems.append({"op": "dwconv_decode", "batch": 3, "channels": 37, "seqlen": 2, "k": 4, "dtype": "bf16",
                     "state_len": 9 if circular else 3, "circular": circular, "indices": True, "activation": "silu",
                     "bias": True})
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "changed-shapes.json")
with open(out, "w") as f:
    json.dump({"problems": problems}, f, indent=0)
print(f"{len(problems)} entries -> {out}")
