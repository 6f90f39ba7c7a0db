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
    """(rank, host, device name) of each '#  Rank' line, read from the file with a plain split; a line a page
    condensed to a span of ranks on one host ('#  Rank  0 .. Rank  7 on HOST NAME') for each rank it spans;
    host ``None`` for a line a post printed without its host ('#  Rank  0 Pid 9 device  0 [..] NAME')."""
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        if "Rank" in f and "device" in f and "on" in f:
            d = f.index("device")
            out.append((int(f[f.index("Rank") + 1]), f[f.index("on") + 1], " ".join(f[d + 3:])))
        elif f[:2] == ["#", "Rank"] and "device" in f:
            out.append((int(f[2]), None, " ".join(f[f.index("device") + 3:])))
        elif f[:2] == ["#", "Rank"] and ".." in f and "on" in f:
            at = f.index("on")
            out += [(r, f[at + 1], " ".join(f[at + 2:])) for r in range(int(f[2]), int(f[at - 1]) + 1)]
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
             "Tesla V100-PCIE-16GB": "pcie-gen3", "Tesla V100-PCIE-32GB": "pcie-gen3",
             "NVIDIA A10G": "pcie-gen4", "NVIDIA L40S": "pcie-gen4",
             "A100-SXM4-40GB": "dgx-a100",  # the name as drivers before 2021 printed it (no "NVIDIA ")
             "Tesla V100-SXM2-16GB": "dgx-1-v100", "NVIDIA GeForce RTX 4090": "pcie-gen4",
             "NVIDIA GH200 120GB": "gh200", "NVIDIA GB200": "gb200-nvl72", "NVIDIA GB300": "gb300-nvl72",
             "NVIDIA A800-SXM4-80GB": "hgx-a800",  # the export part: 8 NVLink3 links, not the A100's 12
             "NVIDIA GB10": "dgx-spark",  # DGX Spark data sheet: one GB10 superchip a box
             "AMD Instinct MI300X": "amd-mi300x",  # AMD's 8-GPU OAM platform (the preset's data sheet)
             "AMD Instinct MI300X VF": "amd-mi300x",  # its virtual functions (an Azure VM's 8 GPUs)
             "NVIDIA H20": "hgx-h20",  # the HGX H20 product brief: 8 SXM GPUs on NVSwitches
             "NVIDIA H20-3e": "hgx-h20",  # the H20 with HBM3e, on the same board (zerocalc.topology.devices)
             "NVIDIA GeForce RTX 5090": "pcie-gen5",  # NVIDIA's RTX 5090 page: PCIe 5.0 x16
             "AMD Instinct MI355X": "amd-mi355x",  # AMD's MI355X platform: 8 OAM GPUs on xGMI
             "AMD Instinct MI350X": "amd-mi350x",  # its air-cooled sibling, the same 8-OAM xGMI platform
             "NVIDIA H800": "hgx-h800",  # the export H100 SXM on the HGX board (the preset's sources)
             "NVIDIA A100 80GB PCIe": "pcie-gen4",  # the A100 PCIe card's product page: PCIe 4.0 x16
             # the custom A100 64 GB of Leonardo's Booster nodes (CINECA's overview), 4 on an NVLink mesh
             "NVIDIA A100-SXM-64GB": "leonardo-booster",
             # a plain H100 (no '80GB HBM3'): the 64/94 GB SXM5 module of the HGX H100 4-GPU board
             "NVIDIA H100": "hgx-h100-4gpu",
             # the China-market RTX PRO 6000 Blackwell derivative (zerocalc.topology.devices): PCIe 5.0 x16
             "NVIDIA RTX 6000D": "pcie-gen5",
             "Tesla T4": "pcie-gen3"}  # NVIDIA's T4 data sheet: PCIe 3.0 x16


#: The PCI slots of a GCP A3 Mega VM's eight H100s (a3-megagpu-8g): beside its eight TCPXO NICs, which
#: Google's A3 Mega scripts name enp6s0, enp7s0, enp13s0, enp14s0, enp134s0, enp135s0, enp141s0, enp142s0
#: (GoogleCloudPlatform/cluster-toolkit,
#: examples/machine-learning/a3-megagpu-8g/nccl-tests/run-nccl-tests.sh).
A3_MEGA_SLOTS = {"04", "05", "0b", "0c", "84", "85", "8b", "8c"}


def bus_slots(path):
    """host → the bus numbers of its ranks' GPUs ('[0000:04:00]' → '04'; a device other than 0 kept with
    its bus: '[0000:04:02]' → '04:02'), read with a plain split."""
    out = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if "Rank" in f and "device" in f and "on" in f:
            bus = f[f.index("device") + 2].strip("[]").split(":")
            if len(bus) == 3:
                out.setdefault(f[f.index("on") + 1], set()).add(
                    bus[1].lower() if bus[2] == "00" else ":".join(bus[1:]).lower())
    return out


#: The GPU bus numbers of AWS EC2 instances (tests/test_aws_slots.py): p4d / p4de two A100s on each of four
#: buses, p5 one H100 on each of eight; GPU name → (buses, two to a bus, preset).
AWS_SLOTS = {"NVIDIA A100-SXM4-40GB": ({0x10, 0x20, 0x90, 0xA0}, True, "aws-p4d"),
             "NVIDIA A100-SXM4-80GB": ({0x10, 0x20, 0x90, 0xA0}, True, "aws-p4de"),
             "NVIDIA H100 80GB HBM3": ({0x53, 0x64, 0x75, 0x86, 0x97, 0xA8, 0xB9, 0xCA}, False, "aws-p5")}


def _host_buses(path):
    """host → the bus number of each of its ranks' GPUs (plain split of the device lines, '[0x10]' or
    '[0000:10:1c]')."""
    hosts = {}
    for f in map(str.split, path.read_text().splitlines()):
        if "Rank" in f and "device" in f and "on" in f:
            bus = f[f.index("device") + 2].strip("[]")
            hosts.setdefault(f[f.index("on") + 1], []).append(
                int(bus, 16) if bus.startswith("0x") else int(bus.split(":")[1], 16))
    return hosts


#: The GPU bus numbers of ABCI 2.0's compute nodes in device order (tests/test_abci_slots.py, as ABCI's
#: published runs list them): GPU name → (slots, preset).
ABCI_SLOTS = {"A100-SXM4-40GB": ([0x27, 0x2A, 0x51, 0x57, 0x9E, 0xA4, 0xC7, 0xCA], "abci-a"),
              "NVIDIA A100-SXM4-40GB": ([0x27, 0x2A, 0x51, 0x57, 0x9E, 0xA4, 0xC7, 0xCA], "abci-a"),
              "Tesla V100-SXM2-16GB": ([0x3D, 0x3E, 0xB1, 0xB2], "abci-v")}


def abci_node(path, gpu):
    """The ABCI preset where every host lists its GPUs at distinct slots of the node, its GPU 0's among
    them, else None."""
    if gpu not in ABCI_SLOTS:
        return None
    slots, preset = ABCI_SLOTS[gpu]
    hosts = _host_buses(path)
    ok = all(len(set(h)) == len(h) and set(h) <= set(slots) and slots[0] in h for h in hosts.values())
    return preset if hosts and ok else None


def aws_instance(path, gpu):
    """The AWS preset whose GPU slots every one of two or more hosts lists, else None."""
    if gpu not in AWS_SLOTS:
        return None
    buses, paired, preset = AWS_SLOTS[gpu]
    hosts = _host_buses(path)
    if len(hosts) < 2 or any(b not in buses for h in hosts.values() for b in h):
        return None
    pairs = [len(set(h)) < len(h) for h in hosts.values()]
    return preset if (all(pairs) if paired else not any(pairs)) else None


def expected_preset(path, gpu):
    """The preset a file's single GPU model picks: the EC2 instance aws-ofi-nccl's INFO line names (``NET/OFI
    Running on p4d.24xlarge platform``: ``aws-p4d``), else an EC2 instance's or an ABCI 2.0 node's GPU slots
    on every host, else H100s at an A3 Mega VM's slots on every one of two or more hosts, each GPU on a bus
    of its own, are that VM's (``gcp-a3-mega``), else :data:`PRESET_OF`."""
    ec2 = re.search(r"NET/OFI Running on ([A-Za-z0-9-]+)(?:\.\S+)? platform", path.read_text())
    if ec2:
        return f"aws-{ec2.group(1).lower()}"
    by_slots = aws_instance(path, gpu) or abci_node(path, gpu)
    if by_slots:
        return by_slots
    slots, ranks = bus_slots(path), device_lines(path)
    own_bus = sum(len(s) for s in slots.values()) == len(ranks)
    if gpu == "NVIDIA H100 80GB HBM3" and len(slots) >= 2 and own_bus \
            and set().union(*slots.values()) <= A3_MEGA_SLOTS:
        return "gcp-a3-mega"
    return PRESET_OF[gpu]


def run_check(*args):
    return runner.invoke(app, ["check", *map(str, args)])


def _nccl_before_2_30(path):
    """Whether the file names an NCCL below 2.30 (its 'NCCL version 2.x' or 'nccl-library=2xxyy' line), the
    releases that refuse two ranks of a communicator on one GPU of one host (src/init.cc)."""
    text = path.read_text()
    found = re.findall(r"NCCL version 2\.(\d+)", text) + re.findall(r"nccl-library=2(\d\d)\d\d", text)
    return bool(found) and int(found[0]) < 30


def priced(res):
    """The sweeps ``check --format json`` priced (a collective the library's model leaves unpriced has no
    rows)."""
    return [s for s in json.loads(res.stdout)["sweeps"] if s["rows"]]


def _cut_after_ranks(path):
    """Whether a line of dots (a post's cut) comes right after one of the file's ``# Rank`` lines: the lines
    listed are then not all its ranks."""
    text = [t.strip() for t in path.read_text().splitlines() if t.strip()]
    pairs = zip(text, text[1:], strict=False)
    return any(" Rank " in a and b.lstrip("#").strip() in ("...", "\u2026") for a, b in pairs)


def _more_ranks_than_listed(path, listed):
    """Whether an all_reduce file's rows print busbw/algbw (2(n-1)/n) above what ``listed`` ranks give:
    '# Rank' lines a post cut short without a mark (NVIDIA/nccl-tests issue 322)."""
    if not path.name.startswith("all_reduce_perf") or listed < 2:
        return False
    rows = [f for f in map(str.split, path.read_text().splitlines())
            if len(f) >= 13 and f[0].isdigit() and f[1].isdigit() and float(f[6]) > 10]
    return bool(rows) and all(float(f[7]) / float(f[6]) > 2 * (listed - 1) / listed + 0.01 for f in rows)


def _pcie_card_over_efa(path, gpu):
    """Whether a PCIe card's file has NCCL INFO lines of AWS's EFA plugin (aws-ofi-nccl prints ``NET/OFI``):
    no PCIe box describes EFA, so check asks for --topology (the 2x T4 g4dn pair)."""
    return PRESET_OF[gpu].startswith("pcie-") and "NET/OFI" in path.read_text()


#: the element types an nccl-tests row names after its size and count (``src/common.cu`` ``test_typenames``;
#: "char" and "int" before NCCL 2, "bfloat16" from NCCL 2.10; the fp8 names of later releases, and
#: rccl-tests' own fp8 names, ROCm/rccl-tests ``src/common.cu``)
ROW_TYPES = {"char", "int", "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
             "bfloat16", "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2"}


def has_rows(path):
    """Whether any line holds an nccl-tests row: a size and a count followed by an element type, whatever
    prefix a launcher put before them (plain split; a Markdown table's bars split cells as blanks do)."""
    for f in (line.replace("|", " ").split() for line in path.read_text().splitlines()):
        triples = zip(f, f[1:], f[2:], strict=False)
        if any(a.isdigit() and b.isdigit() and t in ROW_TYPES for a, b, t in triples):
            return True
    return False


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.txt")))
def test_every_bundled_sweep_gets_its_preset_or_one_line(name):
    """Every bundled nccl-tests file without --topology: the preset its device lines state, with the
    counts read from the file, or exit 2 and one line naming the option the file leaves to the user (or,
    for an output that stopped before its first row, saying so)."""
    lines = device_lines(DATA / name)
    res = run_check(DATA / name, "--format", "json")
    if not has_rows(DATA / name):
        assert res.exit_code == 2 and "Traceback" not in res.output
        (line,) = res.stderr.strip().splitlines()
        assert "no nccl-tests result rows" in line
        return
    gpus = {g for _, _, g in lines}
    ranks = [r for r, _, _ in lines]
    if shares_a_gpu(DATA / name) and _nccl_before_2_30(DATA / name):  # hosts NCCL told apart: priced
        assert res.exit_code == 0, res.output
        assert {s["group_size"] for s in json.loads(res.stdout)["sweeps"]} == {len(set(ranks))}
        return
    if len(set(ranks)) < len(ranks) and not shares_a_gpu(DATA / name):  # processes each with its own run
        assert res.exit_code == 0, res.output
        assert {s["group_size"] for s in json.loads(res.stdout)["sweeps"]} == {len(set(ranks))}
        return
    excerpt = bool(lines) and (max(r for r, _, _ in lines) >= len(lines) or _cut_after_ranks(DATA / name)
                               or _more_ranks_than_listed(DATA / name, len(lines)))
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
    if lines and {h for _, h, _ in lines} == {None} and len(gpus) == 1:  # lines a post printed without hosts
        assert res.exit_code == 0, res.output
        ((sweep,), (gpu,)) = priced(res), gpus
        assert (sweep["topology"], sweep["group_size"]) == (PRESET_OF[gpu], len(lines))
        told = f"from the file's device lines: {gpu}, its {len(lines)} ranks listed without their hosts"
        assert sweep["topology_how"].startswith(told)
        return
    if len(lines) > 1 and len(gpus) == 1 and next(iter(gpus)) in PRESET_OF and not shares_a_gpu(DATA / name) \
            and not _pcie_card_over_efa(DATA / name, next(iter(gpus))):
        # (a PCIe card's hosts over NCCL's socket transport too: the card's box, its NIC NCCL's socket figure)
        assert res.exit_code == 0, res.output
        (gpu,) = gpus
        hosts = {h for _, h, _ in lines}
        per_host = len(lines) // len(hosts)
        sweeps = priced(res)  # one per series of the table (nccl-tests -d all: one per data type)
        rows = [f for f in map(str.split, (DATA / name).read_text().splitlines())
                if len(f) == 13 and f[0].isdigit() and f[1].isdigit()]
        assert len(sweeps) in (1, len({(f[2], f[3]) for f in rows}))
        for sweep in sweeps:
            assert sweep["topology"] == expected_preset(DATA / name, gpu)
            assert sweep["group_size"] == len(lines)
            assert sweep["topology_how"].startswith(f"from the file's device lines: {gpu}, {per_host} per "
                                                    f"host, {len(hosts)} host{'s' * (len(hosts) > 1)}")
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
    assert "topology gcp-a3-mega, from the file's device lines: NVIDIA H100 80GB HBM3, 8 per host, " \
        "2 hosts; its GPUs' PCI slots (04 05 0b 0c 84 85 8b 8c on every host) are a GCP A3 Mega VM's" in first
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
    are 16 ranks' still: checked with ``--n`` equal to the lines kept), its GPUs moved from the A3 Mega VM's
    PCI slots to an HGX H100 host's (those of the bundled ``five-tests-8xH100-1node-nccl2.29.2.log``), so the
    lines name the GPU and the hosts, not a cloud VM."""
    src = (DATA / "all_reduce_perf-16xH100-2nodes.txt").read_text().splitlines(True)
    hgx = dict(zip(sorted(A3_MEGA_SLOTS), ("1b", "43", "52", "61", "9d", "c3", "d1", "df"), strict=True))
    out, k = [], 0
    for line in src:
        m = re.match(r"(#\s+Rank\s+)(\d+)(.* on )(\S+)( device.*)", line)
        if m:
            if k < len(hosts):
                rest = re.sub(r"\[0000:([0-9a-f]{2}):", lambda b: f"[0000:{hgx.get(b[1], b[1])}:", m[5])
                out.append(f"{m[1]}{k:2d}{m[3]}{hosts[k]}{rest}\n")
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
    ("NVIDIA B300 SXM6 AC", "dgx-b300"), ("NVIDIA B300", "dgx-b300"), ("NVIDIA GB300", "gb300-nvl72"),
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


def test_h100s_at_gcp_a3_mega_slots_pick_its_preset_and_nothing_else_does():
    """The bundled TCPXO sweep's GPUs sit at A3 Mega's slots on both hosts (counted from its lines): without
    --topology it is priced on gcp-a3-mega, with that VM's NCCL profile. The same GPUs at other slots, on one
    host, or with an INFO line naming InfiniBand stay dgx-h100."""
    name = DATA / "all_reduce_perf-16xH100-2nodes.txt"
    slots = bus_slots(name)
    assert len(slots) == 2 and all(s == A3_MEGA_SLOTS for s in slots.values())
    doc = json.loads(run_check(name, "--format", "json", "--nccl-version", "2.21.5").stdout)["sweeps"][0]
    assert doc["topology"] == "gcp-a3-mega"
    assert any("NCCL_PROTO=Simple" in n for n in doc["notes"])
    given = json.loads(run_check(name, "--format", "json", "--nccl-version", "2.21.5", "--topology",
                                 "gcp-a3-mega").stdout)["sweeps"][0]
    assert [r["predicted_s"] for r in doc["rows"]] == [r["predicted_s"] for r in given["rows"]]
    gpu = {"NVIDIA H100 80GB HBM3": 16}
    hosts = {"a": 8, "b": 8}
    ids = {h: [f"0000:{s}:00" for s in sorted(A3_MEGA_SLOTS)] for h in hosts}
    assert preset_for_devices(gpu, hosts, where="f", bus_ids=ids)[0].name == "gcp-a3-mega"
    other = {h: [f"0000:{s}:00" for s in ("1b", "43", "52", "61", "9d", "c3", "d1", "df")] for h in hosts}
    assert preset_for_devices(gpu, hosts, where="f", bus_ids=other)[0].name == "dgx-h100"
    one = {"a": ids["a"]}
    assert preset_for_devices({"NVIDIA H100 80GB HBM3": 8}, {"a": 8}, where="f", bus_ids=one)[0].name \
        == "dgx-h100"
    shared = {h: [f"0000:04:{d:02x}" for d in range(0, 16, 2)] for h in hosts}  # one bus, 8 devices
    assert preset_for_devices(gpu, hosts, where="f", bus_ids=shared)[0].name == "dgx-h100"
    ib = {"ib": (12, "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB")}
    assert preset_for_devices(gpu, hosts, where="f", bus_ids=ids, network=ib)[0].name == "dgx-h100"


@pytest.mark.parametrize("gpu", ["NVIDIA B300 SXM6 AC", "NVIDIA B300"])
def test_a_b300_sweep_is_priced_on_dgx_b300_without_being_told(tmp_path, gpu):
    """A sweep whose device lines name B300s (the two-host H100 sweep with its GPU renamed) is checked as a
    new user would, without --topology: on dgx-b300, two nodes of its 8 ranks a host, every row priced."""
    src = DATA / "all_reduce_perf-16xH100-2nodes.txt"
    path = tmp_path / "all_reduce_perf-16xB300.txt"
    path.write_text(src.read_text().replace("NVIDIA H100 80GB HBM3", gpu))
    res = run_check(path, "--format", "json")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    hosts = {f[f.index("on") + 1] for f in map(str.split, path.read_text().splitlines())
             if "Rank" in f and "device" in f and "on" in f}
    sizes = [int(f[0]) for f in map(str.split, path.read_text().splitlines())
             if len(f) >= 13 and f[0].isdigit() and f[1].isdigit()]
    assert (sweep["topology"], sweep["group_size"], len(hosts)) == ("dgx-b300", 16, 2)
    assert [r["bytes"] for r in sweep["rows"]] == sizes
    assert all(r["predicted_s"] > 0 for r in sweep["rows"])
