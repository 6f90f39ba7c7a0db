"""The CUDA release NCCL was built with, as its version line states it (``NCCL version 2.18.3+cuda11.8``), and
the one rule of NCCL's model that reads it: ``src/graph/tuning.cc`` (v2.15.5 to v2.30.7) leaves LL128 out of
its default for a Ring all-reduce of 2 ranks on sm90 when ``CUDART_VERSION == 11080``. Expected values are
that rule read off NCCL's source, and the rows of a bundled two-rank H200 sweep."""

import json

import pytest
from sweep_files import DATA
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.collectives import Collective
from zerocalc.nccl.enabled import CUDA_11_8_PAIR
from zerocalc.nccl.model import tune
from zerocalc.nccl.predict import cuda_build_from_text
from zerocalc.nccl.tables import Algorithm, Protocol, release_for
from zerocalc.topology import PRESETS

runner = CliRunner()
GKE = "all_reduce_perf-2xH200-gke-1pernode.txt"


@pytest.mark.parametrize(("lines", "want"), [
    (["# Using devices", "NCCL version 2.26.6+cuda12.8"], (12, 8)),  # the A4 files' line
    (["host:1:1 [0] NCCL INFO NCCL version 2.18.3+cuda11.8"], (11, 8)),
    (["NCCL version 2.18.3"], None),
    (["# nccl-tests version 2.13.8 nccl-headers=21805 nccl-library=21805"], None),
])
def test_the_cuda_build_is_read_off_the_version_line(lines, want):
    assert cuda_build_from_text(lines) == want


def _ll128(topo, ranks, version, cuda, coll=Collective.ALL_REDUCE):
    release, _ = release_for(version)
    return tune(topo, ranks, release, cuda_build=cuda).entries[(coll, Algorithm.RING, Protocol.LL128)]


def test_ll128_is_left_out_only_for_two_ranks_ring_all_reduce_on_sm90_under_cuda_11_8():
    """The rule's every term: sm90, CUDA 11.8, all-reduce, Ring, 2 ranks; from v2.15.5 (v2.14 has no sm90
    LL128 at all). Elsewhere the pair stays as NCCL's defaults have it."""
    h100 = PRESETS["dgx-h100"]
    off = _ll128(h100, 2, "2.18.3", (11, 8))
    assert not off.enabled and off.why_disabled == CUDA_11_8_PAIR
    assert _ll128(h100, 2, "2.30.7", (11, 8)).why_disabled == CUDA_11_8_PAIR
    assert _ll128(h100, 2, "2.18.3", (12, 2)).enabled
    assert _ll128(h100, 2, "2.18.3", None).enabled
    assert _ll128(h100, 4, "2.18.3", (11, 8)).enabled
    assert _ll128(h100, 2, "2.18.3", (11, 8), Collective.ALL_GATHER).enabled
    assert _ll128(PRESETS["dgx-a100"], 2, "2.18.3", (11, 8)).enabled


def _check(tmp_path, line):
    """The GKE two-rank H200 all-reduce with an NCCL version line after its device lines, as nccl-tests
    prints it (the A4 files), checked at that version; its GPUs moved to slot ``1b`` (a DGX's first GPU), off
    the GCP VM's slots, so the network path is GDR's (:mod:`zerocalc.topology.slots`) and LL128 stays NCCL's
    to choose."""
    out = []
    for text in (DATA / GKE).read_text().splitlines(True):
        text = text.replace("[0000:cc:00]", "[0000:1b:00]").replace("[0000:97:00]", "[0000:1b:00]")
        out.append(text)
        if "Rank  1 Group" in text:
            out.append(line + "\n")
    path = tmp_path / "all_reduce_perf-2xH200.txt"
    path.write_text("".join(out))
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def test_a_cuda_11_8_build_prices_the_two_rank_all_reduce_without_ll128(tmp_path):
    built_11_8 = _check(tmp_path, "NCCL version 2.18.3+cuda11.8")
    built_12_2 = _check(tmp_path, "NCCL version 2.18.3+cuda12.2")
    assert built_11_8["nccl_version"] == built_12_2["nccl_version"] == "2.18.3"
    # the rule leaves out Ring/LL128 alone; Tree/LL128 stays NCCL's to choose (its tree graph on one GPU a
    # node has bwIntra 2 × bwInter, NVIDIA/nccl-tests issue 350's NCCL 2.16.5 log: "Pattern 3, ... bw
    # 48.000000/24.000000")
    assert not any((r["algorithm"], r["protocol"]) == ("Ring", "LL128") for r in built_11_8["rows"])
    assert any(r["protocol"] == "LL128" for r in built_12_2["rows"])
    assert any("CUDA 11.8" in n for n in built_11_8["notes"])
    assert not any("CUDA 11.8" in n for n in built_12_2["notes"])
