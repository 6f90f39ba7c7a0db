"""AWS EFA through aws-ofi-nccl: a network message above 8 KiB waits on the receiver before its payload
moves (zerocalc.nccl.ofi_efa), timed as libfabric cxi's rendezvous is (zerocalc.nccl.ofi_cxi), on the
bundled p5 (RDMA protocol) and p4d / p4de (SENDRECV protocol) all-reduce runs."""

from __future__ import annotations

import gzip
import json

import pytest
from sweep_files import DATA, check_json, median_size_ratio, runner, srun_task0_rows, with_lines_before_table

from zerocalc.cli import app
from zerocalc.nccl.ofi_cxi import chunk_bytes, network_messages
from zerocalc.nccl.ofi_efa import EAGER_BYTES
from zerocalc.nccl.release import Algorithm, Collective, Protocol
from zerocalc.nccl.tables import release_for
from zerocalc.topology import get_topology

SRUN = "all_reduce_perf-16xH100-p5-2nodes-srun.txt"
TUNER = "all_reduce_perf-16xH100-p5-info-tuner-nccl2.20.3.log.gz"
TAGGED = ("all_reduce_perf-16xH100-p5-info-tagged-nccl2.22.3-run1.log.gz",
          "all_reduce_perf-16xH100-p5-info-tagged-nccl2.22.3-run2.log.gz")
P4DE = "all_reduce_perf-16xA100-p4de-2nodes-srun.txt"
AR, TREE, LL, LL128 = Collective.ALL_REDUCE, Algorithm.TREE, Protocol.LL, Protocol.LL128
KiB, MiB = 1 << 10, 1 << 20


def gz_rows(name):
    """(size, out-of-place µs, in-place µs) of rank 0's table, by a plain split of the gunzipped file (its
    lines tagged by OpenMPI, ``[1,0]<stdout>:``)."""
    rows = []
    for line in gzip.open(DATA / name, "rt").read().splitlines():
        tag, _, rest = line.partition(">:")
        f = rest.split()
        if tag == "[1,0]<stdout" and len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5]), float(f[9])))
    return rows


def test_aws_presets_take_the_plugins_eager_limit():
    """aws-ofi-nccl's OFI_NCCL_EAGER_MAX_SIZE default (include/nccl_ofi_param.h, v1 releases: 8192); the
    other presets of NVIDIA GPUs write every message into a posted buffer (none), gh200 keeps cxi's."""
    assert EAGER_BYTES == 8192
    for name in ("aws-p4d", "aws-p4de", "aws-p5", "aws-p5e", "aws-p5en"):
        assert get_topology(name).net_eager_bytes == 8192, name
    assert get_topology("dgx-h100").net_eager_bytes is None
    assert get_topology("gh200").net_eager_bytes == 2048 + 2049


def test_p5_mid_size_messages_counted_as_nccl_sizes_them():
    """2 nodes of 8 H100 on 16 channels (src/enqueue.cc calcCollChunking): a 64 KiB Tree/LL call puts 4 KiB
    on a channel, 8192 bytes of LL lines: eager; 128 KiB puts 16384: a round trip up and one down. A 256
    KiB Tree/LL128 call puts 16 KiB on a channel (17476 on the wire) in one chunk: 2 messages."""
    rel = release_for("2.30.7")[0]
    assert network_messages(rel, AR, TREE, LL, 64 * KiB, 16, 16, 2, EAGER_BYTES) == 0
    assert network_messages(rel, AR, TREE, LL, 128 * KiB, 16, 16, 2, EAGER_BYTES) == 2
    assert chunk_bytes(rel, TREE, LL128, 256 * KiB, 16, 16, 2) >= 16 * KiB
    assert network_messages(rel, AR, TREE, LL128, 256 * KiB, 16, 16, 2, EAGER_BYTES) == 2


def _sweep(path, *args):
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"][0]


def test_p5_runs_within_both_bands_where_their_mid_sizes_were_under():
    """The p5 runs with NCCL's and aws-ofi-nccl's lines (NCCL 2.20.3 and 2.22.3, plugin 1.9.2-aws, RDMA
    protocol): every size within 0.5-2x, the median size within 0.8-1.25x, and 1-16 MiB (Tree/LL128,
    0.73-0.82x without the handshake) within 0.8-1.25x of the file's times."""
    for name in (TUNER, *TAGGED):
        sweep = check_json(name, counted=gz_rows)
        assert sweep["topology"] == "aws-p5", name
        assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"]), name
        assert 0.8 <= median_size_ratio(sweep) <= 1.25, name
        mid = [r for r in sweep["rows"] if MiB <= r["bytes"] <= 16 * MiB]
        assert len(mid) == 5 and all(0.8 <= r["ratio"] <= 1.25 for r in mid), name


def test_the_network_the_lines_name_sets_or_drops_efas_handshake(tmp_path):
    """The srun p5 run (no NCCL lines) on aws-p5: its 256 KiB row pays 2 round trips of NCCL's network hop
    (2 × 2.7 µs each) that NCCL lines naming InfiniBand take off; lines naming the plugin over EFA add the
    limit to dgx-h100, where the srun run alone has none."""
    ib = "p5-st-1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>"
    efa = "p5-st-1:1:1 [0] NCCL INFO NET/OFI Selected Provider is efa (found 32 nics)"
    plain = _sweep(DATA / SRUN, "--topology", "aws-p5")
    on_ib = _sweep(with_lines_before_table(tmp_path, SRUN, [f"0: {ib}"]), "--topology", "aws-p5")
    assert "no rendezvous" in on_ib["topology_how"]
    assert any("aws-ofi-nccl on AWS EFA" in t for t in plain["notes"])
    efa_t = {r["bytes"]: r["predicted_s"] for r in plain["rows"]}
    ib_t = {r["bytes"]: r["predicted_s"] for r in on_ib["rows"]}
    assert efa_t[64 * KiB] == pytest.approx(ib_t[64 * KiB])
    assert efa_t[256 * KiB] == pytest.approx(ib_t[256 * KiB] + 2 * 2 * 2.7e-6)
    h100 = _sweep(with_lines_before_table(tmp_path, SRUN, [f"0: {efa}"]), "--topology", "dgx-h100")
    bare = _sweep(DATA / SRUN, "--topology", "dgx-h100")
    assert "AWS EFA as the file's NCCL lines name it" in h100["topology_how"]
    on_efa = {r["bytes"]: r["predicted_s"] for r in h100["rows"]}
    assert on_efa[256 * KiB] == pytest.approx({r["bytes"]: r["predicted_s"] for r in bare["rows"]}[256 * KiB]
                                              + 2 * 2 * 2.7e-6)


def test_srun_p5_and_p4de_runs_stay_within_0_5_2x():
    """The awsome-distributed-training p5 and p4de blocks (no NCCL lines): every size within 0.5-2x; p4de
    (SENDRECV protocol) keeps its median size within 0.8-1.25x."""
    p5 = check_json(SRUN, "--topology", "aws-p5", counted=srun_task0_rows)
    assert len(p5["rows"]) == 32 and all(0.5 <= r["ratio"] <= 2.0 for r in p5["rows"])
    p4de = check_json(P4DE, "--topology", "aws-p4de", counted=srun_task0_rows)
    assert all(0.5 <= r["ratio"] <= 2.0 for r in p4de["rows"])
    assert 0.8 <= median_size_ratio(p4de) <= 1.25
