"""The implementation plan timed by NCCL's own cost model (``--time-model nccl``, the default where the
topology gives what the model needs): against a measured pair of sweeps, against ``zerocalc table``'s
``t NCCL`` (the plan must say what the table says), and the options at the command line."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.feasibility import FeasibilityConfig, run_feasibility

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
runner = CliRunner()


def _out_of_place_us(name: str, size: int) -> list[float]:
    """The out-of-place times (µs) of every row of ``size`` bytes in a bundled nccl-tests file, read off
    its columns (size, count, type, redop, root, time, ...)."""
    times = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0] == str(size) and re.fullmatch(r"[\d.]+", f[5]):
            times.append(float(f[5]))
    return times


def _item(result, src, dst, in_network=""):
    return next(p for p in result.plan
                if (p.from_scheme, p.to_scheme, p.in_network) == (src, dst, in_network))


def test_in_network_all_reduce_on_one_h100_node_against_the_measured_pair():
    # togethercomputer/together-nccl-tests, one DGX-style host of 8 H100s, NCCL 2.26.2, 8 GiB of float:
    # its default run (NVLS) and its ring config (NCCL_ALGO=RING NCCL_NVLS_ENABLE=0), two processes each
    size = 8 * 2**30
    nvls = _out_of_place_us("all_reduce_perf-2x8xH100-srun-two-processes-nccl2.26.2.out", size)
    ring = _out_of_place_us("all_reduce_perf-2x8xH100-srun-two-processes-ring-nccl2.26.2.out", size)
    assert len(nvls) == len(ring) == 2
    t_nvls, t_ring = sum(nvls) / 2 * 1e-6, sum(ring) / 2 * 1e-6  # 31.41 ms and 40.83 ms
    # dp's gradient all-reduce of Ψ = 2^31 fp32 parameters is that one 8 GiB call
    res = run_feasibility(FeasibilityConfig(n=4, steps=0), ["dp", "deepspeed-zero2", "colocated"],
                          plan_psi=2**31, plan_comm_bytes=4, plan_topology="dgx-h100", plan_n=8,
                          plan_gpus_per_node=8, plan_nccl={"nccl_version": "2.26.2"})
    item = _item(res, "dp", "dp", "nvls")
    assert (item.from_choice, item.to_choice) == ("AR Ring/Simple", "AR NVLS/Simple")
    assert 0.9 <= item.from_time_s / t_ring <= 1.1
    assert 0.9 <= (item.from_time_s - item.time_saved_s) / t_nvls <= 1.1
    assert 0.8 <= item.time_saved_s / (t_ring - t_nvls) <= 1.25  # 9.4 ms measured
    assert res.plan_basis["time_model"] == "nccl" and "NCCL 2.26" in res.plan_basis["time_model_name"]
    # the verdict's sentence is of DeepSpeed ZeRO-2 (its all-reduce, then the all-gather on a ring)
    assert ("(NCCL's model: AR Ring/Simple; AG Ring/Simple without the switch, AR NVLS/Simple; "
            "AG Ring/Simple with it)") in res.in_network_finding


def _table(*args):
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "64", "--psi", "7.5e9", "--format",
                            "json", *args])
    assert r.exit_code == 0, r.output
    return {row["scheme"]: row for row in json.loads(r.stdout)}


@pytest.fixture(scope="module")
def h100_64():
    return run_feasibility(FeasibilityConfig(n=4, steps=1), plan_psi=int(7.5e9), plan_topology="dgx-h100",
                           plan_n=64)


def test_plan_times_what_the_table_prices(h100_64):
    free = _table()
    rings = _table("--nccl-env", "NCCL_NVLS_ENABLE=0")  # dgx-h100's only in-network reduction is NVLS
    for p in h100_64.plan:
        if p.in_network:
            assert p.from_time_s == pytest.approx(rings[p.from_scheme]["time_s_nccl"], rel=1e-9)
            assert p.from_choice == rings[p.from_scheme]["nccl_choice"]
            to_time = p.from_time_s - p.time_saved_s
            assert to_time == pytest.approx(free[p.to_scheme]["time_s_nccl"], rel=1e-9)
            assert p.to_choice == free[p.to_scheme]["nccl_choice"]
        elif p.time_saved_s is not None:
            assert p.from_time_s == pytest.approx(free[p.from_scheme]["time_s_nccl"], rel=1e-9)
            assert p.from_choice == free[p.from_scheme]["nccl_choice"]
            if p.to_choice:
                assert p.time_saved_s == pytest.approx(
                    free[p.from_scheme]["time_s_nccl"] - free[p.to_scheme]["time_s_nccl"], rel=1e-9)


def test_switch_that_nccl_does_not_pick_saves_no_time(h100_64):
    # 8 DGX H100 nodes, 15 GB all-reduces: the table's NCCL keeps Ring whether or not NVLS may run
    free, rings = _table(), _table("--nccl-env", "NCCL_NVLS_ENABLE=0")
    assert free["dp"]["nccl_choice"] == rings["dp"]["nccl_choice"] == "AR Ring/Simple"
    item = _item(h100_64, "dp", "dp", "nvls")
    assert item.time_saved_s == 0 and not item.slower and item.bytes_saved_per_rank > 0
    text = h100_64.in_network_finding
    assert "NCCL's model keeps AR Ring/Simple; AG Ring/Simple with the switch there" in text


def test_ring_time_model_is_the_alpha_beta_one():
    res = run_feasibility(FeasibilityConfig(n=4, steps=1), ["dp", "deepspeed-zero2", "colocated"],
                          plan_psi=int(7.5e9), plan_topology="dgx-h100", plan_n=64, plan_time_model="ring")
    assert res.plan_basis["time_model"] == "ring" and res.plan_basis["algorithm"] == "ring"
    assert all(not p.from_choice and not p.to_choice for p in res.plan)
    assert _item(res, "dp", "dp", "nvls").time_saved_s > 0  # the α-β switch halves the all-reduce's bytes


def test_cli_time_model_options(tmp_path):
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", "dgx-h100", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["plan_basis"]["time_model"] == "nccl" and doc["plan"][0]["from_choice"]
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", "dgx-h100"])
    assert "time by NCCL 2.30's own cost model" in r.stdout and "[NCCL: AR " in r.stdout
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--time-model", "fast"])
    assert r.exit_code == 2
    assert r.output.strip() == "error: --time-model: must be one of nccl, ring, got 'fast'"
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--nccl-version", "2.1"])
    assert r.exit_code == 2 and r.output.startswith("error: --nccl-version: NCCL 2.1")
    assert len(r.output.splitlines()) == 1
    lab = tmp_path / "lab.toml"  # α-β fields only: nothing NCCL's model could price
    lab.write_text('name = "lab"\ngpus_per_node = 4\n[intra]\nalpha_us = 2\nbw_GBps = 100\n'
                   '[inter]\nalpha_us = 5\nbw_GBps = 12\n')
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", str(lab)])
    assert r.exit_code == 0 and "time by the ring α-β model" in r.stdout
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", str(lab), "--time-model", "nccl"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "--time-model: topology 'lab' does not give compute_capability" in r.output
    r = runner.invoke(app, ["report", "--time-model", "fast", "-o", str(tmp_path / "r.pdf")])
    assert r.exit_code == 2 and not (tmp_path / "r.pdf").exists()


def test_amd_cluster_is_timed_by_rccl_and_leaves_the_switch_unpriced():
    # RCCL's tuning model (ROCm/rccl src/graph/tuning.cc) has no NVLS and no CollNet: the plan's
    # in-network items keep their bytes, and their time is said not priced rather than zero
    res = run_feasibility(FeasibilityConfig(n=4, steps=1), ["dp", "deepspeed-zero2", "colocated"],
                          plan_psi=int(7.5e9), plan_topology="amd-mi300x", plan_n=16)
    assert res.plan_basis["time_model_name"].startswith("RCCL 2.21.5's own cost model (ROCm")
    item = _item(res, "dp", "dp", "nvls+sharp")
    assert item.time_saved_s is None and item.bytes_saved_per_rank > 0 and item.available is False
    assert item.from_choice == "AR Ring/Simple" and not item.to_choice
    assert "Its time is not priced: RCCL's cost model" in res.in_network_finding
    exact = _item(res, "deepspeed-zero2", "zero2")
    assert exact.time_saved_s > 0 and exact.to_choice.startswith("RS ")
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", "amd-mi300x", "--plan-n", "16"])
    assert "[RCCL: AR Ring/Simple" in r.stdout and "[NCCL:" not in r.stdout


def test_calibrated_topology_marks_the_pairs_its_calibration_times(tmp_path):
    # fit --out on the bundled 16 x H100 all-reduce sweep (2 nodes, NCCL 2.26.2): the plan on that
    # topology at N = 16 times its all-reduces by the calibration, at the release it was fitted at
    sweep = DATA / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"
    cal = tmp_path / "c.toml"
    assert runner.invoke(app, ["fit", str(sweep), "--out", str(cal)]).exit_code == 0
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", str(cal), "--plan-n", "16",
                            "--format", "json"])
    doc = json.loads(r.stdout)
    assert doc["plan_basis"]["time_model_name"].startswith("NCCL 2.26's own cost model")
    ar = [p for p in doc["plan"] if p["from_choice"].startswith("AR ")]
    assert ar and all(p["from_choice"].split(";")[0].endswith("*") for p in ar)
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", str(cal), "--plan-n", "16"])
    assert "* timed by the calibration of topology c (fit --out)" in r.stdout


def test_a_scheme_the_release_cannot_run_leaves_its_item_unpriced():
    # NCCL 2.6 has no send/receive (2.7 brought them): ZeRO++'s all-to-all cannot be timed, and its item
    # says so instead of a time (JSON null, never NaN)
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--nccl-version", "2.6", "--format", "json"])
    assert r.exit_code == 0 and "NaN" not in r.stdout
    (zpp,) = [p for p in json.loads(r.stdout)["plan"] if p["to_scheme"] == "zeropp"]
    assert zpp["time_saved_s"] is None and zpp["bytes_saved_per_rank"] > 0 and not zpp["to_choice"]
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--nccl-version", "2.6"])
    assert "zero3 → zeropp: saves 14.06 GB (1.88 B/parameter), time not priced by NCCL's model" in r.stdout


def test_restrictions_are_said_where_the_plan_is_timed_under_them():
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", "dgx-h100", "--plan-n", "8",
                            "--nccl-algo", "ring", "--format", "json"])
    doc = json.loads(r.stdout)
    assert doc["plan_basis"]["time_model_name"].endswith("under NCCL_ALGO=ring, one call per phase")
    # one DGX H100 node: without the restriction NCCL picks NVLS for dp's 15 GB all-reduce
    item = next(p for p in doc["plan"] if p["from_scheme"] == "dp" and p["in_network"])
    assert item["from_choice"] == item["to_choice"] == "AR Ring/Simple" and item["time_saved_s"] == 0
    assert "with the switch there, under NCCL_ALGO=ring, so the bytes" in doc["verdict"]


def test_buckets_against_the_measured_pair():
    # the same host and runs: 8 GiB of fp32 in 1 GiB buckets is 8 calls of the sweeps' 1 GiB row
    size = 2**30
    nvls = _out_of_place_us("all_reduce_perf-2x8xH100-srun-two-processes-nccl2.26.2.out", size)
    ring = _out_of_place_us("all_reduce_perf-2x8xH100-srun-two-processes-ring-nccl2.26.2.out", size)
    t_nvls, t_ring = 8 * sum(nvls) / len(nvls) * 1e-6, 8 * sum(ring) / len(ring) * 1e-6  # 32.2, 41.7 ms
    res = run_feasibility(FeasibilityConfig(n=4, steps=0), ["dp", "deepspeed-zero2", "colocated"],
                          plan_psi=2**31, plan_comm_bytes=4, plan_topology="dgx-h100", plan_n=8,
                          plan_gpus_per_node=8, plan_nccl={"nccl_version": "2.26.2", "call_bytes": size})
    item = _item(res, "dp", "dp", "nvls")
    assert (item.from_choice, item.to_choice) == ("AR Ring/Simple", "AR NVLS/Simple")
    assert 0.9 <= item.from_time_s / t_ring <= 1.1
    assert 0.9 <= (item.from_time_s - item.time_saved_s) / t_nvls <= 1.1
    assert 0.8 <= item.time_saved_s / (t_ring - t_nvls) <= 1.25  # 9.5 ms measured
    assert res.plan_basis["call_bytes"] == size
    name = res.plan_basis["time_model_name"]
    assert name.endswith("each phase in equal calls of at most 1.07 GB (--bucket)")


def test_a_bucketed_phase_is_its_calls_of_the_bucket():
    # dp's all-reduce of Ψ·b = 15 GB in buckets of 1.5 GB is 10 calls of 1.5 GB: ten times the table's
    # NCCL time of Ψ = 7.5e8, with the pair NCCL picks for 1.5 GB
    one = _table_at("7.5e8")
    bucketed = _table_at("7.5e9", "--bucket", "1.5GB")
    for scheme in ("dp", "zero2", "deepspeed-zero2"):
        assert bucketed[scheme]["time_s_nccl"] == pytest.approx(10 * one[scheme]["time_s_nccl"], rel=1e-9)
        assert bucketed[scheme]["nccl_choice"] == one[scheme]["nccl_choice"]
    whole = _table_at("7.5e9")
    assert whole["dp"]["nccl_choice"] == "AR Ring/Simple" != bucketed["dp"]["nccl_choice"]
    assert bucketed["dp"]["nccl_call_bytes"] == 1.5e9 and "nccl_call_bytes" not in whole["dp"]


def _table_at(psi, *args):
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "64", "--psi", psi, "--format", "json",
                            "--schemes", "dp,zero2,deepspeed-zero2", *args])
    assert r.exit_code == 0, r.output
    return {row["scheme"]: row for row in json.loads(r.stdout)}


def test_bucket_options_refused_in_one_line(tmp_path):
    for args, message in ((["table", "--bucket", "25"], "error: --bucket: '25' is not a size"),
                          (["feasibility", "--steps", "1", "--bucket", "0MB"],
                           "error: --bucket: must be positive"),
                          (["feasibility", "--steps", "1", "--time-model", "ring", "--bucket", "1GB"],
                           "error: --bucket: the plan is priced by the α-β ring model here"),
                          (["report", "--bucket", "-1GB", "-o", str(tmp_path / "r.pdf")], "error: --bucket")):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and r.output.startswith(message) and len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "r.pdf").exists()


def test_the_reports_bucket_reaches_its_plan():
    from zerocalc import report

    config = report.ReportConfig(topology="dgx-h100", n=64, bucket_bytes=25 * 2**20, feasibility_steps=1)
    result = report.feasibility_result(config)
    assert "equal calls of at most 26.21 MB" in result.plan_basis["time_model_name"]
    assert config.nccl_priced  # the volume table is priced under it too
    item = _item(result, "dp", "dp", "nvls")
    assert item.to_choice == "AR NVLSTree/Simple"  # 25 MiB calls: NCCL picks NVLS Tree, not one call's Ring


def test_a_switch_nccl_mispicks_is_slower_and_says_why():
    # 8 DGX H100 nodes in DDP's 25 MiB buckets: NCCL's estimate picks NVLS Tree, whose run pays its
    # pipeline's fill (zerocalc.nccl.nvls_pipeline); without NVLS the call is Tree/LL128 and quicker
    r = runner.invoke(app, ["feasibility", "--steps", "1", "--topology", "dgx-h100", "--plan-n", "64",
                            "--bucket", "25MiB", "--format", "json"])
    doc = json.loads(r.stdout)
    item = next(p for p in doc["plan"] if p["from_scheme"] == "dp" and p["in_network"])
    assert item["slower"] and item["time_saved_s"] < 0
    assert (item["from_choice"], item["to_choice"]) == ("AR Tree/LL128", "AR NVLSTree/Simple")
    verdict = " ".join(doc["verdict"].split())
    assert "; NCCL picks NVLS Tree by its own estimate, which leaves out the fill" in verdict
