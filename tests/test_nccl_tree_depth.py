"""Tree and NVLS Tree across a number of nodes that is not a power of two: the trees NCCL builds
(``ncclGetBtree`` / ``ncclGetDtree``, ``src/graph/trees.cc``) are ``ceil(log2 nNodes)`` levels deep, where
``ncclTopoTuneModel`` counts ``log2i(nNodes)`` network hops each way; the call runs with the deeper tree."""

import pytest

from zerocalc.nccl.model import nvls_tree_run_correction, tune
from zerocalc.nccl.tables import Algorithm as A
from zerocalc.nccl.tables import Collective as C
from zerocalc.nccl.tables import Protocol as P
from zerocalc.nccl.tables import release_for
from zerocalc.topology import PRESETS


def _btree_parent(nranks: int, rank: int) -> int:
    """ncclGetBtree's parent of ``rank`` (v2.29.2 src/graph/trees.cc, transcribed by hand)."""
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1
    up = (rank ^ bit) | (bit << 1)
    return rank ^ bit if up >= nranks else up


def _depth(nranks: int, rank: int) -> int:
    d = 0
    while rank != 0:
        rank, d = _btree_parent(nranks, rank), d + 1
    return d


@pytest.mark.parametrize("n", range(2, 21))
def test_ncclGetBtree_is_ceil_log2_deep(n):
    # trees.cc's picture for 14 ranks: 0 - 8 - 12 - 13, and 0 - 8 - 4 - 2 - 1: four levels (log2i(14) = 3)
    assert max(_depth(n, r) for r in range(n)) == (n - 1).bit_length()


def test_ten_nodes_run_one_level_deeper_than_nccl_counts():
    # 10 nodes of 8 H100 (dgx-h100), NCCL 2.29.2 tables. NVLS Tree: NVLink hop 25 µs, network hop 20.9 µs:
    # NCCL's 25 + 2 × 3 × 20.9 = 150.4 µs, run with 4 levels: 25 + 2 × 4 × 20.9 = 192.2 µs.
    # Tree/LL: 6.8 + 2 × (7 × 0.6 + 3 × 5.0) = 45.2 µs, run: + 2 × 5.0 = 55.2 µs.
    t = tune(PRESETS["dgx-h100"], 80, release_for("2.29.2")[0])
    n = 1 << 20
    e = t.entries[(C.ALL_REDUCE, A.TREE, P.LL)]
    assert e.latency_us == pytest.approx(45.2)
    assert t.run_time_s(C.ALL_REDUCE, A.TREE, P.LL, n) - t.time_s(C.ALL_REDUCE, A.TREE, P.LL, n) == \
        pytest.approx(10.0e-6)
    e = t.entries[(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)]
    assert e.latency_us == pytest.approx(150.4)
    # Hopper: no treeCorrectionFactor; the pipeline's fill instead (zerocalc.nccl.nvls_pipeline): 1 MiB is a
    # quarter of a loop (16 channels x 8 heads x 32 KiB = 4 MiB), so the call once more, plus 1/16 of it for
    # each of the 2 x 4 - 2 hops between the first up and the last down: 1.375 x 1 MiB at the bandwidth
    assert nvls_tree_run_correction(t, C.ALL_REDUCE, A.NVLS_TREE, n) == 1.0
    assert t.run_time_s(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE, n) == pytest.approx(
        (192.2 + n / (1000 * e.bandwidth_GBps) + 1.375 * n / (1000 * e.bandwidth_GBps)) / 1e6)
    # NCCL still chooses with its own figures
    assert t.choose(C.ALL_REDUCE, 32 << 20)[:2] == (A.NVLS_TREE, P.SIMPLE)


@pytest.mark.parametrize("ranks", [16, 32, 64])
def test_powers_of_two_keep_nccls_latency(ranks):
    t = tune(PRESETS["dgx-h100"], ranks, release_for("2.29.2")[0])
    for p in (P.LL, P.SIMPLE):  # LL128 adds the chunk its network hops hold (test_nccl_tree_pipeline.py)
        assert t.run_time_s(C.ALL_REDUCE, A.TREE, p, 1 << 16) == pytest.approx(
            t.time_s(C.ALL_REDUCE, A.TREE, p, 1 << 16))
