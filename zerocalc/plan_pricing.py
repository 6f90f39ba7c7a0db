"""The implementation plan's time, priced with NCCL's own cost model (RCCL's on AMD GPUs).

:func:`zerocalc.plan.build_plan` asks for the time of each scheme it compares, keyed ``(scheme, ops)``:

- ``ops == ()``: the scheme on the cluster as it is, with every algorithm NCCL has there (NVLS, NVLS
  Tree, CollNet where the topology offers in-network reduction), at NCCL's own choice per collective;
- ``ops is None``: the same without in-network reduction (the topology's ``in_network_reduction``
  emptied): rings and trees only, the baseline an in-network item is measured against;
- ``ops`` a tuple of collectives: with the switches of the plan's kinds, offered or not (a cluster that
  has none is priced as if it had them, and the plan marks the item not available). RCCL's model has
  no in-network algorithm, so on AMD GPUs these keys are left unpriced.

NCCL decides per call whether the switch pays: where its model predicts Ring faster than NVLS Tree (large
all-reduces across nodes of DGX H100s), it keeps Ring, so in-network reduction saves no time even though
a rank would inject fewer bytes. That is what :func:`nccl_plan_times` prices, the same way ``zerocalc
table`` prices its ``t NCCL`` column (:func:`zerocalc.nccl_pricing.price_rows`): one call per phase,
the phase's whole vector, or with ``--bucket`` equal calls no larger than an implementation's bucket
(DDP's 25 MiB, DeepSpeed's ``reduce_bucket_size``), for which NCCL may choose otherwise.
"""

from __future__ import annotations

import math
import re
from collections import namedtuple
from collections.abc import Iterable
from dataclasses import replace

from zerocalc.errors import RestrictedOpError
from zerocalc.nccl_pricing import calls_words
from zerocalc.plan import ALL_KINDS, PlanTimes

#: ``--time-model`` values: NCCL's (or RCCL's) cost model, the textbook ring α-β model.
TIME_MODELS = ("nccl", "ring")


def nccl_priceable(topology) -> bool:
    """Whether NCCL's model (RCCL's on AMD GPUs) can price ``topology``: it gives every field the model
    needs (:func:`zerocalc.nccl_pricing.missing_fields`)."""
    from zerocalc.nccl_pricing import missing_fields

    return topology.gpu_arch is not None or not missing_fields(topology)


class NcclPlanPricing:
    """:func:`nccl_plan_times` under one set of NCCL options, as :func:`zerocalc.plan.build_plan` calls
    its ``pricing``; ``model`` names the cost model, and the ``NCCL_ALGO`` / ``NCCL_PROTO`` it ran under,
    once it has priced (empty before)."""

    def __init__(self, nccl_version: str | None = None, nccl_algo: str | None = None,
                 nccl_proto: str | None = None, call_bytes: float | None = None) -> None:
        self.options = dict(nccl_version=nccl_version, nccl_algo=nccl_algo, nccl_proto=nccl_proto,
                            call_bytes=call_bytes)
        self.model = ""

    def check(self, topology) -> None:
        """Refuse, before any work, a version or an ``NCCL_ALGO`` / ``NCCL_PROTO`` list the model of
        ``topology``'s GPUs (NCCL's, RCCL's on AMD GPUs) does not take: a
        :class:`~zerocalc.errors.ConfigError` naming the option."""
        from zerocalc.nccl.env import restrictions

        version = self.options["nccl_version"]
        if topology.gpu_arch is not None:
            from zerocalc.nccl.rccl_releases import rccl_release_for

            rccl_release_for(version)
        elif version is not None:
            from zerocalc.nccl import release_for

            release_for(version)
        restrictions(self.options["nccl_algo"], self.options["nccl_proto"], version)

    def __call__(self, keys, kinds, topology, **sizes) -> PlanTimes:
        priced = nccl_plan_times(keys, kinds, topology, **sizes, **self.options)
        under = [f"NCCL_{k}={self.options[o]}" for k, o in (("ALGO", "nccl_algo"), ("PROTO", "nccl_proto"))
                 if self.options[o] is not None]
        self.model = (priced.model + (f" under {', '.join(under)}" if under else "")
                      + f", {calls_words(self.options['call_bytes'])}")
        return priced


def nccl_plan_times(keys: Iterable[tuple], kinds: tuple[str, ...], topology, *, psi: float, n: int, g: int,
                    comm_bytes: float, nccl_version: str | None = None, nccl_algo: str | None = None,
                    nccl_proto: str | None = None, call_bytes: float | None = None,
                    micro_batches: int = 1, tp: int = 1, pp: int = 1, param_bytes: float | None = None,
                    grad_bytes: float | None = None) -> PlanTimes:
    """Each ``(scheme, ops)`` of ``keys`` priced with NCCL ``nccl_version``'s model (see the module's
    text for ``ops``) at Ψ = ``psi``, N = ``n``, G = ``g`` and ``comm_bytes`` per element on the wire,
    under ``NCCL_ALGO`` / ``NCCL_PROTO`` where given, each phase in equal calls of at most ``call_bytes``
    (``--bucket``; ``None``: one call per phase), per optimizer step of ``micro_batches`` (each phase at
    its implementation's cadence); under ``tp`` / ``pp`` the data-parallel group of the run of ``n``
    GPUs; ``param_bytes`` / ``grad_bytes``: the parameter- and gradient-side wire widths (default
    ``comm_bytes``); ``kinds``: the in-network reduction of the plan's switch items. One table of rows per
    topology variant, priced as ``zerocalc table`` prices it."""
    offered = tuple(topology.in_network_reduction or ())
    switched = tuple(k for k in ALL_KINDS if k in offered or k in kinds)
    variants = {"as is": topology, "rings": replace(topology, in_network_reduction=()),
                "switch": replace(topology, in_network_reduction=switched)}
    by_variant: dict = {}
    for name, ops in dict.fromkeys(keys):
        variant = "rings" if ops is None else "as is" if ops == () else "switch"
        by_variant.setdefault(variant, []).append((name, ops))
    times, choices, model = {}, {}, ""
    for variant, items in by_variant.items():
        if variant == "switch" and topology.gpu_arch is not None:
            continue  # RCCL's model has no in-network algorithm: those keys stay unpriced
        topo = variants[variant]
        names = list(dict.fromkeys(name for name, _ in items))
        df = _Rows(names, psi=psi, n=n, g=g, comm_bytes=float(comm_bytes), micro_batches=micro_batches,
                   tp=tp, pp=pp, param_bytes=param_bytes, grad_bytes=grad_bytes)
        try:
            priced = _price(df, topo, nccl_version, nccl_algo, nccl_proto, call_bytes)
        except RestrictedOpError:  # NCCL_ALGO leaves none of the variant's schemes a pair: all unpriced
            continue  # (NCCL_ALGO=NVLS where the rings variant has no in-network reduction)
        model = model or _model_name(priced.notes[0])
        row = {s: (t, c) for s, t, c in zip(df["scheme"], priced.times, priced.choices, strict=True)}
        for name, ops in items:
            t, c = row[name]
            if not math.isnan(t):  # a phase the release cannot run (send/receive before NCCL 2.7): unpriced
                times[(name, ops)], choices[(name, ops)] = t, "" if c == "-" else c  # "-": no call
    return PlanTimes(times, choices, model)


class _Rows:
    """The rows :func:`zerocalc.nccl_pricing.price_rows` (and RCCL's) reads, one per scheme, as
    :func:`zerocalc.evaluate.evaluate` lays them out for one configuration (``tp`` / ``pp``, gradients
    reduced as each implementation does by default in ``micro_batches`` per step, HSDP's shard group the
    node's ranks of the group): the two things the pricing reads of
    a frame, its ``scheme`` column and :meth:`itertuples`, without compiling the symbolic model's
    volumes and times (or importing pandas), which it does not read."""

    def __init__(self, names: list[str], *, psi: float, n: int, g: int, comm_bytes: float,
                 micro_batches: int = 1, tp: int = 1, pp: int = 1, param_bytes: float | None = None,
                 grad_bytes: float | None = None) -> None:
        from zerocalc.evaluate import data_parallel_layout

        n_dp, g_dp, g_node = data_parallel_layout(n, g, tp, pp)
        self.names = list(names)
        param = float(comm_bytes if param_bytes is None else param_bytes)
        grad = float(comm_bytes if grad_bytes is None else grad_bytes)
        self.config = dict(psi=float(psi), n=float(n), gpus_per_node=float(g_node),
                           comm_bytes_per_element=comm_bytes, param_comm_bytes_per_element=param,
                           grad_comm_bytes_per_element=grad, micro_batches=int(micro_batches),
                           grad_sync="every", tp=int(tp), pp=int(pp), dp_size=float(n_dp),
                           hsdp_shard_size=float(g_dp))

    def __getitem__(self, column: str) -> list:
        return self.names if column == "scheme" else [self.config[column]] * len(self.names)

    def itertuples(self, index: bool = False):
        row = namedtuple("Row", ["scheme", *self.config])
        return (row(name, *self.config.values()) for name in self.names)


def _model_name(note: str) -> str:
    """The cost model a pricing's first note names: ``NCCL 2.30's own cost model (v2.30.7-1
    tuning.cc)``, ``RCCL 2.21.5's own cost model (ROCm 6.3)``."""
    m = re.match(r"t [NR]CCL: ([NR]CCL \S+'s own cost model \([^;)]*)", note)
    return f"{m.group(1)})" if m else note


def _price(df, topo, nccl_version, nccl_algo, nccl_proto, call_bytes):
    """``df`` priced as ``zerocalc table`` prices it: RCCL's model on AMD GPUs, NCCL's otherwise."""
    if topo.gpu_arch is not None:
        from zerocalc.rccl_pricing import price_rows_rccl

        return price_rows_rccl(df, topo, rccl_version=nccl_version, nccl_algo=nccl_algo,
                               nccl_proto=nccl_proto, call_bytes=call_bytes)
    from zerocalc.nccl_pricing import price_rows

    return price_rows(df, topo, nccl_version=nccl_version, nccl_algo=nccl_algo, nccl_proto=nccl_proto,
                      call_bytes=call_bytes)
