"""The group of a gloo call from its worker thread (``kineto_groups._worker_groups``): a process group
starts two worker threads when it is made, groups are made in the order of their ``pg_name``, so the
workers' thread ids fall to the rank's groups in that order. Expected values by hand."""

from zerocalc.traces.kineto_groups import _fill_groups, _monotone_places, _worker_groups

WORLD = ("default_pg", 4, (0, 1, 2, 3), "0")
TP = ("pg 1", 2, (0, 1), "1")
DP = ("pg 3", 2, (0, 2), "3")


def _row(worker, op="all_reduce", n=1000, size=None, group_from=None):
    return {"op": op, "in_nelems": n, "out_nelems": n, "group_size": size, "group": None,
            "group_from": group_from, "worker": worker}


def test_places_every_item_where_one_order_fits():
    # four items into two groups of at most two, in order: the first two to 0, the last two to 1
    assert _monotone_places([[0, 1], [0, 1], [0, 1], [0, 1]]) == {0: 0, 1: 0, 2: 1, 3: 1}


def test_places_only_the_items_every_order_agrees_on():
    # three items in two groups: (0, 0, 1) or (0, 1, 1); the middle one could be either
    assert _monotone_places([[0, 1], [0, 1], [0, 1]]) == {0: 0, 2: 1}
    # one item, two groups: either
    assert _monotone_places([[0, 1]]) == {}


def test_places_nothing_where_no_order_fits():
    # five items, two groups of two
    assert _monotone_places([[0, 1]] * 5) == {}
    # the second item only in a group before the first's
    assert _monotone_places([[1], [0]]) == {}


def test_sizes_restrict_the_groups():
    # groups of sizes (4, 2, 2); items known to be on groups of 2: they cannot be the world's
    assert _monotone_places([[1, 2], [1, 2], [1, 2], [1, 2]]) == {0: 1, 1: 1, 2: 2, 3: 2}


def test_tensor_and_data_parallel_all_reduces_named_by_thread_order():
    # threads 11, 12 (made first: tp), 21, 22 (dp); every call a group of 2 by pg_config's guess
    rows = [_row(w, size=2, group_from="pg_config") for w in ("11", "21", "12", "22")]
    _worker_groups(rows, [WORLD, TP, DP], {"11": 11, "12": 12, "21": 21, "22": 22})
    assert [r["group"] for r in rows] == ["pg 1", "pg 3", "pg 1", "pg 3"]
    assert [r["group_ranks"] for r in rows] == ["0,1", "0,2", "0,1", "0,2"]


def test_a_missing_thread_leaves_its_neighbour_unnamed():
    # dp (pg_name 1, listed last: the name orders) made before tp (3); dp's threads 21, 22 known from
    # their reduce-scatters; one tp thread, 30, seen: 21 is dp's, 30 tp's, 22 either
    dp, tp = ("mesh_dp", 2, (0, 2), "1"), ("mesh_tp", 2, (0, 1), "3")
    rows = [_row("21", "reduce_scatter", size=2), _row("22", "reduce_scatter", size=2),
            _row("30", size=2, group_from="pg_config")]
    _worker_groups(rows, [WORLD, tp, dp], {"21": 21, "22": 22, "30": 30})
    assert [r["group"] for r in rows] == ["mesh_dp", None, "mesh_tp"]


def test_a_scalar_on_a_guessed_size_does_not_bind_its_thread():
    # thread 5 (the default group's) all-reduces a loss: its guessed size of 2 is not taken, so the world
    # fits it, and the four threads of the two groups of 2 are still placed
    rows = [_row("5", n=1, size=2, group_from="pg_config")]
    rows += [_row(w, size=2, group_from="pg_config") for w in ("11", "12", "21", "22")]
    _worker_groups(rows, [WORLD, TP, DP], {"5": 5, "11": 11, "12": 12, "21": 21, "22": 22})
    assert [r["group"] for r in rows] == ["default_pg", "pg 1", "pg 1", "pg 3", "pg 3"]
    assert rows[0]["group_size"] == 4 and rows[0]["group_ranks"] == "0,1,2,3"


def test_left_alone_where_a_thread_holds_two_sizes():
    rows = [_row("11", "all_gather", size=2), _row("11", "all_gather", size=4)]
    _worker_groups(rows, [WORLD, TP, DP], {"11": 11})
    assert [r["group"] for r in rows] == [None, None]


def test_a_guessed_size_is_the_threads_where_the_groups_differ_in_size():
    # one thread, a size pg_config guessed (the one group besides the world): nothing contradicts it
    rows = [_row("11", size=2, group_from="pg_config")]
    _worker_groups(rows, [WORLD, TP], {"11": 11})
    assert (rows[0]["group"], rows[0]["group_size"]) == ("pg 1", 2)
    # post-local SGD: the world's threads 11, 12 (made first) average the parameters, the subgroup's
    # threads 21, 22 all-reduce the gradients; pg_config guesses the subgroup's 2 for every call: the
    # threads' order puts the averaging on the world
    rows = [_row(w, size=2, group_from="pg_config") for w in ("21", "11", "22", "12")]
    _worker_groups(rows, [WORLD, TP], {"11": 11, "12": 12, "21": 21, "22": 22})
    assert [(r["group"], r["group_size"]) for r in rows] == [("pg 1", 2), ("default_pg", 4), ("pg 1", 2),
                                                             ("default_pg", 4)]
    assert rows[1]["group_ranks"] == "0,1,2,3" and rows[1]["group_from"] == "worker"


def test_a_call_without_a_size_takes_its_threads_group():
    # data parallelism 4 × tensor parallelism 2 in a world of 8: dp's threads 21, 22 run all-gathers of a
    # known group of 4; the tensor-parallel all-reduce on thread 31 has no size (pg_config's groups differ
    # in size, so it guesses none): the thread after dp's is tp's, a group of 2
    world8 = ("default_pg", 8, tuple(range(8)), "0")
    dp4, tp2 = ("mesh_dp", 4, (0, 2, 4, 6), "1"), ("mesh_tp", 2, (0, 1), "5")
    rows = [_row("21", "all_gather", size=4), _row("22", "all_gather", size=4), _row("31")]
    _worker_groups(rows, [world8, dp4, tp2], {"21": 21, "22": 22, "31": 31})
    assert [(r["group"], r["group_size"]) for r in rows] == [("mesh_dp", 4), ("mesh_dp", 4), ("mesh_tp", 2)]
    assert rows[2]["group_ranks"] == "0,1" and rows[2]["group_from"] == "worker"


#: DeepSpeed MoE's groups on rank 0 (expert parallelism 2 in a world of 4): the expert-data-parallel group
#: (made first), the expert-parallel one, and the data-parallel group of the world's size
EDP, EP, DP4 = ("pg 1", 2, (0, 2), "1"), ("pg 3", 2, (0, 1), "3"), ("pg 5", 4, (0, 1, 2, 3), "5")


def test_the_guess_kept_for_the_most_elements_places_a_thread_that_ran_no_gather():
    # threads 11, 12 the experts' (12 gathers on a group of 2), 21, 22 the all-to-alls', 31, 32 the dense
    # gradients' (32 gathers on 4); pg_config guesses 2 for every call that states no size. No order of the
    # threads keeps every guess: 31's all-reduces of 19,488 are on the group of 4. Keeping the guess of 11
    # (8 × 30,720 elements) rather than 31's (2 × 19,488) places 11 with 12 and 31 with 32, sized 4
    rows = [_row("11", n=30_720, size=2, group_from="pg_config") for _ in range(8)]
    rows += [_row("12", "all_gather", n=61_792, size=2, group_from="shapes")]
    rows += [_row(w, "all_to_all", n=6_144, size=2, group_from="pg_config") for w in ("21", "22")]
    rows += [_row("31", n=19_488, size=2, group_from="pg_config") for _ in range(2)]
    rows += [_row("32", "all_gather", n=11_016, size=4, group_from="shapes")]
    _worker_groups(rows, [WORLD, EDP, EP, DP4], {w: int(w) for w in ("11", "12", "21", "22", "31", "32")})
    assert [(r["worker"], r["group"], r["group_size"]) for r in rows[7:]] == [
        ("11", "pg 1", 2), ("12", "pg 1", 2), ("21", "pg 3", 2), ("22", "pg 3", 2), ("31", "pg 5", 4),
        ("31", "pg 5", 4), ("32", "pg 5", 4)]
    # with weights alike, 11 in the world's group and 31 in the data-parallel one keep as many guesses
    allowed = [[0, 1, 2, 3], [1, 2], [0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [0, 3]]
    alike = [({1, 2}, 1)] * 5 + [({0, 3}, 1)]
    assert _monotone_places(allowed, alike) == {1: 1, 3: 2, 5: 3}


def test_a_thread_that_runs_its_siblings_calls_takes_its_size():
    # the dense gradients' buckets run on both threads of the data-parallel group of 4 in turn; only 32
    # ran the gather that sizes it. 31 runs the same buckets, so it is on a group of 4, not the sub-groups'
    # size of 2 pg_config would guess (every group but the default one and the world-sized one is of 2)
    rows = [_row("32", "all_gather", n=11_016, size=4, group_from="shapes"), _row("32", n=960),
            _row("31", n=960), _row("31", n=18_528), _row("32", n=18_528), _row("11", n=30_720)]
    for r in rows:
        r["group_ranks"] = None
    _fill_groups(rows, [WORLD, EDP, EP, DP4], 4)
    assert [(r["worker"], r["group_size"], r["group_from"]) for r in rows[1:]] == [
        ("32", 4, "worker"), ("31", 4, "worker"), ("31", 4, "worker"), ("32", 4, "worker"),
        ("11", 2, "pg_config")]  # 11 runs calls no sized thread runs: the guess
