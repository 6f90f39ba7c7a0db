"""check on more public nccl-tests outputs of NVIDIA machines (NCCL 2.8 and later): the all-reduce,
all-to-all and send/receive runs of a 10-node H100 cluster with 1, 2 and 4 ranks a host, and the five runs
of 4 H100 of one host, one process per GPU (tests/data/traces/README.md names each file's source).

What each test expects is counted from the file itself by a plain split, not through zerocalc: per
``# Collective test starting`` run, its test's name, its rows (size, out-of-place µs) and its '#  Rank'
lines. The bands are issue 11's (0.5-2x at every size, 0.8-1.25x at the median size) where the model meets
them.
"""

import json

import pytest
from sweep_files import DATA, device_lines
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.topology.devices import pcie_card
from zerocalc.topology.stated import stated_hcas

runner = CliRunner()

#: nccl-tests' binary name → the op ``check`` reports
OPS = {"all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather", "reduce_scatter_perf":
       "reduce_scatter", "alltoall_perf": "all_to_all", "sendrecv_perf": "sendrecv", "broadcast_perf":
       "broadcast", "reduce_perf": "reduce"}

FOUR_H100 = "five-tests-4xH100-1node-4procs-nccl2.29.2.log"
H800_INFO = "broadcast_perf-8xH800-g8-info-c0-nccl2.18.3.txt"
LEO_PAIR = "sendrecv_perf-2xA100-SXM-64GB-4gpu-board-t2-info-nccl2.22.3.txt"
NC_A100 = "all_gather_perf-4xA100-80GB-PCIe-azure-nc96ads-g4-32M.txt"
RTX6000D = "alltoall_perf-16xRTX6000D-2nodes-p2p-disable-crlf-nccl2.30.3.txt"
TEN_NODES = [f"{kind}-{n}xH100-10nodes-{g}pernode-nccl2.29.2.{ext}"
             for n, g in ((10, 1), (20, 2), (40, 4))
             for kind, ext in (("all_reduce_perf", "txt"), ("alltoall-sendrecv", "log"))]

#: file → (the options a user gives, the preset it is priced on, every run within both bands)
PRICED = {
    FOUR_H100: ((), "dgx-h100", True),
    # within 0.5-2x at every size; up to 4 MiB the 8 GPUs' calls take 25-45 µs, under the floor priced for
    # one thread launching 8 GPUs' kernels of 16 channels each (median size 1.37x)
    H800_INFO: ((), "hgx-h800", False),
    # NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1, 8 HCAs named (8 NICs a node for the box's one): 0.69-1.10x,
    # the median size (1 MiB) 0.79x
    RTX6000D: ((), "pcie-gen5", False),
    # 2 GPUs of a Leonardo Booster node's 4-GPU A100 board, 4 NVLinks between each pair (the post's
    # topology): priced on the pair's 4 links, every size within 0.5-2x; its calls up to 128 KiB (P2P/LL)
    # take 10-19 µs where 7-11 µs are priced, so the median size is 0.54x
    LEO_PAIR: ((), "leonardo-booster", False),
    # 4 A100 PCIe of an Azure NC A100 v4 VM, one process: priced through host memory between GPUs each on a
    # bus of its own, 1.54x at its one size (the VM's NVLink bridges, GPUs 0-1 and 2-3, are not in the file)
    NC_A100: ((), "pcie-gen4", False),
    **{name: ((), "dgx-h100", True) for name in TEN_NODES},
}


def runs_in_file(name):
    """Per run of the file: (test name, its '#  Rank' lines, hosts, [(size, out-of-place µs)]), by a plain
    split. A file holding one block without a ``Collective test starting`` line is one run named by its
    file name."""
    runs = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if line.startswith("# Collective test starting:"):
            runs.append([f[-1], 0, set(), []])
            continue
        counted = "Rank" in f or (len(f) >= 13 and f[0].isdigit() and f[1].isdigit())
        if counted and not runs:
            runs.append([name.split("-")[0], 0, set(), []])
        if "Rank" in f and "device" in f and "on" in f:
            runs[-1][1] += 1
            runs[-1][2].add(f[f.index("on") + 1])
        elif len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            runs[-1][3].append((int(f[0]), float(f[5])))
    return [(test, ranks, len(hosts), rows) for test, ranks, hosts, rows in runs]


def test_the_rtx_6000d_is_read_as_the_rtx_pro_6000_blackwell_it_derives_from():
    """Named as nvidia-smi names it in the bundled run; its press-reported parent is the RTX PRO 6000
    Blackwell (PCIe Gen5 x16, compute capability 12.0), not the RTX 6000 Ada Generation (Gen4, 8.9)."""
    six_d, parent = pcie_card("NVIDIA RTX 6000D"), pcie_card("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert (six_d.pcie_gen, six_d.compute_capability) == (parent.pcie_gen, parent.compute_capability)
    assert pcie_card("NVIDIA RTX 6000 Ada Generation").pcie_gen == 4
    assert ("NVIDIA RTX 6000D", 16) == (device_lines(RTX6000D)[0][1], len(device_lines(RTX6000D)))


def test_the_hcas_a_launch_line_names_are_the_pcie_boxs_nics():
    """The RTX 6000D run's mpirun line names its HCAs with the shell's escaped commas
    (``NCCL_IB_HCA=mlx5_2\\,mlx5_3\\,...``): read as that many NICs a node of the PCIe box, which
    assumes one; a prefix (``mlx5``, ``mlx5_``) or an exclusion (``^...``) names no count."""
    line = next(e for e in (DATA / RTX6000D).read_text().splitlines() if "NCCL_IB_HCA=" in e)
    value = next(w for w in line.split() if w.startswith("NCCL_IB_HCA=")).split("=", 1)[1]
    named = value.replace("\\", "").split(",")
    assert stated_hcas(value) == len(named) == 8
    assert [stated_hcas(v) for v in ("mlx5", "mlx5_", "^mlx5_bond_0", "=mlx5_0:1,mlx5_1:1")] == [None, None,
                                                                                           None, 2]
    (sweep,) = sweeps(RTX6000D)
    assert f"NCCL_IB_HCA names {len(named)} network devices" in sweep["topology_how"]


def sweeps(name, *args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


def median_size_ratio(sweep):
    rows = sorted(sweep["rows"], key=lambda r: r["bytes"])
    return rows[(len(rows) - 1) // 2]["ratio"]


@pytest.mark.parametrize("name", sorted(PRICED))
def test_each_run_is_read_as_the_file_counts_it(name):
    args, _, _ = PRICED[name]
    runs = runs_in_file(name)
    got = sweeps(name, *args)
    assert [s["op"] for s in got] == [OPS[test] for test, _, _, _ in runs]
    for sweep, (_, ranks, _, rows) in zip(got, runs, strict=True):
        assert sweep["group_size"] == ranks
        assert [r["bytes"] for r in sweep["rows"]] == [size for size, _ in rows]
        assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t in rows])


@pytest.mark.parametrize("name", sorted(PRICED))
def test_the_preset_is_the_one_the_device_lines_name_with_the_hosts_they_name(name):
    args, preset, _ = PRICED[name]
    for sweep, (_, ranks, hosts, _) in zip(sweeps(name, *args), runs_in_file(name), strict=True):
        assert sweep["topology"] == preset
        how = sweep["topology_how"]
        assert f"{ranks // hosts} per host" in how and f"{hosts} host" in how


#: files whose every size is within 0.5-2x though a median size is not within 0.8-1.25x
EVERY_SIZE = [H800_INFO, RTX6000D, NC_A100, LEO_PAIR]


@pytest.mark.parametrize("name", EVERY_SIZE)
def test_every_size_within_the_wide_band(name):
    args, _, _ = PRICED[name]
    for sweep in sweeps(name, *args):
        assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"]), sweep["op"]


def test_info_lines_between_the_header_and_the_rows_are_read_past():
    """The pair's P2P connection INFO lines lie between the table's header and its first row: every row
    the file holds is read, and its two threads' ranks are the two '#  Rank' lines."""
    text = (DATA / LEO_PAIR).read_text().splitlines()
    header = next(i for i, line in enumerate(text) if line.startswith("#        (B)"))
    assert "NCCL INFO" in text[header + 1]
    (sweep,) = sweeps(LEO_PAIR)
    ((_, ranks, _, rows),) = runs_in_file(LEO_PAIR)
    assert (sweep["op"], sweep["group_size"], len(sweep["rows"])) == ("sendrecv", ranks, len(rows))


def test_the_info_lines_and_the_unchecked_rows_of_the_h800_run_are_read_past():
    """The run's NCCL INFO lines lie between its device lines and its table, and validation was off
    (``validation: 0``, every ``#wrong`` cell N/A): the version is the one its ``NCCL version`` line
    states and no row is counted wrong."""
    text = (DATA / H800_INFO).read_text()
    (line,) = [e for e in text.splitlines() if e.startswith("NCCL version")]
    stated = line.split()[2].split("+")[0]
    assert "validation: 0" in text
    (sweep,) = sweeps(H800_INFO)
    assert sweep["nccl_version"] == stated
    assert not any(r["wrong"] for r in sweep["rows"])


@pytest.mark.parametrize("name", sorted(n for n, (_, _, ok) in PRICED.items() if ok))
def test_runs_within_both_bands(name):
    args, _, _ = PRICED[name]
    for sweep in sweeps(name, *args):
        assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"]), sweep["op"]
        assert 0.8 <= median_size_ratio(sweep) <= 1.25, sweep["op"]


def test_the_leonardo_pair_moves_its_large_sends_over_its_four_links():
    """The post's ``nvidia-smi topo -m`` shows NV4 between each pair of the node's 4 GPUs (no NVSwitch), so a
    send between two of them has 4 NVLink3 links, NCCL's 20 GB/s each (``topo.h`` ``SM80_NVLINK_BW``): 80
    GB/s, not the 12 links a GPU has to the NVSwitches of an 8-GPU board. From 128 MiB, where the file's
    sends run at 72-73 GB/s (counted from its rows), the predicted time is the bytes over 80 GB/s, within a
    tenth for the latency and the channels' rounding."""
    (sweep,) = sweeps(LEO_PAIR)
    assert sweep["topology"] == "leonardo-booster"
    big = [r for r in sweep["rows"] if r["bytes"] >= 128 << 20]
    (_, _, _, rows), = runs_in_file(LEO_PAIR)
    assert len(big) == sum(size >= 128 << 20 for size, _ in rows) == 5
    for r in big:
        assert r["predicted_s"] == pytest.approx(r["bytes"] / (4 * 20e9), rel=0.1)
        assert 0.85 <= r["ratio"] <= 1.0
