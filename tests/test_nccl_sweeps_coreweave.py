"""check on CoreWeave's published H100 all-reduce (coreweave/nccl-tests README, Jun 2023): 96 ranks of HGX
H100 with InfiniBand SHARP, priced on ``dgx-h100`` (8 H100 and 8 400 Gb/s NICs a node) with and without
the SHARP its job names.

Expected figures are read off the file (rows, sizes, times, busbw/algbw); the bands are issue 11's
(0.5-2x at every size, 0.8-1.25x at the median size)."""

import json
from dataclasses import replace

import pytest
from sweep_files import DATA, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.topology import PRESETS
from zerocalc.topology.mapping import topology_to_toml

runner = CliRunner()
NAME = "all_reduce_perf-96xH100-coreweave-sharp.txt"


def _sweep(*args, env=None):
    res = runner.invoke(app, ["check", str(DATA / NAME), "--format", "json", *args], env=env)
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in file_rows(NAME)]
    return sweep


def test_the_rows_are_ninety_six_ranks_by_their_bus_to_algorithm_bandwidth():
    """Five rows, 512 MiB to 8 GiB (the job's ``-b 512M -e 8G``); busbw/algbw = 2(n-1)/n gives n = 96 on
    every row (356.01 / 179.88 = 1.97915 → 95.9; 386.56 / 195.31 → 96.2), not the 64 the page's prose and
    its job file name: the README's commit put these rows under an older run's header lines."""
    rows = file_rows(NAME)
    assert [s for s, _, _ in rows] == [512 << 20, 1 << 30, 2 << 30, 4 << 30, 8 << 30]
    assert rows[0][1:] == (2984.6, 2979.7) and rows[-1][1:] == (43980.0, 44094.0)
    sweep = _sweep("--topology", "dgx-h100", "--nccl-version", "2.18.1")
    assert sweep["group_size"] == 96


def test_within_bands_as_collnet_chain_over_sharp_as_its_job_sets_it(tmp_path):
    """The job the page applies (``mpi-operator/nccl-test-distributed-h100-64-sharp-las1-mpijob.yaml`` at the
    same commit) runs NCCL 2.18.1 (its image tag) with ``NCCL_ALGO=COLLNETCHAIN`` and
    ``NCCL_COLLNET_ENABLE=1``: on ``dgx-h100`` with InfiniBand SHARP added (CollNet), every row is priced as
    CollNet Chain and lies within both bands."""
    topo = tmp_path / "hgx-h100-sharp.toml"
    topo.write_text(topology_to_toml(replace(PRESETS["dgx-h100"], name="hgx-h100-sharp",
                                             in_network_reduction=("nvls", "sharp"))))
    sweep = _sweep("--topology", str(topo), "--nccl-version", "2.18.1", env={"NCCL_ALGO": "COLLNETCHAIN"})
    assert {r["algorithm"] for r in sweep["rows"]} == {"CollNetChain"}
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


@pytest.mark.parametrize("version", ["2.18.1", "2.30.7"])
def test_within_bands_on_the_plain_hgx_preset_too(version):
    """Without SHARP (the preset as a user would pick it for 12 HGX H100 nodes) the large sizes are the
    network-bound ring's: still within both bands, at the job's NCCL and at the latest modelled."""
    sweep = _sweep("--topology", "dgx-h100", "--nccl-version", version)
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25
