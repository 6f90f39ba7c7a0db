"""The run an implementation plan is priced for: its cluster, its data-parallel group, its micro-batches and
its wire widths.

A plan is priced at Ψ parameters on a run of ``n`` GPUs, ``g`` a node. Under tensor / pipeline parallelism
(tp, pp) its collectives run on the data-parallel group, N = n/(tp·pp) ranks holding Ψ/(tp·pp) each, laid
out as ``zerocalc table --tp --pp`` lays them (:func:`zerocalc.evaluate.data_parallel_layout`). Per
optimizer step of k micro-batches each scheme reduces as its implementation does; under mixed precision the
parameter- and gradient-side collectives carry their own widths (b_p, b_g). :class:`PlanRun` holds all of
it, checked, with the errors naming the plan's options, and says it in words and in the JSON's
``plan_basis``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from zerocalc.errors import ConfigError


@dataclass(frozen=True)
class PlanRun:
    """The plan's run (module docstring): ``psi``, ``world`` GPUs, ``node_gpus`` a node, at ``tp`` / ``pp``;
    its data-parallel group of ``n`` ranks, ``g`` a node, holding ``group_psi`` each; ``micro_batches`` per
    optimizer step; wire widths ``comm_bytes`` and, where mixed precision sets them apart,
    ``param_bytes`` / ``grad_bytes`` (``None``: ``comm_bytes``)."""

    psi: int
    world: int
    node_gpus: int
    tp: int
    pp: int
    n: int
    g: int
    group_psi: int | Fraction
    micro_batches: int
    comm_bytes: int | Fraction
    param_bytes: int | Fraction | None = None
    grad_bytes: int | Fraction | None = None

    @property
    def widths(self) -> dict:
        """``param_bytes`` and ``grad_bytes`` as the model's functions take them."""
        return dict(param_bytes=self.param_bytes, grad_bytes=self.grad_bytes)

    @property
    def group(self) -> dict:
        """The data-parallel group and its step as the plan's bytes are counted: ``psi``, ``n``,
        ``gpus_per_node``, ``comm_bytes``, ``micro_batches`` and the widths."""
        return dict(psi=self.group_psi, n=self.n, gpus_per_node=self.g, comm_bytes=self.comm_bytes,
                    micro_batches=self.micro_batches, **self.widths)

    @property
    def pricing_sizes(self) -> dict | None:
        """The run as a pricing lays it out (``psi``, ``n``, ``g``, ``tp``, ``pp``) where it is not the group
        itself; ``None`` at tp = pp = 1."""
        if self.tp * self.pp == 1:
            return None
        return dict(psi=self.psi, n=self.world, g=self.node_gpus, tp=self.tp, pp=self.pp)

    def words(self, topology) -> str:
        """Where the plan was priced, in words: ``"N = 4, 2-byte wire elements"``, or with the cluster,
        the micro-batches above one and the run whose group it is."""
        where = f"N = {self.n}, {wire_words(self.comm_bytes, self.param_bytes, self.grad_bytes)}"
        where = where if topology is None else f"{topology.name}, {where}, G = {self.g}"
        if self.micro_batches > 1:
            where += f", {self.micro_batches} micro-batches per step"
        if self.tp * self.pp > 1:
            where += (f", the data-parallel group of a {self.world}-GPU run at tp = {self.tp}, "
                      f"pp = {self.pp} (Ψ/(tp·pp) a rank)")
        return where

    def basis(self, period: int) -> dict:
        """The run's fields of the JSON's ``plan_basis``, and the plan's averaging ``period`` (in the order
        the fields were added)."""
        return {"psi": self.psi, "n": self.n, "gpus_per_node": self.g,
                "comm_bytes": _number(self.comm_bytes), "period": period, "micro_batches": self.micro_batches,
                "tp": self.tp, "pp": self.pp, "world": self.world,
                **{k: _number(self.comm_bytes if v is None else v) for k, v in self.widths.items()}}


def plan_run(*, psi, world: int, node_gpus: int, comm_bytes, micro_batches: int, tp: int = 1, pp: int = 1,
             param_bytes=None, grad_bytes=None) -> PlanRun:
    """The :class:`PlanRun` of these sizes, checked: a :class:`ConfigError` naming ``--plan-micro-batches``,
    ``--plan-n`` / ``--plan-tp`` / ``--plan-pp`` (:func:`zerocalc.evaluate.data_parallel_layout`'s
    refusals) or ``--param-dtype`` / ``--grad-dtype``."""
    k = micro_batches
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"must be a whole number ≥ 1, got {k!r}", option="--plan-micro-batches")
    for value, option in ((param_bytes, "--param-dtype"), (grad_bytes, "--grad-dtype")):
        if value is not None and not value > 0:
            raise ConfigError(f"must be a positive width in bytes, got {value!r}", option=option)
    n, g, group_psi = world, node_gpus, psi
    if tp != 1 or pp != 1:
        from zerocalc.evaluate import data_parallel_layout

        try:
            n_dp, g_dp, _ = data_parallel_layout(world, node_gpus, tp, pp)
        except ConfigError as exc:
            names = {"--n": "--plan-n", "--tp": "--plan-tp", "--pp": "--plan-pp"}
            option = "/".join(names.get(o, o) for o in (exc.option or "").split("/"))
            raise ConfigError(exc.message, option=option or None) from None
        n, g = int(n_dp), int(g_dp)
        share = Fraction(int(psi), tp * pp) if int(psi) == psi else Fraction(str(psi)) / (tp * pp)
        group_psi = int(share) if share.denominator == 1 else share
    return PlanRun(psi, world, node_gpus, tp, pp, n, g, group_psi, k, comm_bytes, param_bytes, grad_bytes)


def wire_words(comm_bytes, param_bytes=None, grad_bytes=None) -> str:
    """``2-byte wire elements``, or ``2-byte parameters and 4-byte gradients on the wire``."""
    p = comm_bytes if param_bytes is None else param_bytes
    g = comm_bytes if grad_bytes is None else grad_bytes
    if p == g:
        return f"{_width_text(p)}-byte wire elements"
    return f"{_width_text(p)}-byte parameters and {_width_text(g)}-byte gradients on the wire"


def _width_text(width) -> str:
    """A wire width in bytes as text: ``2``, ``4``, ``0.5``."""
    w = Fraction(str(width))
    return str(w.numerator) if w.denominator == 1 else f"{float(w):g}"


def _number(width):
    """A wire width for JSON: an int where whole, else a float."""
    return width if isinstance(width, int) else float(width)
