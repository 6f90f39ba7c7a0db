"""Ranks the device lines put on one GPU of one host under an NCCL that refuses it (src/init.cc,
"Duplicate GPU detected", v2.9.9-v2.29.7): read as the hosts NCCL told apart
(:mod:`zerocalc.topology.renamed_hosts`). Expected values are read off the files by a plain split, and
a file whose host names were masked is priced as the same file with its names."""

import json
import re

from sweep_files import DATA
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.topology.renamed_hosts import hosts_apart

runner = CliRunner()
XE9680 = DATA / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"  # 2 hosts x 8 H100, NCCL 2.26.2
EBPF = DATA / "tag-output-allreduce-allgather-2ranks.txt"  # 2 ranks on one RTX 5090, NCCL 2.29.7


def _sweeps(path):
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


def test_host_names_masked_by_one_placeholder_price_as_the_named_file(tmp_path):
    text = XE9680.read_text()
    hosts = sorted(set(re.findall(r"#\s+Rank\s+\d+ .* on\s+(\S+) device", text)))
    assert len(hosts) == 2 and "NCCL version 2.26.2" in text
    masked = tmp_path / "all_reduce_perf.txt"
    names = "|".join(map(re.escape, hosts))
    masked.write_text(re.sub(r"( on\s+)(" + names + r")( device)", r"\1xxxxxx\3", text))
    (named,), (read,) = _sweeps(XE9680), _sweeps(masked)
    assert read["group_size"] == named["group_size"] == 16 and read["topology"] == named["topology"]
    assert "ranks 0, 8 share one host name and GPU (xxxxxx, 0000:19:00)" in read["topology_how"]
    assert "read as 2 hosts of 8 GPUs" in read["topology_how"]
    assert [r["predicted_s"] for r in read["rows"]] == [r["predicted_s"] for r in named["rows"]]


def test_ranks_on_one_gpu_under_nccl_hostid_are_two_hosts():
    """The eBPF study's two ranks on one RTX 5090 (NCCL 2.29.7; the study sets NCCL_HOSTID per rank and
    runs NCCL's socket transport between them): two hosts of one GPU, each sweep of the file."""
    lines = [ln for ln in EBPF.read_text().splitlines() if "#  Rank" in ln]
    assert {ln.split(" on ")[1].split()[0] for ln in lines} == {"lab"}
    sweeps = _sweeps(EBPF)
    assert [s["op"] for s in sweeps] == ["all_reduce", "all_gather"]
    assert all(s["group_size"] == 2 and "read as 2 hosts of 1 GPU" in s["topology_how"] for s in sweeps)


def test_uneven_copies_later_nccl_and_amd_gpus_are_left_as_listed():
    run = {"shared_devices": [["h", "0000:19:00", [0, 2]]], "gpus": {"NVIDIA H100 80GB HBM3": 3},
           "hosts": {"h": 3}, "bus_ids": {"h": ["0000:19:00", "0000:3b:00", "0000:19:00"]}}
    assert hosts_apart(run, "2.26.2") is None  # 19:00 twice, 3b:00 once: not copies of one host
    even = {**run, "hosts": {"h": 4}, "bus_ids": {"h": ["0000:19:00", "0000:3b:00"] * 2}}
    assert hosts_apart(even, "2.26.2")[0]["hosts"] == {"h (1 of 2)": 2, "h (2 of 2)": 2}
    assert hosts_apart(even, "2.30.7") is None and hosts_apart(even, None) is None
    assert hosts_apart({**even, "gpus": {"AMD Instinct MI300X": 4}}, "2.22.3") is None
