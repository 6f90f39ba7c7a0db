"""RCCL's all-to-all (zerocalc.nccl.rccl_p2p): grouped sends, timed as their data moves.

Expected values: RCCL's own figures, read by hand from ROCm/rccl ``src/graph/tuning.cc`` (``baseLat`` 12 µs
for LL and 17 µs for Simple; ``hwLat`` Ring xGMI hops 0.8 µs LL / 2.1 µs Simple in models 5 and 6, and
2.20.5's model 5 network Ring/Simple hop 19.8 µs where later models carry 320), ``src/graph/topo.h`` (48 GB/s
an xGMI link), ``src/collectives.cc`` (``ncclAllToAll_impl``: MSCCL, pivot, else one send and one receive per
rank) and ``tools/msccl-algorithms/alltoall-8n-7mb-43mb.xml`` (``maxBytes`` 45088768); the NICs from the
preset (8 × 400 Gb/s a node, ``amd-mi355x``); rows and times counted from the bundled sweeps
(tests/data/traces/README.md names their sources).
"""

import pytest
from sweep_files import check_json, file_rows, median_size_ratio

from zerocalc.nccl.rccl import V2_21, V2_26, rccl_tune
from zerocalc.nccl.rccl_p2p import MSCCL_ALL_TO_ALL_MAX_BYTES, all_to_all_us, msccl_all_to_all
from zerocalc.nccl.release import Protocol
from zerocalc.topology import PRESETS

A2A_2N = "alltoall_perf-16xMI355X-2nodes-ainic-rccl2.27.7.txt"


def test_all_to_all_on_two_nodes_by_hand():
    t = rccl_tune(PRESETS["amd-mi355x"], 16, V2_26)
    n = 1 << 30
    per_peer = n / 16
    # 8 peers on the other node over the rank's 400 Gb/s (50 GB/s), 7 on its node over 7 × 48 GB/s
    nic_us = 8 * per_peer / (1000 * 50.0)
    links_us = 7 * per_peer / (1000 * 7 * 48.0)
    us, proto, bound = all_to_all_us(t, n)
    assert proto == Protocol.SIMPLE and bound
    assert us == pytest.approx(17 + 19.8 + max(nic_us, links_us))
    # a small call: one Ring/Simple step, base 17 µs and the network hop (2.20.5's 19.8, not model 6's 320)
    assert all_to_all_us(t, 256)[0] == pytest.approx(17 + 19.8 + 8 * 16 / (1000 * 50.0))


def test_all_to_all_on_one_node_by_hand():
    t = rccl_tune(PRESETS["amd-mi300x"], 8, V2_21)
    # 128 B to each peer: LL (at most 16 KiB), base 12 µs + one 0.8 µs xGMI hop, LL's half of each link
    us, proto, bound = all_to_all_us(t, 1024)
    assert proto == Protocol.LL and not bound
    assert us == pytest.approx(12 + 0.8 + 7 * 128 / (1000 * 336 * 0.5))
    us, proto, _ = all_to_all_us(t, 1 << 30)
    assert proto == Protocol.SIMPLE and us == pytest.approx(17 + 2.1 + 7 * (1 << 27) / (1000 * 336))
    # MSCCL's one-node programs cover out-of-place calls up to 45088768 B, on 8 gfx942 / gfx950 GPUs only
    assert msccl_all_to_all(t, MSCCL_ALL_TO_ALL_MAX_BYTES, False)
    assert not msccl_all_to_all(t, MSCCL_ALL_TO_ALL_MAX_BYTES + 1, False)
    assert not msccl_all_to_all(t, 1024, True)
    assert not msccl_all_to_all(rccl_tune(PRESETS["amd-mi355x"], 16, V2_26), 1024, False)


def _nonzero_rows(name):
    """The file's rows of a size above 0 (rccl-tests prints 0 B rows for sizes under 16 ranks × 4 bytes)."""
    return [r for r in file_rows(name) if r[0] > 0]


def test_two_node_all_to_all_within_both_bands():
    s = check_json(A2A_2N, "--topology", "amd-mi355x", counted=_nonzero_rows)
    rows = sorted(s["rows"], key=lambda r: r["bytes"])
    assert len(rows) == len(_nonzero_rows(A2A_2N)) == 27 and s["group_size"] == 16
    assert all(r["algorithm"] == "P2P" for r in rows)
    assert all(0.5 <= r["ratio"] <= 2 for r in rows), [(r["bytes"], round(r["ratio"], 2)) for r in rows]
    assert 0.8 <= median_size_ratio(s) <= 1.25
    # the largest sizes on the NICs: 8/16 of each rank's buffer over its 50 GB/s, within 0.9-1.1x
    big = [r for r in rows if r["bytes"] >= 1 << 30]
    assert big and all(0.9 <= r["ratio"] <= 1.1 for r in big)
    assert any("bound by the nodes' NICs" in n for n in s["notes"])
