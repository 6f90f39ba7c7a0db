"""All-gather and reduce-scatter across nodes of 8 H100 with a NIC each: NCCL 2.29.2's choice by hand from
``src/graph/tuning.cc`` (v2.29.2), against the 10-node sweep of that release bundled with the tests."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.model import tune
from zerocalc.nccl.tables import Algorithm as A
from zerocalc.nccl.tables import Collective as C
from zerocalc.nccl.tables import Protocol as P
from zerocalc.nccl.tables import release_for
from zerocalc.topology import PRESETS
from zerocalc.topology.devices import nodes_of

LOG = Path(__file__).parent / "data" / "traces" / "nccl-tests" / "five-tests-80xH100-10nodes-nccl2.29.2.log"


def _block(op: str) -> dict[int, float]:
    """size → out-of-place µs of one test's rows in the five-test log, by a plain split (no zerocalc code)."""
    out, inside = {}, False
    for line in LOG.read_text().splitlines():
        if line.startswith("# Collective test starting:"):
            inside = line.split(":")[1].strip() == op
        f = line.split()
        if inside and len(f) == 13 and f[0].isdigit():
            out[int(f[0])] = float(f[5])
    return out


@pytest.mark.parametrize("coll", [C.ALL_GATHER, C.REDUCE_SCATTER])
def test_ring_on_80_h100_by_hand(coll):
    # 10 nodes × 8 H100 (dgx-h100: 8 NICs of 400 Gb/s, Intel hosts), NCCL 2.29.2. PAT needs one GPU per node
    # (ncclPatEnable: nNodes != nRanks → 0); NVLS and CollNet Direct all-gather / reduce-scatter across
    # nodes need a CollNet plugin (busBw = 0 without comm->ncclCollNet): Ring alone.
    t = tune(PRESETS["dgx-h100"], 80, release_for("2.29.2")[0])
    enabled = {(a, p) for (c, a, p), e in t.entries.items() if c == coll and e.enabled}
    assert enabled == {(A.RING, P.LL), (A.RING, P.LL128), (A.RING, P.SIMPLE)}
    # The ring graph: one channel per NIC at 48 GB/s (the GPU's PCIe 5 path, under the NIC's 50), 8 channels.
    # nsteps = 79, bus → algorithm × 80 / 79. Bandwidth (GB/s):
    #   LL     min(llMaxBw[Intel][N4] 20.4, 384 × 0.5)            = 20.4
    #   LL128  min(384 × 0.92, 8 × perChMaxRingLL128Bw 36.7)      = 293.6
    #   Simple 8 × 48                                             = 384
    # Latency (µs): base + (79 − 9) × max(NVLink hop, net overhead: 1 µs, × 3 for Simple) + 9 network hops:
    #   LL     6.6 + 70 × max(0.6, 1) + 9 × 2.7                   = 100.9
    #   LL128  14 + 70 × max(1.9, 1) + 9 × 4.0                    = 183.0
    #   Simple 8.4 + 70 × max(3.4, 3) + 9 × 14.0                  = 372.4
    by_hand = {P.LL: (100.9, 20.4), P.LL128: (183.0, 293.6), P.SIMPLE: (372.4, 384.0)}
    for p, (lat, bus) in by_hand.items():
        e = t.entries[(coll, A.RING, p)]
        assert e.latency_us == pytest.approx(lat, abs=1e-6)
        assert e.bandwidth_GBps == pytest.approx(bus * 80 / 79, rel=1e-6)
    # LL128 until 183 + S / 297.3 = 372.4 + S / 388.9 (S in kB): S ≈ 239 MB; Simple from there
    assert t.choose(coll, 128 << 20)[:2] == (A.RING, P.LL128)
    assert t.choose(coll, 256 << 20)[:2] == (A.RING, P.SIMPLE)


@pytest.mark.parametrize("op", ["all_gather_perf", "reduce_scatter_perf"])
def test_the_sweep_shows_nccls_switch_to_simple_where_its_model_puts_it(op):
    # the file's own rows (counted from it): from 32 to 128 MiB the time grows by less than 1.6x per doubling
    # (LL128), from 128 to 256 MiB by more than 1.7x (Simple, whose latency is twice LL128's here), as NCCL's
    # model chooses (above): the sweep runs the protocol NCCL's model picks. What the model leaves out there
    # is the run's own speed: at 4-16 GiB 313-324 GB/s of bus bandwidth over the node's 8 NICs, against 384
    # in NCCL's figure, where the 10-node runs of 1, 2 and 4 GPUs a node reach their NICs' 48 GB/s each.
    rows = _block(op)
    sizes = sorted(rows)
    assert len(sizes) == 10
    mid = [s for s in sizes if s <= 128 << 20]
    assert len(mid) == 3
    for a, b in zip(mid, mid[1:], strict=False):
        assert rows[b] / rows[a] < 1.6
    i = next(k for k, s in enumerate(sizes) if s > 128 << 20)
    assert rows[sizes[i]] / rows[sizes[i - 1]] > 1.7


@pytest.mark.parametrize("coll", [C.ALL_GATHER, C.REDUCE_SCATTER])
def test_ring_across_nodes_runs_every_step_at_the_network_hop(coll):
    # By hand, v2.29 tables: every one of the 79 steps at max(NVLink hop (or net overhead), network hop):
    #   LL     6.6 + 79 × max(0.6, 1, 2.7)                        = 219.9
    #   LL128  14 + 79 × max(1.9, 1, 4.0)                         = 330.0
    #   Simple 8.4 + 79 × max(3.4, 3, 14.0)                       = 1114.4
    # NCCL still chooses with its own 372.4 / 183.0 (LL128 to 128 MiB, Simple from 256 MiB).
    t = tune(PRESETS["dgx-h100"], 80, release_for("2.29.2")[0])
    for p, lat in {P.LL: 219.9, P.LL128: 330.0, P.SIMPLE: 1114.4}.items():
        bw = t.entries[(coll, A.RING, p)].bandwidth_GBps
        assert t.run_time_s(coll, A.RING, p, 1 << 30) == pytest.approx((lat + (1 << 30) / (1000 * bw)) / 1e6)
    assert t.choose(coll, 128 << 20)[:2] == (A.RING, P.LL128)
    # one GPU a node: every step crosses the network already, NCCL's own latency; one node: no network
    for topo, n in ((nodes_of(PRESETS["dgx-h100"], 1)[0], 10), (PRESETS["dgx-h100"], 8)):
        one = tune(topo, n, release_for("2.29.2")[0])
        e = one.entries[(coll, A.RING, P.SIMPLE)]
        assert one.run_time_s(coll, A.RING, P.SIMPLE, 1 << 30) == pytest.approx(
            (e.latency_us + (1 << 30) / (1000 * e.bandwidth_GBps)) / 1e6)
    # all-reduce keeps NCCL's estimate (its plateau factor)
    e = t.entries[(C.ALL_REDUCE, A.RING, P.LL128)]
    assert t.run_time_s(C.ALL_REDUCE, A.RING, P.LL128, 1 << 20) == pytest.approx(
        t.time_s(C.ALL_REDUCE, A.RING, P.LL128, 1 << 20))


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_the_80_rank_sweep_within_the_bands(op):
    # the file's out-of-place times (counted from it) against zerocalc check's prediction for each size: every
    # size within 0.5-2x and the median size within 0.8-1.25x (0.43-0.87x and 0.71-0.72x at the median before)
    rows = _block(f"{op}_perf")
    res = CliRunner().invoke(app, ["check", str(LOG), "--format", "json"])
    assert res.exit_code == 0, res.output
    sweep = next(s for s in json.loads(res.stdout)["sweeps"] if s["op"] == op)
    pred = {r["bytes"]: r["predicted_s"] for r in sweep["rows"]}
    assert sorted(pred) == sorted(rows)
    ratios = [pred[s] / (rows[s] * 1e-6) for s in sorted(rows)]
    assert all(0.5 <= r <= 2 for r in ratios), ratios
    assert 0.8 <= ratios[(len(ratios) - 1) // 2] <= 1.25, ratios


@pytest.mark.parametrize("coll", [C.ALL_GATHER, C.REDUCE_SCATTER])
def test_the_plugins_wire_latency_is_not_charged_to_every_step(coll):
    # 2 aws-p5 nodes (16 ranks, EFA, AMD hosts), NCCL 2.22.3: NCCL chooses with the 75 µs the plugin reports
    # and the call is timed with the wire's 20 µs. Paced at the table's own network hop, by hand: LL128
    # base 14 + 15 × max(1.9, net overhead 2, 4.0) = 74 µs; NCCL's estimate with the wire's latency charges
    # it to the one step that crosses nodes: 14 + 14 × 2 + (4.0 + 20) = 66 µs. Charged to every step (24 µs
    # each) the 15 steps alone would be 360 µs.
    rel = release_for("2.22.3")[0]
    assert (rel.base_lat_us[A.RING][1], rel.hw_lat_us[2][A.RING][1]) == (14.0, 4.0)  # LL128 base, NET hop
    t = tune(PRESETS["aws-p5"], 16, rel)
    run = t.run_time_s(coll, A.RING, P.LL128, 8 << 20)
    bw = t.entries[(coll, A.RING, P.LL128)].bandwidth_GBps
    assert run == pytest.approx((14.0 + 15 * 4.0 + (8 << 20) / (1000 * bw)) / 1e6)
    assert run < (14.0 + 15 * 24.0) / 1e6
