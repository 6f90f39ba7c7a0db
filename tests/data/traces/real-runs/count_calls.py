"""Count the collectives in the real-run traces, independently of zerocalc (plain json/gzip).

Usage::

    python count_calls.py CASEDIR [CASEDIR ...]          # a readable table per rank and step
    python count_calls.py --write CASEDIR [CASEDIR ...]  # also write CASEDIR/expected.json

What is counted, per rank and per ``ProfilerStep#k`` (the step's window is the
``ProfilerStep#k`` annotation on the main thread; a call belongs to it when it starts and
ends inside the window; in a trace without ``ProfilerStep``, per ``OptimizerStep#k``: the window
from the end of the k-th ``Optimizer.step#`` annotation to the end of the next):

* every ``c10d::*`` CPU op on the main thread (the collective as the Python code called it):
  its name, the root of a broadcast/reduce (``Concrete Inputs`` argument 2), the elements of
  its input and output tensors (from ``Input Dims``; a
  ``TensorList`` argument counts all tensors in the list, a 0-d tensor counts 1), and its
  element type from ``Input type`` (``TensorList`` arguments carry no type);
* the ``aten::mse_loss`` ops on the main thread (``aten::cross_entropy_loss`` in the GPT-2 case): the model's
  loss, one per forward pass,
  so one per micro-batch;
* the reductions of a forward pass (``forward_reductions``, written only where a step has any): every
  ``c10d::`` all-reduce, reduce-scatter or reduce nested (on its thread, by start and end) in a CPU op
  whose ``args`` record a ``Sequence number`` (an op autograd differentiates, an ``autograd.Function``'s
  forward) and in no ``autograd::engine::evaluate_function:`` event (a node of the backward) nor any event
  whose name says ``backward`` (FSDP2's ``FSDP::root_post_backward_callback``, run after the nodes), as
  ``"<op> <elements in> in <innermost such op>"``; and the all-gathers of a forward pass, every ``c10d::``
  all-gather so nested (``forward_gathers``, likewise);
* the all-gathers of a reentrant checkpoint's recompute (``recompute_gathers``, written only where a step
  has any): every ``c10d::`` all-gather whose innermost enclosing ``autograd::engine::evaluate_function:``
  event is a checkpoint's (``CheckpointFunctionBackward``), with no event between that names a backward (a
  hook of the backward that follows the recompute, FSDP1's ``_pre_backward_hook``), as
  ``"<op> <elements in> in <that node>"``;
* the all-gathers run in the backward (``backward_gathers``, written only where a step has any): every
  ``c10d::`` all-gather nested in an ``autograd::engine::evaluate_function:`` event, as
  ``"<op> <elements in> in <the innermost such node>"``;
* every ``gloo:*`` annotation (the gloo worker thread that carried the call out): name,
  elements, element type, thread id. Worker events belong to the step in whose window
  they start.

Each ``c10d::*`` op is paired with the first not yet paired gloo worker event that starts
after it and has the matching gloo name and input size (see ``GLOO_NAME``); the pairing gives
the element type of ``TensorList`` calls and the worker thread (each gloo process group has
its own pool of worker threads). The group size of an all-gather is output/input, of a
reduce-scatter input/output; for the other collectives the trace does not name the group.
"""

import argparse
import collections
import gzip
import json
import math
import os
import re
import sys

# c10d op -> the gloo worker annotation that carries it out. Over gloo a reduce-scatter
# runs as an all-reduce of the whole input (the worker event shows gloo:all_reduce).
GLOO_NAME = {
    "c10d::allreduce_": "gloo:all_reduce",
    "c10d::allreduce_coalesced_": "gloo:all_reduce",
    "c10d::_reduce_scatter_base_": "gloo:all_reduce",
    "c10d::reduce_scatter_": "gloo:all_reduce",
    "c10d::reduce_scatter_tensor_coalesced_": "gloo:all_reduce",
    "c10d::_allgather_base_": "gloo:all_gather",
    "c10d::allgather_": "gloo:all_gather",
    "c10d::allgather_into_tensor_coalesced_": "gloo:all_gather",
    "c10d::broadcast_": "gloo:broadcast",
    "c10d::reduce_": "gloo:reduce",
    "c10d::alltoall_base_": "gloo:all_to_all",
    "c10d::alltoall_": "gloo:all_to_all",
    "c10d::send": "gloo:send",
    "c10d::recv_": "gloo:recv",
    "c10d::barrier": "gloo:barrier",
}
OUT_FIRST = ("allgather", "reduce_scatter", "alltoall")  # ops whose arg 0 is the output
STEP = re.compile(r"ProfilerStep#(\d+)$")


def numel(dims, typ):
    """Elements of one argument from its Input Dims / Input type entries."""
    if typ in ("", "Scalar", "ScalarList", "None") or dims is None:
        return None
    if typ in ("TensorList", "GenericList"):
        return sum(numel(d, "Tensor") or 0 for d in dims)
    if dims and isinstance(dims[0], list):  # nested list of shapes
        return sum(numel(d, "Tensor") or 0 for d in dims)
    return math.prod(dims)


def c10d_call(e):
    a = e.get("args", {})
    dims, types = a.get("Input Dims", []), a.get("Input type", [])
    sizes = [numel(d, t) for d, t in zip(dims, types, strict=False)]
    name = e["name"]
    if any(k in name for k in OUT_FIRST):
        out_n, in_n, dtype = sizes[0], sizes[1], types[1]
    else:
        in_n = out_n = sizes[0] if sizes else None
        dtype = types[0] if types else None
    if dtype in ("TensorList", "GenericList", ""):
        dtype = None
    group = None
    if "allgather" in name and in_n and out_n:  # c10d::allgather_'s output list has no recorded dims
        group = out_n // in_n
    elif "reduce_scatter" in name and out_n:
        group = in_n // out_n
    root = None
    if name in ("c10d::broadcast_", "c10d::reduce_"):  # (tensors, group, root_rank, root_tensor, ...)
        conc = a.get("Concrete Inputs", [])
        root = int(conc[2]) if len(conc) > 2 and conc[2].lstrip("-").isdigit() else None
    return {"op": name, "dtype": dtype, "in_elems": in_n, "out_elems": out_n,
            "group_size_from_shapes": group, "root": root, "ts": e["ts"], "dur": e.get("dur", 0)}


REDUCTIONS = ("c10d::allreduce_", "c10d::allreduce_coalesced_", "c10d::reduce_", "c10d::reduce_scatter_",
              "c10d::_reduce_scatter_base_", "c10d::reduce_scatter_tensor_coalesced_")
GATHERS = ("c10d::allgather_", "c10d::_allgather_base_", "c10d::allgather_into_tensor_coalesced_",
           "c10d::allgather_coalesced_")
NODE = "autograd::engine::evaluate_function:"


def mark_forward(events, tid, calls):
    """Set ``forward_in`` on each call (a ``c10d_call`` dict) nested in a numbered op and in no node of the
    backward on thread ``tid``: the innermost numbered op's name; None on every other call."""
    by_start = {(c["ts"], c["dur"], c["op"]): c for c in calls}
    stack = []  # the events enclosing the current one, outermost first
    mine = (e for e in events if e["tid"] == tid and "dur" in e)
    for e in sorted(mine, key=lambda e: (e["ts"], -e["dur"])):
        end = e["ts"] + e["dur"]
        while stack and stack[-1]["ts"] + stack[-1]["dur"] < end - 1e-3:
            stack.pop()
        c = by_start.get((e["ts"], e["dur"], e["name"]))
        if c is not None:
            numbered = [a["name"] for a in stack if (a.get("args") or {}).get("Sequence number", -1) >= 0]
            in_node = any(a["name"].startswith(NODE) or "backward" in a["name"].lower() for a in stack)
            marked = c["op"] in REDUCTIONS or c["op"] in GATHERS
            c["forward_in"] = numbered[-1] if numbered and not in_node and marked else None
            c["recompute_in"] = recompute_node(stack) if c["op"] in GATHERS else None
            nodes = [a["name"][len(NODE):].strip() for a in stack if a["name"].startswith(NODE)]
            c["backward_in"] = nodes[-1] if nodes and c["op"] in GATHERS else None
        stack.append(e)


def recompute_node(stack):
    """The name of the innermost node of the backward in ``stack`` (the events enclosing a call, outermost
    first) where it is a reentrant checkpoint's (``CheckpointFunctionBackward``) and no event inside it
    names a backward (a hook of the backward that follows the recompute); None otherwise."""
    for k in range(len(stack) - 1, -1, -1):
        name = stack[k]["name"]
        if name.startswith(NODE):
            inner = [a["name"] for a in stack[k + 1:]]
            hook = any("backward" in n.lower() and "Checkpoint" not in n for n in inner)
            return name[len(NODE):].strip() if "Checkpoint" in name and not hook else None
    return None


def gloo_event(e):
    a = e.get("args", {})
    dims, types = a.get("Input Dims", [[]]), a.get("Input type", [""])
    return {"op": e["name"], "dtype": types[0] or None, "elems": numel(dims[0], types[0] or "Tensor"),
            "tid": e["tid"], "ts": e["ts"]}


def count_file(path):
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    info = trace.get("distributedInfo", {})
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in events if STEP.match(e.get("name", ""))), key=lambda e: e["ts"])
    if not steps:  # a profile without prof.step(): the spans from one optimizer step's end to the next's
        opt = sorted((e for e in events if e.get("name", "").startswith("Optimizer.step#")
                      and e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
        ends = [e["ts"] + e["dur"] for e in opt]
        steps = [{"name": f"OptimizerStep#{k}", "ts": a, "dur": b - a, "tid": opt[0]["tid"]}
                 for k, (a, b) in enumerate(zip(ends, ends[1:], strict=False), start=1)]
    main_tid = steps[0]["tid"] if steps else None
    calls = sorted((c10d_call(e) for e in events
                    if e.get("name", "").startswith("c10d::") and e["tid"] == main_tid),
                   key=lambda c: c["ts"])
    mark_forward(events, main_tid, calls)
    workers = sorted((gloo_event(e) for e in events if e.get("name", "").startswith("gloo:")),
                     key=lambda g: g["ts"])
    pair(calls, workers)
    out = {"rank": info.get("rank"), "world_size": info.get("world_size"),
           "backend": info.get("backend"),
           "pg_config": [{k: g.get(k) for k in ("pg_name", "pg_desc", "pg_size", "ranks")}
                         for g in info.get("pg_config", [])],
           "steps": {}, "outside_steps": {}}
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        inside = [c for c in calls if lo <= c["ts"] and c["ts"] + c["dur"] <= hi]
        wk = [g for g in workers if lo <= g["ts"] < hi]
        losses = outermost([e for e in events if e["name"] in LOSSES and e["tid"] == main_tid
                            and lo <= e["ts"] and e["ts"] + e.get("dur", 0) <= hi])
        row = out["steps"][s["name"]] = summarise(inside, wk)
        row["loss_calls"] = len(losses)
        # the calls in order with the forward passes between them: which micro-batch each falls in
        marks = sorted([(e["ts"], "forward") for e in losses]
                       + [(c["ts"], f"{c['op']} {c['in_elems']}") for c in inside])
        row["timeline"] = [m for _, m in marks]
        for key, ops in (("forward_reductions", REDUCTIONS), ("forward_gathers", GATHERS)):
            forward = [f"{c['op']} {c['in_elems']} in {c['forward_in']}" for c in inside
                       if c.get("forward_in") and c["op"] in ops]
            if forward:
                row[key] = forward
        again = [f"{c['op']} {c['in_elems']} in {c['recompute_in']}" for c in inside if c.get("recompute_in")]
        if again:
            row["recompute_gathers"] = again
        backward = [f"{c['op']} {c['in_elems']} in {c['backward_in']}" for c in inside
                    if c.get("backward_in")]
        if backward:
            row["backward_gathers"] = backward
    in_any = {id(c) for s in steps for c in calls
              if s["ts"] <= c["ts"] and c["ts"] + c["dur"] <= s["ts"] + s["dur"]}
    out["outside_steps"] = summarise([c for c in calls if id(c) not in in_any], [])["c10d"]
    return out


def outermost(evs):
    """The events of ``evs`` that no other of them encloses (a loss a tensor subclass dispatches again,
    DTensor's ``aten::mse_loss`` around the local one, is one forward pass)."""
    out = []
    for e in sorted(evs, key=lambda e: (e["ts"], -e.get("dur", 0))):
        if out and e["ts"] + e.get("dur", 0) <= out[-1]["ts"] + out[-1].get("dur", 0):
            continue
        out.append(e)
    return out


def pair(calls, workers):
    """Pair each c10d op with its gloo worker event (same op kind and input size, after it); a barrier with
    its own where the release annotates one (gloo:barrier, torch 2.13)."""
    free = list(workers)
    for c in calls:
        want = GLOO_NAME.get(c["op"])
        for i, g in enumerate(free):
            if g["op"] == want and g["ts"] >= c["ts"] and g["elems"] == c["in_elems"]:
                c["worker"] = free.pop(i)
                break


def summarise(calls, workers):
    """Aggregate calls by (op, dtype, in, out, group size, worker op), in order of first use."""
    agg = collections.OrderedDict()
    for c in calls:
        w = c.get("worker")
        key = (c["op"], c["dtype"] or (w["dtype"] if w else None), c["in_elems"], c["out_elems"],
               c["group_size_from_shapes"], c["root"], w["op"] if w else None)
        row = agg.setdefault(key, {"op": key[0], "dtype": key[1], "in_elems": key[2],
                                   "out_elems": key[3], "group_size_from_shapes": key[4], "root": key[5],
                                   "worker_op": key[6], "worker_tids": set(), "calls": 0})
        row["calls"] += 1
        if w:
            row["worker_tids"].add(w["tid"])
    rows = []
    for r in agg.values():
        r["worker_tids"] = sorted(r["worker_tids"])
        rows.append(r)
    totals = collections.OrderedDict()
    for c in calls:
        t = totals.setdefault(c["op"], {"calls": 0, "in_elems": 0})
        t["calls"] += 1
        t["in_elems"] += c["in_elems"] or 0
    gagg = collections.OrderedDict()
    for g in workers:
        row = gagg.setdefault((g["op"], g["dtype"], g["elems"]),
                              {"op": g["op"], "dtype": g["dtype"], "elems": g["elems"], "calls": 0})
        row["calls"] += 1
    unpaired = sum(1 for c in calls if "worker" not in c)
    return {"c10d": rows, "c10d_totals": totals, "gloo_workers": list(gagg.values()),
            "c10d_sequence": [f"{c['op']} {c['dtype'] or (c['worker']['dtype'] if 'worker' in c else '?')}"
                              f" {c['in_elems']}->{c['out_elems']}" for c in calls],
            "unpaired_c10d": unpaired}


#: A rank's trace file: ``rank{r}.json.gz``, or ``rank{r}.{time}.pt.trace.json.gz`` as
#: ``torch.profiler.tensorboard_trace_handler(..., worker_name=f"rank{r}", use_gzip=True)`` writes one per
#: profiling window of a schedule that repeats.
#: The models' losses: the MLP's, and a causal LM's (Hugging Face GPT-2)
LOSSES = ("aten::mse_loss", "aten::cross_entropy_loss")
TRACE_FILE = re.compile(r"rank\d+(\.\d+\.pt\.trace)?\.json\.gz")


def count_case(casedir):
    files = sorted(f for f in os.listdir(casedir) if TRACE_FILE.fullmatch(f))
    if not files:
        sys.exit(f"{casedir}: no rank*.json.gz")
    ranks = {}
    for f in files:
        r = count_file(os.path.join(casedir, f))
        if str(r["rank"]) in ranks:  # another window of this rank: its steps beside the others'
            r = merge_windows(ranks[str(r["rank"])], r)
        ranks[str(r["rank"])] = r
    return {"case": os.path.basename(os.path.normpath(casedir)),
            "counted_by": "count_calls.py (plain json/gzip) from rank*.json.gz",
            "per_step_all_ranks": common_rows(ranks), "ranks": ranks}


def traces(casedir):
    """The trace documents of a run's rank*.json.gz files, in the files' order."""
    for f in sorted(f for f in os.listdir(casedir) if TRACE_FILE.fullmatch(f)):
        with gzip.open(os.path.join(casedir, f), "rt") as fh:
            yield json.load(fh)


def count_copy_ins(casedir):
    """Per rank and ``ProfilerStep#k``, each ``aten::_chunk_cat`` CPU op that starts in the step's window, in
    order: FSDP2's copy of a unit's gradients into its reduce-scatter input (``out``, argument 3, viewed as
    shard ranks x padded shard), as ``{"grad_elems": the gradients' elements (argument 0, a TensorList of
    their shapes), "out_elems": the input's}``. Not part of expected.json."""
    out = {}
    for trace in traces(casedir):
        events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        steps = [e for e in events if STEP.match(e.get("name", ""))]
        copies = sorted((e for e in events if e.get("name") == "aten::_chunk_cat"
                         and e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
        rank = out.setdefault(str(trace.get("distributedInfo", {}).get("rank")), {})
        for s in steps:
            rank[s["name"]] = [{"grad_elems": numel(e["args"]["Input Dims"][0], "TensorList"),
                                "out_elems": numel(e["args"]["Input Dims"][3], "Tensor")}
                               for e in copies if s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
    return out


def count_bucket_copies(casedir):
    """Per rank, DDP's copies of its gradients into its buckets over the whole trace (the CPU ops
    ``torch::distributed::reducer::mul_out``, or ``torch::distributed::reducer::copy_`` where a comm hook is
    registered) as ``{"copies": how many, "elements": their first argument's elements summed}`` (None where
    the trace recorded no shapes); ranks with none left out. Not part of expected.json."""
    names = ("torch::distributed::reducer::mul_out", "torch::distributed::reducer::copy_")
    out = {}
    for trace in traces(casedir):
        copies = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("name") in names
                  and e.get("cat") == "cpu_op"]
        if copies:
            shapes = [e.get("args", {}).get("Input Dims") for e in copies]
            out[str(trace.get("distributedInfo", {}).get("rank"))] = {
                "copies": len(copies),
                "elements": None if None in shapes else sum(numel(d[0], "Tensor") for d in shapes)}
    return out


def count_after_optimizer(casedir):
    """Per rank and ``ProfilerStep#k``, the c10d ops of the main thread that begin after the end of an
    ``Optimizer.step#`` annotation in the step that no other such annotation holds, with no autograd node
    begun between that end and them, as ``"op in_elems"`` strings in order. Not part of expected.json."""
    out = {}
    for trace in traces(casedir):
        events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        steps = sorted((e for e in events if STEP.match(e.get("name", ""))), key=lambda e: e["ts"])
        opt = [e for e in events if e.get("name", "").startswith("Optimizer.step#")
               and e.get("cat") == "user_annotation"]
        outer = [e for e in opt if not any(o is not e and o["ts"] <= e["ts"]
                                           and e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in opt)]
        nodes = [e["ts"] for e in events if e.get("name", "").startswith(NODE)]
        main_tid = steps[0]["tid"] if steps else None
        calls = [c10d_call(e) for e in events
                 if e.get("name", "").startswith("c10d::") and e["tid"] == main_tid]
        rank = out.setdefault(str(trace.get("distributedInfo", {}).get("rank")), {})
        for s in steps:
            lo, hi = s["ts"], s["ts"] + s["dur"]
            ends = [o["ts"] + o["dur"] for o in outer if lo <= o["ts"] + o["dur"] <= hi]
            after = []
            for c in sorted(calls, key=lambda c: c["ts"]):
                if not lo <= c["ts"] <= hi:
                    continue
                before = [t for t in ends if t <= c["ts"]]
                inside = any(o["ts"] <= c["ts"] <= o["ts"] + o["dur"] for o in outer)
                if before and not inside and not any(max(before) <= t <= c["ts"] for t in nodes):
                    after.append(f"{c['op']} {c['in_elems']}")
            rank[s["name"]] = after
    return out


def merge_windows(a, b):
    """One rank's counts from two files (two profiling windows): the same header, steps of their own."""
    head = ("rank", "world_size", "backend", "pg_config")
    if any(a[k] != b[k] for k in head) or set(a["steps"]) & set(b["steps"]):
        sys.exit(f"rank {a['rank']}: two files of other runs (their headers or step names overlap)")
    steps = dict(sorted({**a["steps"], **b["steps"]}.items(), key=lambda kv: int(kv[0].split("#")[1])))
    return {**{k: a[k] for k in head}, "steps": steps,
            "outside_steps": a["outside_steps"] + b["outside_steps"]}


def common_rows(ranks):
    """Per step, the c10d rows (without worker thread ids) when every rank counts the same, else None."""
    out = {}
    first = next(iter(ranks.values()))
    for step in first["steps"]:
        seen = []
        for r in ranks.values():
            rows = r["steps"].get(step, {}).get("c10d")
            seen.append(None if rows is None else [{k: v for k, v in row.items() if k != "worker_tids"}
                                                    for row in rows])
        out[step] = seen[0] if all(x == seen[0] for x in seen) else None
    return out


def show(res):
    print(f"== {res['case']}")
    for rank, r in res["ranks"].items():
        groups = ", ".join(f"{g['pg_name']}:{g['ranks']}" for g in r["pg_config"])
        print(f" rank {rank} (world {r['world_size']}, {r['backend']}; pg_config {groups})")
        for step, s in r["steps"].items():
            ops = "; ".join(f"{k} x{t['calls']} ({t['in_elems']} in)" for k, t in s["c10d_totals"].items())
            print(f"  {step}: {s['loss_calls']} forward pass(es); {ops}")
            for row in s["c10d"]:
                print(f"    {row['calls']:3d} x {row['op']:30s} {str(row['dtype']):14s} "
                      f"in {row['in_elems']} out {row['out_elems']} group {row['group_size_from_shapes']} "
                      f"worker {row['worker_op']} tids {row['worker_tids']}")
            if s["unpaired_c10d"]:
                print(f"    ({s['unpaired_c10d']} c10d ops without a gloo worker event)")
            forward = s.get("forward_reductions", []) + s.get("forward_gathers", [])
            if forward:
                print(f"    in a forward pass: {', '.join(squeeze(forward))}")
        if r["outside_steps"]:
            print("  outside any ProfilerStep: " + "; ".join(
                f"{row['calls']} x {row['op']} {row['in_elems']}" for row in r["outside_steps"]))


def squeeze(items):
    """['a', 'a', 'b'] -> ['a x2', 'b']."""
    out = []
    for it in items:
        if out and out[-1][0] == it:
            out[-1][1] += 1
        else:
            out.append([it, 1])
    return [f"{it} x{n}" if n > 1 else it for it, n in out]


def markdown(res):
    """The per-step calls as a Markdown list, ranks that count alike merged."""

    def key(s):
        return [(r["op"], r["dtype"], r["in_elems"], r["out_elems"], r["root"], r["calls"])
                for r in s["c10d"]]

    loss = {st: min(r["steps"][st]["loss_calls"] for r in res["ranks"].values() if st in r["steps"])
            for st in next(iter(res["ranks"].values()))["steps"]}
    blocks = collections.OrderedDict()  # per-step listing -> the steps that show it
    for step in next(iter(res["ranks"].values()))["steps"]:
        by = collections.OrderedDict()
        for rank, r in res["ranks"].items():
            s = r["steps"].get(step)
            if s is not None:
                by.setdefault(json.dumps(key(s)), (s, []))[1].append(rank)
        text = []
        for s, ranks in by.values():
            text.append(f"  - rank{'s' if len(ranks) > 1 else ''} {','.join(ranks)}:")
            text.append(f"    - order: {' / '.join(squeeze(s['timeline']))}")
            for r in s["c10d"]:
                g = r["group_size_from_shapes"]
                grp = f", group {g} (from shapes)" if g else ""
                grp += f", root {r['root']}" if r["root"] is not None else ""
                text.append(f"    - {r['calls']} x `{r['op']}` {r['dtype']} in {r['in_elems']} "
                            f"out {r['out_elems']}{grp}; worker `{r['worker_op']}`")
            forward = s.get("forward_reductions", []) + s.get("forward_gathers", [])
            if forward:
                text.append(f"    - in a forward pass: {', '.join(squeeze(forward))}")
            if again := s.get("recompute_gathers"):
                text.append(f"    - in a checkpoint's recompute: {', '.join(squeeze(again))}")
        blocks.setdefault((loss[step], "\n".join(text)), []).append(step)
    lines = []
    for (passes, text), steps in blocks.items():
        passes = f"{passes} forward pass{'es' if passes != 1 else ''}"
        lines.append(f"- {', '.join(steps)}{' (each)' if len(steps) > 1 else ''} ({passes}):")
        lines.append(text)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("casedirs", nargs="+")
    ap.add_argument("--write", action="store_true", help="write CASEDIR/expected.json")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown list per step instead")
    args = ap.parse_args()
    for d in args.casedirs:
        res = count_case(d)
        if args.markdown:
            print(markdown(res))
        else:
            show(res)
        if args.write:
            with open(os.path.join(d, "expected.json"), "w") as f:
                json.dump(res, f, indent=1)
                f.write("\n")


if __name__ == "__main__":
    main()
