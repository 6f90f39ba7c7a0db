"""The group of each call of a Kineto trace that records none: from its element counts (an
all-gather or reduce-scatter), from the calls its gloo worker runs, or from the rank's process
groups in ``distributedInfo.pg_config``."""

from __future__ import annotations

from zerocalc.traces.kineto_events import _int


def _process_groups(info: dict) -> list[tuple[str, int, tuple[int, ...]]]:
    """The process groups of ``distributedInfo.pg_config`` (the groups this rank is a member of):
    (description or name, size, ranks), those that state a size."""
    out = []
    pg_config = info.get("pg_config")
    for pg in pg_config if isinstance(pg_config, list) else []:  # not a list: no groups, as a bad entry
        if not isinstance(pg, dict):
            continue
        size = _int(pg.get("pg_size"))
        ranks = pg.get("ranks")
        ranks = tuple(r for r in ranks if isinstance(r, int)) if isinstance(ranks, list) else ()
        if size is None and ranks:
            size = len(ranks)
        if size is None:
            continue
        desc, name = pg.get("pg_desc"), pg.get("pg_name")
        label = desc if isinstance(desc, str) and desc not in ("", "undefined") else f"pg {name}"
        out.append((label, size, ranks))
    return out


def _group_from_shapes(row: dict) -> bool:
    """Group size of an all-gather (output ÷ input) or reduce-scatter (input ÷ output) from its
    element counts (§5: ``_allgather_base`` out = shard × p, ``_reduce_scatter_base`` in = shard × p)."""
    i, o = row["in_nelems"], row["out_nelems"]
    big, small = (o, i) if row["op"] == "all_gather" else (i, o) if row["op"] == "reduce_scatter" else (0, 0)
    if not big or not small or big % small:
        return False
    row["group_size"] = big // small
    return True


def _fill_groups(rows: list[dict], pgs: list[tuple[str, int, tuple[int, ...]]], world: int | None) -> None:
    """Group size and group of the calls that record none, from what the trace does say.

    In order: a gloo worker thread serves one process group (ProcessGroupGloo keeps a pool of worker
    threads per group), so calls run by the worker of a call whose group size is known share it
    (``group_from`` "worker"); else the rank's process groups in ``distributedInfo.pg_config``: one
    group only (the world) gives its size, and groups besides ``default_pg`` all of one size give that
    size (a sub-group job: DDP over a data-parallel group, HSDP's shard and replicate groups):
    ``group_from`` "pg_config". A call whose size matches exactly one of the rank's groups is named
    after it (``group``). Nothing is taken from ``world_size`` when the call says otherwise.
    """
    by_worker: dict[str, set[int]] = {}
    for r in rows:
        if r.get("worker") is not None and r["group_size"] is not None:
            by_worker.setdefault(r["worker"], set()).add(r["group_size"])
    others = {p for g, p, _ in pgs if g != "default_pg" and p != world}
    only = {p for _, p, _ in pgs}
    guess = None
    if len(only) == 1:
        guess = next(iter(only))
    elif len(others) == 1 and all(p == world or g == "default_pg" or p in others for g, p, _ in pgs):
        guess = next(iter(others))
    for r in rows:
        if r["group_size"] is None and r["op"] not in ("send", "recv"):
            known = by_worker.get(r.get("worker"), set())
            if len(known) == 1:
                r["group_size"], r["group_from"] = next(iter(known)), "worker"
            elif guess is not None:
                r["group_size"], r["group_from"] = guess, "pg_config"
        if r["op"] == "all_gather" and r["out_nelems"] is None and r["in_nelems"] is not None \
                and r["group_size"] is not None:
            r["out_nelems"] = r["in_nelems"] * r["group_size"]
        if r["group"] is None and r["group_size"] is not None:
            named = [g for g, p, _ in pgs if p == r["group_size"]]
            if len(named) == 1:
                r["group"] = named[0]
