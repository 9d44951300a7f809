#!/usr/bin/env python3
"""PyTorch peers of kvtune-bench: times PyTorch eager and torch.compile on kvtune-bench's suites.

The problems come from `kvtune-bench --list-suite NAME --json FILE` (one source of truth for the
shapes); the output is the peers JSON that `kvtune-bench --peers FILE` merges (schema
"kvtune-bench-peers/1", documented in docs/PERFORMANCE.md).

Per problem:
  normalize, layernorm:   F.layer_norm(x, (cols,), weight, bias, eps)
  normalize, standardize: (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + eps)
  normalize, rmsnorm:     F.rms_norm(x, (cols,), weight, eps)
  normalize with residual: s = x + r, then the norm of s (both returned; torch.compile fuses them)
  normalize_backward:     torch.autograd.grad(y, (x, weight[, bias]), dy) of F.layer_norm / F.rms_norm
  dwconv forward:         F.conv1d / F.conv2d with groups = C (causal 1D: padding K - 1, output
                          sliced to L, as PyTorch users write it)
  dwconv backward_data:   torch.autograd.grad(y, x, dy) through the same function
  dwconv backward_weight: torch.autograd.grad(y, w, dy)
  dwconv with bias and an activation (the fused rows): the convolution with bias, then
                          F.silu / F.gelu / F.relu as its own op (eager: the unfused pair);
                          backward through both (backward_weight: the weight and bias gradients)
  dwconv with seq_idx:    the causal conv1d as K shifted, masked multiply-adds (a tap reads
                          position t' for output t only when seq_idx[t'] == seq_idx[t])
  dwconv with states:     torch.cat([initial_state, x]) then the unpadded conv1d; the final state
                          is the last K - 1 inputs (backward_data: the gradients of x and the state)
  dwconv_decode:          one decode step as PyTorch users write it: gather the rows' states by
                          state_indices, concatenate the new tokens, conv1d over the window, the
                          activation, and scatter the shifted state back (circular states: read and
                          write positions modulo the state length by advanced indexing)
each eager ("torch-eager") and through torch.compile ("torch-compile"). The timing mirrors
kvtune-bench: CUDA events, warm-up, median of --samples batches, inputs rotated over sets whose
total exceeds twice the L2, random data, CUDA-graph replay (torch.cuda.CUDAGraph) below
--graph-threshold-us per call, and always for the calls in ALWAYS_GRAPH (host-bound in a loop)
and for torch.compile (its runtime wrapper's host time).
"""
import argparse
import json
import math
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # --check reads the listing only
    torch = F = None

SCHEMA = "kvtune-bench-peers/1"
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16} if torch is not None else {}


def log(message):
    print(message, file=sys.stderr, flush=True)


def summarize(per_call_ms, mode):
    per_call_ms = sorted(per_call_ms)
    n = len(per_call_ms)

    def at(q):
        return per_call_ms[int(q * (n - 1) + 0.5)]

    median = at(0.5)
    return {"status": "ok", "median_ms": median,
            "spread": (at(0.9) - at(0.1)) / median if median > 0 else 0.0, "mode": mode}


# Calls whose events estimate is the host's time, not the kernels': a decode step, and the normalize
# backward, whose autograd.grad costs 100-350 us of host time a call (eager and torch.compile's
# runtime wrappers) around 10-200 us of kernels. They are always timed by graph replay (device time).
ALWAYS_GRAPH = ("dwconv_decode", "normalize_backward")


def measure(call, slots, args, graph=False):
    """Times call(slot) like kvtune-bench's measure(): events, or graph replay for short calls (and
    always for `graph`: a decode step, whose events estimate is the host's time, not the kernels')."""
    stream = torch.cuda.current_stream()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    state = {"next": 0}
    # Outputs "held": each set keeps its last output alive until its next call, so the caching
    # allocator hands every call memory that was written a whole rotation earlier, as kvtune-bench
    # rotates its own outputs with the inputs. "reused": the output is dropped at once and the next
    # call gets the block just freed, whose lines are still in L2 (stores that never reach DRAM
    # within the timing); measured side by side in bench/NOTES.md, 2026-11-29.
    held = [None] * slots

    def one():
        slot = state["next"]
        out = call(slot)
        if args.outputs == "held":
            held[slot] = out
        state["next"] = (slot + 1) % slots

    for _ in range(2 * slots):  # two rotations: with held outputs the first allocates every set's block
        one()
    torch.cuda.synchronize()
    start.record(stream)
    for _ in range(slots):
        one()
    stop.record(stream)
    stop.synchronize()
    estimate = max(start.elapsed_time(stop) / slots, 1e-4)
    for _ in range(int(min(10000, math.ceil(args.warmup_ms / estimate)))):
        one()
    torch.cuda.synchronize()

    fallback = None
    if not args.no_graphs and (graph or estimate * 1e3 < args.graph_threshold_us):
        batch = int(min(max(math.ceil(args.graph_batch_ms / estimate), slots), 5000))
        try:
            side = capture_stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up on a side stream, as CUDA-graph capture requires
                for _ in range(3):
                    one()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=side):
                for _ in range(batch):
                    one()
            graph.replay()
            torch.cuda.synchronize()
            times = []
            for _ in range(args.samples):
                start.record(stream)
                graph.replay()
                stop.record(stream)
                stop.synchronize()
                times.append(start.elapsed_time(stop) / batch)
            del graph
            held[:] = [None] * slots
            return summarize(times, "graph")
        except Exception as e:  # capture is not possible for every op: fall back to events
            fallback = f"graph capture failed, timed with events: {type(e).__name__}: {e}"
            torch.cuda.synchronize()
    batch = int(min(max(math.ceil(args.batch_ms / estimate), 1), 10000))
    times = []
    for _ in range(args.samples):
        start.record(stream)
        for _ in range(batch):
            one()
        stop.record(stream)
        stop.synchronize()
        times.append(start.elapsed_time(stop) / batch)
    result = summarize(times, "events")
    if fallback:
        result["message"] = fallback[:500]
    return result


def rotation_slots(set_bytes, l2_bytes):
    free, _ = torch.cuda.mem_get_info()
    count = int(min(max(math.ceil(2.0 * l2_bytes / set_bytes) + 1, 1), 64))
    while count > 1 and count * set_bytes > 0.4 * free:
        count -= 1
    return count


_streams = {}


def capture_stream():
    """The stream that graph capture records on. The retained forwards of the backward calls run on
    it too: autograd runs each backward op on its forward op's stream, so a forward on another stream
    would put the captured backward's kernels outside the capture."""
    if "capture" not in _streams:
        _streams["capture"] = torch.cuda.Stream()
        # Inputs come from a generator of our own: a capture that fails can leave the default
        # generator registered with the abandoned graph, and every later torch.rand would then fail.
        _streams["generator"] = torch.Generator(device="cuda")
        _streams["generator"].manual_seed(20261128)
    return _streams["capture"]


def make_on_capture_stream(make, f):
    """make(f) with its work (the backward calls' retained forwards) on the capture stream."""
    side, here = capture_stream(), torch.cuda.current_stream()
    side.wait_stream(here)
    with torch.cuda.stream(side):
        call = make(f)
    here.wait_stream(side)
    return call


def random_tensor(shape, dtype, offset=0.5, scale=1.0, memory_format=None):
    capture_stream()
    t = (torch.rand(shape, device="cuda", dtype=torch.float32, generator=_streams["generator"]) * 2 - 1) * scale + offset
    t = t.to(dtype)
    if memory_format is not None:
        t = t.contiguous(memory_format=memory_format)
    return t


def norm_function(p, cols, gamma, beta, eps):
    """The peer's normalization of p["mode"]: its description and a function of x."""
    mode = p["mode"]
    if mode == "layernorm":
        return "F.layer_norm", lambda x: F.layer_norm(x, (cols,), gamma, beta, eps)
    if mode == "rmsnorm":
        return "F.rms_norm", lambda x: F.rms_norm(x, (cols,), gamma, eps)
    if p.get("ddof", 1) != 1:
        raise ValueError("the three-op standardize peer uses torch.std's ddof = 1")
    return ("(x - x.mean(1)) / (x.std(1) + eps)",
            lambda x: (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + eps))


def normalize_case(p, l2_bytes):
    rows, cols, eps = p["rows"], p["cols"], float(p["eps"])
    dtype = DTYPES[p["dtype"]]
    esize = torch.tensor([], dtype=dtype).element_size()
    slots = rotation_slots((4 if p.get("residual") else 2) * rows * cols * esize, l2_bytes)
    xs = [random_tensor((rows, cols), dtype) for _ in range(slots)]
    gamma = random_tensor((cols,), dtype, 1.0, 0.25) if p.get("gamma") else None
    beta = random_tensor((cols,), dtype, 0.0, 0.25) if p.get("beta") else None
    op, fn = norm_function(p, cols, gamma, beta, eps)

    if p.get("residual"):  # the pre-norm step: s = x + r, y = norm(s); both written
        rs = [random_tensor((rows, cols), dtype, 0.0, 2.0) for _ in range(slots)]
        norm, op = fn, "x + r, then " + op

        def fn(x, r):
            s = x + r
            return norm(s), s

        def make(f):
            return lambda slot: f(xs[slot], rs[slot])
        return op, fn, make, slots

    def make(f):
        return lambda slot: f(xs[slot])

    return op, fn, make, slots


def normalize_backward_case(p, l2_bytes):
    """The backward of F.layer_norm / F.rms_norm through autograd, as the dwconv backward rows: one
    retained forward graph per slot (eager, or torch.compile's forward whose backward graph Inductor
    compiles too); each timed call is one autograd.grad for x, the weight and the bias."""
    rows, cols, eps = p["rows"], p["cols"], float(p["eps"])
    dtype = DTYPES[p["dtype"]]
    if p["mode"] == "standardize":
        raise ValueError("the standardize backward has no PyTorch peer in the suites")
    esize = torch.tensor([], dtype=dtype).element_size()
    slots = rotation_slots(3 * rows * cols * esize, l2_bytes)
    xs = [random_tensor((rows, cols), dtype).requires_grad_(True) for _ in range(slots)]
    gamma = random_tensor((cols,), dtype, 1.0, 0.25).requires_grad_(p.get("dgamma", False)) if p.get("gamma") else None
    beta = random_tensor((cols,), dtype, 0.0, 0.25).requires_grad_(True) if p.get("dbeta") else None
    op, fn = norm_function(p, cols, gamma, beta, eps)
    wrt = [t for t in (gamma if p.get("dgamma") else None, beta) if t is not None]
    op += " backward (autograd.grad of x" + (", weight" if p.get("dgamma") else "") + \
        (", bias" if p.get("dbeta") else "") + ")"

    def make(f):
        ys = [f(xs[slot]) for slot in range(slots)]
        dys = [random_tensor((rows, cols), dtype, 0.0, 1.0) for _ in range(slots)]
        return lambda slot: torch.autograd.grad(ys[slot], [xs[slot]] + wrt, dys[slot], retain_graph=True)

    return op, fn, make, slots


def dwconv_case(p, l2_bytes):
    dtype = DTYPES[p["dtype"]]
    n, c, h, w = p["n"], p["c"], p["h"], p["w"]
    kh, kw = p["kernel_h"], p["kernel_w"]
    layout, direction, causal = p["layout"], p["direction"], p["causal"]
    if p["dilation_h"] != 1 or p["dilation_w"] != 1:
        raise ValueError("dilation is not in the suites")
    one_d = layout in ("ncl", "nlc")
    activation = p.get("activation", "none")
    act = {"none": lambda y: y, "silu": F.silu, "relu": F.relu, "gelu_erf": F.gelu,
           "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}[activation]
    bias = random_tensor((c,), dtype, 0.0, 0.25) if p.get("bias", False) else None
    with_seq_idx, with_state = p.get("seq_idx", False), p.get("initial_state", False)
    final_state, dinitial_state = p.get("final_state", False), p.get("dinitial_state", False)
    if (with_seq_idx or with_state) and not (one_d and causal and layout == "ncl"):
        raise ValueError("seq_idx and states are benchmarked on causal NCL rows")
    if not causal and (p["pad_top"] != p["pad_bottom"] or p["pad_left"] != p["pad_right"]):
        raise ValueError("asymmetric padding")
    state_len = kw - 1
    if one_d:
        pad = kw - 1 if causal else p["pad_left"]
        stride = p["stride_w"]

        def conv(x, weight, bias, state, seq):
            if state is not None:  # the state is the K - 1 inputs before position 0
                u = torch.cat([state, x], -1)
                y = act(F.conv1d(u, weight.view(c, 1, kw), bias, groups=c))
                return (y, u[..., -state_len:].contiguous()) if final_state else y
            if seq is not None:  # K shifted, masked multiply-adds
                xp, sp = F.pad(x, (kw - 1, 0)), F.pad(seq, (kw - 1, 0), value=-1)
                y = bias.view(1, c, 1).to(x.dtype) if bias is not None else 0
                for k in range(kw):
                    same = (sp[:, k:k + w] == seq).unsqueeze(1)
                    y = y + weight[:, k].view(1, c, 1) * torch.where(same, xp[..., k:k + w], 0)
                return act(y)
            y = F.conv1d(x, weight.view(c, 1, kw), bias, stride=stride, padding=pad, groups=c)
            return act(y[..., :w] if causal else y)
        weight = random_tensor((c, kw), dtype, 0.0, 0.5)
        op = "F.conv1d(groups=C)"
        if with_seq_idx:
            op = "K shifted masked multiply-adds (seq_idx)"
        elif with_state:
            op = "torch.cat([initial_state, x]), F.conv1d(groups=C)" + (", final state sliced" if final_state else "")
    else:
        pad = (p["pad_top"], p["pad_left"])
        stride = (p["stride_h"], p["stride_w"])

        def conv(x, weight, bias, state, seq):
            return act(F.conv2d(x, weight.view(c, 1, kh, kw), bias, stride=stride, padding=pad, groups=c))
        weight = random_tensor((c, kh, kw), dtype, 0.0, 0.5)
        op = "F.conv2d(groups=C)"
    if bias is not None:
        op += " + bias"
    if activation != "none":
        op += f", then {activation}"

    def make_x():
        if layout == "nlc":  # [N, L, C] in memory, seen as [N, C, L]
            return random_tensor((n, w, c), dtype).transpose(1, 2)
        if layout == "nhwc":
            return random_tensor((n, c, h, w), dtype, memory_format=torch.channels_last)
        return random_tensor((n, c, w) if one_d else (n, c, h, w), dtype)

    esize = torch.tensor([], dtype=dtype).element_size()
    elements = n * c * h * w
    slots = rotation_slots(3 * elements * esize, l2_bytes)
    xs = [make_x() for _ in range(slots)]
    states = [random_tensor((n, c, state_len), dtype) if with_state else None for _ in range(slots)]
    seq = None
    if with_seq_idx:  # equal runs, as kvtune-bench's: position t of a row is in sequence t * S / w
        seq = (torch.arange(w, device="cuda", dtype=torch.int64) * p["sequences"] // w).to(torch.int32)
        seq = seq.unsqueeze(0).expand(n, w).contiguous()
    if direction == "forward":
        def make(f):
            return lambda slot: f(xs[slot], weight, bias, states[slot], seq)
        return op, conv, make, slots

    # Backward: one retained forward graph per slot; each timed call is one autograd.grad.
    if direction == "backward_data":
        for x, state in zip(xs, states):
            x.requires_grad_(True)
            if dinitial_state:
                state.requires_grad_(True)
        op += " backward (input grad" + (" and the initial state's" if dinitial_state else "") + ")"
    else:
        weight.requires_grad_(True)
        if bias is not None and p.get("dbias", False):
            bias.requires_grad_(True)
        op += " backward (weight grad" + (" and bias grad" if p.get("dbias", False) else "") + ")"

    def wrt(slot):
        if direction == "backward_data":
            return (xs[slot], states[slot]) if dinitial_state else (xs[slot],)
        return (weight, bias) if p.get("dbias", False) else (weight,)

    def make(f):
        ys = [f(xs[slot], weight, bias, states[slot], seq) for slot in range(slots)]
        dys = [random_tensor(y.shape, dtype, 0.0, 1.0) for y in ys]
        if layout == "nhwc":
            dys = [d.contiguous(memory_format=torch.channels_last) for d in dys]
        inputs = [wrt(slot) for slot in range(slots)]
        return lambda slot: torch.autograd.grad(ys[slot], inputs[slot], dys[slot], retain_graph=True)

    return op, conv, make, slots


def decode_case(p, l2_bytes):
    dtype = DTYPES[p["dtype"]]
    batch, c, seqlen, kw = p["batch"], p["channels"], p["seqlen"], p["kernel_w"]
    state_len, circular = p["state_len"], p["circular"]
    act = {"none": lambda y: y, "silu": F.silu, "relu": F.relu, "gelu_erf": F.gelu,
           "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}[p.get("activation", "none")]
    esize = torch.tensor([], dtype=dtype).element_size()
    slots = rotation_slots((2 * seqlen + 2 * state_len) * batch * c * esize, l2_bytes)
    xs = [random_tensor((batch, c, seqlen), dtype) for _ in range(slots)]
    states = [random_tensor((batch, c, state_len), dtype) for _ in range(slots)]
    weight = random_tensor((c, kw), dtype, 0.0, 0.5)
    bias = random_tensor((c,), dtype, 0.0, 0.25) if p.get("bias", False) else None
    rows = torch.arange(batch, device="cuda", dtype=torch.int64)
    indices = rows.clone() if p.get("state_indices", False) else None
    channels = torch.arange(c, device="cuda").view(1, c, 1)
    positions = (rows * 2654435761 % 4096) if circular else None
    history = torch.arange(kw - 1, device="cuda")
    new = torch.arange(seqlen, device="cuda")

    def step(x, state, weight, bias, indices, positions):
        slot = indices if indices is not None else rows
        if circular:
            read = (positions.view(-1, 1) - (kw - 1) + history) % state_len
            write = (positions.view(-1, 1) + new) % state_len
            window = torch.cat([state[slot.view(-1, 1, 1), channels, read.unsqueeze(1)], x], -1)
            state[slot.view(-1, 1, 1), channels, write.unsqueeze(1)] = x
        else:
            window = torch.cat([state[slot], x], -1)
            state.index_copy_(0, slot, window[..., -(kw - 1):])
        return act(F.conv1d(window, weight.unsqueeze(1), bias, groups=c))

    op = "decode step: gather states, cat, F.conv1d(groups=C)" + (" + bias" if bias is not None else "") + \
        f", then {p.get('activation', 'none')}, scatter the state" + (" (circular)" if circular else "")

    def make(f):
        return lambda slot: f(xs[slot], states[slot], weight, bias, indices, positions)

    return op, step, make, slots


# The peer of each call kind of the suite listing ("call"); --check fails for a kind missing here.
CASES = {"normalize": normalize_case, "normalize_backward": normalize_backward_case, "dwconv": dwconv_case,
         "dwconv_decode": decode_case}


def run_problem(p, args, l2_bytes, compile_state):
    results = []
    case = CASES[p.get("call", p["family"])]
    try:
        op, fn, make, slots = case(p, l2_bytes)
    except Exception as e:
        for peer in ("torch-eager", "torch-compile"):
            results.append({"id": p["id"], "peer": peer, "status": "unsupported", "message": str(e)[:500]})
        return results
    for peer in ("torch-eager", "torch-compile"):
        entry = {"id": p["id"], "peer": peer, "op": op + (" via torch.compile" if peer == "torch-compile" else "")}
        try:
            if peer == "torch-compile":
                if args.no_compile:
                    results.append({**entry, "status": "skipped", "message": "--no-compile"})
                    continue
                if compile_state["seconds"] > args.compile_budget_s:
                    results.append({**entry, "status": "skipped",
                                    "message": f"torch.compile budget of {args.compile_budget_s:.0f} s spent"})
                    continue
                torch._dynamo.reset()
                began = time.perf_counter()
                f = torch.compile(fn, dynamic=False)
                call = make_on_capture_stream(make, f)
                call(0)  # compiles forward (and, for the backward problems, the backward graph)
                torch.cuda.synchronize()
                compile_state["seconds"] += time.perf_counter() - began
            else:
                call = make_on_capture_stream(make, fn)
            # torch.compile's runtime wrapper costs 20-170 us of host time a call: near the threshold its
            # events estimate flipped between modes run to run (normalize-wide 2 x 2^20 f32: 13.3 us by
            # graph replay, 106-168 us by events; bench/NOTES.md, 2026-11-29), so it is always replayed.
            graph = p.get("call") in ALWAYS_GRAPH or peer == "torch-compile"
            results.append({**entry, **measure(call, slots, args, graph=graph)})
        except Exception as e:
            results.append({**entry, "status": "failed", "message": f"{type(e).__name__}: {e}"[:500]})
        finally:
            torch.cuda.synchronize()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite-json", required=True, help="output of kvtune-bench --list-suite NAME --json FILE")
    parser.add_argument("--out", help="peers JSON to write (kvtune-bench --peers FILE)")
    parser.add_argument("--check", action="store_true",
                        help="no GPU needed: check that every problem's call kind has a peer, and exit")
    parser.add_argument("--samples", type=int, default=21)
    parser.add_argument("--warmup-ms", type=float, default=2.0)
    parser.add_argument("--batch-ms", type=float, default=1.0)
    parser.add_argument("--graph-batch-ms", type=float, default=0.5)
    parser.add_argument("--graph-threshold-us", type=float, default=100.0)
    parser.add_argument("--no-graphs", action="store_true")
    parser.add_argument("--outputs", choices=("held", "reused"), default="held",
                        help="held (default): each rotated set keeps its output until its next call, as "
                             "kvtune-bench's outputs rotate; reused: dropped at once, the next call writes "
                             "the same (L2-resident) block")
    parser.add_argument("--no-compile", action="store_true", help="time eager PyTorch only")
    parser.add_argument("--compile-budget-s", type=float, default=150.0,
                        help="stop compiling new problems once torch.compile has taken this long")
    args = parser.parse_args()

    with open(args.suite_json) as f:
        suite = json.load(f)
    if suite.get("schema") != "kvtune-bench-suite/1":
        sys.exit(f"{args.suite_json}: not a kvtune-bench suite listing (schema {suite.get('schema')!r})")
    if args.check:
        kinds = sorted({p.get("call", p["family"]) for p in suite["problems"]})
        missing = [k for k in kinds if k not in CASES]
        if missing:
            sys.exit(f"torch_peers.py: no peer for the call kinds {missing}")
        print(f"torch_peers.py: {len(suite['problems'])} problems, call kinds {kinds}: every one has a peer")
        return
    if args.out is None:
        sys.exit("torch_peers.py: --out is required")
    if torch is None:
        sys.exit("torch_peers.py: PyTorch is not installed")
    if not torch.cuda.is_available():
        sys.exit("torch_peers.py: no CUDA device visible to PyTorch")

    # Parity with kvtune and kvtune-bench's cuDNN: f32 without TF32; cuDNN picks its fastest algorithm.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 50 << 20)
    torch.manual_seed(1234)

    compile_state = {"seconds": 0.0}
    results = []
    problems = suite["problems"]
    for i, p in enumerate(problems):
        log(f"[{i + 1}/{len(problems)}] {p['id']}")
        for r in run_problem(p, args, l2_bytes, compile_state):
            shown = f"{r['median_ms'] * 1e3:.2f} us ({r['mode']})" if r["status"] == "ok" else \
                f"{r['status']}: {r.get('message', '')[:120]}"
            log(f"    {r['peer']}: {shown}")
            results.append(r)
        torch.cuda.empty_cache()

    doc = {"schema": SCHEMA, "source": "bench/peers/torch_peers.py", "torch_version": torch.__version__,
           "cuda_version": str(torch.version.cuda), "cudnn_version": str(torch.backends.cudnn.version()),
           "device": props.name, "suite": suite.get("suite"), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "compile_seconds": compile_state["seconds"], "outputs": args.outputs, "results": results}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    log(f"wrote {args.out}: {len(results)} results, torch.compile took {compile_state['seconds']:.0f} s")


if __name__ == "__main__":
    main()
