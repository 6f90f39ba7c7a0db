"""The group of each call of a Kineto trace: its size where the call records none (from its element
counts, an all-gather or reduce-scatter; from the calls its gloo worker runs; from the rank's process
groups in ``distributedInfo.pg_config``), which of two groups of one size it ran on (from the order of
its gloo worker thread), and its members' global ranks (``group_ranks``), which place the group on the
cluster's nodes (:mod:`zerocalc.validate.nccl_timing`)."""

from __future__ import annotations

import functools

from zerocalc.traces.kineto_events import _int
from zerocalc.traces.schema import SCALAR_MAX_ELEMENTS

#: PyTorch writes a list argument of more than this many entries as its first ``_TRUNCATED - 1``, ``...``
#: and its last (``format_list``, ``torch/csrc/profiler/util.cpp``, ``kTruncateLength``).
_TRUNCATED = 30
#: The most ranks a group's member list is spelt out for (a bigger one, a malformed size, is left unknown).
MAX_LISTED_RANKS = 1 << 20


def _process_groups(info: dict) -> list[tuple[str, int, tuple[int, ...], str | None]]:
    """The process groups of ``distributedInfo.pg_config`` (the groups this rank is a member of):
    (description or name, size, ranks, ``pg_name``), those that state a size."""
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
        out.append((label, size, ranks, None if name is None else str(name)))
    return out


def ranks_recorded(rargs: dict, size: int | None) -> str | None:
    """The global ranks of a call's group as ``record_param_comms`` states them, as text (``"0,8"``);
    ``None`` where it does not, or states them at odds with the group's ``size``.

    ``Process Group Ranks`` (``"[0, 8]"``; past 30 ranks PyTorch writes the first 29, ``...`` and the
    last: read back where the 29 step evenly to the last at the group's size), else ``Global rank start``
    and ``Global rank stride`` (written where the group's ranks step evenly, ``ProcessGroupNCCL``) with the
    group's size. An empty list (the default group of some releases) states nothing."""
    stated = rargs.get("Process Group Ranks")
    start, stride = rargs.get("Global rank start"), rargs.get("Global rank stride")
    if isinstance(stated, list):
        return _ranks_text(stated, size, start, stride)
    try:
        return _ranks_cached(stated, size, start, stride)
    except TypeError:  # an argument that is not hashable (an object): not one PyTorch writes
        return None


def _ranks_text(stated, size: int | None, start, stride) -> str | None:
    """:func:`ranks_recorded` of these arguments."""
    if size is not None and not 0 < size <= MAX_LISTED_RANKS:
        return None
    ranks = _ranks_list(stated, size)
    if not ranks and size:
        start, stride = _int(start), _int(stride)
        if start is not None and start >= 0 and stride is not None and stride > 0:
            ranks = [start + i * stride for i in range(size)]
    if not ranks or (size is not None and len(ranks) != size) or len(set(ranks)) != len(ranks) \
            or min(ranks) < 0:
        return None
    return ",".join(map(str, ranks))


#: :func:`_ranks_text` once per distinct group (a trace repeats a few groups over all its calls)
_ranks_cached = functools.lru_cache(maxsize=1024)(_ranks_text)


def _ranks_list(value, size: int | None) -> list[int] | None:
    """``Process Group Ranks`` as a list of ints (a JSON list, or its text ``"[0, 8]"``, truncated
    or not: :func:`ranks_recorded`); ``None`` where it is not one."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.strip().removeprefix("[").removesuffix("]").split(",")]
        value = [] if parts == [""] else parts
    if not isinstance(value, list):
        return None
    if "..." in value:
        cut = value.index("...")
        head, tail = [_int(v) for v in value[:cut]], [_int(v) for v in value[cut + 1:]]
        if len(head) != _TRUNCATED - 1 or len(tail) != 1 or None in head or tail[0] is None or not size:
            return None
        step = head[1] - head[0]
        whole = [head[0] + i * step for i in range(size)]
        return whole if step > 0 and whole[:len(head)] == head and whole[-1] == tail[0] else None
    ranks = [_int(v) for v in value]
    return None if None in ranks else ranks


def _group_from_shapes(row: dict) -> bool:
    """Group size of an all-gather (output ÷ input) or reduce-scatter (input ÷ output) from its
    element counts (§5: ``_allgather_base`` out = shard × p, ``_reduce_scatter_base`` in = shard × p)."""
    i, o = row["in_nelems"], row["out_nelems"]
    big, small = (o, i) if row["op"] == "all_gather" else (i, o) if row["op"] == "reduce_scatter" else (0, 0)
    if not big or not small or big % small:
        return False
    row["group_size"] = big // small
    return True


def _sub_group(label: str, size: int, world: int | None) -> bool:
    """Whether a rank's process group (``pg_config``'s ``label`` and ``size``) is a sub-group: not the default
    group, and of neither the world's size nor one rank (a mesh dimension of 1: no call that moves data runs
    on it)."""
    return label != "default_pg" and size not in (world, 1)


def _fill_groups(rows: list[dict], pgs: list[tuple[str, int, tuple[int, ...], str | None]],
                 world: int | None) -> None:
    """Group size and group of the calls that record none, from what the trace does say.

    In order: a gloo worker thread serves one process group (ProcessGroupGloo keeps a pool of worker
    threads per group), so calls run by the worker of a call whose group size is known share it
    (``group_from`` "worker"), and so do those of a worker that runs the same calls as the workers of one
    known size (:func:`_sizes_from_sibling_workers`); else the rank's process groups in
    ``distributedInfo.pg_config``: one group only (the world) gives its size, and groups besides
    ``default_pg`` all of one size give that size (a sub-group job: DDP over a data-parallel group, HSDP's
    shard and replicate groups), groups of one rank aside (a mesh dimension of size 1: no call that moves
    data runs on it): ``group_from`` "pg_config" (so also the world's where every other group is of one
    rank: HSDP's shard dimension of 1). A call whose size matches exactly one of the rank's groups is named
    after it (``group``). Nothing is taken from ``world_size`` when the call says otherwise.

    A call whose group's ranks the call does not state (``group_ranks``) takes those of the rank's process
    group it names (``pg_name``), else of the one group of its size, where ``pg_config`` lists them; a group
    of ``world_size`` ranks is the world's.
    """
    by_worker: dict[str, set[int]] = {}
    for r in rows:
        if r.get("worker") is not None and r["group_size"] is not None:
            by_worker.setdefault(r["worker"], set()).add(r["group_size"])
    _sizes_from_sibling_workers(rows, by_worker)
    others = {p for g, p, _, _ in pgs if _sub_group(g, p, world)}
    only = {p for _, p, _, _ in pgs}
    guess = None
    ranks_of: dict[tuple, str | None] = {}  # (group, size) → its ranks (_pg_ranks), once per group
    if len(only) == 1:
        guess = next(iter(only))
    elif world is not None and only == {world, 1}:  # the world and groups of one rank (a mesh dimension of 1)
        guess = world
    elif len(others) == 1 and all(p == world or g == "default_pg" or p in others for g, p, _, _ in pgs):
        guess = next(iter(others))
    # sub-groups of several sizes, every size but one that of a worker's known calls (HSDP's shard group of
    # 4 beside its replicate group of 2: the shard group's threads gather, the others all-reduce): a
    # worker of unknown size runs the calls of the one sub-group left, as the one-size guess above reads
    # a sub-group job (:func:`_worker_groups` then moves a world's thread, a loss's, to the world by the
    # threads' order)
    claimed = {next(iter(k)) for k in by_worker.values() if len(k) == 1}
    left = others - claimed
    worker_guess = next(iter(left)) if guess is None and len(others) > 1 and len(left) == 1 else None
    for r in rows:
        if r["group_size"] is None and r["op"] not in ("send", "recv"):
            known = by_worker.get(r.get("worker"), set())
            if len(known) == 1:
                r["group_size"], r["group_from"] = next(iter(known)), "worker"
            elif guess is not None:
                r["group_size"], r["group_from"] = guess, "pg_config"
            elif worker_guess is not None and r.get("worker") is not None:
                r["group_size"], r["group_from"] = worker_guess, "pg_config"
        if r["op"] == "all_gather" and r["out_nelems"] is None and r["in_nelems"] is not None \
                and r["group_size"] is not None:
            r["out_nelems"] = r["in_nelems"] * r["group_size"]
        if r["group"] is None and r["group_size"] is not None:
            named = [g for g, p, _, _ in pgs if p == r["group_size"]]
            if len(named) == 1:
                r["group"] = named[0]
        if r.get("group_ranks") is None and r["group_size"] is not None and r["op"] not in ("send", "recv"):
            key = (r["group"], r["group_size"])
            if key not in ranks_of:
                ranks_of[key] = _pg_ranks(r, pgs, world)
            r["group_ranks"] = ranks_of[key]


def _sizes_from_sibling_workers(rows: list[dict], by_worker: dict[str, set[int]]) -> None:
    """The group size of a worker thread no call of which states one, from the other thread of its pool:
    a group's threads take its calls in turn, so one that runs no sized call (the gather of DeepSpeed's
    data-parallel group ran on the other) runs the same calls, op and elements, as its sibling. Where its
    calls above a scalar are calls of workers of one known size alone, that size is its (``by_worker``
    grows by it); a scalar runs on every group."""
    calls: dict[str, set[tuple]] = {}
    for r in rows:
        if r.get("worker") is not None and (r["in_nelems"] or 0) > SCALAR_MAX_ELEMENTS:
            calls.setdefault(r["worker"], set()).add((r["op"], r["in_nelems"]))
    sized: dict[tuple, set[int]] = {}
    for w, sizes in by_worker.items():
        for call in calls.get(w, ()):
            sized.setdefault(call, set()).update(sizes)
    for w, own in calls.items():
        if w in by_worker:
            continue
        implied = [sized.get(call) for call in own]
        if implied and all(implied):
            sizes = set().union(*implied)
            if len(sizes) == 1:
                by_worker[w] = sizes


#: Worker threads a gloo process group starts: ``options->threads = options->devices.size() * 2``, one
#: device unless ``GLOO_SOCKET_IFNAME`` names several (PyTorch ``torch/csrc/distributed/c10d/init.cpp``);
#: ``ProcessGroupGloo``'s constructor starts them one after the other (``ProcessGroupGloo.cpp``).
THREADS_PER_GROUP = 2


def _worker_groups(rows: list[dict], pgs: list[tuple[str, int, tuple[int, ...], str | None]],
                   tids: dict[str, int]) -> None:
    """Name the group of the calls a gloo worker thread runs where the rank has two process groups of one
    size (tensor parallelism 2 beside data parallelism 2), which the calls' sizes cannot tell apart, or
    where calls have no size (an all-reduce on a tensor-parallel group of 2 beside data parallelism 4), or
    only the size :func:`_fill_groups` guessed (the one group besides the world's, which post-local SGD's
    parameter averaging on the world's threads is not on).

    Over gloo no call names its group, but each group runs its calls on worker threads of its own
    (:data:`THREADS_PER_GROUP`), started when the group is made. Groups are made in the order of their
    ``pg_name`` (a counter), so the workers' thread ids, in that order too, fall to the rank's groups in
    ``pg_config`` in order, at most :data:`THREADS_PER_GROUP` to a group, each to a group of the size of
    its calls. A worker whose group every such assignment agrees on names its calls' group (``group``,
    ``group_ranks``); the others are left as they were, as is every call where no assignment fits.
    ``tids``: each worker's thread id."""
    sizes = [p for _, p, _, _ in pgs]
    unsized = any((r["group_size"] is None or r.get("group_from") == "pg_config") and r.get("worker") in tids
                  for r in rows)
    if (len(set(sizes)) == len(sizes) and not unsized) or any(name is None or not name.isdigit()
                                                               for *_, name in pgs):
        return
    order = sorted(pgs, key=lambda pg: int(pg[3]))
    seen: dict[str, set[int]] = {}
    known: dict[str, set[int]] = {}  # the sizes the calls state or their worker's other calls gave
    guessed: dict[str, int] = {}  # the elements of the worker's calls whose size pg_config guessed
    for r in rows:
        w = r.get("worker")
        if w is None or w not in tids:
            continue
        fits = seen.setdefault(w, set())
        stated = known.setdefault(w, set())
        # a size pg_config guessed binds the worker only for a call above a scalar (a loss or a metric,
        # often on the default group, takes the guess too)
        if r["group_size"] is not None and (r.get("group_from") != "pg_config"
                                            or (r["in_nelems"] or 0) > SCALAR_MAX_ELEMENTS):
            fits.add(r["group_size"])
            if r.get("group_from") == "pg_config":
                guessed[w] = guessed.get(w, 0) + r["in_nelems"]
        if r["group_size"] is not None and r.get("group_from") != "pg_config":
            stated.add(r["group_size"])
    if not seen or any(len(f) > 1 for f in known.values()):
        return
    workers = sorted(seen, key=tids.__getitem__)
    # the stated sizes bind; the guessed ones are kept for as many elements as any placement lets keep
    # (a guess may take a group of another size: the data-parallel all-reduces of a thread that ran no
    # gather, beside expert-data-parallel groups of the size pg_config guessed)
    allowed = [[j for j, pg in enumerate(order) if not known[w] or pg[1] in known[w]] for w in workers]
    preferred = [({j for j in ok if order[j][1] in seen[w]}, guessed.get(w, 1))
                 for w, ok in zip(workers, allowed, strict=True)]
    places = {workers[i]: j for i, j in _monotone_places(allowed, preferred).items()}
    if not places and order and not any(known[w] or seen[w] for w in workers):
        # no call of any worker states a size, and the order leaves each in doubt between the world and a
        # sub-group: a sub-group job (as :func:`_fill_groups` reads one of one size) runs its calls on its
        # sub-groups, so the workers take them in order where that placement is the only one (tensor
        # parallelism 2 beside data parallelism 4 by hand: the first threads the tensor-parallel group's,
        # the next the data-parallel group's)
        world = max(pg[1] for pg in order)
        sub = [[j for j in ok if _sub_group(order[j][0], order[j][1], world)] for ok in allowed]
        if all(sub):
            places = {workers[i]: j for i, j in _monotone_places(sub).items()}
    for r in rows:
        j = places.get(r.get("worker"))
        if j is None or (r["group"] is not None and r.get("group_from") != "pg_config"):
            continue
        label, size, ranks, _ = order[j]
        if r["group_size"] is None or (r.get("group_from") == "pg_config" and r["group_size"] != size):
            r["group_size"], r["group_from"] = size, "worker"  # none, or a guess the thread's group corrects
        if r["group_size"] == size:
            r["group"] = label
            if len(ranks) == size:
                r["group_ranks"] = ",".join(map(str, ranks))


def _monotone_places(allowed: list[list[int]],
                     preferred: list[tuple[set[int], int]] | None = None) -> dict[int, int]:
    """For items in order, each to one of its ``allowed`` groups (numbered in order), the groups never
    going back and each taking at most :data:`THREADS_PER_GROUP` items: the items whose group every such
    assignment agrees on, as {item: group}; {} where none exists. With ``preferred`` (each item's groups
    it would rather take, and its weight), only the assignments of the most weight placed so count."""
    if not allowed:
        return {}
    pref = preferred if preferred is not None else [(set(), 0)] * len(allowed)
    # best[i]: each reachable state after item i, (group, items in it so far), with the most weight
    # placed in a preferred group that a path to it has for items 0 … i
    best: list[dict[tuple[int, int], int]] = []
    for i, ok in enumerate(allowed):
        here: dict[tuple[int, int], int] = {}
        if i == 0:
            steps = [((j, 1), 0) for j in ok]
        else:
            steps = [((j, c + 1), v) for (j, c), v in best[-1].items() if c < THREADS_PER_GROUP and j in ok]
            steps += [((k, 1), v) for (j, _), v in best[-1].items() for k in ok if k > j]
        for state, v in steps:
            v += pref[i][1] if state[0] in pref[i][0] else 0
            if v > here.get(state, -1):
                here[state] = v
        best.append(here)
    if not best[-1]:
        return {}
    top = max(best[-1].values())
    good = {s for s, v in best[-1].items() if v == top}  # states on a path of the most preferred
    places: dict[int, int] = {}
    for i in range(len(allowed) - 1, -1, -1):
        groups = {j for j, _ in good}
        if len(groups) == 1:
            places[i] = next(iter(groups))
        if i:
            good = {(j, c) for (j, c), v in best[i - 1].items()
                    if any(((k == j and c2 == c + 1) or (k > j and c2 == 1))
                           and v + (pref[i][1] if k in pref[i][0] else 0) == best[i][(k, c2)]
                           for k, c2 in good)}
    return places


def _pg_ranks(row: dict, pgs: list[tuple[str, int, tuple[int, ...], str | None]],
              world: int | None) -> str | None:
    """The ranks ``pg_config`` lists for the group of ``row`` (:func:`_fill_groups`), as text; a group of
    the world's size is the world, ranks 0 to world - 1."""
    size = row["group_size"]
    if not 0 < size <= MAX_LISTED_RANKS:
        return None
    if size == world:
        return ",".join(map(str, range(size)))
    mine = [r for _, p, r, name in pgs if name is not None and name == row["group"] and p == size]
    if not mine:
        mine = [r for _, p, r, _ in pgs if p == size]
        mine = mine if len({tuple(r) for r in mine}) == 1 else []
    ranks = mine[0] if mine else ()
    return ",".join(map(str, ranks)) if len(ranks) == size and len(set(ranks)) == size else None
