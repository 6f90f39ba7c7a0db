"""The implementation plan: what to change, ranked by the bytes the model says it saves.

Each item goes from one scheme to another (or keeps the scheme and changes how it runs); its saving is
the symbolic model's difference of bytes per rank per step at the plan's Ψ, N, G and wire element size,
never a number written here. Items are tiered by what they do to the update: ``exact`` (the
data-parallel update), ``approximate`` (the same rule on quantised values), ``changed`` (a different
update rule), and ranked by bytes saved within a tier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from zerocalc.sim.accounting import model_bytes_exact
from zerocalc.sim.compare import REL_TOL
from zerocalc.units import format_diff

__all__ = ["DEFAULT_PLAN_COMM_BYTES", "PlanItem", "build_plan", "saving_sentence"]

#: Bytes per element on the wire for which the implementation plan is computed: fp16/bf16, as real runs
#: communicate (b = 2 in ZeRO's notation).
DEFAULT_PLAN_COMM_BYTES = 2


@dataclass(frozen=True)
class PlanItem:
    """One step of the implementation plan: going from ``from_scheme`` to ``to_scheme`` saves
    ``bytes_saved_per_rank`` per rank per step by the symbolic model. ``update`` is ``"exact"`` (the
    data-parallel update), ``"approximate"`` (same rule, quantised values) or ``"changed"`` (a
    different update rule)."""

    rank: int
    action: str
    from_scheme: str
    to_scheme: str
    bytes_saved_per_rank: float
    bytes_saved_over_psi: float
    update: str
    evidence: str
    note: str

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# (action, from, to, changes the update rule, note). Savings come from the model, never from here.
_PLAN_CANDIDATES: tuple[tuple[str, str, str, bool, str], ...] = (
    ("native reduce-scatter for DeepSpeed ZeRO-1/2 (gradients reduced onto their shard owner, "
     "ZeRO §5.2, instead of a bucket all-reduce)", "deepspeed-zero12", "zero2", False,
     "deepspeed/runtime/zero/stage_1_and_2.py all-reduces regardless of the reduce_scatter flag "
     "(DeepSpeed issues #5758, #6463); PR #7440 was closed"),
    ("DeepSpeed ZeRO-2 with use_multi_rank_bucket_allreduce=False (one reduce per owner)",
     "deepspeed-zero12", "deepspeed-zero2-reduce", False,
     "an existing switch; N reduces instead of one all-reduce, more and smaller calls"),
    ("reduce-scatter + all-gather in PyTorch ZeroRedundancyOptimizer instead of DDP all-reduce + "
     "per-parameter broadcasts", "torch-zero1", "zero1", False, "pytorch issue #69591"),
    ("FSDP SHARD_GRAD_OP instead of FULL_SHARD (keep the gathered parameters through backward)",
     "fsdp-full-shard", "fsdp-shard-grad-op", False, "costs the memory of the unsharded parameters"),
    ("hierarchical partitioning: FSDP HYBRID_SHARD (shard inside a node, all-reduce Ψ/G across nodes)",
     "fsdp-full-shard", "fsdp-hybrid", False,
     "moves bytes onto intra-node links; optimizer state per rank grows from Ψ/N to Ψ/G"),
    ("quantised collectives: ZeRO++ (int8 weights, in-node secondary copy, int4 gradients)",
     "zero3", "zeropp", False, "quantisation error in weights and gradients; needs G > 1 for hpZ"),
    ("overlap the collectives with backward and forward compute", "zero2", "zero2", False,
     "hides time, moves the same bytes"),
    ("periodic averaging (local SGD / DiLoCo) every {H} steps", "dp", "dp", True,
     "averages parameters every H steps; the update is no longer the data-parallel one"),
    ("colocated gradients (the proposal of DeepSpeed issue #4582)", "zero2", "colocated", True,
     "each shard trained on its own rank's micro-batch only"),
)


def build_plan(runs: Mapping, *, psi: int, n: int, gpus_per_node: int, comm_bytes: int,
               period: int) -> tuple[PlanItem, ...]:
    from zerocalc.schemes import get_scheme

    def model(name: str) -> Fraction:
        return model_bytes_exact(name, psi=psi, n=n, gpus_per_node=gpus_per_node, comm_bytes=comm_bytes)

    rows = []
    for action, src, dst, changes, note in _PLAN_CANDIDATES:
        if "{H}" in action:
            saved = model(src) * Fraction(period - 1, period)
            action = action.format(H=period)
        else:
            saved = model(src) - model(dst)
        run = runs.get(dst)
        exact = run.equivalent if run is not None and run.steps else get_scheme(dst).equivalent_at(n)
        update = "changed" if changes else ("exact" if exact else "approximate")
        if src == dst:
            evidence = "same collectives, " + ("a different update rule by construction" if changes
                                               else "the same update")
        elif run is not None and run.steps:
            evidence = (f"simulated {dst}: max rel diff {format_diff(run.max_rel_diff, 2)} after "
                        f"{run.steps} steps "
                        f"({'within' if run.equivalent else 'outside'} {REL_TOL:g})")
        else:
            evidence = f"model: {dst} equivalent_to_dp={get_scheme(dst).equivalent_at(n)} at N = {n}"
        rows.append((changes, -saved, action, src, dst, saved, update, evidence, note))
    tier = {"exact": 0, "approximate": 1, "changed": 2}
    rows.sort(key=lambda r: (tier[r[6]], r[1]))
    return tuple(
        PlanItem(i + 1, action, src, dst, float(saved), float(saved / psi), update, evidence, note)
        for i, (_, _, action, src, dst, saved, update, evidence, note) in enumerate(rows)
    )


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
