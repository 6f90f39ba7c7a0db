"""Flight Recorder dumps of gloo runs: the all-reduces that stand for reduce-scatters.

ProcessGroupGloo runs a reduce-scatter as an all-reduce of the whole input, the rank keeping its part,
and a Flight Recorder dump records that all-reduce (``gloo:all_reduce``, input and output the whole), so
a dump cannot say which of its all-reduces the framework called as reduce-scatters. Where the calls read
as recorded match no scheme (or leave more of them reported apart), the all-reduces of the whole an
all-gather on the same group returns (a unit's gradient is reduced at the size its parameters are
gathered: FSDP1 and FSDP2 per unit, DeepSpeed ZeRO-3 per parameter, or the whole model in one bucket) are
read as the reduce-scatters they stand for (:func:`stand_ins`, :func:`as_reduce_scatters`), and
:func:`zerocalc.validate.check` keeps that reading where a scheme sends it. Where none does, nor any the
calls as recorded, every all-reduce larger than a scalar on a group the rank all-gathers on is read so
(DeepSpeed ZeRO-3 reduces buckets of several parameters, gathered one by one: ``sized=False``). A
profiler trace of the same run names those calls ``c10d::_reduce_scatter_base_`` and reads as the dump
then does.

A DeepSpeed ZeRO-2 step (its gradient buckets all-reduced, then its parameters gathered on the same
group) may all-reduce buckets the size of its gathers too: its dump matches as recorded and opens with its
first micro-batch's reductions, and is read as recorded. FSDP's SHARD_GRAD_OP sends the same calls, but a
sharded forward gathers first: a dump that opens with a gather (:func:`opens_with_gathers`) is read with
the reduce-scatters, though its calls match as recorded.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from zerocalc.validate.classify import INTEGER_TYPES, NORM_MAX_SHARE, OBJECT_TYPES, SCALAR_MAX_ELEMENTS


def gloo_dump_files(meta: dict | None) -> set[str]:
    """The files of ``meta`` that are Flight Recorder dumps of a gloo process group."""
    return {f for f, v in (meta or {}).items() if isinstance(v, dict)
            and v.get("format") == "flight_recorder" and v.get("backend") == "gloo"}


def stand_ins(table: pd.DataFrame, meta: dict | None, sized: bool = True) -> np.ndarray:
    """The rows of ``table`` that may be reduce-scatters recorded as all-reduces: in a gloo dump, an
    all-reduce larger than a scalar on a group the same rank all-gathers on, a whole the group's size
    divides, and (``sized``) of as many elements as one of those all-gathers returns, else more than
    :data:`~.classify.NORM_MAX_SHARE` of the largest all-reduce of the rank there (an evaluation's losses,
    a vector of norms, are no gradient bucket)."""
    files = gloo_dump_files(meta)
    if not files or not len(table):
        return np.zeros(len(table), dtype=bool)
    op = table["op"].astype(str).to_numpy()
    in_dump = table["file"].astype(str).isin(files).to_numpy()
    size = table["in_nelems"].to_numpy(dtype=np.float64, na_value=np.nan)
    out = table["out_nelems"].to_numpy(dtype=np.float64, na_value=np.nan)
    gs = table["group_size"].to_numpy(dtype=np.float64, na_value=np.nan)
    key = pd.Series(list(zip(table["file"].astype(str), table["rank"].astype(str), _members(table, in_dump),
                             strict=True)), dtype=object)
    ag = in_dump & (op == "all_gather")
    gathered = set(zip(key[ag], out[ag], strict=True)) if sized else set(key[ag])
    ar = np.flatnonzero(in_dump & (op == "all_reduce") & (size > SCALAR_MAX_ELEMENTS) & (size == out)
                        & (gs > 1))
    largest = pd.Series(size[ar]).groupby(key[ar].to_numpy()).max().to_dict() if len(ar) else {}
    mask = np.zeros(len(table), dtype=bool)
    mask[[i for i in ar.tolist() if ((key[i], size[i]) if sized else key[i]) in gathered
          and size[i] % gs[i] == 0 and (sized or size[i] > largest[key[i]] * NORM_MAX_SHARE)]] = True
    return mask


def _members(table: pd.DataFrame, in_dump: np.ndarray) -> list[str]:
    """Each row's group by its ranks where the table says them (``group_ranks``; the default group, which a
    gloo dump lists without ranks, all the ranks whose dumps are read, where its size is theirs), else by
    its name: two groups of the same ranks are one for the reduction a gather stands beside, as DeepSpeed
    before 0.19.3 gathers ZeRO-3's parameters on the default group and reduces on a data-parallel group of
    every rank."""
    out = ("group " + table["group"].astype(str)).to_numpy(dtype=object)
    ranks = sorted({int(r) for r in table["rank"][in_dump]})
    if "group_desc" in table:
        size = table["group_size"].to_numpy(dtype=np.float64, na_value=np.nan)
        out[(table["group_desc"].astype(str).to_numpy() == "default_pg") & (size == len(ranks))] = ",".join(
            map(str, ranks))
    if "group_ranks" in table:
        given = table["group_ranks"].to_numpy(dtype=object)
        listed = np.array([isinstance(g, str) and g != "" for g in given], dtype=bool)
        out[listed] = given[listed]
    return out.tolist()


def opens_with_gathers(table: pd.DataFrame, meta: dict | None) -> bool:
    """Whether every gloo dump of ``table`` holds its rank's first call (record 0: the ring buffer has not
    wrapped) and its first gather or reduction of floating-point data (not a scalar, not pickled bytes nor
    token ids) on a group it reduces gradients on is an all-gather: a sharded forward gathers each unit
    before its gradient is reduced (FSDP1, FSDP2, HSDP, DeepSpeed ZeRO-3), where DeepSpeed ZeRO-1 and -2 and
    DDP reduce a step's gradients before they first gather. Gathers on other groups (sequence parallelism's
    token ids and activations, a tensor-parallel group's) say nothing of the data-parallel one."""
    files = gloo_dump_files(meta)
    if not files or "record" not in table or not len(table):
        return False
    file = table["file"].astype(str).to_numpy()
    op = table["op"].astype(str).to_numpy()
    size = table["in_nelems"].to_numpy(dtype=np.float64, na_value=np.nan)
    record = table["record"].to_numpy(dtype=np.float64, na_value=np.nan)
    dtype = table["dtype"].astype(str).to_numpy()
    group = table["group"].astype(str).to_numpy()
    data = np.isin(op, ["all_gather", "all_reduce", "reduce_scatter"]) & (size > SCALAR_MAX_ELEMENTS) \
        & ~np.isin(dtype, OBJECT_TYPES + INTEGER_TYPES)
    reduces = data & (op != "all_gather")
    for f in files:
        mine = np.flatnonzero(file == f)
        if not len(mine) or np.nanmin(record[mine], initial=np.inf) != 0:
            return False
        first = mine[np.argsort(record[mine], kind="stable")]
        first = first[data[first] & np.isin(group[first], group[mine[reduces[mine]]])]
        if not len(first) or op[first[0]] != "all_gather":
            return False
    return True


def opens_with_gathers_sentence(as_recorded: tuple[str, ...]) -> str:
    """The note on a dump read with its all-reduces as reduce-scatters though, as recorded, its calls match
    ``as_recorded``, because it opens with gathers (:func:`opens_with_gathers`)."""
    return (f"read as recorded, the calls match {', '.join(as_recorded)}, but every rank's dump opens with "
            "an all-gather, before any reduction: a sharded forward gathering its parameters (FSDP, ZeRO-3), "
            "where DeepSpeed ZeRO-1 and -2 reduce a step's gradients before they first gather; the "
            "all-reduces are read as the reduce-scatters they stand for")


def as_reduce_scatters(table: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """A copy of ``table`` with the rows of ``mask`` as the reduce-scatters they stand for: the whole in,
    the rank's part (the whole over the group's size) out."""
    t = table.copy()
    if isinstance(t["op"].dtype, pd.CategoricalDtype) and "reduce_scatter" not in t["op"].cat.categories:
        t["op"] = t["op"].cat.add_categories(["reduce_scatter"])
    pos = np.flatnonzero(mask)  # by position: a table's index need not be unique
    whole = t["in_nelems"].iloc[pos].to_numpy(dtype=np.int64)
    t.iloc[pos, t.columns.get_loc("op")] = "reduce_scatter"
    t.iloc[pos, t.columns.get_loc("out_nelems")] = whole // t["group_size"].iloc[pos].to_numpy(dtype=np.int64)
    return t


def read_sentence(calls: int, sizes: list[int], sized: bool = True) -> str:
    """The note on a dump read with ``calls`` all-reduces (of ``sizes`` elements) as reduce-scatters,
    ``sized`` as :func:`stand_ins` took them."""
    shown = ", ".join(f"{s:,}" for s in sorted(set(sizes))[:3]) + (" …" if len(set(sizes)) > 3 else "")
    which = ("of the whole an all-gather returns on their group" if sized else
             "on groups their rank all-gathers on, whatever their size (buckets of several parameters, "
             "gathered one by one)")
    return ("over gloo a reduce-scatter runs, and a Flight Recorder dump records it, as an all-reduce of its "
            f"whole input (ProcessGroupGloo): the {calls:,} all-reduces {which} ({shown} elements) are read "
            "as the reduce-scatters they stand for, each rank sending (g−1)/g of the whole on its group of g "
            "as over NCCL; a profiler trace of the run names them (c10d::_reduce_scatter_base_)")
