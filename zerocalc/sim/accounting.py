"""The symbolic model's bytes evaluated exactly, to compare with what the simulated ranks counted.

The symbolic model reports bytes sent per rank *averaged over the ranks of a group* (Thakur,
Rabenseifner & Gropp 2005). With integers substituted its expressions are sympy rationals, so the
comparison with the simulation's :class:`fractions.Fraction` counts is exact for any Ψ and N,
including N not a power of two.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from zerocalc.sim.compare import SchemeRun
from zerocalc.sim.world import WIRE_ELEM_BYTES

__all__ = ["model_bytes_by_phase", "model_bytes_exact", "model_link_bytes_exact",
           "simulated_bytes_by_collective"]

def _exact_bytes(expr, *, psi: int, n: int, gpus_per_node: int, comm_bytes: int, what: str,
                 micro_batches: int = 1, param_bytes=None, grad_bytes=None) -> Fraction:
    """A ring bytes-per-rank expression of :mod:`zerocalc.schemes` at integer Ψ, N, G (at most N) and
    b, ``micro_batches`` per optimizer step and DeepSpeed's default reuse distance (as the simulation
    runs), as an exact rational: with integers substituted it is a sympy Rational already. The integers
    replace the symbols in one pass (``xreplace``: every sum, product, Max and case split rebuilt from
    numbers folds to one), a few times cheaper than ``subs``, which tries each substitution on every
    subexpression in turn. ``param_bytes`` / ``grad_bytes``: the wire widths of the parameter- and
    gradient-side collectives (b_p, b_g; default ``comm_bytes``), as mixed precision sets them."""
    import sympy

    from zerocalc import symbols as S
    from zerocalc.evaluate import DEFAULT_REUSE_DISTANCE

    ints = {S.Psi: psi, S.N: n, S.G: min(gpus_per_node, n), S.H: min(gpus_per_node, n), S.b_comm: comm_bytes,
            S.b_p: comm_bytes if param_bytes is None else param_bytes,
            S.b_g: comm_bytes if grad_bytes is None else grad_bytes, S.n_mb: int(micro_batches),
            S.D_reuse: int(DEFAULT_REUSE_DISTANCE)}
    value = expr.xreplace({s: sympy.sympify(v) for s, v in ints.items()})
    if not value.is_Rational:
        raise ValueError(f"model bytes of {what} did not evaluate to a rational: {value}")
    return Fraction(int(value.p), int(value.q))


def model_bytes_exact(name: str, *, psi: int, n: int, gpus_per_node: int,
                      comm_bytes: int = WIRE_ELEM_BYTES, in_network: Sequence[str] = (),
                      switch_ops: Sequence[str] | None = None, micro_batches: int = 1,
                      param_bytes=None, grad_bytes=None) -> Fraction:
    """The symbolic model's bytes per rank per step (:meth:`zerocalc.schemes.Scheme.bytes_per_rank`,
    ring; with ``in_network`` kinds, the bytes sent under :func:`zerocalc.in_network.scheme_link_bytes`)
    evaluated with exact rational arithmetic (``param_bytes`` / ``grad_bytes``: :func:`_exact_bytes`)."""
    from zerocalc.schemes import get_scheme

    if in_network:
        return model_link_bytes_exact(name, psi=psi, n=n, gpus_per_node=gpus_per_node, comm_bytes=comm_bytes,
                                      in_network=in_network, switch_ops=switch_ops,
                                      micro_batches=micro_batches, param_bytes=param_bytes,
                                      grad_bytes=grad_bytes)["sent"]
    return _exact_bytes(get_scheme(name).bytes_per_rank(), psi=psi, n=n, gpus_per_node=gpus_per_node,
                        comm_bytes=comm_bytes, what=name, micro_batches=micro_batches,
                        param_bytes=param_bytes, grad_bytes=grad_bytes)


def model_link_bytes_exact(name: str, *, psi: int, n: int, gpus_per_node: int,
                           comm_bytes: int = WIRE_ELEM_BYTES,
                           in_network: Sequence[str] = (),
                           switch_ops: Sequence[str] | None = None,
                           micro_batches: int = 1, param_bytes=None, grad_bytes=None) -> dict[str, Fraction]:
    """Model bytes per rank per step by link type and direction
    (:func:`zerocalc.in_network.scheme_link_bytes`: rings when ``in_network`` is empty), exact: keys
    ``intra_sent``, ``intra_received``, ``inter_sent``, ``inter_received`` and their sums
    ``sent`` and ``received``. ``switch_ops``: the collectives that go through the switch (default: all
    it can run)."""
    from zerocalc.in_network import scheme_link_bytes

    lb = scheme_link_bytes(name, in_network, switch_ops)
    out = {k: _exact_bytes(v, psi=psi, n=n, gpus_per_node=gpus_per_node, comm_bytes=comm_bytes,
                           what=f"{name} {k}", micro_batches=micro_batches, param_bytes=param_bytes,
                           grad_bytes=grad_bytes) for k, v in lb.as_dict().items()}
    out["sent"] = out["intra_sent"] + out["inter_sent"]
    out["received"] = out["intra_received"] + out["inter_received"]
    return out


def model_bytes_by_phase(name: str, *, psi: int, n: int, gpus_per_node: int,
                         comm_bytes: int = WIRE_ELEM_BYTES, micro_batches: int = 1, param_bytes=None,
                         grad_bytes=None) -> dict[str, Fraction]:
    """Model bytes per rank per step summed by ``"<collective>/<group>"``, exact."""
    from zerocalc.schemes import get_scheme

    out: dict[str, Fraction] = {}
    for ph in get_scheme(name).phases:
        # the simulation's HSDP shard group is a node (H = G), its replicate group the cross-node one
        group = {"shard": "intra", "replicate": "inter"}.get(ph.group.value, ph.group.value)
        key = f"{ph.collective.value}/{group}"
        v = _exact_bytes(ph.bytes_per_rank(), psi=psi, n=n, gpus_per_node=gpus_per_node,
                         comm_bytes=comm_bytes, what=f"{name} {key}", micro_batches=micro_batches,
                         param_bytes=param_bytes, grad_bytes=grad_bytes)
        out[key] = out.get(key, Fraction(0)) + v
    return out


def simulated_bytes_by_collective(run: SchemeRun) -> dict[str, Fraction]:
    """Simulated bytes per rank per step summed by ``"<collective>/<group>"`` (comparable with
    :func:`model_bytes_by_phase`)."""
    out: dict[str, Fraction] = {}
    for key, v in run.by_phase.items():
        k = key.split(":")[0]
        out[k] = out.get(k, Fraction(0)) + v
    return out
