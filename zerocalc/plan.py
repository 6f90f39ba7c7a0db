"""The implementation plan: what to change, ranked by the bytes the model says it saves, priced on a cluster.

Each item goes from one scheme to another, or keeps the scheme and changes how it runs (in the switch,
on fewer bits, less often); its saving is the symbolic model's difference of bytes per rank per step at
the plan's Ψ, N, G and wire element size, never a number written here. Items are tiered by what they
do to the update: ``exact`` (the data-parallel update), ``approximate`` (the same rule on quantised or
compressed values), ``changed`` (a different update rule), and ranked by bytes saved within a tier.

Priced on a cluster (a :class:`zerocalc.topology.Topology`), each item also gets the time it saves per
step: by the ring α-β model here, or by NCCL's own cost model (:mod:`zerocalc.plan_pricing`, what
``zerocalc table`` shows as ``t NCCL``), with the algorithm/protocol pairs NCCL picks on either side.
An item that is slower there (negative time saved; unpriced, one that sends more bytes) is kept apart:
:func:`helps` lists the others in rank order, :func:`slower` these, ranked after them and flagged
``slower`` (in the JSON too).

In-network reduction (:mod:`zerocalc.in_network`) is priced with the kinds the cluster offers
(``Topology.in_network_reduction``); on a cluster without any, with NVLS and SHARP both, and the item
says it is not available there (``available`` false).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from zerocalc.sim.accounting import model_bytes_exact
from zerocalc.sim.compare import REL_TOL
from zerocalc.units import format_diff

__all__ = ["DEFAULT_PLAN_COMM_BYTES", "NVLS_ONE_A_NODE", "PlanItem", "PlanTimes", "build_plan", "helps",
           "in_network_sentence", "pairs_library", "saving_sentence", "slower", "switch_words"]

#: Bytes per element on the wire for which the implementation plan is computed: fp16/bf16, as real runs
#: communicate (b = 2 in ZeRO's notation).
DEFAULT_PLAN_COMM_BYTES = 2
#: The in-network reduction a plan prices on a cluster that offers none: both kinds, marked unavailable.
ALL_KINDS = ("nvls", "sharp")


@dataclass(frozen=True)
class PlanItem:
    """One step of the implementation plan: going from ``from_scheme`` to ``to_scheme`` saves
    ``bytes_saved_per_rank`` per rank per step by the symbolic model (``None`` where the model cannot say:
    a saving that depends on layer shapes). ``update`` is ``"exact"`` (the data-parallel update),
    ``"approximate"`` (same rule, quantised or compressed values) or ``"changed"`` (a different update
    rule). ``in_network`` names the in-network reduction ``to_scheme`` runs with (``"nvls+sharp"``;
    empty: rings), ``available`` whether the priced cluster has it (``None``: not priced or not needed).
    ``time_saved_s`` and ``from_time_s`` are the model's seconds per step on the priced cluster
    (``None`` unpriced); ``slower`` flags an item that costs time there (or, unpriced, bytes).
    ``from_choice`` / ``to_choice``: the algorithm/protocol pairs NCCL picks on either side
    (``AR Ring/Simple``; empty unless NCCL's model priced the plan). ``in_network_idle``: why the switch
    sums nothing for this group, where it cannot (:data:`NVLS_ONE_A_NODE`; empty otherwise)."""

    rank: int
    action: str
    from_scheme: str
    to_scheme: str
    bytes_saved_per_rank: float | None
    bytes_saved_over_psi: float | None
    update: str
    evidence: str
    note: str
    in_network: str = ""
    available: bool | None = None
    time_saved_s: float | None = None
    from_time_s: float | None = None
    slower: bool = False
    from_choice: str = ""
    to_choice: str = ""
    in_network_idle: str = ""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class PlanTimes:
    """Seconds per step and NCCL's choices (``AR Ring/Simple; AG Ring/Simple``; none under the α-β
    model) per ``(scheme, ops)`` key of :func:`build_plan`; ``model`` names the cost model in words."""

    times: dict
    choices: dict
    model: str


@dataclass(frozen=True)
class _Candidate:
    """A plan item before pricing. ``saving``: ``"scheme"`` (model(src) - model(dst)), ``"in_network"``
    (ring src − dst in the switch), ``"period"`` (src × (H-1)/H), ``"bits"`` (src's gradient reduction on
    ``bits`` per element instead of 8b), ``"sync"`` (src × (k-1)/k: a scheme whose one collective is its
    gradient reduction, run once per step of k micro-batches instead of in each; listed for k > 1),
    ``"shapes"`` (not priced: depends on layer shapes)."""

    action: str
    src: str
    dst: str
    update: str  # "model" (exact or approximate as the model / simulation says), "approximate", "changed"
    note: str
    saving: str = "scheme"
    bits: int = 0
    #: collectives ``dst`` runs through the switch (``saving == "in_network"``)
    ops: tuple[str, ...] = ()


# Savings come from the model, never from here.
_CANDIDATES: tuple[_Candidate, ...] = (
    _Candidate("native reduce-scatter for DeepSpeed ZeRO-2 (each micro-batch's gradients reduced onto "
               "their shard owner, ZeRO §5.2, instead of a bucket all-reduce)", "deepspeed-zero2", "zero2",
               "model", "deepspeed/runtime/zero/stage_1_and_2.py all-reduces regardless of the "
               "reduce_scatter flag (DeepSpeed issues #5758, #6463); PR #7440 was closed. ZeRO-2 reduces "
               "in every micro-batch (engine.py allreduce_gradients), so with k per optimizer step it "
               "saves k times the one micro-batch's"),
    _Candidate("native reduce-scatter for DeepSpeed ZeRO-1 (the accumulated gradient reduce-scattered "
               "onto its shard owners at the boundary, ZeRO §5.1, instead of a bucket all-reduce)",
               "deepspeed-zero1", "zero1", "model",
               "the same all-reduce in stage_1_and_2.py, once per optimizer step (engine.py "
               "allreduce_gradients): ZeRO-2's saving at one micro-batch, at any k"),
    _Candidate("DeepSpeed ZeRO-2 with use_multi_rank_bucket_allreduce=False (one reduce per owner)",
               "deepspeed-zero2", "deepspeed-zero2-reduce", "model",
               "an existing switch; N reduces instead of one all-reduce, more and smaller calls"),
    _Candidate("reduce-scatter + all-gather in PyTorch ZeroRedundancyOptimizer instead of DDP all-reduce + "
               "per-parameter broadcasts", "torch-zero1", "zero1", "model", "pytorch issue #69591"),
    _Candidate("FSDP SHARD_GRAD_OP instead of FULL_SHARD (keep the gathered parameters through backward)",
               "fsdp-full-shard", "fsdp-shard-grad-op", "model",
               "costs the memory of the unsharded parameters"),
    _Candidate("hierarchical partitioning: FSDP HYBRID_SHARD (shard inside a node, all-reduce Ψ/G across "
               "nodes)", "fsdp-full-shard", "fsdp-hybrid", "model",
               "moves bytes onto intra-node links; optimizer state per rank grows from Ψ/N to Ψ/G"),
    _Candidate("in-network reduction of DeepSpeed ZeRO-2's gradient all-reduce (the switch sums: NVLS in "
               "the node, SHARP across nodes; ZeRO-1's all-reduce, once per step, the same at one "
               "micro-batch)", "deepspeed-zero2", "deepspeed-zero2", "model",
               "NCCL picks NVLS / CollNet by itself where the hardware and NCCL_NVLS_ENABLE / "
               "NCCL_COLLNET_ENABLE allow (NCCL src/graph/tuning.cc); the all-reduce goes from 2(N-1)/N·Ψ "
               "to about Ψ(1 + 1/N) per rank each way", saving="in_network", ops=("all_reduce",)),
    _Candidate("in-network all-reduce for data parallelism (DDP's gradient all-reduce summed in the "
               "switch)", "dp", "dp", "model", "no sharding: the memory of data parallelism",
               saving="in_network", ops=("all_reduce",)),
    _Candidate("ZeRO-2's reduce-scatter and all-gather through the switch (NVLS / SHARP)", "zero2", "zero2",
               "model", "a switch reduce-scatter sends the whole vector and an all-gather receives it: "
               "no less than the ring's (N-1)/N·Ψ each; only the all-reduce is halved", saving="in_network",
               ops=("reduce_scatter", "all_gather")),
    _Candidate("quantised collectives: ZeRO++ (int8 weights, in-node secondary copy, int4 gradients)",
               "zero3", "zeropp", "model",
               "quantisation error in weights and gradients; needs G > 1 for hpZ"),
    _Candidate("error-feedback 1-bit compression of the gradient all-reduce (1-bit Adam, 0/1 Adam)",
               "dp", "dp", "approximate", "1-bit Adam (Tang et al., ICML 2021, arXiv 2102.02888) after a "
               "full-precision warm-up, 0/1 Adam (Lu et al., ICLR 2023, arXiv 2202.06009) also skips "
               "rounds; error feedback keeps convergence; priced on steady-state steps, scales left out",
               saving="bits", bits=1),
    _Candidate("low-rank gradient compression with error feedback (PowerSGD)", "dp", "dp", "approximate",
               "Vogels, Karimireddy & Jaggi, NeurIPS 2019 (arXiv 1905.13727): rank r sends r(m+n) instead "
               "of m·n per m×n layer; not priced: the model has no layer shapes", saving="shapes"),
    _Candidate("accumulate gradients locally under DDP's no_sync() in all but the last micro-batch (one "
               "all-reduce per optimizer step instead of one per micro-batch)", "dp", "dp", "model",
               "torch DistributedDataParallel.no_sync(); the sum of the k micro-batches' gradients is "
               "all-reduced once, the same update; no memory added, DDP keeps whole gradients anyway "
               "(FSDP's set_requires_gradient_sync(False) does the same to its reduce-scatter)",
               saving="sync"),
    _Candidate("overlap the collectives with backward and forward compute", "zero2", "zero2", "model",
               "hides time, moves the same bytes", saving="none"),
    _Candidate("periodic averaging (local SGD / DiLoCo) every {H} steps", "dp", "dp", "changed",
               "averages parameters every H steps; the update is no longer the data-parallel one",
               saving="period"),
    _Candidate("colocated gradients (the proposal of DeepSpeed issue #4582)", "zero2", "colocated",
               "changed", "each shard trained on its own rank's micro-batch only"),
)


def _values(topology, *, psi, n, g, comm_bytes, micro_batches=1, tp=1, pp=1, param_bytes=None,
            grad_bytes=None) -> dict[str, float]:
    """Numbers for every symbol of :data:`zerocalc.symbols.ARGUMENTS` on a cluster (widths b = the wire's):
    a run of ``n`` GPUs, ``g`` a node, at ``tp`` / ``pp``, its data-parallel group laid out and its share
    of the node's network as :func:`zerocalc.evaluate.evaluate` prices it; ``param_bytes`` /
    ``grad_bytes``: the parameter- and gradient-side wire widths (default ``comm_bytes``)."""
    from zerocalc import symbols as S
    from zerocalc.evaluate import data_parallel_layout, group_inter_bandwidth

    known = dict(topology.values())
    if tp * pp > 1:
        n_dp, g_dp, g_node = (float(x) for x in data_parallel_layout(n, g, tp, pp))
        psi, n, g = float(psi) / (tp * pp), n_dp, g_dp
        if tp > 1:
            known["bw_inter"] = group_inter_bandwidth(known["bw_inter"], g_dp, g_node)
    known.update(Psi=float(psi), N=float(n), G=float(g), H=float(g), n_mb=float(micro_batches), K=12.0,
                 b_p=float(comm_bytes if param_bytes is None else param_bytes),
                 b_g=float(comm_bytes if grad_bytes is None else grad_bytes))
    return {s.name: known.get(s.name, float(comm_bytes)) for s in S.ARGUMENTS}


def alpha_beta_times(keys, kinds, topology, *, psi, n, g, comm_bytes, micro_batches=1, tp=1,
                     pp=1, param_bytes=None, grad_bytes=None) -> PlanTimes:
    """Model seconds per optimizer step of ``micro_batches`` on ``topology`` by the ring α-β model per
    (scheme, collectives through the switch): ``()`` and ``None`` (no switch) are both rings. ``psi``,
    ``n``, ``g``: the run's Ψ, GPUs and node; under ``tp`` / ``pp`` its data-parallel group is priced."""
    import sympy

    from zerocalc import symbols as S
    from zerocalc.in_network import scheme_in_network_time_s
    from zerocalc.schemes import get_scheme

    keys = list(dict.fromkeys(keys))
    values = _values(topology, psi=psi, n=n, g=g, comm_bytes=comm_bytes, micro_batches=micro_batches, tp=tp,
                     pp=pp, param_bytes=param_bytes, grad_bytes=grad_bytes)
    numbers = {s: sympy.Float(values[s.name]) for s in S.ARGUMENTS}
    # one evaluation each: substituting numbers (xreplace) is several times cheaper than lambdify here
    done: dict = {}
    for name, ops in keys:
        key = (name, tuple(ops or ()))
        if key not in done:
            done[key] = float((scheme_in_network_time_s(name, kinds, key[1]) if key[1]
                               else get_scheme(name).time_s()).xreplace(numbers))
    return PlanTimes({(name, ops): done[(name, tuple(ops or ()))] for name, ops in keys}, {},
                     "the ring α-β model")


def build_plan(runs: Mapping, *, psi: int, n: int, gpus_per_node: int, comm_bytes: int,
               period: int, topology=None, in_network_runs: Mapping | None = None,
               in_network: Sequence[str] | None = None, pricing=None,
               micro_batches: int = 1, run: Mapping | None = None, param_bytes=None,
               grad_bytes=None) -> tuple[PlanItem, ...]:
    """The plan at Ψ = ``psi`` parameters, N = ``n``, G = ``gpus_per_node``, ``comm_bytes`` per element,
    per optimizer step of ``micro_batches`` (each scheme's collectives at their implementation's cadence,
    :mod:`zerocalc.schemes`: DeepSpeed ZeRO-2 reduces in every micro-batch, ZeRO-1 once per step);
    ``param_bytes`` / ``grad_bytes``: the wire widths of the parameter- and gradient-side collectives
    under mixed precision (default ``comm_bytes``).

    ``runs`` (scheme → :class:`zerocalc.sim.SchemeRun`) and ``in_network_runs`` ((scheme, collectives
    through the switch) → the same, simulated with switches) are the evidence. ``topology`` (a
    :class:`zerocalc.topology.Topology`) prices each item's time; ``in_network`` overrides the kinds of
    in-network reduction priced (default: the topology's, else both, marked unavailable). ``pricing``
    (default :func:`alpha_beta_times`) times the schemes: called as it is, with ``(scheme, ops)`` keys
    (``ops`` ``()``: the cluster as it is; ``None``: without in-network reduction, an in-network
    item's baseline; collectives: through the switch), returning a :class:`PlanTimes`; a key it leaves
    out leaves the item's time saved unpriced (``None``). ``run``: the run whose data-parallel group the
    plan is of (``psi``, ``n``, ``g``: its Ψ, GPUs and node; ``tp``, ``pp``), which ``pricing`` is called
    with (default: the group itself, tp = pp = 1)."""
    offered = tuple(getattr(topology, "in_network_reduction", None) or ()) if topology is not None else ()
    wanted = in_network if in_network is not None else (offered or ALL_KINDS)
    kinds = tuple(k for k in ALL_KINDS if k in wanted)
    available = None if topology is None else all(k in offered for k in kinds)
    tag = "+".join(kinds)
    in_network_runs = in_network_runs or {}
    model = _Bytes(psi=psi, n=n, gpus_per_node=gpus_per_node, comm_bytes=comm_bytes,
                   micro_batches=micro_batches, param_bytes=param_bytes, grad_bytes=grad_bytes)
    priced = None
    if topology is not None:
        keys = [k for c in _CANDIDATES for k in _time_keys(c)]
        sizes = dict(run) if run is not None else dict(psi=psi, n=n, g=gpus_per_node)
        if param_bytes is not None or grad_bytes is not None:
            sizes.update(param_bytes=param_bytes, grad_bytes=grad_bytes)
        priced = (pricing or alpha_beta_times)(keys, kinds, topology, comm_bytes=comm_bytes,
                                                micro_batches=micro_batches, **sizes)
    rows = []
    for c in _CANDIDATES:
        if c.saving == "sync" and micro_batches == 1:
            continue  # one micro-batch: nothing to hold back
        switch = c.saving == "in_network"
        action, frac, saved = _saving(c, model, kinds, period, micro_batches)
        simulated = (in_network_runs.get((c.dst, c.ops)) if switch else runs.get(c.dst))
        update, evidence = _evidence(c, simulated, n, tag)
        timed = _item_time(c, frac, saved, priced)
        worse = (timed["time_saved_s"] < 0) if timed["time_saved_s"] is not None else (
            saved is not None and saved < 0)
        idle = NVLS_ONE_A_NODE if switch and gpus_per_node <= 1 and kinds == ("nvls",) else ""
        rows.append(PlanItem(0, action, c.src, c.dst, None if saved is None else float(saved),
                             None if saved is None else float(saved / psi), update, evidence, c.note,
                             in_network=tag if switch else "", available=available if switch else None,
                             slower=bool(worse), in_network_idle=idle, **timed))
    tier = {"exact": 0, "approximate": 1, "changed": 2}
    rows.sort(key=lambda r: (r.slower, tier[r.update], r.bytes_saved_per_rank is None,
                             -(r.bytes_saved_per_rank or 0.0)))
    return tuple(replace(r, rank=i + 1) for i, r in enumerate(rows))


#: Why an NVLS-only item sums nothing for a group of one rank a node (its ``in_network_idle``).
NVLS_ONE_A_NODE = "idle: NVLS sums a node's ranks and this group has one a node"


def switch_words(item: PlanItem, unavailable: str) -> str:
    """The bracket after an in-network item's action: its kinds, and ``unavailable`` where the cluster
    lacks them or why the switch sums nothing for the group (``"[nvls, idle: ...]"``); '' for a ring item."""
    if not item.in_network:
        return ""
    why = item.in_network_idle or (unavailable if item.available is False else "")
    return f"[{item.in_network}{', ' + why if why else ''}]"


class _Bytes:
    """The symbolic model's exact bytes per rank per step of the plan's group (:func:`build_plan`'s sizes):
    called with a scheme (and in-network kinds and the collectives through the switch), or
    :meth:`gradient` for its gradient-side collectives alone."""

    def __init__(self, **group) -> None:
        self.group = group
        width = group["grad_bytes"] if group["grad_bytes"] is not None else group["comm_bytes"]
        #: the gradients' wire width, bytes per element
        self.grad_width = Fraction(width)

    def __call__(self, name: str, ks: Sequence[str] = (), ops: Sequence[str] | None = None) -> Fraction:
        return model_bytes_exact(name, in_network=ks, switch_ops=ops, **self.group)

    def gradient(self, name: str) -> Fraction:
        from zerocalc.sim.accounting import model_bytes_by_phase

        by = model_bytes_by_phase(name, **self.group)
        return sum((v for k, v in by.items() if not k.startswith(("all_gather", "broadcast"))), Fraction(0))


def _saving(c: _Candidate, model: _Bytes, kinds: tuple[str, ...], period: int,
            micro_batches: int) -> tuple[str, Fraction | None, Fraction | None]:
    """An item's ``(action, share, bytes saved)``: the share of its source's bytes it removes where it keeps
    the scheme (``None`` where it changes it), and the bytes saved per rank per step (``None``: not priced,
    a saving that depends on layer shapes)."""
    action, frac = c.action, None
    if c.saving == "sync":
        frac = Fraction(micro_batches - 1, micro_batches)
    elif c.saving == "period":
        frac = Fraction(period - 1, period)
        action = action.format(H=period)
    elif c.saving == "bits":
        whole = model(c.src)
        cut = model.gradient(c.src) * (1 - Fraction(c.bits) / (8 * model.grad_width))
        frac = cut / whole if whole else Fraction(0)
    elif c.saving == "none":
        frac = Fraction(0)
    if frac is not None:
        return action, frac, model(c.src) * frac
    if c.saving == "shapes":
        return action, None, None
    after = model(c.dst, kinds, c.ops) if c.saving == "in_network" else model(c.dst)
    return action, None, model(c.src) - after


def _evidence(c: _Candidate, run, n: int, tag: str) -> tuple[str, str]:
    """An item's ``(update, evidence)``: what the destination does to the update, from its simulation
    (``run``, with ``tag``'s switches for an in-network item) where there is one, else from the model."""
    from zerocalc.schemes import get_scheme

    switch = c.saving == "in_network"
    simulated = run is not None and run.steps
    exact = run.equivalent if simulated else get_scheme(c.dst).equivalent_at(n)
    update = c.update if c.update != "model" else ("exact" if exact else "approximate")
    if simulated and (c.src != c.dst or switch):
        return update, (f"simulated {c.dst}{' with ' + tag + ' switches' if switch else ''}: max rel diff "
                        f"{format_diff(run.max_rel_diff, 2)} after {run.steps} steps "
                        f"({'within' if run.equivalent else 'outside'} {REL_TOL:g})")
    if c.src == c.dst:
        return update, "same collectives, " + {"changed": "a different update rule by construction",
                                               "approximate": "compressed values on the wire"}.get(
                                                   c.update, "the same update")
    return update, f"model: {c.dst} equivalent_to_dp={get_scheme(c.dst).equivalent_at(n)} at N = {n}"


def _item_time(c: _Candidate, frac: Fraction | None, saved, priced: PlanTimes | None) -> dict:
    """An item's time fields: ``from_time_s`` (its source, as :func:`_time_keys` keys it), ``time_saved_s``
    (the share ``frac`` of it, or source less destination), and the pairs NCCL picks on either side;
    ``None`` / empty where ``priced`` (``None``: no cluster) leaves them out."""
    out = dict(time_saved_s=None, from_time_s=None, from_choice="", to_choice="")
    src_key, dst_key = _time_keys(c)
    if priced is None:
        return out
    out["from_choice"] = priced.choices.get(src_key, "")
    if frac is None and saved is not None:
        out["to_choice"] = priced.choices.get(dst_key, "")
    if src_key in priced.times:
        out["from_time_s"] = from_time = priced.times[src_key]
        if frac is not None:
            out["time_saved_s"] = float(frac) * from_time
        elif saved is not None and dst_key in priced.times:
            out["time_saved_s"] = from_time - priced.times[dst_key]
    return out


def pairs_library(basis: Mapping) -> str:
    """Whose algorithm/protocol pairs a plan's items name: ``RCCL`` where RCCL's model priced it (its
    ``plan_basis``), else ``NCCL``."""
    return "RCCL" if str(basis.get("time_model_name") or "").startswith("RCCL") else "NCCL"


def _time_keys(c: _Candidate) -> tuple[tuple, tuple]:
    """The ``(scheme, ops)`` keys an item is timed by: its source and its destination; an in-network
    item goes from the scheme without the switch (``None``) to the scheme through it."""
    if c.saving == "in_network":
        return (c.src, None), (c.dst, c.ops)
    return (c.src, ()), (c.dst, ())


def in_network_candidates() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(scheme, collectives through the switch) of the plan's in-network items: what to simulate."""
    return tuple((c.dst, c.ops) for c in _CANDIDATES if c.saving == "in_network")


def helps(plan: Sequence[PlanItem]) -> tuple[PlanItem, ...]:
    """The items that save time on the priced cluster (bytes, unpriced), in rank order."""
    return tuple(p for p in plan if not p.slower)


def slower(plan: Sequence[PlanItem]) -> tuple[PlanItem, ...]:
    """The items that cost time on the priced cluster (bytes, unpriced): ranked after :func:`helps`."""
    return tuple(p for p in plan if p.slower)


def in_network_sentence(plan: Sequence[PlanItem], *, psi: int, n: int, gpus_per_node: int, comm_bytes: int,
                        basis: str, format_time=None, nccl_algo: str | None = None,
                        micro_batches: int = 1, param_bytes=None, grad_bytes=None) -> str:
    """What in-network reduction does to the #4582 question, in numbers at the plan's basis.

    Per parameter per rank per step, bytes sent: data parallelism's all-reduce on a ring (2(N-1)/N·b),
    the same summed in the switch (:func:`zerocalc.in_network.scheme_link_bytes`), and the #4582
    all-gather alone (ring); then the plan's in-network item for DeepSpeed ZeRO-2 with its time on the
    priced cluster (``format_time`` formats seconds) and, where NCCL's model priced it, the pairs NCCL
    picks without and with the switch (``nccl_algo``: the ``NCCL_ALGO`` it ran under), per optimizer step
    of ``micro_batches`` (data parallelism and ZeRO-2 reduce in each). Empty when the plan has no
    in-network item.
    """
    item = next((p for p in plan if p.in_network and p.from_scheme == "deepspeed-zero2"), None)
    if item is None:
        return ""
    kinds = tuple(item.in_network.split("+"))

    def per_param(name: str, ks: Sequence[str] = ()) -> float:
        return float(model_bytes_exact(name, psi=psi, n=n, gpus_per_node=gpus_per_node, comm_bytes=comm_bytes,
                                       in_network=ks, micro_batches=micro_batches, param_bytes=param_bytes,
                                       grad_bytes=grad_bytes) / psi)

    ring, switch, wanted = per_param("dp"), per_param("dp", kinds), per_param("colocated")
    names = " and ".join({"nvls": "NVLS in the node", "sharp": "SHARP across nodes"}[k] for k in kinds)
    if ring == 0:
        return (f"In-network reduction changes nothing at {basis}: with one rank nothing is reduced, in a "
                "switch or on a ring.")
    if gpus_per_node <= 1 and kinds == ("nvls",):  # NVLS sums a node's ranks; this group has one a node
        return (f"In-network reduction changes nothing at {basis}: the data-parallel group has one rank a "
                "node, and NVLS sums only inside a node; SHARP switches, summing across nodes, would take "
                "this group's gradient reduction into the network.")
    if switch < ring:
        text = (f"In-network reduction is the exact route to the traffic #4582 wanted: with {names} the "
                f"switch sums, so data parallelism's gradient all-reduce sends {switch:.3g} bytes per "
                f"parameter per rank instead of a ring's {ring:.3g} (the #4582 all-gather alone: "
                f"{wanted:.3g}), and the update stays the data-parallel one")
    else:
        text = (f"In-network reduction ({names}) keeps the data-parallel update but does not pay at "
                f"{basis}: data parallelism's all-reduce would send {switch:.3g} bytes per parameter per "
                f"rank through the switches against a ring's {ring:.3g} (each level hands back 1/G of the "
                "vector on top, which only a large group amortises; the #4582 all-gather alone: "
                f"{wanted:.3g})")
    sim = item.evidence if item.evidence.startswith("simulated") else ""
    text += f" ({sim})." if sim else "."
    if item.time_saved_s is None and item.from_time_s is not None:
        text += (" Its time is not priced: RCCL's cost model, which times this cluster, has no in-network "
                 "algorithm.")
    if item.time_saved_s is not None:
        fmt = format_time or (lambda t: f"{t:.3g} s")
        t = item.time_saved_s
        change = f"saves {fmt(t)} per step" if t >= 0 else f"costs {fmt(-t)} more per step"
        who = ("DeepSpeed ZeRO-2 as shipped (ZeRO-1 too, at one micro-batch)" if micro_batches == 1 else
               f"DeepSpeed ZeRO-2 as shipped, reducing in each of the {micro_batches} micro-batches,")
        where = f"On {basis}, {who} {change} that way" + _nccl_words(item, nccl_algo)
        if item.available is False:
            where += (" — if the hardware offered it: this cluster has no in-network reduction (NVLS needs "
                      "NVSwitch 3, H100 or later; SHARP needs SHARP-capable InfiniBand switches)")
        text += f" {where}."
    return text


def _nccl_words(item: PlanItem, nccl_algo: str | None = None) -> str:
    """What NCCL picks without and with the switch, where NCCL's model priced the item (under
    ``NCCL_ALGO`` = ``nccl_algo`` where given)."""
    if not item.from_choice or not item.to_choice:
        return ""
    if item.from_choice == item.to_choice:
        why = (f"under NCCL_ALGO={nccl_algo}" if nccl_algo else
               "its in-network algorithms predicted slower for one call of the whole vector")
        return (f": NCCL's model keeps {item.to_choice} with the switch there, {why}, so the bytes the "
                "switch would save buy no time")
    words = f"NCCL's model: {item.from_choice} without the switch, {item.to_choice} with it"
    if (item.time_saved_s or 0) < 0 and "NVLSTree" in item.to_choice:
        words += ("; NCCL picks NVLS Tree by its own estimate, which leaves out the fill of NVLS Tree's "
                  "pipeline that the call then pays, zerocalc.nccl.nvls_pipeline")
    return f" ({words})"


def saving_sentence(action: str | None, from_scheme: str | None, to_scheme: str | None,
                    bytes_per_parameter: float | None, basis: str) -> str:
    """The verdict's last sentence: the best exact saving of the plan and where it was priced.

    ``basis`` says on what it was priced (``"N = 4, 2-byte wire elements"`` for the simulation's plan,
    the chosen cluster for the report); ``action`` None means no exact change saves bytes there.
    """
    if action is None:
        return (f"Priced at {basis}, no exact change of scheme saves bytes; only changing the update rule "
                "(periodic averaging) or quantising would.")
    return (f"The saving the issue is after exists only against implementations that all-reduce: "
            f"{action.split(' (')[0]} ({from_scheme} → {to_scheme}) saves "
            f"{bytes_per_parameter:.3g} bytes per parameter per rank per step ({basis}) without "
            "changing the update.")
