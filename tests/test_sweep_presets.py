"""check SWEEP: the ranks read from busbw/algbw, the network a file's lines show, the AWS and PCIe presets."""

import json
import re
import tomllib
from pathlib import Path

import pytest
from sweep_files import with_lines_before_table
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError, TraceFormatError
from zerocalc.topology import PRESETS
from zerocalc.topology.devices import mixed_pcie_card, pcie_card, preset_for_gpu
from zerocalc.traces.busbw import ranks_from_bandwidth
from zerocalc.traces.nccl_tests import parse

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
H100 = DATA / "all_reduce_perf-16xH100-2nodes.txt"
runner = CliRunner()


def run_check(*args):
    return runner.invoke(app, ["check", *map(str, args)])


def one_line_error(res, *words):
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    (line,) = res.stderr.strip().splitlines()
    for w in words:
        assert w in line, line
    return line


def last_row_cells(path):
    """The last result row's cells, split by whitespace (no zerocalc code)."""
    rows = [ln.split() for ln in path.read_text().splitlines()
            if ln.split() and ln.split()[0].isdigit() and len(ln.split()) >= 13]
    return rows[-1]


@pytest.mark.parametrize("name,ranks", [
    # Lambda's 2 × 8 B200 run with `-n 16 -N 8` and Nebius' 2 nodes × 8 H100 (the README's sources)
    ("all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt", 16),
    ("all_reduce_perf-16xH100-2nodes-infiniband.txt", 16),
])
def test_ranks_from_busbw_match_a_hand_computation_and_the_source(name, ranks):
    cells = last_row_cells(DATA / name)
    algbw, busbw = float(cells[6]), float(cells[7])  # out-of-place algbw, busbw
    by_hand = 2 / (2 - busbw / algbw)  # busbw = algbw · 2(n-1)/n
    assert round(by_hand) == ranks and abs(by_hand - ranks) < 0.05
    res = run_check(DATA / name, "--format", "json", "--topology", "dgx-h100")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["group_size"] == ranks
    assert sweep["n_how"].startswith("from busbw/algbw = 2(n-1)/n")
    text = run_check(DATA / name, "--topology", "dgx-h100").stdout.splitlines()[0]
    assert f"on {ranks} ranks (from busbw/algbw" in text


def test_ranks_from_busbw_agree_with_the_rank_lines_where_a_file_has_both():
    for name, op in [(H100.name, "all_reduce"), ("all_reduce_perf-8xA100-SXM4-40GB-oci.txt", "all_reduce"),
                     ("all_gather_perf-bf16-2gpu.txt", "all_gather")]:
        with open(DATA / name) as f:
            res = parse(f, name)
        rows = [r for r in res.rows if r["op"] == op]
        assert ranks_from_bandwidth(rows, op, file=name).n == rows[0]["group_size"]


def test_n_how_says_where_the_ranks_came_from():
    (sweep,) = json.loads(run_check(H100, "--format", "json").stdout)["sweeps"]
    assert sweep["n_how"] == "the file's # Rank lines (16)"
    (sweep,) = json.loads(run_check(H100, "--format", "json", "--n", "16").stdout)["sweeps"]
    assert sweep["n_how"] == "given (--n)"


def _table(rows):
    head = ["#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong"]
    return "\n".join(["# Collective test starting: all_reduce_perf", *head, *rows]) + "\n"


def test_rows_that_disagree_on_the_ranks_are_refused(tmp_path):
    # 1 GiB rows: busbw/algbw = 1.875 is n = 16, 1.75 is n = 8
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_table([
        "  1073741824     268435456     float     sum      -1    10000  107.37  201.32      0"
        "    10000  107.37  201.32      0",
        "  2147483648     536870912     float     sum      -1    20000  107.37  187.90      0"
        "    20000  107.37  187.90      0",
    ]))
    one_line_error(run_check(path, "--topology", "dgx-h100"), "--n", "rows disagree", "line 3", "line 4")
    with open(path) as f, pytest.raises(TraceFormatError, match="disagree"):
        ranks_from_bandwidth(parse(f, str(path)).rows, "all_reduce", file=str(path))



def test_a_busbw_past_the_factors_limit_is_refused_naming_its_line(tmp_path):
    # all-reduce's busbw = algbw × 2(n-1)/n stays under 2 × algbw for every n: 338.82 / 100.00 (line 4) is
    # no rank count (the 1 GiB row, line 3, alone would give n = 16)
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_table([
        "  1073741824     268435456     float     sum      -1    10000  107.37  201.32      0"
        "    10000  107.37  201.32      0",
        "  8589934592    2147483648     float     sum      -1    85899  100.00  338.82      0"
        "    85899  100.00  338.82      0",
    ]))
    one_line_error(run_check(path, "--topology", "dgx-h100"), "--n", ":4:", "2 or more")


@pytest.mark.parametrize("cell", ["1e309", "9" * 320, "nan", "inf"],
                         ids=["1e309", "320-digits", "nan", "inf"])
def test_a_cell_no_double_holds_is_not_a_number(tmp_path, cell):
    # a busbw no double holds (it overflows to infinity) is skipped like a word, naming its line
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_table([
        "  1073741824     268435456     float     sum      -1    10000  107.37  201.32      0"
        "    10000  107.37  201.32      0",
        f"  2147483648     536870912     float     sum      -1    20000  107.37  {cell}      0"
        "    20000  107.37  201.32      0",
    ]))
    res = run_check(path, "--topology", "dgx-h100")
    assert res.exit_code == 0, res.output
    assert f":4: oop_busbw '{cell}' is not a number" in res.output
    res = run_check(path, "--topology", "dgx-h100", "--strict")
    one_line_error(res, ":4:", "is not a number")


_TIMES = "    20000  107.37  201.32      0    20000  107.37  201.32      0"


@pytest.mark.parametrize(("row", "says"), [
    ("  99999999999999999999     268435456     float     sum      -1" + _TIMES,
     "size_bytes '99999999999999999999' is past what a 64-bit count"),
    ("  1073741824  99999999999999999999     float     sum      -1" + _TIMES,
     "count '99999999999999999999' is past what a 64-bit count"),
    ("  1073741824     268435456     float     sum      99999999999" + _TIMES,
     "root '99999999999' is past what nccl-tests' int root holds"),
], ids=["size", "count", "root"])
def test_a_count_past_64_bits_is_refused_naming_its_line(tmp_path, row, says):
    # nccl-tests prints size and count from size_t and the root from an int: a cell past them is no row of
    # it (trace summary raised OverflowError building its table, check priced 1e20 bytes)
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_table([
        "  1073741824     268435456     float     sum      -1    10000  107.37  201.32      0"
        "    10000  107.37  201.32      0",
        row,
    ]))
    res = run_check(path, "--topology", "dgx-h100", "--n", "16")
    assert res.exit_code == 0, res.output
    assert f":4: {says}" in res.output
    res = runner.invoke(app, ["trace", "summary", str(path)])
    assert res.exit_code == 0 and f":4: {says}" in res.output, res.output


def test_sizes_too_small_to_tell_and_a_factor_of_one_are_refused(tmp_path):
    # the p5 excerpt: three rows of 0.00 GB/s
    one_line_error(run_check(DATA / "all_reduce_perf-tag-output-p5-excerpt.txt"), "--n",
                   "no row has non-zero")
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_table([
        "        4096          1024     float     sum      -1    40.00    0.10    0.19      0"
        "    40.00    0.10    0.19      0",
    ]))
    one_line_error(run_check(path, "--topology", "dgx-h100"), "--n", "too small to tell")
    bcast = tmp_path / "broadcast_perf.txt"
    bcast.write_text("# Collective test starting: broadcast_perf\n"
                     "#       size         count      type   redop    root     time   algbw   busbw #wrong"
                     "     time   algbw   busbw #wrong\n"
                     "  1073741824     268435456     float    none       0    10000  107.37  107.37      0"
                     "    10000  107.37  107.37      0\n")
    one_line_error(run_check(bcast, "--topology", "dgx-h100"), "--n", "busbw equals its algbw")


def _sweep_on(tmp_path, gpu, hosts, extra=()):
    """The bundled 16xH100 sweep with its rank lines naming ``gpu`` on ``hosts`` (8 ranks each) and
    ``extra`` lines (NCCL INFO lines) before its table."""
    out = []
    for line in H100.read_text().splitlines(True):
        m = re.match(r"(#\s+Rank\s+)(\d+)(.* on )(\S+)( device\s+\d+\s+\[[^\]]*\]\s+)(.*)", line)
        if m:
            out.append(f"{m[1]}{m[2]}{m[3]}{hosts[int(m[2]) // 8]}{m[5]}{gpu}\n")
            continue
        if line.startswith("#       size"):
            out += [f"{e}\n" for e in extra]
        out.append(line)
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("".join(out))
    return path


def _topology(path):
    res = run_check(path, "--format", "json")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep["topology"], sweep["topology_how"]


EC2 = ["ip-10-1-2-3", "ip-10-1-2-4"]
OFI = "ip-10-1-2-3:6899:6950 [0] NCCL INFO NET/OFI Selected Provider is efa, fabric is efa (found 4 nics)"
#: aws-ofi-nccl's platform line (src/platform-aws.c: "Running on %s platform, Setting NCCL_TOPO_FILE ...")
RUNNING_ON = ("ip-10-1-2-3:6899:6950 [0] NCCL INFO NET/OFI Running on {} platform, Setting NCCL_TOPO_FILE "
              "environment variable to /opt/aws-ofi-nccl/share/aws-ofi-nccl/xml/p5en.48xl-topo.xml")
IB = "node1:6899:6950 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>"
SOCKET = "node1:6899:6950 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"


@pytest.mark.parametrize("gpu,hosts,extra,preset,evidence", [
    ("NVIDIA A100-SXM4-40GB", EC2, (), "aws-p4d", "host names ip-10-1-2-3… (AWS EC2, a hint"),
    ("NVIDIA A100-SXM4-80GB", EC2, (), "aws-p4de", "host names ip-10-1-2-3… (AWS EC2, a hint"),
    ("NVIDIA H100 80GB HBM3", ["a", "b"], (OFI,), "aws-p5", "network AWS EFA (aws-ofi-nccl) from line"),
    ("NVIDIA H200", EC2, (), "aws-p5e", "p5e or p5en"),
    # the instance aws-ofi-nccl names tells p5e from p5en (same GPUs, EFAv2 / EFAv3)
    ("NVIDIA H200", EC2, (OFI, RUNNING_ON.format("p5en.48xlarge")), "aws-p5en", "p5en.48xlarge by aws-ofi"),
    ("NVIDIA H200", EC2, (OFI, RUNNING_ON.format("p5e.48xlarge")), "aws-p5e", "p5e.48xlarge by aws-ofi"),
    # an instance of other GPUs than the device lines' is not taken: the GPU's own preset stands
    ("NVIDIA H200", EC2, (OFI, RUNNING_ON.format("p5.48xlarge")), "aws-p5e",
     "names p5.48xlarge, aws-p5's, a machine of other GPUs than the device lines'"),
    ("NVIDIA A100-SXM4-40GB", EC2, (OFI, RUNNING_ON.format("P4d")), "aws-p4d", "P4d by aws-ofi-nccl"),
    # another size of the family (one H100, 100 Gb/s of EFA) is no preset's: the GPU's own stands, said so
    ("NVIDIA H100 80GB HBM3", EC2, (OFI, RUNNING_ON.format("p5.4xlarge")), "aws-p5",
     "names p5.4xlarge, which no preset describes: priced as aws-p5's GPUs and NICs; --topology"),
    ("NVIDIA H100 80GB HBM3", EC2, (IB,), "dgx-h100", "network InfiniBand/RoCE (NCCL's IB transport)"),
    ("NVIDIA A100-SXM4-40GB", ["a", "b"], (), "dgx-a100", None),
    ("NVIDIA H100 80GB HBM3", ["a", "b"], ("x:1:2 [0] NCCL INFO Using network FasTrak",), "gcp-a3-mega",
     "GCP GPUDirect-TCPXO"),
    # GCP A3 High: NCCL's line naming the TCPX plugin (v7 API) and the plugin's own (skypilot-org/skypilot
    # examples/gcp_gpu_direct_tcpx/README.md: "NCCL INFO NET/GPUDirectTCPX ver. 3.1.8.")
    ("NVIDIA H100 80GB HBM3", ["a", "b"], ("x:1:2 [0] NCCL INFO Using network GPUDirectTCPX_v7",),
     "gcp-a3-high", "GCP GPUDirect-TCPX"),
    ("NVIDIA H100 80GB HBM3", ["a", "b"], ("x:1:2 [0] NCCL INFO NET/GPUDirectTCPX ver. 3.1.8.",),
     "gcp-a3-high", "GCP GPUDirect-TCPX"),
])
def test_the_network_the_file_shows_chooses_the_preset_and_is_said(tmp_path, gpu, hosts, extra, preset,
                                                                    evidence):
    name, how = _topology(_sweep_on(tmp_path, gpu, hosts, extra))
    assert name == preset
    if evidence is None:
        assert ";" not in how
    else:
        assert evidence in how
    first = run_check(_sweep_on(tmp_path, gpu, hosts, extra)).stdout.splitlines()[0]
    assert f"topology {preset}, from the file's device lines" in first


def test_a_network_no_preset_of_the_gpu_has_is_refused(tmp_path):
    one_line_error(run_check(_sweep_on(tmp_path, "NVIDIA H100 80GB HBM3", ["a", "b"], (SOCKET,))),
                   "--topology", "TCP sockets", "NVIDIA H100 80GB HBM3")
    one_line_error(run_check(_sweep_on(tmp_path, "NVIDIA H100 80GB HBM3", ["a", "b"], (OFI, IB))),
                   "--topology", "several networks")
    # a socket line beside the plugin's is bootstrap's: the plugin's network stands
    assert _topology(_sweep_on(tmp_path, "NVIDIA H100 80GB HBM3", ["a", "b"], (SOCKET, OFI)))[0] == "aws-p5"


def test_pcie_cards_go_to_the_box_of_their_generation(tmp_path):
    res = run_check(_sweep_on(tmp_path, "NVIDIA GeForce RTX 5090", ["a", "b"]), "--format", "json")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["topology"] == "pcie-gen5"
    assert "a PCIe 5.0 card, compute capability 12" in sweep["topology_how"]
    assert _topology(_sweep_on(tmp_path, "NVIDIA L40S", ["a", "b"]))[0] == "pcie-gen4"
    assert _topology(_sweep_on(tmp_path, "Tesla V100-PCIE-16GB", ["a", "b"]))[0] == "pcie-gen3"
    assert _topology(_sweep_on(tmp_path, "NVIDIA GeForce RTX 2080 Ti", ["a", "b"]))[0] == "pcie-gen3"


def test_ranks_sharing_one_gpu_are_refused_where_the_file_states_no_nccl(tmp_path):
    # the eBPF socket study: two MPI ranks on one RTX 5090 (the same bus id on the same host); without the
    # lines naming its NCCL (2.29.7, which refuses that unless NCCL_HOSTID sets the hosts apart) nothing says
    # whether its NCCL ran several ranks on one GPU (2.30 on) or on hosts it told apart
    lines = (DATA / "tag-output-allreduce-allgather-2ranks.txt").read_text().splitlines(True)
    bare = tmp_path / "tag-output.txt"
    bare.write_text("".join(ln for ln in lines if "nccl-library" not in ln and "NCCL version" not in ln))
    one_line_error(run_check(bare), "--topology",
                   "ranks 0, 1 share one NVIDIA GeForce RTX 5090 (host lab, bus 0000:02:00)")


def test_aws_presets_state_the_instances_figures():
    # AWS EC2 P4/P5 instance pages: network per instance; aws-ofi-nccl platform-aws.cpp: the latency it
    # reports to NCCL; its tuner's nccl_ofi_model.cpp model_platform_params (v1.16.0): the wire's own
    for name, gbps, latency, wire in [("aws-p4d", 400, 75.0, None), ("aws-p4de", 400, 75.0, None),
                                      ("aws-p5", 3200, 75.0, 20.0), ("aws-p5e", 3200, 75.0, 20.0),
                                      ("aws-p5en", 3200, 35.0, 18.0)]:
        t = PRESETS[name]
        assert t.nics_per_node * t.nic_Gbps == gbps
        assert t.inter.bw_Bps == gbps / 8 * 1e9
        assert t.net_latency_us == latency and t.net_wire_latency_us == wire
        assert "aws-ofi-nccl" in t.source
    assert PRESETS["aws-p4d"].compute_capability == 80 and PRESETS["aws-p5"].nvls
    assert PRESETS["aws-p5"].cpu_vendor == "amd" and PRESETS["aws-p5en"].cpu_vendor == "intel"
    assert PRESETS["pcie-gen5"].intra.bw_Bps == pytest.approx(32e9 * 16 * 128 / 130 / 8, rel=1e-3)


def _rows_of(path):
    """(size, out-of-place time µs) of each result row, read with a plain split past the ``0:`` prefix."""
    out = []
    for line in path.read_text().splitlines():
        f = line.split()[1:] if line.startswith("0:") else line.split()
        if f and f[0].isdigit() and len(f) == 13:
            out.append((int(f[0]), float(f[5])))
    return out


P4DE = DATA / "all_reduce_perf-16xA100-p4de-2nodes-srun.txt"
P5 = DATA / "all_reduce_perf-16xH100-p5-2nodes-srun.txt"


def test_aws_p4de_sweep_priced_on_its_instance():
    """aws-samples/awsome-distributed-training's 2× p4de.24xlarge all_reduce (8 B to 2 GiB; NCCL 2.20.3 in
    the page's container table): every size within 0.5-2x on aws-p4de, none on the DGX A100's
    InfiniBand, whose network is 4x faster and whose plugin-free latency is 75 µs lower."""
    rows = _rows_of(P4DE)
    assert len(rows) == 29
    (sweep,) = json.loads(run_check(P4DE, "--format", "json", "--topology", "aws-p4de",
                                    "--nccl-version", "2.20.3").stdout)["sweeps"]
    assert [(r["bytes"], r["measured_s"]) for r in sweep["rows"]] == [(b, pytest.approx(t * 1e-6))
                                                                     for b, t in rows]
    assert sweep["group_size"] == 16 and sweep["n_how"].startswith("from busbw/algbw")
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    (dgx,) = json.loads(run_check(P4DE, "--format", "json", "--topology", "dgx-a100",
                                  "--nccl-version", "2.20.3").stdout)["sweeps"]
    assert sum(0.5 <= r["ratio"] <= 2.0 for r in dgx["rows"]) < len(rows) // 4


def test_aws_p5_sweep_priced_on_its_instance():
    """The same page's 2× p5.48xlarge all_reduce (8 B to 16 GiB): every size within 0.5-2x on aws-p5.
    NCCL chooses with the 75 µs per network hop the plugin reports (aws-ofi-nccl's p5 figure); the calls
    are timed with the 20 µs AWS's own tuner model gives a hop, where the sweep measures 65-79 µs for the
    whole call below 8 KiB."""
    rows = _rows_of(P5)
    assert len(rows) == 32
    (sweep,) = json.loads(run_check(P5, "--format", "json", "--topology", "aws-p5",
                                    "--nccl-version", "2.20.3").stdout)["sweeps"]
    assert [r["bytes"] for r in sweep["rows"]] == [b for b, _ in rows]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert max(t for b, t in rows if b <= 8192) < 82.0  # the file's small-size times, µs
    # 8 B by hand, NCCL 2.21's tuning.cc: Tree/LL base 6.8 + 2 × (7 NVLink hops × 0.6 + one network hop of
    # hwLat 5.0 + latencyInter); chosen with the plugin's 75 µs (175.2 µs), timed with the wire's 20
    first = sweep["rows"][0]
    assert (first["algorithm"], first["protocol"]) == ("Tree", "LL")
    assert first["predicted_s"] == pytest.approx((6.8 + 2 * (7 * 0.6 + 5.0 + 20.0)) * 1e-6, rel=1e-3)


def test_wire_latency_times_calls_and_leaves_the_choice(tmp_path):
    """A topology whose network's own latency differs from what its plugin reports: NCCL's choice is the
    one under the reported latency at every size, the time the one under the wire's (TOML too)."""
    import dataclasses

    from zerocalc.nccl.model import tune
    from zerocalc.nccl.tables import RELEASES, Collective
    from zerocalc.topology import topology_from_mapping, topology_to_toml

    p5 = PRESETS["aws-p5"]
    told = dataclasses.replace(p5, net_wire_latency_us=None)
    wire = dataclasses.replace(p5, net_latency_us=20.0, net_wire_latency_us=None)
    rel = RELEASES["2.21"]
    both, t_told, t_wire = (tune(t, 16, rel) for t in (p5, told, wire))
    ar = Collective.ALL_REDUCE
    for n in (8, 65536, 1 << 20, 1 << 26, 1 << 30):
        a, p, _ = both.choose(ar, n)
        assert (a, p) == t_told.choose(ar, n)[:2]
        assert both.run_time_s(ar, a, p, n) == t_wire.run_time_s(ar, a, p, n) < t_told.run_time_s(ar, a, p, n)
    assert tune(told, 16, rel).wire_run is None and tune(p5, 8, rel).wire_run is None  # one node: no hop
    back = topology_from_mapping(tomllib.loads(topology_to_toml(p5)), where="p5")
    assert back.net_wire_latency_us == 20.0
    bad = topology_to_toml(p5).replace("net_wire_latency_us = 20.0", "net_wire_latency_us = -1")
    with pytest.raises(ConfigError, match="net_wire_latency_us must be a positive number"):
        topology_from_mapping(tomllib.loads(bad), where="p5")


@pytest.mark.parametrize("line,kind", [
    # aws/aws-ofi-nccl issue 64 (2 × p4d, aws-ofi-nccl 1.1.2): a channel over the plugin of its day
    ("ip-172-31-6-104:9922:9980 [1] NCCL INFO Channel 01 : 9[101d0] -> 0[101c0] [send] "
     "via NET/AWS Libfabric/0", "efa"),
    # NCCL's own strings (src/init.cc "Using network %s", transport/net_ib.cc "NET/IB : Using", net_socket.cc)
    ("node1:1:2 [0] NCCL INFO Using network IB", "ib"),
    ("node1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>", "ib"),
    ("node1:1:2 [0] NCCL INFO Using network Socket", "socket"),
    ("mpirun -np 2 -x NCCL_IB_DISABLE=1 ./build/all_reduce_perf -b 8 -e 1G", "socket"),
    ("node1:1:2 [0] NCCL INFO NET/IB : No device found.", None),  # IB absent: no network named
])
def test_network_lines_are_read_per_run(tmp_path, line, kind):
    path = _sweep_on(tmp_path, "NVIDIA H100 80GB HBM3", ["a", "b"], (line,))
    with open(path) as f:
        (run,) = parse(f, str(path)).meta["runs"]
    assert list(run["network"]) == ([kind] if kind else [])
    if kind:
        assert run["network"][kind][1] == line.strip()


@pytest.mark.parametrize("name", ["aws-p4d", "aws-p4de", "aws-p5", "aws-p5e", "aws-p5en", "pcie-gen5"])
def test_new_presets_are_described_by_toml(name, tmp_path):
    """Each preset written as a topology TOML and read back is the same machine, and check prices a
    sweep on the file as on the preset."""
    import tomllib

    from zerocalc.topology import topology_from_mapping, topology_to_toml

    text = topology_to_toml(PRESETS[name])
    assert topology_from_mapping(tomllib.loads(text), where=name) == PRESETS[name]
    f = tmp_path / f"{name}.toml"
    f.write_text(text)
    by_name = json.loads(run_check(P4DE, "--format", "json", "--topology", name)
                         .stdout)["sweeps"][0]["rows"]
    by_file = json.loads(run_check(P4DE, "--format", "json", "--topology", f).stdout)["sweeps"][0]["rows"]
    assert [r["predicted_s"] for r in by_file] == [r["predicted_s"] for r in by_name]


def test_rank_lines_that_disagree_with_the_bandwidths_are_refused_and_an_excerpt_keeps_the_node(tmp_path):
    """An excerpt listing 4 of 16 ranks (as OCI's BM.GPU.B4.8 example lists ranks 0, 7, 8 and 15): its
    lines name rank 15, past their count, so its busbw/algbw tells the ranks (16); the lines tell the GPU,
    and the node stays the preset's 8 GPUs. Lines 0-3 alone (what a run under MPI with -g prints on each
    host) against rows of 16 are refused naming --n, as are lines naming a rank its rows do not have."""
    out = []
    for line in H100.read_text().splitlines(True):
        m = re.match(r"#\s+Rank\s+(\d+)\b", line)
        if m and int(m[1]) not in (0, 7, 8, 15):
            continue
        out.append(line)
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("".join(out))
    first = [ln for ln in H100.read_text().splitlines(True)
             if not re.match(r"#\s+Rank\s+(\d+)\b", ln) or int(re.match(r"#\s+Rank\s+(\d+)", ln)[1]) < 4]
    head = tmp_path / "all_reduce_perf_head.txt"
    head.write_text("".join(first))
    one_line_error(run_check(head), "--n", "# Rank lines (4) give 4 ranks but its busbw/algbw gives 16")
    past = tmp_path / "all_reduce_perf_past.txt"
    past.write_text("".join(out).replace("#  Rank 15 ", "#  Rank 16 "))
    one_line_error(run_check(past), "--n", "its # Rank lines name rank 16 but its busbw/algbw gives 16 ranks")
    assert json.loads(run_check(path, "--format", "json").stdout)["sweeps"][0]["group_size"] == 16
    res = run_check(path, "--format", "json", "--n", "16")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    # the four lines' GPUs sit at a GCP A3 Mega VM's PCI slots on both hosts (zerocalc.topology.slots)
    assert sweep["topology"] == "gcp-a3-mega" and sweep["group_size"] == 16
    assert "4 of its 16 ranks listed (nodes as gcp-a3-mega's)" in sweep["topology_how"]
    full = json.loads(run_check(H100, "--format", "json").stdout)["sweeps"][0]
    assert [r["predicted_s"] for r in sweep["rows"]] == [r["predicted_s"] for r in full["rows"]]


# aws-ofi-nccl on HPE Slingshot (libfabric's cxi provider), as its INFO lines read in public logs of
# CSCS Alps and LUMI: the plugin's own lines, then the provider line that names the fabric
CXI = ("nid005098:267630:267630 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.19.0",
       "nid005098:267630:267630 [0] NCCL INFO NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)",
       "nid005098:267630:267630 [0] NCCL INFO Using network AWS Libfabric")


def test_aws_ofi_nccl_over_slingshot_is_slingshot_not_efa(tmp_path):
    """The Alps GH200 sweep (2 nodes of 4) with aws-ofi-nccl's lines on Slingshot: the cxi provider line
    (the second of three added before the file's line 15, so line 16) names the network, and the
    gh200 preset's nodes (Slingshot 11) price it; an A100 run on Slingshot has no preset and is refused."""
    alps = DATA / "all_reduce_perf-8xGH200-2nodes-4pernode-slingshot.txt"
    name, how = _topology(with_lines_before_table(tmp_path, alps, CXI))
    assert name == "gh200"
    assert "network HPE Slingshot (aws-ofi-nccl over libfabric's cxi provider) from line 16" in how
    one_line_error(run_check(_sweep_on(tmp_path, "NVIDIA A100-SXM4-40GB", ["a", "b"], CXI)),
                   "--topology", "HPE Slingshot", "NVIDIA A100-SXM4-40GB")
    # the plugin's lines alone (no provider line) still read as EFA
    plugin_only = _sweep_on(tmp_path, "NVIDIA H100 80GB HBM3", ["a", "b"], (CXI[0], CXI[2]))
    assert _topology(plugin_only)[0] == "aws-p5"


@pytest.mark.parametrize("gpu,preset,cc", [
    # NVIDIA's product pages (PCIe generation) and CUDA GPUs page (compute capability); names as nvidia-smi
    # prints them
    ("Tesla V100S-PCIE-32GB", "pcie-gen3", 70), ("NVIDIA TITAN V", "pcie-gen3", 70),
    ("Quadro GV100", "pcie-gen3", 70), ("NVIDIA GeForce GTX 1660 SUPER", "pcie-gen3", 75),
    ("NVIDIA T1000", "pcie-gen3", 75), ("Tesla P100-PCIE-16GB", "pcie-gen3", 60),
    ("Tesla P40", "pcie-gen3", 61), ("Quadro P6000", "pcie-gen3", 61),
    ("NVIDIA GeForce GTX 1080 Ti", "pcie-gen3", 61), ("NVIDIA TITAN Xp", "pcie-gen3", 61),
    ("NVIDIA RTX 4000 SFF Ada Generation", "pcie-gen4", 89), ("NVIDIA L20", "pcie-gen4", 89),
    ("NVIDIA A2", "pcie-gen4", 86), ("NVIDIA A16", "pcie-gen4", 86),
    ("NVIDIA GeForce RTX 3090 Ti", "pcie-gen4", 86),
    # numbers a GeForce card shares: the Quadro RTX 4000 / 5000 are Turing, the RTX 5000 Ada an Ada card
    ("Quadro RTX 5000", "pcie-gen3", 75), ("Quadro RTX 4000", "pcie-gen3", 75),
    ("NVIDIA RTX 5000 Ada Generation", "pcie-gen4", 89), ("NVIDIA GeForce RTX 5080", "pcie-gen5", 120),
    # NVLink modules are not PCIe cards
    ("Tesla P100-SXM2-16GB", None, None), ("Tesla K80", None, None),
])
def test_pcie_card_names_of_every_generation(gpu, preset, cc):
    card = pcie_card(gpu)
    assert preset_for_gpu(gpu) == preset
    assert (card.compute_capability if card else None) == cc


def test_a_pascal_pair_is_priced_and_an_unknown_card_is_one_line(tmp_path):
    assert _topology(_sweep_on(tmp_path, "Tesla P100-PCIE-16GB", ["a", "b"]))[0] == "pcie-gen3"
    one_line_error(run_check(_sweep_on(tmp_path, "Tesla K80", ["a", "b"])), "--topology",
                   "no preset describes its GPUs (Tesla K80)")


def test_several_pcie_card_models_take_the_slowest_cards_box(tmp_path):
    # an RTX 3090 (PCIe 4.0, 8.6) beside an RTX 2080 Ti (PCIe 3.0, 7.5): NCCL runs the ring at the slowest
    # link and tunes with the communicator's least compute capability (search.cc, tuning.cc ccMin)
    src = (DATA / "all_reduce_perf-2xRTX2080Ti-pcie3-shm.txt").read_text()
    i = src.index("NVIDIA GeForce RTX 2080 Ti")
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(src[:i] + "NVIDIA GeForce RTX 3090" + src[i + len("NVIDIA GeForce RTX 2080 Ti"):])
    name, how = _topology(path)
    assert name == "pcie-gen3"
    assert "compute capability 7.5" in how and "several models" in how and "no PCIe peer-to-peer" in how
    assert mixed_pcie_card(["NVIDIA L40S", "NVIDIA RTX A6000"]).compute_capability == 86
    assert mixed_pcie_card(["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]) is None  # an SXM module
    assert mixed_pcie_card(["NVIDIA H100 NVL", "NVIDIA H100 PCIe"]) is None  # NVLink bridges


def _ten_on_one_host(tmp_path, gpu):
    """The RTX 2080 Ti pair's sweep with ten rank lines of ``gpu`` on one host, each on a bus of its own."""
    lines = (DATA / "all_reduce_perf-2xRTX2080Ti-pcie3-shm.txt").read_text().splitlines(True)
    first = next(i for i, t in enumerate(lines) if t.startswith("#  Rank  0"))
    ranks = [f"#  Rank {r:2d} Group  0 Pid   1 on box device {r:2d} [0x{r + 1:02x}] {gpu}\n"
             for r in range(10)]
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("".join(lines[:first] + ranks + lines[first + 2:]))
    return path


def test_a_pcie_box_of_more_cards_than_eight_holds_them_all(tmp_path):
    # ten GeForce cards on one host (a server of ten slots): the box's layout, two sockets of switches of
    # four, holding ten GPUs; an NVLink node's GPUs are its board's, so ten H100 on one host stay one line
    res = run_check(_ten_on_one_host(tmp_path, "NVIDIA GeForce RTX 3090"), "--n", "10", "--format", "json")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["topology"] == "pcie-gen4" and sweep["group_size"] == 10
    assert "10 per host, 1 host" in sweep["topology_how"] and "10 cards a host" in sweep["topology_how"]
    one_line_error(run_check(_ten_on_one_host(tmp_path, "NVIDIA H100 80GB HBM3"), "--n", "10"), "--topology",
                   "10 ranks per host, more than the 8 GPUs of a dgx-h100 node")



def test_a_run_of_one_rank_is_refused_in_one_line_that_says_why():
    """A run of one GPU (NVIDIA/nccl-tests issue 287: one RTX 5090, -g 1, every busbw 0.00): nothing moves
    between GPUs, so one line says so, and names --n for a file whose lines show fewer ranks than ran."""
    name = DATA / "all_reduce_perf-1xRTX5090-g1-nccl-tests-issue287.txt"
    ranks = [ln for ln in name.read_text().splitlines() if ln.startswith("#  Rank")]
    busbw = {ln.split()[7] for ln in name.read_text().splitlines() if ln.split() and ln.split()[0].isdigit()}
    assert len(ranks) == 1 and busbw == {"0.00"}
    line = one_line_error(run_check(name), "--n", "one rank", "moves no data between GPUs")
    assert "if the run had more ranks than the file shows" in line
