"""The whole check: measure the trace, time it, compare it with the schemes, explain the result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from zerocalc.validate.compare import SchemeComparison, compare, consistent, indistinguishable
from zerocalc.validate.explain import reused_sentence
from zerocalc.validate.fit import AlphaBetaFit, Timing, timing
from zerocalc.validate.frozen import frozen_note, hpz_pass, pass_recomputed
from zerocalc.validate.measure import Measurement, measure
from zerocalc.validate.nccl_timing import KERNEL_NAMING, NcclTiming, nccl_timing, release_by_kernel_names
from zerocalc.validate.regather import (
    gathered_in_backward_with_apart,
    hpz_merged,
    hpz_regathered,
    recomputed_note,
    regathered_note,
)
from zerocalc.validate.regimes import (
    all_reduced_once_note,
    gathered_after_reductions,
    kept_for_backward_note,
    kept_notes,
    secondary_partition,
    smaller_group_gathers,
)


@dataclass(frozen=True)
class CheckResult:
    """Everything ``zerocalc check`` reports."""

    measurement: Measurement
    comparisons: tuple[SchemeComparison, ...]
    matches: tuple[str, ...]
    indistinguishable: tuple[tuple[str, ...], ...]
    timing: Timing | None
    notes: tuple[str, ...] = field(default=())
    #: schemes that send exactly the measured pattern when the forward all-gather is kept for backward
    reused: tuple[str, ...] = field(default=())
    #: schemes that send exactly the measured pattern when gathered parameters are kept across the step's
    #: micro-batches (:func:`~.regimes.kept_notes`)
    kept: tuple[str, ...] = field(default=())
    #: schemes that send exactly the measured pattern when the all-gathers reported apart on a smaller
    #: group are their parameter gathers there (ZeRO++'s hpZ, FSDP2's reshard_after_forward=int;
    #: :func:`~.regimes.secondary_partition`)
    secondary_partition: tuple[str, ...] = field(default=())
    #: schemes that send exactly the measured pattern when HSDP's replicate all-reduce runs in the last
    #: micro-batch alone (:func:`~.regimes.all_reduced_once`)
    all_reduced_once: tuple[str, ...] = field(default=())
    #: schemes that send exactly the measured pattern when the forward's gathers of part of the parameters
    #: are kept for the backward (:func:`~.regimes.kept_for_backward_share`)
    partly_kept: tuple[str, ...] = field(default=())
    #: schemes that send exactly the measured pattern when the gathers of parameters never reduced are
    #: those of frozen parameters (:mod:`.frozen`), and those gathers' elements per rank per step
    frozen: tuple[str, ...] = field(default=())
    frozen_elements: float = 0.0
    #: schemes that send exactly the measured pattern with more than Ψ gathered in the backward: activation
    #: checkpointing's recompute (:func:`~.regather.recomputed_share`), or read with frozen parameters by pass
    #: with a backward that gathers more than the forward (:func:`~.frozen.pass_recomputed`)
    recomputed: tuple[str, ...] = field(default=())
    #: the step's collectives timed by NCCL's model on a cluster (``check TRACE --topology``;
    #: :mod:`zerocalc.validate.nccl_timing`), ``None`` without one
    nccl_timing: NcclTiming | None = None
    #: the calls of gloo Flight Recorder dumps recorded as all-reduces and read as the reduce-scatters they
    #: stand for (:mod:`~.gloo_dumps`), all ranks' in the whole dumps; 0 where calls are read as recorded
    read_as_reduce_scatters: int = 0
    #: where the calls match as recorded: the schemes they match with those all-reduces read as
    #: reduce-scatters (:mod:`~.gloo_dumps`; FSDP's SHARD_GRAD_OP over gloo reads as DeepSpeed ZeRO-2 as
    #: recorded, and as FSDP's with them)
    if_reduce_scatters: tuple[str, ...] = field(default=())
    #: where those all-reduces are read as reduce-scatters though the calls match as recorded (the dumps
    #: open with gathers: :func:`~.gloo_dumps.opens_with_gathers`): the schemes the calls match as recorded
    as_recorded: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        """The ``check --format json`` contract, plus detail fields."""
        m = self.measurement
        t = self.timing
        return {
            "psi": m.psi, "psi_inferred": m.psi_trace, "psi_how": m.psi_how, "psi_without_padding": m.psi_own,
            "n": m.n, "n_how": m.n_how, "world_size": m.world_size,
            "dp_group_sizes": list(m.dp_group_sizes), "hsdp_shard_size": m.shard_size,
            "expert_parallel": None if not m.expert_size else {
                "expert_data_parallel_size": m.expert_size, "expert_parallel_size": m.n // m.expert_size,
                "expert_psi": m.expert_psi, "dense_psi": m.psi - (m.expert_psi or 0)},
            "micro_batches": m.micro_batches, "micro_batches_how": m.micro_batches_how,
            "grad_sync": m.grad_sync, "grad_sync_how": m.grad_sync_how,
            "param_dtype": m.param_dtype, "grad_dtype": m.grad_dtype,
            "steps": m.steps, "steps_how": m.steps_how,
            "ranks": list(m.ranks), "ranks_how": m.ranks_how,
            "comm_dtype": m.comm_dtype, "comm_elem_bytes": m.comm_elem_bytes,
            "matches": list(self.matches),
            "indistinguishable": [list(g) for g in self.indistinguishable],
            "matches_if_parameters_kept_for_backward": list(self.reused),
            "matches_if_parameters_kept_across_micro_batches": list(self.kept),
            "matches_with_secondary_partition": list(self.secondary_partition),
            "matches_if_all_reduced_once": list(self.all_reduced_once),
            "matches_if_some_parameters_kept_for_backward": list(self.partly_kept),
            "matches_with_frozen_parameters": list(self.frozen),
            "matches_if_recomputed_in_backward": list(self.recomputed),
            "frozen_gathered_elements_per_rank_per_step": self.frozen_elements or None,
            "recompute_gathered_elements_per_rank_per_step": m.recompute_elements or None,
            "matches_if_parameters_gathered_again_in_backward": [
                c.scheme for c in self.comparisons if c.matches_if_regathered],
            "matches_reuse_regime": {c.scheme: {"reuse_distance": c.reuse_distance, "regime": c.reuse_regime}
                                     for c in self.comparisons
                                     if c.scheme in self.matches and c.reuse_regime},
            "measured_bytes_per_rank_per_step": m.bytes_per_rank_per_step,
            "categories": m.categories.to_dict(orient="records"),
            "schemes": [c.as_record(m.psi) for c in self.comparisons],
            "timing": None if t is None else {
                "fit": None if t.fit is None else t.fit.as_record(), "fit_source": t.fit_source,
                "predicted_step_time_s": t.predicted_step_time_s,
                "measured_step_time_s": t.measured_step_time_s,
                "ratio": float(t.ratio), "note": t.note,
            },
            "notes": list(m.notes) + list(self.notes),
            "nccl_timing": None if self.nccl_timing is None else self.nccl_timing.as_dict(),
            "all_reduces_read_as_reduce_scatters": self.read_as_reduce_scatters,
            "matches_if_all_reduces_are_reduce_scatters": list(self.if_reduce_scatters),
            "matches_as_recorded": list(self.as_recorded),
        }


def check(
    table: pd.DataFrame,
    *,
    psi: int | None = None,
    n: int | None = None,
    steps: int | None = None,
    dtype: str | None = None,
    schemes: Sequence[str] | None = None,
    meta: dict | None = None,
    gpus_per_node: int | None = None,
    fit: AlphaBetaFit | None = None,
    micro_batches: int | None = None,
    reuse_distance: float | None = None,
    weights=None,
    nccl: dict | None = None,
) -> CheckResult:
    """Measure a canonical trace table and compare it with every scheme.

    The stages in order: :func:`measure` (classify the calls, infer ranks, N, element types, steps,
    micro-batches and Ψ), :func:`timing` (fit α-β), :func:`compare` (every scheme against the
    measured step; ``reuse_distance``, DeepSpeed's stage3_max_reuse_distance, when known, else each
    regime tried) and the notes that explain the result. ``weights``: a folded trace's weight of each
    row (:func:`measure`; raises :class:`~zerocalc.validate.folded.Unfoldable` where it cannot stand
    for the full trace). ``nccl``: ``topology`` (a :class:`~zerocalc.topology.Topology`) and the NCCL
    options (``nccl_version``, default the one the trace states; ``nccl_algo``, ``nccl_proto``) to time
    the step's calls by NCCL's model on that cluster (:func:`zerocalc.validate.nccl_timing.nccl_timing`).
    Flight Recorder dumps of a gloo run that all-gather and reduce-scatter nothing are read again with the
    all-reduces that stand for reduce-scatters as those where that explains them better (:func:`_read_again`).
    """
    options = dict(psi=psi, n=n, steps=steps, dtype=dtype, schemes=schemes, meta=meta,
                   gpus_per_node=gpus_per_node, fit=fit, micro_batches=micro_batches,
                   reuse_distance=reuse_distance, weights=weights, nccl=nccl)
    m = measure(table, psi=psi, n=n, steps=steps, dtype=dtype, meta=meta, micro_batches=micro_batches,
                weights=weights)
    backends = {str(v.get("backend")) for v in (meta or {}).values()
                if isinstance(v, dict) and v.get("backend")}
    backend = next(iter(backends)) if len(backends) == 1 else None
    t = timing(m, fit, backend=backend)
    timed_by_nccl = None if nccl is None else _by_nccl(m, nccl, meta, gpus_per_node, backend)
    comps = compare(m, schemes, gpus_per_node=gpus_per_node, fit=t.fit if t is not None else None,
                    reuse_distance=reuse_distance)
    notes = _run_notes(m, meta, nccl, backend, timed_by_nccl)
    comps, regime_notes, secondary, set_apart = _regime_notes(m, comps)
    notes += regime_notes
    matches = tuple(s for s in consistent(comps) if s not in set_apart)
    frozen = _frozen(m, comps, notes, set_apart)
    recomputed_by_pass = frozen.pop("recomputed", ())
    recorded = _gloo_reduce_scatter_note(m, meta, backend)
    if recorded and not matches:
        notes.append(recorded)
    regathered = [c.scheme for c in comps if c.matches_if_regathered]
    if regathered:
        notes.append(f"{', '.join(regathered)} sends exactly this pattern with stage3_max_reuse_distance = 0 "
                     "(or a model past it): every parameter gathered again in backward, none kept from the "
                     "forward nor prefetched")
    res = CheckResult(
        measurement=m, comparisons=tuple(comps), matches=matches,
        indistinguishable=tuple(g for g in (tuple(s for s in g if s not in set_apart)
                                            for g in indistinguishable(comps)) if len(g) > 1),
        timing=t, notes=tuple(notes),
        reused=tuple(c.scheme for c in comps if c.matches_if_reused), nccl_timing=timed_by_nccl,
        kept=tuple(c.scheme for c in comps if c.matches_if_kept_across_micro_batches),
        secondary_partition=secondary[0] if secondary else (),
        all_reduced_once=tuple(c.scheme for c in comps if c.matches_if_all_reduced_once),
        partly_kept=tuple(c.scheme for c in comps if c.kept_for_backward_share), **frozen,
        recomputed=tuple(c.scheme for c in comps if c.recomputed_share) + recomputed_by_pass,
    )
    return _read_again(res, table, options) if recorded else res


def _run_notes(m: Measurement, meta: dict | None, nccl: dict | None, backend: str | None,
               timed_by_nccl: NcclTiming | None) -> list[str]:
    """The notes on the run as a whole: the preset its GPUs point to, the NCCL release and durations
    ``--topology`` prices with, a run of one rank or one with no step traffic."""
    notes = []
    hint = None if nccl is not None or backend == "gloo" else topology_hint(m, meta)
    if hint:
        notes.append(hint)
    if timed_by_nccl is not None and not nccl.get("nccl_version") and not _stated_versions(meta):
        named, release = release_by_kernel_names(m), timed_by_nccl.release
        how = (f"{KERNEL_NAMING[named]}: its calls are priced as NCCL {release}, the last release of that "
               "naming" if named else f"its calls are priced by the latest release modelled, {release}")
        notes.append(f"--topology: the trace states no NCCL version; {how} (--nccl-version to choose the "
                     "run's)")
    if nccl is not None and timed_by_nccl is None:
        notes.append("--topology: the trace records no call durations, so NCCL's model has nothing to be "
                     "set against")
    if m.n == 1:
        notes.append("N = 1: a single rank sends nothing to another rank, so there is no cross-rank traffic "
                     "to compare with the schemes (every scheme predicts 0 B)")
    elif m.bytes_per_rank_per_step == 0:
        notes.append("no gradient or parameter traffic in the steady state: no scheme can be checked")
    return notes


def _regime_notes(m: Measurement, comps: list) -> tuple[list, list[str], tuple | None, tuple[str, ...]]:
    """The notes naming the schemes that send the measured pattern in a regime of their implementation
    (:mod:`~.regimes`), and the comparisons with the gathers reported apart on smaller groups taken for
    that rather than for parameters kept on N; (comparisons, notes, the secondary partition or None, the
    schemes whose match on the calls left is set aside: DeepSpeed ZeRO-3 read past its reuse distance with
    hpZ (:func:`~.regather.hpz_regathered`), whose gathers reported apart are its own, so the parameters
    kept for the backward that the rest prices it at are not what it ran)."""
    notes = []
    reused = tuple(c.scheme for c in comps if c.matches_if_reused)
    if reused:
        notes.append(reused_sentence(reused))
    on = smaller_group_gathers(m)
    secondary, again = (secondary_partition(m, comps, on) if on else None), {}
    if secondary is None and on and (merged := hpz_merged(m, comps, on)) is not None:
        # past the reuse distance: part gathered again from the copy
        hpz = hpz_regathered(m, merged) or hpz_pass(m, merged)
        if hpz is not None:
            secondary, again = hpz[:2], hpz[2]
    if secondary:  # the gathers reported apart explain it better than parameters kept on N
        # but for a share DeepSpeed ZeRO-3 keeps beside them (secondary_partition's third part)
        kept_by = secondary[2] if len(secondary) > 2 else {}
        comps = [replace(c, matches_if_kept_across_micro_batches=False, gathers_if_kept=0,
                         persistent_share=kept_by.get(c.scheme, 0.0), kept_for_backward_share=0.0, **again)
                 if c.scheme in secondary[0] else c for c in comps]
    kept = any(c.persistent_share > 0 for c in comps)
    notes += kept_notes(comps, m.micro_batches, m.psi, gathered_after_reductions(m) if kept else None)
    if secondary:
        notes += secondary[1]
    once = tuple(c.scheme for c in comps if c.matches_if_all_reduced_once)
    if once:
        notes.append(all_reduced_once_note(once, m.micro_batches))
    partly = kept_for_backward_note(comps, m.psi)
    if partly:
        notes.append(partly)
    # a share gathered again beside parameters kept across the micro-batches is said in that note
    alone = [c for c in comps if c.regathered_share and not c.persistent_share]
    for share in sorted({c.regathered_share for c in alone}):
        notes.append(regathered_note([c.scheme for c in alone if c.regathered_share == share], share, m.psi,
                                     m.gathered_in_backward is not None))
    for share in sorted({c.recomputed_share for c in comps if c.recomputed_share}):
        notes.append(recomputed_note([c.scheme for c in comps if c.recomputed_share == share], share, m.psi))
    return comps, notes, secondary, secondary[0] if again else ()


def _frozen(m: Measurement, comps: list, notes: list[str], hpz: tuple[str, ...] = ()) -> dict:
    """The schemes that match with frozen parameters gathered and never reduced (:mod:`.frozen`: all read one
    way, where no scheme explains the trace otherwise), those gathers' elements per rank per step, and the
    schemes whose backward gathers more than their forward, read by pass (activation checkpointing's
    recompute: :func:`~.frozen.pass_recomputed`), their note appended to ``notes``; ``hpz``: the schemes
    read past their reuse distance with hpZ, whose backward's gathers are also those reported apart
    (:func:`~.frozen.hpz_pass`)."""
    found = [c for c in comps if c.frozen_gathered]
    if not found:
        return {}
    if found[0].scheme in hpz:
        m = replace(m, gathered_in_backward=gathered_in_backward_with_apart(m))
    recomputed = found[0].frozen_how == "pass" and pass_recomputed(m, found[0].frozen_gathered)
    labels = [c.scheme if c.scheme in hpz else c.label for c in found]  # hpZ's: not the regime priced
    notes.append(frozen_note(labels, found[0].frozen_gathered, m.psi, found[0].frozen_how,
                             m.gathered_in_backward or 0.0, recomputed))
    return {"frozen": tuple(c.scheme for c in found), "frozen_elements": found[0].frozen_gathered,
            "recomputed": tuple(c.scheme for c in found) if recomputed else ()}


def _gloo_reduce_scatter_note(m: Measurement, meta: dict | None, backend: str | None) -> str | None:
    """The sentence for Flight Recorder dumps of a gloo run that all-gather and all-reduce and reduce-scatter
    nothing: ProcessGroupGloo runs a reduce-scatter as an all-reduce of the whole input, and the dump records
    that all-reduce, so a sharded scheme's reduce-scatters read as all-reduces; ``None`` elsewhere."""
    dumps = any(isinstance(v, dict) and v.get("format") == "flight_recorder" for v in (meta or {}).values())
    ops = {o for o, *_ in m.pattern}
    if backend != "gloo" or not dumps or not {"all_gather", "all_reduce"} <= ops or "reduce_scatter" in ops:
        return None
    return ("over gloo a reduce-scatter runs, and a Flight Recorder dump records it, as an all-reduce of its "
            "whole input (ProcessGroupGloo), so a sharded scheme's reduce-scatters read as all-reduces here; "
            "a profiler trace of the run names them (c10d::_reduce_scatter_base_)")


def _read_again(res: CheckResult, table: pd.DataFrame, options: dict) -> CheckResult:
    """``res``, the check of gloo dumps that all-gather and reduce-scatter nothing, or the reading of the
    same calls with the all-reduces that stand for reduce-scatters as those
    (:func:`_read_as_reduce_scatters`, sized, else unsized where no scheme sends ``res`` or the dumps open
    with a gather), where a scheme sends it and none ``res``, or ``res`` leaves more bytes reported apart,
    or the dumps open with a gather though ``res`` matches (:func:`~.gloo_dumps.opens_with_gathers`);
    ``res`` with a note naming the other reading's matches where both match and the dumps open with a
    reduction."""
    from zerocalc.validate.gloo_dumps import opens_with_gathers, opens_with_gathers_sentence

    matches = res.matches
    gathers_first = bool(matches) and opens_with_gathers(table, options["meta"])  # a sharded forward
    other = _read_as_reduce_scatters(table, options)
    if other is None and (not _explained(res) or gathers_first):
        other = _read_as_reduce_scatters(table, options, sized=False)
    if other is None:
        return res
    if not _explained(res):  # the calls read as what they stand for: explained, or more of them
        return replace(other, notes=other.notes + ("read as recorded, no scheme sends the dumps' calls",))
    if _apart(other) < _apart(res):
        more = _apart(res) - _apart(other)
        return replace(other, notes=other.notes + (
            f"read as recorded, the dumps' calls leave {more:,.0f} B per rank per step more reported apart",))
    if other.matches and set(other.matches) != set(matches):
        if gathers_first:
            return replace(other, notes=other.notes + (opens_with_gathers_sentence(matches),),
                           as_recorded=matches)
        res = replace(res, notes=res.notes + (_other_reading_note(other),), if_reduce_scatters=other.matches)
    return res


def _explained(res: CheckResult) -> bool:
    """Whether some scheme sends the measured pattern, as it is or in a regime of its implementation the
    notes name (parameters kept or gathered again, HSDP's all-reduce in the last micro-batch, gathers on a
    smaller group, frozen parameters gathered and never reduced)."""
    return bool(res.matches or res.reused or res.kept or res.secondary_partition or res.all_reduced_once
                or res.partly_kept or res.frozen or res.recomputed
                or any(c.matches_if_regathered for c in res.comparisons))


def _apart(res: CheckResult) -> float:
    """The bytes per rank per step of the calls reported apart, no data-parallel scheme's."""
    cats = res.measurement.categories
    row = cats[cats["category"] == "unexplained"]
    return float(row["bytes_per_rank_per_step"].iloc[0]) if len(row) else 0.0


def _read_as_reduce_scatters(table: pd.DataFrame, options: dict, sized: bool = True) -> CheckResult | None:
    """:func:`check` of ``table`` with the all-reduces of gloo dumps that stand for reduce-scatters read as
    those (:func:`~.gloo_dumps.stand_ins`, ``sized`` or not), with the sentence saying so, where some
    scheme sends that reading (:func:`_explained`); else ``None``."""
    from zerocalc.validate import gloo_dumps

    mask = gloo_dumps.stand_ins(table, options["meta"], sized)
    if not mask.any():
        return None
    res = check(gloo_dumps.as_reduce_scatters(table, mask), **options)
    if not _explained(res):
        return None
    sizes = table["in_nelems"].to_numpy()[mask].astype(int).tolist()
    calls = int(mask.sum())
    return replace(res, notes=res.notes + (gloo_dumps.read_sentence(calls, sizes, sized),),
                   read_as_reduce_scatters=calls)


def _other_reading_note(other: CheckResult) -> str:
    """The sentence naming what a gloo dump whose calls match as recorded matches with its all-reduces of
    a gather's whole read as reduce-scatters (``other``, :func:`_read_as_reduce_scatters`)."""
    return ("over gloo a reduce-scatter runs, and a Flight Recorder dump records it, as an all-reduce of its "
            f"whole input (ProcessGroupGloo): read as reduce-scatters, the {other.read_as_reduce_scatters:,} "
            "all-reduces of the whole an all-gather returns on their group match "
            f"{', '.join(other.matches)}; the dump cannot tell which the run called, a profiler trace of it "
            "can (c10d::_reduce_scatter_base_)")


def topology_hint(m: Measurement, meta: dict | None) -> str | None:
    """The sentence that points a trace whose step calls have durations to ``--topology``: the preset whose
    nodes hold the GPUs the traces name (Kineto's ``deviceProperties``,
    :func:`zerocalc.topology.devices.preset_for_gpu`); ``None`` where they name none, or several kinds, or
    one no preset describes, or the step has no durations."""
    import numpy as np

    from zerocalc.topology.devices import preset_for_gpu
    from zerocalc.validate.classify import STEP

    names = {g for v in (meta or {}).values() if isinstance(v, dict) for g in v.get("gpus") or ()}
    if len(names) != 1:
        return None
    c = m.columns
    step = (c.cat == STEP) & (c.step_id >= 0)
    if not np.any(step & ~np.isnan(c.duration_s)):
        return None
    (gpu,) = names
    preset = preset_for_gpu(gpu)
    return None if preset is None else (
        f"--topology {preset} (the preset for the trace's {gpu}, from its deviceProperties) would time the "
        "steps' NCCL calls by NCCL's own cost model, each against its kernel's duration")


def _stated_versions(meta: dict | None) -> set[str]:
    """The NCCL releases the traces state (``distributedInfo.nccl_version``)."""
    return {str(v.get("nccl_version")) for v in (meta or {}).values()
            if isinstance(v, dict) and v.get("nccl_version")}


def _by_nccl(m: Measurement, nccl: dict, meta: dict | None, gpus_per_node: int | None,
             backend: str | None) -> NcclTiming | None:
    """The step's calls timed by NCCL's model under ``nccl`` (:func:`check`), in the release the traces
    state (``distributedInfo.nccl_version``) where ``nccl`` names none and they agree on one."""
    stated = _stated_versions(meta)
    options = {k: v for k, v in nccl.items() if k != "topology"}
    if options.get("nccl_version") is None and len(stated) == 1:
        options["nccl_version"] = next(iter(stated))
    elif options.get("nccl_version") is None and not stated:
        options["nccl_version"] = release_by_kernel_names(m)
    return nccl_timing(m, nccl["topology"], gpus_per_node=gpus_per_node, backend=backend, **options)
