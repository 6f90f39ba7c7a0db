"""Gather and scatter across nodes: the root alone uses its node's network (nccl-tests src/gather.cu /
src/scatter.cu: the root sends to, or receives from, every rank in one group), on its own NICs, and a
scatter's root under PXN on every NIC of its node (NCCL src/graph/search.cc ``ncclTopoGetNetDev``,
v2.12.7 to v2.30.7)."""

from __future__ import annotations

import json

import pytest
from sweep_files import DATA, check_json, median_size_ratio, with_lines_before_table
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.model import tune
from zerocalc.nccl.p2p import P2pOp, group_time, op_time, p2p_comm, root_net
from zerocalc.nccl.tables import release_for
from zerocalc.topology import get_topology


def comm(n, version, preset="dgx-h100", **kw):
    topo = get_topology(preset)
    rel, _ = release_for(version)
    return p2p_comm(topo, n, rel, version, tune(topo, n, rel).comm_channels, **kw)


def test_root_net_by_nccl_rules():
    """AWS p4d.24xlarge: 4 x 100 Gb/s EFA for 8 GPUs (AWS's P4 page), two GPUs to a NIC: a scatter's root
    sends through all 4 NICs under PXN (3 of them through the GPU nearest each, over NVLink), receives on
    the one NIC it shares with its idle neighbour; DGX H100: a NIC per GPU."""
    r = root_net(4, 12.5, 8, pxn=True)
    assert (r.send_GBps, r.receive_GBps, r.send_proxies, r.relayed) == (50.0, 12.5, 4, 0.75)
    r = root_net(4, 12.5, 8, pxn=False)
    assert (r.send_GBps, r.receive_GBps, r.send_proxies, r.relayed) == (12.5, 12.5, 1, 0.0)
    r = root_net(8, 48.0, 8, pxn=True)
    assert (r.send_GBps, r.receive_GBps, r.send_proxies, r.relayed) == (384.0, 48.0, 8, 7 / 8)


def test_pxn_from_2_12_and_off_when_disabled():
    """PXN came with NCCL 2.12 (``NCCL_PXN_DISABLE``, ``NCCL_P2P_PXN_LEVEL`` default 2, v2.12.7 paths.cc /
    search.cc); off by either variable or on a node whose GPUs no NVLink joins."""
    assert comm(16, "2.18.3", "aws-p4d").root_net.send_GBps == 50.0
    assert comm(16, "2.11.4", "aws-p4d").root_net.send_GBps == 12.5
    assert comm(16, "2.18.3", "aws-p4d", pxn_disable=1).root_net.send_GBps == 12.5
    assert comm(16, "2.18.3", "aws-p4d", pxn_level=0).root_net.send_GBps == 12.5
    assert comm(16, "2.18.3", "aws-p4d", pxn_level=1).root_net.send_GBps == 50.0
    assert comm(8, "2.18.3", "aws-p4d").root_net is None  # one node: no network


def test_scatter_against_gather_and_alltoall():
    """16 ranks on 2 DGX H100 (a NIC per GPU): a gather's root takes in its 8 remote blocks on its one NIC,
    as an all-to-all rank does; a scatter's root sends them over 8 NICs, unless PXN is off."""
    c = comm(16, "2.29.2")
    size = 2**32
    gather = op_time(c, P2pOp.GATHER, size)
    assert gather.time_s == pytest.approx(op_time(c, P2pOp.ALL_TO_ALL, size).time_s)
    assert op_time(c, P2pOp.SCATTER, size).time_s < gather.time_s / 2
    off = comm(16, "2.29.2", pxn_disable=1)
    assert op_time(off, P2pOp.SCATTER, size).time_s == pytest.approx(op_time(off, P2pOp.GATHER, size).time_s)


def test_p4d_scatter_transfer_by_hand():
    """2 GiB scatter, 16 ranks on 2 p4d (NCCL 2.18.3): the root's 8 remote blocks of 2 GiB / 16 leave
    through 4 x 12.5 GB/s of EFA, 6 of them first relayed over NVLink; plus the pipeline's fill, one
    128 KiB step (p2pChunkSize across nodes) at a network channel's 14 GB/s."""
    c = comm(16, "2.18.3", "aws-p4d")
    size = 2**31
    t = op_time(c, P2pOp.SCATTER, size)
    assert t.transfer_us == pytest.approx((8 * size / 16 / 50e9 + 131072 / 14e9) * 1e6)


def test_messages_run_eight_to_a_channel_work():
    """Up to 8 sends share one channel's work and run at once (``NCCL_MAX_WORK_ELEMENTS_P2P`` 16 = 8 sends
    + 8 receives, v2.18.3 enqueue.cc): 16 messages on 8 channels pay one hop, not two; the network hop
    counts the network's latency once (75 us on p4d, aws-ofi-nccl's figure)."""
    c = comm(16, "2.18.3", "aws-p4d")
    one = group_time(c, [(64, "net")])
    many = group_time(c, [(64, "net")] * 16)
    assert many.latency_us - one.latency_us == pytest.approx(15 * 3 * c.net_overhead_us)  # posts only
    hop = 14.0 + 75.0  # hwLat[NET][Ring][Simple] (tuning.cc v2.18.3) + latencyInter
    assert one.latency_us == pytest.approx(8.4 + hop + 3 * c.net_overhead_us)
    # a scatter root's 8 remote sends are posted by the 4 proxies of the GPUs nearest the 4 NICs
    assert op_time(c, P2pOp.SCATTER, 64 * 16).latency_us == pytest.approx(8.4 + hop + 2 * 3)


runner = CliRunner()
P4D_SCATTER = "scatter_perf-16xA100-40GB-p4d-2nodes-srun-nccl2.18.3.out"


def _srun_rows(name):
    """(size, out-of-place µs, in-place µs) of each sized row, by a plain split past ``srun -l``'s
    ``N:`` label (the zero-size rows left out)."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if f and f[0].endswith(":") and f[0][:-1].isdigit():
            f = f[1:]
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit() and int(f[0]) > 0:
            rows.append((int(f[0]), float(f[5]), float(f[9])))
    return rows


def test_p4d_scatter_root_sends_through_every_nic():
    """The p4d scatter log (16 ranks, NCCL 2.18.3, aws-ofi-nccl over EFA): its INFO lines connect rank 0's
    sends to the 8 ranks of the other node through all 4 NICs, 3 of them by PXN (``NET/AWS Libfabric/1(2)``:
    NIC 1 through rank 2), and its 2 GiB row moves the root's remote half at more than 3 NICs' 12.5 GB/s;
    priced within issue 11's bands (0.5-2x every size, 0.8-1.25x at the median size)."""
    text = (DATA / P4D_SCATTER).read_text()
    nics = set()
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["0:"] and "[send]" in f and "0[0]" in f and "NET/AWS" in line:
            peer = int(f[f.index("->") + 1].split("[")[0])
            dev = line.split("NET/AWS Libfabric/")[1].split("/")[0]
            if peer >= 8:
                nics.add(dev)
    assert nics == {"0", "1(2)", "2(4)", "3(6)"}
    size, t_us, _ = _srun_rows(P4D_SCATTER)[-1]
    assert size == 2**31 and size / 2 / (t_us * 1e-6) > 3 * 12.5e9
    sweep = check_json(P4D_SCATTER, counted=_srun_rows)
    assert sweep["op"] == "scatter" and sweep["group_size"] == 16
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


@pytest.mark.parametrize("line", ["NCCL_PXN_DISABLE set by environment to 1.",
                                  "NCCL_P2P_PXN_LEVEL set by environment to 0."])
def test_p4d_scatter_without_pxn_sends_on_one_nic(tmp_path, line):
    """The same log with PXN turned off by NCCL's own INFO line (``ncclLoadParam``): the root's remote
    half leaves through the one NIC nearest its GPU, a quarter of the 4 NICs, so the 2 GiB row, priced by
    the root's network, takes 4 times as long; the note names the variable."""
    path = with_lines_before_table(tmp_path, P4D_SCATTER, [f" 0: h1:1:1 [0] NCCL INFO {line}"],
                                   name=P4D_SCATTER)
    on = check_json(P4D_SCATTER, counted=_srun_rows)
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (off,) = json.loads(res.stdout)["sweeps"]
    assert any(line.split()[0] in n and "priced" in n for n in off["notes"])
    big_on, big_off = on["rows"][-1], off["rows"][-1]
    assert big_on["bytes"] == big_off["bytes"] == 2**31
    assert big_off["predicted_s"] / big_on["predicted_s"] == pytest.approx(4, rel=0.02)
