"""check on public nccl-tests sweeps of older machines and releases (2019-2021): ABCI 2.0's A100 and V100
nodes under NCCL 2.8.4 (one to 32 nodes) and a 2019 run of 16 V100 SXM2 32 GB on two AWS hosts under NCCL
2.4.6, all in nccl-tests' layout before Aug 2022 (``#   Rank  0 Pid`` device lines without a group, an
``error`` column, per-test lead columns), and the pre-2022 layouts told apart when nothing names the test;
and an rccl-tests excerpt a page filtered with egrep: four runs on 1-8 nodes of 8 MI325X, three rows each
under a '====== N-node ======' line, with no header, device lines or test named.

Expected figures are read off the files (tests/data/traces/README.md) by a plain split, not through zerocalc:
rows (:func:`old_rows`), device lines (:func:`sweep_files.device_lines`); the test each file ran
is the one its source names (the job script's ``all_reduce_perf``, SuperBench's log file names).
"""

import json
import shutil

import pytest
from sweep_files import DATA, check_json, device_lines, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()

A100_2N = "all_reduce_perf-16xA100-SXM4-40GB-abci-2nodes-nccl2.8.4.txt"
A100_16N = "all_reduce_perf-128xA100-SXM4-40GB-abci-16nodes-nccl2.8.4.txt"
A100_1N = "all_reduce_perf-8xA100-SXM4-40GB-abci-1node-nccl2.8.4.txt"
V100_2N = "all_reduce_perf-8xV100-SXM2-16GB-abci-2nodes-nccl2.8.4.txt"
V100_8N = "all_reduce_perf-32xV100-SXM2-16GB-abci-8nodes-nccl2.8.4.txt"
V100_32N = "all_reduce_perf-128xV100-SXM2-16GB-abci-32nodes-nccl2.8.4.txt"
V100_1N = "all_reduce_perf-4xV100-SXM2-16GB-abci-1node-nccl2.8.4.txt"
V100_AWS = "all_reduce_perf-16xV100-SXM2-32GB-aws-2nodes-pkb.txt"

#: file → (options a user gives: the release the source states, and a preset where none is picked)
ABCI = {name: ("--nccl-version", "2.8.4") for name in (A100_2N, A100_16N, A100_1N, V100_2N, V100_8N,
                                                       V100_32N, V100_1N)}
#: NCCL 2.4.6 (its own 'NCCL version' line) is older than any release modelled: priced as 2.8, on the
#: nearest preset (8 V100 SXM2 in NVLink's hybrid cube-mesh)
ARGS = {**ABCI, V100_AWS: ("--topology", "dgx-1-v100", "--nccl-version", "2.8")}


def old_rows(name):
    """(size, out-of-place µs, in-place µs) of each row, counted from the file by a plain split: before Aug
    2022 a row is ``size count type``, the test's lead cells (none, ``redop``, ``root`` or both), then eight
    cells, ``time algbw busbw error`` out of place and in place."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if 11 <= len(f) <= 13 and f[0].isdigit() and f[1].isdigit():
            lead = len(f) - 11
            rows.append((int(f[0]), float(f[3 + lead]), float(f[7 + lead])))
    return rows


def _hosts(name):
    return len({host for host, _ in device_lines(name)})


@pytest.mark.parametrize("name", sorted(ARGS))
def test_older_sweeps_read_as_their_files_count_them(name):
    sweep = check_json(name, *ARGS[name], counted=old_rows)
    ranks = device_lines(name)
    assert ranks and sweep["op"] == "all_reduce"
    assert sweep["group_size"] == len(ranks)
    assert len(sweep["rows"]) == len(old_rows(name)) > 0


def test_abci_nodes_pick_the_preset_of_their_gpus_slots_and_keep_each_hosts_gpus():
    # A100-SXM4-40GB and Tesla V100-SXM2-16GB (the names older drivers print, without 'NVIDIA') at ABCI's
    # nodes' PCI slots (tests/test_abci_slots.py): the abci-a and abci-v presets, not the DGX A100 and
    # DGX-1 the GPU names alone pick, each host's GPUs a node as its device lines count them
    for name, preset in ((A100_2N, "abci-a"), (V100_8N, "abci-v")):
        res = runner.invoke(app, ["check", str(DATA / name), *ARGS[name]])
        assert res.exit_code == 0, res.output
        head = res.output.splitlines()[0]
        assert f"topology {preset}" in head
        gpus = {gpu for _, gpu in device_lines(name)}
        per_host = len(device_lines(name)) // _hosts(name)
        assert gpus == {"A100-SXM4-40GB"} if preset == "abci-a" else {"Tesla V100-SXM2-16GB"}
        assert f"{per_host} per host, {_hosts(name)} hosts" in head


def test_two_v100_nodes_of_abci_are_within_half_and_twice_at_every_size():
    sweep = check_json(V100_2N, *ARGS[V100_2N], counted=old_rows)
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"]), [r["ratio"] for r in sweep["rows"]]


def test_nccl_2_4_is_refused_by_name_not_priced_as_another_release():
    res = runner.invoke(app, ["check", str(DATA / V100_AWS), "--topology", "dgx-1-v100"])
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert "NCCL 2.4.6 is not modelled" in line


#: bundled file → the test its source names (SuperBench's tests/data file names: nccl_allreduce.log …;
#: ABCI's job script runs all_reduce_perf; PerfKitBenchmarker's nccl_benchmark runs all_reduce_perf),
#: and options where no preset is picked
NEUTRAL = {
    "all_reduce_perf-8xA100-SXM4-40GB-g8-superbench.txt": ("all_reduce", ()),
    "reduce_scatter_perf-8xA100-SXM4-40GB-g8-superbench.txt": ("reduce_scatter", ()),
    "all_gather_perf-8xA100-SXM4-40GB-g8-superbench.txt": ("all_gather", ()),
    "broadcast_perf-8xA100-SXM4-40GB-g8-superbench.txt": ("broadcast", ()),
    "reduce_perf-8xA100-SXM4-40GB-g8-superbench.txt": ("reduce", ()),
    "alltoall_perf-8xA100-SXM4-40GB-g8-superbench.txt": ("all_to_all", ()),
    A100_2N: ("all_reduce", ARGS[A100_2N]),
    V100_AWS: ("all_reduce", ARGS[V100_AWS]),
}


@pytest.mark.parametrize("name", sorted(NEUTRAL))
def test_pre2022_tables_tell_their_test_under_any_file_name(tmp_path, name):
    # a job's output file (ABCI's 'job02.sh.7194279.nccl') names no test: the pre-2022 lead columns
    # (redop; root; redop root; neither) and the size/count ratio tell it, and the rows are priced as
    # under the file's own name
    op, args = NEUTRAL[name]
    path = tmp_path / "job02.sh.7194279.nccl"
    shutil.copyfile(DATA / name, path)
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["op"] == op
    named = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    (as_named,) = json.loads(named.stdout)["sweeps"]
    assert sweep["rows"] == as_named["rows"] != []
    assert {s for s, _, _ in old_rows(name) if s} >= {r["bytes"] for r in sweep["rows"]}


MI325X_EGREP = "all_reduce_perf-8to64xMI325X-1to8nodes-egrep-rccl2.22.3.txt"
#: the page's script: ROCm 6.4.1 (RCCL 2.22.3), NCCL_ALGO=Ring; the GPUs the page names
MI325X_ARGS = ("--topology", "amd-mi325x", "--nccl-version", "2.22.3", "--nccl-algo", "Ring")


def egrep_blocks(name):
    """{ranks: [(size, out-of-place µs)]} by a plain split: each '====== N-node ======' line opens the rows
    of N nodes of 8 GPUs (the page's 'mpirun -np 8N -H host:8,…')."""
    blocks, ranks = {}, None
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) == 3 and f[0] == f[2] == "======":
            ranks = 8 * int(f[1].split("-")[0])
            blocks[ranks] = []
        elif ranks and len(f) == 13 and f[0].isdigit():
            blocks[ranks].append((int(f[0]), float(f[5])))
    return blocks


def test_mi325x_egrep_excerpt_reads_four_runs_by_their_bandwidths_within_both_bands():
    # no header, no device lines, no test named: each run's 4-16 GiB rows, its ranks from busbw/algbw
    res = runner.invoke(app, ["check", str(DATA / MI325X_EGREP), "--format", "json", *MI325X_ARGS])
    assert res.exit_code == 0, res.output
    sweeps = json.loads(res.stdout)["sweeps"]
    blocks = egrep_blocks(MI325X_EGREP)
    assert [s["group_size"] for s in sweeps] == sorted(blocks) == [8, 16, 32, 64]
    for s in sweeps:
        assert s["op"] == "all_reduce"
        assert [(r["bytes"], r["measured_s"]) for r in s["rows"]] == [
            (b, pytest.approx(t * 1e-6)) for b, t in blocks[s["group_size"]]]
        assert all(0.8 <= r["ratio"] <= 1.25 for r in s["rows"]), [r["ratio"] for r in s["rows"]]


V100_OCI_G8 = "all_reduce_perf-8xV100-SXM2-16GB-oci-bm-gpu3-g8-1G.txt"
V100_A2A_G2 = "alltoall_perf-4xV100-SXM2-16GB-2nodes-g2.txt"


@pytest.mark.parametrize("name,op", [(V100_OCI_G8, "all_reduce"), (V100_A2A_G2, "all_to_all")])
def test_v100_runs_of_2023_2025_pick_the_dgx1_preset_and_meet_both_bands(name, op):
    # no NCCL version printed: priced at the latest release modelled, as a new user's first check
    sweep = check_json(name, counted=lambda n: [r for r in file_rows(n) if r[0]])  # zero-size rows: no call
    assert sweep["op"] == op and sweep["group_size"] == len(device_lines(name))
    sized = sweep["rows"]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sized), [r["ratio"] for r in sized]
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


V100_GKE_FLUX = "all_reduce_perf-2xV100-gke-flux-1pernode-socket.txt"


def test_flux_pods_on_gke_read_through_the_blank_line_and_the_memory_note():
    # a blank line inside the table and '# Reducing maxBytes' before it: every row is read, 8 B to 2 GiB;
    # 2 pods of one V100 each, VMs of one GPU: priced over NCCL's socket transport (the file naming no
    # network; tests/test_nccl_socket_transport.py)
    sweep = check_json(V100_GKE_FLUX)
    assert sweep["op"] == "all_reduce" and sweep["group_size"] == len(device_lines(V100_GKE_FLUX)) == 2
    assert {host for host, _ in device_lines(V100_GKE_FLUX)} == {"flux-sample-0", "flux-sample-1"}
    assert len(sweep["rows"]) == len(file_rows(V100_GKE_FLUX)) == 29


def test_abci_a_is_the_node_abci_describes():
    # ABCI's system overview: Compute Node (A) holds 8 A100 SXM4 40 GB on NVSwitch, 2 Intel Xeon Platinum
    # 8360Y and 4 InfiniBand HDR (200 Gb/s) a node, half the DGX A100's 8
    from zerocalc.topology import PRESETS

    abci, dgx = PRESETS["abci-a"], PRESETS["dgx-a100"]
    assert (abci.gpus_per_node, abci.nics_per_node, abci.nic_Gbps, abci.cpu_vendor) == (8, 4, 200.0, "intel")
    assert (abci.nvlinks_per_gpu, abci.nvswitch_gen, abci.compute_capability) == (
        dgx.nvlinks_per_gpu, dgx.nvswitch_gen, dgx.compute_capability)
    assert abci.inter.bw_Bps == pytest.approx(dgx.inter.bw_Bps / 2)


def test_two_abci_a_nodes_are_not_priced_past_their_four_nics():
    # A ring all-reduce of n bytes over 2 nodes sends 2·(r-1)/r·n through each node's network (r = 16
    # ranks): 32 MiB over 4 × 25 GB/s takes at least 0.63 ms. The DGX A100's 8 NICs price the call under
    # that bound; ABCI's 4, the preset its GPUs' slots pick, do not.
    size, ranks = 32 << 20, len(device_lines(A100_2N))
    bound = 2 * (ranks - 1) / ranks * size / (4 * 25e9)
    rows = {p: {r["bytes"]: r for r in check_json(A100_2N, *ARGS[A100_2N], *p, counted=old_rows)["rows"]}
            for p in ((), ("--topology", "dgx-a100"))}
    assert rows[("--topology", "dgx-a100")][size]["predicted_s"] < bound
    assert rows[()][size]["predicted_s"] >= bound


@pytest.mark.parametrize("name", [A100_2N, A100_16N])
def test_abci_a_nodes_on_their_preset(name):
    # On dgx-a100 18 of the 24 sizes of each are within 0.5-2x (8 NICs a node price 4-32 MiB 0.25-0.45x);
    # on abci-a every size is but the 32 MiB call of 2 nodes (0.47x: 33 GB/s of bus bandwidth where NCCL's
    # ring over 4 NICs prices 82) and the 128 KiB call of 16 nodes, whose out-of-place time is 1.57x its
    # in-place one in the file (an unsteady row)
    sweep = check_json(name, *ARGS[name], "--topology", "abci-a", counted=old_rows)
    assert sweep["topology"] == "abci-a"
    unsteady = {s for s, out, inp in old_rows(name) if out > 1.25 * inp}
    out = {r["bytes"] for r in sweep["rows"] if not 0.5 <= r["ratio"] <= 2.0}
    if name == A100_2N:
        assert out == {32 << 20}
    else:
        assert out == unsteady == {128 << 10}
    assert all(r["ratio"] >= 0.43 for r in sweep["rows"])
