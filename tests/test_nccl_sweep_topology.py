"""check SWEEP without --topology: the preset the file's '#  Rank' device lines describe, or one line."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.topology.devices import preset_for_devices, preset_for_gpu

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
runner = CliRunner()


def device_lines(path):
    """(rank, host, device name) of each '#  Rank' line, read from the file with a plain split."""
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        if "Rank" in f and "device" in f and "on" in f:
            d = f.index("device")
            out.append((int(f[f.index("Rank") + 1]), f[f.index("on") + 1], " ".join(f[d + 3:])))
    return out


def shares_a_gpu(path):
    """Whether '#  Rank' lines of two rank numbers name one host and one full bus id (nccl-tests 2.10 on):
    ranks on one GPU (a file of several runs lists each rank once a run)."""
    fields = map(str.split, path.read_text().splitlines())
    seen = {(f[f.index("Rank") + 1], f[f.index("on") + 1], f[f.index("device") + 2]) for f in fields
            if "Rank" in f and "device" in f and "on" in f and len(f) > f.index("device") + 2}
    return len({(h, b) for _, h, b in seen}) < len(seen) and all(b.count(":") == 2 for _, _, b in seen)


#: The preset of each GPU model the bundled sweeps name (the datasheets each preset cites; the PCIe
#: cards' product pages: RTX 2080 Ti PCIe 3.0 x16, A100 PCIe PCIe 4.0 x16, V100 PCIe PCIe 3.0 x16, A10G and
#: L40S PCIe 4.0 x16).
PRESET_OF = {"NVIDIA H100 80GB HBM3": "dgx-h100", "NVIDIA H200": "dgx-h200", "NVIDIA B200": "dgx-b200",
             "NVIDIA A100-SXM4-40GB": "dgx-a100", "NVIDIA A100-SXM4-80GB": "dgx-a100",
             "NVIDIA GeForce RTX 2080 Ti": "pcie-gen3", "NVIDIA A100-PCIE-40GB": "pcie-gen4",
             "Tesla V100-PCIE-16GB": "pcie-gen3", "NVIDIA A10G": "pcie-gen4", "NVIDIA L40S": "pcie-gen4",
             "A100-SXM4-40GB": "dgx-a100",  # the name as drivers before 2021 printed it (no "NVIDIA ")
             "Tesla V100-SXM2-16GB": "dgx-1-v100", "NVIDIA GeForce RTX 4090": "pcie-gen4",
             "NVIDIA GH200 120GB": "gh200", "NVIDIA GB200": "gb200-nvl72", "NVIDIA GB300": "gb300-nvl72",
             "NVIDIA A800-SXM4-80GB": "hgx-a800",  # the export part: 8 NVLink3 links, not the A100's 12
             "NVIDIA GB10": "dgx-spark",  # DGX Spark data sheet: one GB10 superchip a box
             "AMD Instinct MI300X": "amd-mi300x",  # AMD's 8-GPU OAM platform (the preset's data sheet)
             "AMD Instinct MI300X VF": "amd-mi300x",  # its virtual functions (an Azure VM's 8 GPUs)
             "NVIDIA H20": "hgx-h20",  # the HGX H20 product brief: 8 SXM GPUs on NVSwitches
             "NVIDIA GeForce RTX 5090": "pcie-gen5",  # NVIDIA's RTX 5090 page: PCIe 5.0 x16
             "AMD Instinct MI355X": "amd-mi355x"}  # AMD's MI355X platform: 8 OAM GPUs on xGMI


def run_check(*args):
    return runner.invoke(app, ["check", *map(str, args)])


def priced(res):
    """The sweeps ``check --format json`` priced (a collective the library's model leaves unpriced has no
    rows)."""
    return [s for s in json.loads(res.stdout)["sweeps"] if s["rows"]]


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.txt")))
def test_every_bundled_sweep_gets_its_preset_or_one_line(name):
    """Every bundled nccl-tests file without --topology: the preset its device lines state, with the
    counts read from the file, or exit 2 and one line naming the option the file leaves to the user."""
    lines = device_lines(DATA / name)
    res = run_check(DATA / name, "--format", "json")
    gpus = {g for _, _, g in lines}
    ranks = [r for r, _, _ in lines]
    if len(set(ranks)) < len(ranks) and not shares_a_gpu(DATA / name):  # processes each with its own run
        assert res.exit_code == 0, res.output
        assert {s["group_size"] for s in json.loads(res.stdout)["sweeps"]} == {len(set(ranks))}
        return
    excerpt = bool(lines) and max(r for r, _, _ in lines) >= len(lines)
    if lines and len(gpus) == 1 and next(iter(gpus)) in PRESET_OF and excerpt:
        # an excerpt (the lines name a rank past their count): the preset, the ranks from its rows, else --n
        assert res.exit_code in (0, 2), res.output
        if res.exit_code == 0:
            (sweep,) = priced(res)
            assert sweep["topology"] == PRESET_OF[next(iter(gpus))]
            assert sweep["group_size"] > max(r for r, _, _ in lines)
            assert f"{len(lines)} of its {sweep['group_size']} ranks listed" in sweep["topology_how"]
        else:
            assert "--n" in res.stderr
        return
    if len(lines) > 1 and len(gpus) == 1 and next(iter(gpus)) in PRESET_OF and not shares_a_gpu(DATA / name):
        # (a PCIe card's hosts over NCCL's socket transport too: the card's box, its NIC NCCL's socket figure)
        assert res.exit_code == 0, res.output
        (gpu,) = gpus
        hosts = {h for _, h, _ in lines}
        (sweep,) = priced(res)
        assert sweep["topology"] == PRESET_OF[gpu]
        assert sweep["group_size"] == len(lines)
        per_host = len(lines) // len(hosts)
        assert sweep["topology_how"].startswith(f"from the file's device lines: {gpu}, {per_host} per host, "
                                                f"{len(hosts)} host{'s' * (len(hosts) > 1)}")
        return
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert "Traceback" not in res.output
    assert "--topology" in line or "--n" in line or "no nccl-tests result rows" in line \
        or "cannot tell the collective" in line
    if lines and "--topology" in line:  # a GPU no preset describes: named, with the presets
        assert next(iter(gpus)) in line and "dgx-h100" in line and "pcie-gen4" in line


def test_bundled_h100_sweep_text_says_where_its_topology_and_version_come_from():
    name = DATA / "all_reduce_perf-16xH100-2nodes.txt"
    res = run_check(name)
    assert res.exit_code == 0, res.output
    first = res.stdout.splitlines()[0]
    assert first.endswith("topology dgx-h100, from the file's device lines: NVIDIA H100 80GB HBM3, "
                          "8 per host, 2 hosts")
    assert "states no NCCL version; priced as NCCL" in res.stdout
    doc = json.loads(run_check(name, "--format", "json").stdout)
    assert doc["sweeps"][0]["nccl_version_how"].startswith("default")


def test_topology_given_always_wins():
    name = DATA / "all_reduce_perf-16xH100-2nodes.txt"
    res = run_check(name, "--format", "json", "--topology", "gcp-a3-mega", "--nccl-version", "2.21.5")
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert (sweep["topology"], sweep["topology_how"]) == ("gcp-a3-mega", "given (--topology)")
    assert (sweep["nccl_version"], sweep["nccl_version_how"]) == ("2.21.5", "given (--nccl-version)")
    # a file with no device lines is checked as before when the topology is given
    res = run_check(DATA / "all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt", "--format", "json", "--n", "16",
                    "--topology", "dgx-b200")
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert (sweep["nccl_version"], sweep["nccl_version_how"]) == ("2.26.2", "stated by the file")


def _with_hosts(tmp_path, hosts):
    """The bundled 16xH100 sweep with its first len(hosts) rank lines kept, put on ``hosts`` (its rows
    are 16 ranks' still: checked with ``--n`` equal to the lines kept)."""
    src = (DATA / "all_reduce_perf-16xH100-2nodes.txt").read_text().splitlines(True)
    out, k = [], 0
    for line in src:
        m = re.match(r"(#\s+Rank\s+)(\d+)(.* on )(\S+)( device.*)", line)
        if m:
            if k < len(hosts):
                out.append(f"{m[1]}{k:2d}{m[3]}{hosts[k]}{m[5]}\n")
            k += 1
            continue
        out.append(line)
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("".join(out))
    return path


def test_four_ranks_per_host_make_nodes_of_four(tmp_path):
    path = _with_hosts(tmp_path, ["a"] * 4 + ["b"] * 4)
    res = run_check(path, "--format", "json", "--n", "8")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["group_size"] == 8
    assert sweep["topology_how"] == ("from the file's device lines: NVIDIA H100 80GB HBM3, 4 per host, "
                                     "2 hosts (nodes of 4 GPUs and 4 NICs)")
    # 2 nodes: the large sizes go over the network, slower than the 8 GPUs of one DGX H100 (one host)
    (tmp_path / "one").mkdir()
    one_host = _with_hosts(tmp_path / "one", ["a"] * 8)
    one = json.loads(run_check(one_host, "--format", "json", "--topology", "dgx-h100", "--n", "8")
                     .stdout)["sweeps"][0]
    assert sweep["rows"][-1]["predicted_s"] > 1.5 * one["rows"][-1]["predicted_s"]
    # --topology given: its nodes still hold the 4 ranks each host runs
    given = json.loads(run_check(path, "--format", "json", "--topology", "dgx-h100", "--n", "8")
                       .stdout)["sweeps"][0]
    assert given["topology_how"] == ("given (--topology); nodes of 4 GPUs and 4 NICs, as the file's device "
                                     "lines list 4 ranks on each of 2 hosts")
    assert [r["predicted_s"] for r in given["rows"]] == [r["predicted_s"] for r in sweep["rows"]]


def test_uneven_hosts_and_unknown_gpus_are_refused(tmp_path):
    res = run_check(_with_hosts(tmp_path, ["a"] * 5 + ["b"] * 3), "--n", "8")
    assert res.exit_code == 2
    assert "different numbers of ranks (a 5, b 3)" in res.stderr and "--topology" in res.stderr
    with pytest.raises(ConfigError, match="several GPU models"):
        preset_for_devices({"NVIDIA H100 80GB HBM3": 8, "NVIDIA H200": 8}, {"x": 16}, where="f")
    with pytest.raises(ConfigError, match="more than the 8 GPUs"):
        preset_for_devices({"NVIDIA B200": 16}, {"x": 16}, where="f")
    res = run_check(DATA / "all_reduce_perf-16xH100-2nodes.txt", "--nccl-tuner", "x.conf")
    assert res.exit_code == 2 and "--topology" in res.stderr


@pytest.mark.parametrize("gpu,preset", [
    ("NVIDIA A100-SXM4-40GB", "dgx-a100"), ("NVIDIA A100-SXM4-80GB", "dgx-a100"),
    ("A100-SXM4-40GB", "dgx-a100"),
    ("NVIDIA A100-PCIE-40GB", "pcie-gen4"), ("NVIDIA A100 80GB PCIe", "pcie-gen4"),
    ("NVIDIA H100 80GB HBM3", "dgx-h100"), ("NVIDIA H200", "dgx-h200"), ("NVIDIA B200", "dgx-b200"),
    ("NVIDIA H100 PCIe", "pcie-gen5"), ("NVIDIA H100 NVL", "pcie-gen5"), ("NVIDIA H200 NVL", "pcie-gen5"),
    ("NVIDIA GeForce RTX 5090", "pcie-gen5"), ("NVIDIA GeForce RTX 4090", "pcie-gen4"),
    ("NVIDIA L40S", "pcie-gen4"), ("NVIDIA RTX A6000", "pcie-gen4"), ("NVIDIA A10G", "pcie-gen4"),
    ("Tesla V100-PCIE-16GB", "pcie-gen3"), ("NVIDIA GeForce RTX 2080 Ti", "pcie-gen3"),
    ("NVIDIA H800", "hgx-h800"),
    ("NVIDIA GH200 480GB", "gh200"), ("NVIDIA GB200", "gb200-nvl72"), ("Tesla V100-SXM2-32GB", "dgx-1-v100"),
])
def test_gpu_names(gpu, preset):
    assert preset_for_gpu(gpu) == preset


def test_a_gzipped_sweep_is_read_as_the_trace_reader_reads_it(tmp_path):
    import gzip

    src = DATA / "all_reduce_perf-16xH100-2nodes.txt"
    gz = tmp_path / "all_reduce_perf.txt.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    plain = json.loads(run_check(src, "--format", "json").stdout)["sweeps"][0]
    res = run_check(gz, "--format", "json")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert (sweep["topology"], sweep["rows"]) == (plain["topology"], plain["rows"])
