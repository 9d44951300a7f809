#!/usr/bin/env python3
"""Writes tests/data/export-example.json: a `kvtune-cache export` document with SYNTHETIC timings.

CI has no GPU, so the tools' tests import this file to get a realistic cache: real problem keys,
real variant labels and configs (from `kvtune-tune --dry-run --json --variants`), the real
template hash of the build that ran this script, and times from a simple bandwidth/latency model
of an H200 (copy 4258 GB/s, as measured in bench/results/2026-11-21-h200-demo.log) and of an H100
without measured ceilings. The numbers are plausible, not measurements: never quote them.

usage: make_export_example.py BUILD/tools/kvtune-tune [OUT.json]
"""
import json
import math
import os
import subprocess
import sys
import tempfile

FNV_OFFSET = 1469598103934665603
FNV_PRIME = 1099511628211


def fnv_hex(text):
    h = FNV_OFFSET
    for byte in text.encode():
        h ^= byte
        h = (h * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def device(name, sms, l2, memory, bus, smem, driver, nvrtc, kvtune):
    # The id is computed as DeviceFingerprint::id() does.
    ident = fnv_hex(f"{name}|9.0|{sms}|{l2}|{memory}|{bus}|{driver}|{nvrtc}|{kvtune}")
    return {
        "id": ident, "name": name, "cc_major": 9, "cc_minor": 0, "sm_count": sms, "l2_bytes": l2,
        "memory_bytes": memory, "driver_version": driver, "nvrtc_version": nvrtc, "kvtune_version": kvtune,
        "updated_at": 1795251600,
        "fingerprint": {"id": ident, "name": name, "compute_capability": "9.0", "sm_count": sms, "l2_bytes": l2,
                        "memory_bytes": memory, "memory_bus_bits": bus, "max_smem_per_block_optin": smem,
                        "driver_version": driver, "nvrtc_version": nvrtc, "kvtune_version": kvtune},
    }


def elem_bytes(dtype):
    return 4 if dtype == "f32" else 2


def model_bytes(p, rows):
    e = elem_bytes(p["dtype"])
    b = 2.0 * rows * p["cols"] * e + (p["gamma"] + p["beta"]) * p["cols"] * e
    return b + (p["mean"] + p["rstd"]) * rows * 4.0


def dwconv_dims(p, n_bucket):
    """Input and output elements, taps and channels of a dwconv shapes entry (as dwconv::Problem)."""
    one_d = p["layout"] in ("ncl", "nlc")
    if one_d:
        h, w, kh, kw, sh, sw, dh, dw = 1, p["l"], 1, p["kernel"], 1, p["stride"], 1, p["dilation"]
        pad_l, pad_r = ((kw - 1) * dw, 0) if p["causal"] else tuple(p["padding"])
        pad_t = pad_b = 0
    else:
        h, w = p["h"], p["w"]
        (kh, kw), (sh, sw), (dh, dw) = p["kernel"], p["stride"], p["dilation"]
        pad_t, pad_b, pad_l, pad_r = p["padding"]
    oh = (h + pad_t + pad_b - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pad_l + pad_r - dw * (kw - 1) - 1) // sw + 1
    return n_bucket * p["c"] * h * w, n_bucket * p["c"] * oh * ow, kh * kw, p["c"]


def dwconv_model_bytes(p, n_bucket):
    inputs, outputs, taps, c = dwconv_dims(p, n_bucket)
    return elem_bytes(p["dtype"]) * (inputs + outputs + c * taps + (c if p["bias"] else 0))


def dwconv_model_ms(p, n_bucket, config, copy_gbps, seed):
    """Time of one dwconv variant: launch latency + traffic at an efficiency + FMAs at a rate."""
    inputs, outputs, taps, c = dwconv_dims(p, n_bucket)
    traffic = dwconv_model_bytes(p, n_bucket)
    flops = 2.0 * outputs * taps
    kind = config["kernel"]
    if kind == "direct":
        efficiency, fma_rate = (0.45, 0.10) if config["coalesced"] else (0.12, 0.05)
    elif kind == "tiled":
        efficiency = 0.55 + 0.08 * min(config["rw"], 4) / 4 + 0.1 * config["halo"] + 0.05 * (config["vc"] > 1)
        efficiency *= 1.0 if config["tx"] * config["ty"] >= 128 else 0.85
        fma_rate = 0.25 + 0.1 * config["filter"] + 0.05 * min(config["rw"], 4)
    else:  # wgrad: a reduction over N x H x W per tap
        efficiency = 0.35 + 0.1 * min(config["splits"], 32) / 32 + 0.05 * config["atomic"]
        efficiency *= 1.0 if config["ct"] * config["py"] >= 128 else 0.8
        fma_rate = 0.15 + 0.1 * min(config["tg"], 16) / 16
    us = 3.0 + traffic / (copy_gbps * 1e9 * efficiency) * 1e6 + flops / (61240e9 * fma_rate) * 1e6
    return us / 1000.0 * noise(seed, 0.03)


def noise(seed, sigma):
    # Deterministic, roughly normal, from the hash of the seed text.
    h = int(fnv_hex(seed), 16)
    u = [((h >> (16 * i)) & 0xFFFF) / 65535.0 for i in range(4)]
    return math.exp(sigma * (sum(u) - 2.0) * 1.7)


def model_ms(p, rows_bucket, config, copy_gbps, sms, l2, seed):
    """Time of one variant: launch latency + serial latency + traffic at an efficiency."""
    e = elem_bytes(p["dtype"])
    ve = max(1, config["vw"] // e)
    tpr, rpb = config["tpr"], config["rpb"]
    items = math.ceil(p["cols"] / (tpr * ve))
    traffic = model_bytes(p, rows_bucket)
    plane = rows_bucket * p["cols"] * e
    if config["keep"] == "reread":
        traffic += plane * (0.15 if plane < l2 / 2 else 1.0)  # a second read of x, from L2 or DRAM
    efficiency = {16: 0.94, 8: 0.86, 4: 0.72, 2: 0.45}[config["vw"]]
    efficiency *= {"reg": 1.0, "smem": 0.95, "reread": 0.97}[config["keep"]]
    blocks = math.ceil(rows_bucket / rpb)
    waves = blocks / (sms * max(1, 2048 // (tpr * rpb)))
    efficiency *= min(1.0, 0.25 + 0.75 * waves) if waves < 1 else 1.0
    efficiency *= 1.0 if tpr * rpb >= 128 else 0.85
    serial_us = 0.08 * items * (2 if config["keep"] == "reread" else 1) + 0.06 * math.log2(max(2, tpr))
    if config["stat"] == "welford":
        serial_us *= 1.3
        efficiency *= 0.97
    us = 2.3 + serial_us + traffic / (copy_gbps * 1e9 * efficiency) * 1e6
    return us / 1000.0 * noise(seed, 0.03)


def trial_status(p, config, seed):
    # Register-heavy wide blocks exceed the register file, as they do on real hardware.
    block = config["tpr"] * config["rpb"]
    if config["keep"] == "reg" and block >= 512 and config["items"] >= 2:
        return "resources_exceeded", f"{block} threads per block, the compiled kernel allows 384 (168 registers)"
    return "ok", ""


def main():
    tool = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "..", "..", "tests", "data", "export-example.json")
    shapes = {"problems": [
        {"op": "normalize", "rows": 1024, "cols": 128},
        {"op": "normalize", "rows": 4096, "cols": 256},
        {"op": "normalize", "rows": 8192, "cols": 512},
        {"op": "normalize", "rows": 16384, "cols": 1024},
        {"op": "normalize", "rows": 100000, "cols": 37},
        {"op": "normalize", "rows": 2048, "cols": 37},
        {"op": "normalize", "rows": 4096, "cols": 78},
        {"op": "normalize", "rows": 65536, "cols": 1024, "mode": "layernorm", "gamma": True, "beta": True},
        {"op": "normalize", "rows": 32768, "cols": 4096, "dtype": "bf16", "mode": "rmsnorm", "gamma": True},
        {"op": "normalize", "rows": 65536, "cols": 16, "dtype": "bf16", "mode": "layernorm", "gamma": True,
         "beta": True},
        # dwconv, tuned on the H200 only: Mamba's causal conv1d and a ConvNeXt weight gradient.
        {"op": "dwconv", "direction": "forward", "layout": "ncl", "dtype": "bf16", "n": 8, "c": 2048, "l": 2048,
         "kernel": 4, "causal": True, "bias": True},
        {"op": "dwconv", "direction": "backward_weight", "layout": "nchw", "dtype": "f32", "n": 32, "c": 384,
         "h": 14, "w": 14, "kernel": [7, 7], "padding": 3, "bias": True},
    ]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(shapes, f)
        shapes_path = f.name
    try:
        dry = json.loads(subprocess.check_output([tool, "--shapes", shapes_path, "--dry-run", "--json",
                                                  "--variants"]))
    finally:
        os.unlink(shapes_path)

    h200 = device("NVIDIA H200", 132, 52428800, 150754820096, 6144, 232448, 13000, 13000, "0.1.0")
    h200["ceilings"] = {"copy_gbps": 4258.0, "fma_gflops": 61240.0, "measured_at": 1795251600}
    h100 = device("NVIDIA H100 80GB HBM3", 132, 52428800, 84929347584, 5120, 232448, 13000, 13000, "0.1.0")
    gpus = [(h200, 4258.0, 0, len(dry["problems"])), (h100, 3020.0, 1, 4)]  # the H100 tuned the first four

    entries = []
    for dev, copy_gbps, offset, count in gpus:
        for index, item in enumerate(dry["problems"][:count]):
            p = item["problem"]
            trials = []
            for v in item["variants"]:
                seed = f"{dev['id']}|{item['key']}|{v['label']}"
                if item["op"] == "dwconv":
                    n_bucket = int(item["key"].split("n<=")[1].split(",")[0])
                    status, message = "ok", ""
                else:
                    rows_bucket = int(item["key"].split("rows<=")[1].split(",")[0])
                    status, message = trial_status(p, v["config"], seed)
                trial = {"label": v["label"], "status": status}
                if status == "ok":
                    if item["op"] == "dwconv":
                        ms = dwconv_model_ms(p, n_bucket, v["config"], copy_gbps, seed)
                        moved = dwconv_model_bytes(p, n_bucket)
                    else:
                        ms = model_ms(p, rows_bucket, v["config"], copy_gbps, dev["sm_count"], dev["l2_bytes"], seed)
                        moved = model_bytes(p, rows_bucket)
                    trial.update({"median_ms": round(ms, 6), "spread": round(0.01 + 0.03 * noise(seed + "s", 0.5) - 0.02, 4),
                                  "gbps": round(moved / (ms * 1e-3) / 1e9, 1)})
                else:
                    trial["message"] = message
                trials.append(trial)
            best = min((t for t in trials if t["status"] == "ok"), key=lambda t: t["median_ms"])
            config = next(v["config"] for v in item["variants"] if v["label"] == best["label"])
            entries.append({
                "op": item["op"], "problem_key": item["key"], "device_id": dev["id"],
                "template_hash": item["template_hash"], "label": best["label"], "config": config,
                "origin": "tuned", "median_ms": best["median_ms"], "gbps": best["gbps"],
                "created_at": 1795251600 + 60 * index + 3600 * offset, "trials": trials,
            })

    document = {"kvtune_export": 1, "kvtune_version": "0.1.0", "exported_at": 1795262400,
                "devices": [h200, h100], "entries": entries}
    # One trial per line keeps the file reviewable.
    text = json.dumps(document, indent=1)
    with open(out, "w") as f:
        f.write(compact_trials(text) + "\n")
    print(f"wrote {out}: {len(entries)} entries, {sum(len(e['trials']) for e in entries)} trials")


def compact_trials(text):
    doc = json.loads(text)
    lines = ["{", f' "kvtune_export": {doc["kvtune_export"]},', f' "kvtune_version": "{doc["kvtune_version"]}",',
             f' "exported_at": {doc["exported_at"]},', ' "devices": [']
    lines.append(",\n".join("  " + json.dumps(d) for d in doc["devices"]))
    lines.append(" ],")
    lines.append(' "entries": [')
    blocks = []
    for e in doc["entries"]:
        head = {k: v for k, v in e.items() if k != "trials"}
        body = ",\n".join("    " + json.dumps(t) for t in e["trials"])
        blocks.append("  " + json.dumps(head)[:-1] + ', "trials": [\n' + body + "\n  ]}")
    lines.append(",\n".join(blocks))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
