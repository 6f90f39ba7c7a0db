"""An nccl-tests sweep run with symmetric buffer registration (``-R 2``): which of its rows NCCL runs on
its symmetric kernels (:mod:`zerocalc.nccl.symmetric`), and the notes that say so.

Pure: the communicator NCCL tunes (:class:`~zerocalc.nccl.model.Tuning`) and the run's facts in, a
:class:`SymmetricRun` (or the reason there is none) out; :func:`zerocalc.validate.sweep.compare_sweep`
prices each row with it where it gives a kernel, every other row as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from zerocalc.nccl.model import Tuning
from zerocalc.nccl.symmetric import Call, Choice, falls_back, pick, unsupported
from zerocalc.nccl.tables import Algorithm, Collective, Protocol

ALGORITHM = "SYMK"
"""The ``algorithm`` field of a row priced with a symmetric kernel (its ``protocol`` field is the kernel's
own name after its collective: ``AGxLL_R``, ``RSxLDMC_AGxSTMC``, ``LL``, ``ST``, ``LDMC``)."""

REGISTER_VALUES = (0, 1, 2)
"""nccl-tests ``-R`` / ``--local_register``: none, local (``ncclCommRegister``), symmetric
(``ncclCommWindowRegister``) (``src/common.cu``)."""

LOCAL_NOTE = ("nccl-tests -R 1 (local buffer registration, ncclCommRegister) does not enter NCCL's cost "
              "model: priced as without it")


@dataclass(frozen=True)
class SymmetricRun:
    """A sweep NCCL may run on symmetric kernels: the call's constant part and the release."""

    call: Call
    version: tuple[int, int, int]

    def price(self, size_bytes: int, legacy_protocol: str) -> tuple[Choice | None, str | None]:
        """The kernel NCCL runs a call of ``size_bytes`` on and its time, or ``(None, why)`` where it
        runs its legacy kernels (``legacy_protocol``: the protocol the legacy model picks at that size)."""
        call = replace(self.call, size_bytes=int(size_bytes))
        choice = pick(call, self.version)
        if choice is None:
            return None, "no symmetric kernel takes the size (ncclSymkMask)"
        why = falls_back(call, choice, self.version, legacy_protocol == "LL")
        return (None, why) if why else (choice, None)

    def notes(self, out: Sequence[Mapping], fallbacks: Mapping[str, int]) -> list[str]:
        """:func:`symmetric_notes` of this run."""
        return symmetric_notes(self, out, fallbacks)

    def apply(self, row: dict, size_bytes: int, launched: Callable[[float], dict],
              fallbacks: dict[str, int] | None = None, wire_s: float = 0.0) -> None:
        """``row`` (a :func:`~zerocalc.validate.sweep.compare_sweep` row) priced on the symmetric kernel
        NCCL runs ``size_bytes`` on: ``launched(time)`` gives the prediction's fields (the kernel's time,
        no less than ``wire_s``, plus the thread's launch terms; one work struct, no channel terms), and
        ``algorithm`` :data:`ALGORITHM`, ``protocol`` the kernel's, ``symk_kernel``, ``symk_blocks`` and
        ``symk_model_s`` (the kernel's time by NCCL's model) are set; left as priced, counted in
        ``fallbacks`` by why, where NCCL runs its legacy kernels.

        ``wire_s``: the legacy model's bandwidth term for the size (its time less its time for a call of
        no bytes, on the pair it picks). The symmetric kernels move the same bytes over the same NVLink and
        NVSwitch, and NCCL's model of them understates a multimem kernel's bytes on purpose so that it
        wins the choice (``src/sym_kernels.cc``, v2.28-v2.30: "Wrong. Should be nRanks*nBytes but we want
        to beat non-MC"; its all-reduce's peak, 480 GiB/s on Hopper, taken over about the call's bytes
        where the legacy model's bus bandwidth is over 2(n-1)/n of them): NCCL's time picks the kernel,
        and a call takes no less than the links' rate allows."""
        choice, why = self.price(size_bytes, row["protocol"])
        if choice is None:
            if fallbacks is not None and why:
                fallbacks[why] = fallbacks.get(why, 0) + 1
            return
        row.update(launched(max(choice.time_s, wire_s)))
        row["symk_model_s"] = choice.time_s
        row.update(algorithm=ALGORITHM, protocol=choice.kernel.protocol, launch_channels=None,
                   symk_kernel=choice.kernel.name, symk_blocks=choice.blocks)


def symmetric_run(tuning: Tuning, coll: Collective, group_size: int, version: tuple[int, int, int], *,
                  local_register: int | None, nvls_enable: bool = True, dtype: str | None = None,
                  redop: str | None = None, gpus_per_thread: int | None = None,
                  agg_iters: int | None = None) -> tuple[SymmetricRun | None, list[str]]:
    """The symmetric pricing of a sweep run with nccl-tests ``-R local_register`` on ``tuning``'s
    communicator, or ``None`` with the note that says why not (none where ``-R`` is 0 or not known).
    Symmetric kernels run inside one NVLink domain: one node, or an NVL72 clique NCCL counts as one
    (``comm->symmetricSupport``, ``isAllDirectNvlink`` from v2.29, the LSA team); a communicator of
    several (their GIN kernels, v2.29 on) or of GPUs joined by PCIe only (CUDA P2P, which v2.27-v2.28
    also take) is left to the legacy kernels here."""
    if local_register == 1:
        return None, [LOCAL_NOTE]
    if local_register != 2:
        return None, []
    m = tuning.machine
    call = Call(coll, 0, group_size, m.compute_capability, bool(m.nvls and nvls_enable), dtype, redop,
                group_calls=max(1, agg_iters or 1), one_thread_multi_gpu=(gpus_per_thread or 1) > 1)
    why = unsupported(call, version)
    ring = m.graphs.get(Algorithm.RING)
    if why is None and m.n_nodes > 1:
        why = ("the ranks span more than one NVLink domain; NCCL's symmetric GIN (network) kernels "
               "(v2.29+) are not modelled")
    if why is None and (ring is None or not ring.nvlink or not (m.nvswitch or group_size == 2)):
        why = "the GPUs are not all joined by NVLink; symmetric kernels over PCIe P2P are not modelled"
    if why is not None:
        return None, [f"nccl-tests -R 2 (symmetric registration): priced with NCCL's legacy kernels: {why}"]
    return SymmetricRun(call, version), []


def symmetric_notes(run: SymmetricRun | None, out: Sequence[Mapping],
                    fallbacks: Mapping[str, int]) -> list[str]:
    """What the symmetric pricing did to the priced rows ``out``: the kernels that priced them and where
    NCCL's own source puts them, and the rows NCCL would run on its legacy kernels (``fallbacks``: why →
    rows)."""
    if run is None:
        return []
    v = ".".join(map(str, run.version))
    src = "src/symmetric.cc queryModel" if run.version < (2, 28, 0) else "src/sym_kernels.cc queryModel_lsa"
    kernels = list(dict.fromkeys(r["symk_kernel"] for r in out if r.get("symk_kernel")))
    notes, n = [], sum(1 for r in out if r.get("symk_kernel"))
    if kernels:
        notes.append(f"nccl-tests -R 2 (symmetric registration): {n} of {len(out)} sizes priced with "
                     f"NCCL {v}'s symmetric kernels ({', '.join(kernels)}; {src}, LSA kernels over "
                     f"NVLink; algorithm {ALGORITHM}, protocol the kernel's)")
    notes += [f"nccl-tests -R 2: {n} sizes priced with NCCL's legacy kernels: {why}"
              for why, n in fallbacks.items()]
    return notes


def wire_s(tuning: Tuning, coll: Collective, algo: Algorithm, proto: Protocol, size: float) -> float:
    """The legacy model's bandwidth term for a call of ``size`` bytes on the pair it picks: its time less
    its time for a call of no bytes (:meth:`SymmetricRun.apply`)."""
    full = tuning.run_time_s(coll, algo, proto, size, disabled_ok=True)
    empty = tuning.run_time_s(coll, algo, proto, 0, disabled_ok=True)
    return 0.0 if full is None or empty is None else max(0.0, full - empty)
