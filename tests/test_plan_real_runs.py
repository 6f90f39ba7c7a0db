"""The implementation plan for the runs people do: per optimizer step of
k micro-batches, each scheme's collectives at its implementation's cadence (DeepSpeed ZeRO-2 reduces in every
micro-batch, ZeRO-1 only at the boundary; DDP every micro-batch by default; the parameter all-gather once per
step); of a tensor/pipeline-parallel run's data-parallel group; under mixed precision (each side's wire
width). Expected values are derived by hand or read from ``zerocalc table``, which prices the same run."""

import json
from fractions import Fraction

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.feasibility import FeasibilityConfig, run_feasibility
from zerocalc.plan import NVLS_ONE_A_NODE

runner = CliRunner()
PSI, N, B = 7_500_000_000, 64, 2


def _plan(k, time_model=None,
          schemes=("deepspeed-zero1", "deepspeed-zero2", "zero1", "zero2", "colocated")):
    return run_feasibility(FeasibilityConfig(n=4, steps=0), list(schemes), plan_psi=PSI, plan_comm_bytes=B,
                           plan_topology="dgx-h100", plan_n=N, plan_micro_batches=k,
                           plan_time_model=time_model)


def _item(result, src, dst):
    return next(p for p in result.plan if (p.from_scheme, p.to_scheme, p.in_network) == (src, dst, ""))


@pytest.fixture(scope="module")
def plans():
    return {k: _plan(k) for k in (1, 4)}


def test_bytes_follow_each_implementations_cadence(plans):
    ring = Fraction(N - 1, N) * PSI * B  # one ring reduce-scatter (or all-gather) of Ψ·b, sent per rank
    for k, res in plans.items():
        # ZeRO-2 as shipped all-reduces (2 rings) in every micro-batch, the paper's reduce-scatters (1 ring):
        # k rings saved; ZeRO-1 reduces once per step either way: one ring saved at any k
        assert _item(res, "deepspeed-zero2", "zero2").bytes_saved_per_rank == pytest.approx(float(k * ring))
        assert _item(res, "deepspeed-zero1", "zero1").bytes_saved_per_rank == pytest.approx(float(ring))
        # the #4582 proposal against the paper's ZeRO-2: its k reduce-scatters
        assert _item(res, "zero2", "colocated").bytes_saved_per_rank == pytest.approx(float(k * ring))
        assert res.plan_basis["micro_batches"] == k


def test_time_follows_the_cadence_and_the_table(plans):
    one, four = plans[1], plans[4]
    # only the per-micro-batch gradient collective differs between ZeRO-2 as shipped and the paper's
    a, b = _item(one, "deepspeed-zero2", "zero2"), _item(four, "deepspeed-zero2", "zero2")
    assert b.time_saved_s == pytest.approx(4 * a.time_saved_s, rel=1e-9)
    assert _item(four, "deepspeed-zero1", "zero1").time_saved_s == pytest.approx(
        _item(one, "deepspeed-zero1", "zero1").time_saved_s, rel=1e-9)
    # the plan prices a step as `table --micro-batches 4` does
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", str(N), "--psi", "7.5e9",
                            "--micro-batches", "4", "--schemes", "deepspeed-zero2,zero2", "--format", "json"])
    assert r.exit_code == 0, r.output
    table = {row["scheme"]: row for row in json.loads(r.stdout)}
    assert b.from_time_s == pytest.approx(table["deepspeed-zero2"]["time_s_nccl"], rel=1e-9)
    assert b.from_time_s - b.time_saved_s == pytest.approx(table["zero2"]["time_s_nccl"], rel=1e-9)


def test_alpha_beta_plan_follows_the_cadence_too():
    one, four = _plan(1, "ring"), _plan(4, "ring")
    a, b = _item(one, "deepspeed-zero2", "zero2"), _item(four, "deepspeed-zero2", "zero2")
    assert b.time_saved_s == pytest.approx(4 * a.time_saved_s, rel=1e-9)


def test_the_simulations_micro_batches_are_the_plans_default():
    res = run_feasibility(FeasibilityConfig(n=4, steps=0, micro_batches=3), ["deepspeed-zero2", "zero2"],
                          plan_psi=PSI, plan_comm_bytes=B, plan_topology="dgx-h100", plan_n=N)
    assert res.plan_basis["micro_batches"] == 3
    assert "3 micro-batches per step" in res.verdict


def test_cli_plan_micro_batches():
    args = ["feasibility", "--steps", "0", "--schemes", "deepspeed-zero2,zero2", "--topology", "dgx-h100",
            "--plan-n", "64"]
    r = runner.invoke(app, [*args, "--plan-micro-batches", "4"])
    assert r.exit_code == 0, r.output
    assert "saved per rank per optimizer step of 4 micro-batches" in r.stdout
    r = runner.invoke(app, [*args, "--plan-micro-batches", "4", "--format", "json"])
    out = json.loads(r.stdout)
    assert out["plan_basis"]["micro_batches"] == 4
    assert "DeepSpeed ZeRO-2 as shipped, reducing in each of the 4 micro-batches," in out["verdict"]
    for bad in ("0", "-2"):
        r = runner.invoke(app, [*args, "--plan-micro-batches", bad])
        assert r.exit_code == 2 and "--plan-micro-batches" in r.output
        assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def _table_dp(*args):
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", str(N), "--psi", "7.5e9", "--schemes",
                            "dp", "--format", "json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)[0]


def test_no_sync_is_listed_where_there_is_something_to_hold_back():
    res = run_feasibility(FeasibilityConfig(n=4, steps=0, micro_batches=4), ["dp"], plan_psi=PSI,
                          plan_comm_bytes=B, plan_topology="dgx-h100", plan_n=N)
    item = next(p for p in res.plan if "no_sync()" in p.action)
    # DDP all-reduces 2(N-1)/N·Ψ·b in each of the 4 micro-batches; under no_sync() once per step
    assert item.bytes_saved_per_rank == pytest.approx(float(3 * 2 * Fraction(N - 1, N) * PSI * B))
    assert (item.update, item.from_scheme, item.to_scheme) == ("exact", "dp", "dp")
    # the time table prices for DDP with --grad-sync boundary is what is left
    every = _table_dp("--micro-batches", "4")
    boundary = _table_dp("--micro-batches", "4", "--grad-sync", "boundary")
    assert item.from_time_s == pytest.approx(every["time_s_nccl"], rel=1e-9)
    assert item.from_time_s - item.time_saved_s == pytest.approx(boundary["time_s_nccl"], rel=1e-9)
    one = run_feasibility(FeasibilityConfig(n=4, steps=0), ["dp"], plan_psi=PSI, plan_comm_bytes=B,
                          plan_topology="dgx-h100", plan_n=N)
    assert not any("no_sync()" in p.action for p in one.plan)


def test_the_reports_micro_batches_reach_its_table_simulation_and_plan():
    from zerocalc import report
    from zerocalc.report.config import config_line
    from zerocalc.report.sweeps import volume_table

    config = report.ReportConfig(topology="dgx-h100", n=N, micro_batches=4, feasibility_steps=1)
    result = report.feasibility_result(config)
    assert result.plan_basis["micro_batches"] == 4 and result.config.micro_batches == 4
    ring = Fraction(N - 1, N) * PSI * B
    assert _item(result, "deepspeed-zero2", "zero2").bytes_saved_per_rank == pytest.approx(float(4 * ring))
    table = volume_table(config).set_index("scheme")
    # ZeRO-2 as shipped: 4 all-reduces (2 rings each) and one all-gather per step; ZeRO-1 one of each
    assert table.loc["deepspeed-zero2", "bytes_per_rank"] == pytest.approx(float(9 * ring))
    assert table.loc["deepspeed-zero1", "bytes_per_rank"] == pytest.approx(float(3 * ring))
    assert "4 micro-batches per optimizer step" in config_line(config)
    assert "micro-batches" not in config_line(report.ReportConfig())


def test_report_refuses_a_bad_micro_batch_count(monkeypatch):
    from zerocalc import report

    calls = []
    monkeypatch.setattr(report, "write_report", lambda out, config, progress=None: calls.append(out))
    res = runner.invoke(app, ["report", "--micro-batches", "0"])
    assert res.exit_code == 2 and "--micro-batches" in res.stderr and res.stderr.count("\n") == 1
    assert "Traceback" not in res.output and calls == []


def test_plan_of_a_tensor_parallel_runs_data_parallel_group():
    # 64 GPUs at tp = 8 on 8-GPU nodes: 8 data-parallel ranks, one a node, each holding Ψ/8 parameters
    res = run_feasibility(FeasibilityConfig(n=4, steps=0), ["deepspeed-zero2", "zero2"], plan_psi=PSI,
                          plan_comm_bytes=B, plan_topology="dgx-h100", plan_n=64, plan_tp=8)
    basis = res.plan_basis
    assert (basis["n"], basis["gpus_per_node"], basis["tp"], basis["pp"], basis["world"]) == (8, 1, 8, 1, 64)
    item = _item(res, "deepspeed-zero2", "zero2")
    assert item.bytes_saved_per_rank == pytest.approx(7 / 8 * PSI / 8 * B)  # one ring of Ψ/8 on 8 ranks
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "64", "--tp", "8", "--psi", "7.5e9",
                            "--schemes", "deepspeed-zero2,zero2", "--format", "json"])
    table = {row["scheme"]: row for row in json.loads(r.stdout)}
    assert item.from_time_s == pytest.approx(table["deepspeed-zero2"]["time_s_nccl"], rel=1e-9)
    assert item.from_time_s - item.time_saved_s == pytest.approx(table["zero2"]["time_s_nccl"], rel=1e-9)
    assert "the data-parallel group of a 64-GPU run at tp = 8, pp = 1" in res.verdict
    # one rank of the group a node: NVLS (dgx-h100's in-network reduction) sums only inside a node
    assert res.plan_basis["in_network"] == "nvls"
    assert "the data-parallel group has one rank a node, and NVLS sums only inside a node" in res.verdict
    # its in-network items save nothing, and each says why: no node holds two of its ranks to sum
    switch = [p for p in res.plan if p.in_network]
    assert switch and all(p.bytes_saved_per_rank == 0 for p in switch)
    assert {p.in_network_idle for p in switch} == {NVLS_ONE_A_NODE}
    whole = run_feasibility(FeasibilityConfig(n=4, steps=0), ["deepspeed-zero2", "zero2"], plan_psi=PSI,
                            plan_comm_bytes=B, plan_topology="dgx-h100", plan_n=64)  # 8 ranks a node
    assert all(p.in_network_idle == "" for p in whole.plan)
    # the α-β plan too, with the node's network shared by its 8 data-parallel groups as table shares it
    ring = run_feasibility(FeasibilityConfig(n=4, steps=0), ["deepspeed-zero2", "zero2"], plan_psi=PSI,
                           plan_comm_bytes=B, plan_topology="dgx-h100", plan_n=64, plan_tp=8,
                           plan_time_model="ring")
    a = _item(ring, "deepspeed-zero2", "zero2")
    assert a.from_time_s == pytest.approx(table["deepspeed-zero2"]["time_s_ring"], rel=1e-9)
    assert a.from_time_s - a.time_saved_s == pytest.approx(table["zero2"]["time_s_ring"], rel=1e-9)


def test_figure_2_prices_the_reports_data_parallel_group():
    # time against Ψ at tp = 8 on 64 GPUs: the 8-rank data-parallel group, one rank a node, as table prices it
    from zerocalc import report
    from zerocalc.report.sweeps import time_vs_psi

    config = report.ReportConfig(topology="dgx-h100", n=64, tp=8, grad_dtype="fp32", micro_batches=2)
    fig = time_vs_psi(config, psi_values=[1e9], topologies=["dgx-h100"])
    ring = fig[fig["algorithm"] == "ring"].set_index("scheme")
    assert set(ring["n"]) == {8}
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "64", "--tp", "8", "--psi", "1e9",
                            "--grad-dtype", "fp32", "--micro-batches", "2", "--format", "json"])
    table = {row["scheme"]: row for row in json.loads(r.stdout)}
    for scheme, row in ring.iterrows():
        assert row["time_s"] == pytest.approx(table[scheme]["time_s_ring"], rel=1e-9)


def test_cli_plan_tp_pp_refusals():
    base = ["feasibility", "--steps", "0", "--schemes", "dp", "--topology", "dgx-h100"]
    for args, option in ((["--plan-n", "48", "--plan-tp", "3"], "--plan-tp"),
                         (["--plan-n", "60", "--plan-pp", "8"], "--plan-n"),
                         (["--plan-n", "64", "--plan-pp", "0"], "--plan-pp")):
        r = runner.invoke(app, [*base, *args])
        assert r.exit_code == 2 and r.output.startswith(f"error: {option}"), r.output
        assert len(r.output.strip().splitlines()) == 1
    r = runner.invoke(app, [*base, "--plan-n", "64", "--plan-pp", "4", "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["plan_basis"]["n"] == 16


def test_the_reports_tp_reaches_its_table_equivalences_verdict_and_plan():
    from zerocalc import report
    from zerocalc.report.config import config_line
    from zerocalc.report.sweeps import volume_table

    # 64 GPUs at tp = 8: data-parallel groups of 8 ranks, one a node, each holding Ψ/8
    config = report.ReportConfig(topology="dgx-h100", n=64, tp=8, feasibility_steps=1)
    assert config.dp_n == 8
    table = volume_table(config).set_index("scheme")
    ring = Fraction(7, 8) * PSI / 8 * B  # one ring of Ψ/8 on 8 ranks, per rank
    assert table.loc["colocated", "bytes_per_rank"] == pytest.approx(float(ring))
    assert table.loc["zero2", "bytes_per_rank"] == pytest.approx(float(2 * ring))
    # ZeRO-2's model states on a rank: 2 bytes of parameters + (2 + 12)/8 of gradients and optimizer state
    assert table.loc["zero2", "memory_bytes_per_rank"] == pytest.approx(PSI / 8 * (2 + 14 / 8))
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "64", "--tp", "8", "--psi", "7.5e9",
                            "--schemes", "deepspeed-zero2,zero2", "--format", "json"])
    cli = {row["scheme"]: row for row in json.loads(r.stdout)}
    assert table.loc["deepspeed-zero2", "time_s"] == pytest.approx(cli["deepspeed-zero2"]["time_s"])
    result = report.feasibility_result(config)
    basis = result.plan_basis
    assert (basis["n"], basis["gpus_per_node"], basis["tp"], basis["world"]) == (8, 1, 8, 64)
    item = _item(result, "deepspeed-zero2", "zero2")
    assert item.bytes_saved_per_rank == pytest.approx(float(ring))
    assert item.from_time_s == pytest.approx(cli["deepspeed-zero2"]["time_s_nccl"], rel=1e-9)
    plan = report.plan_on_cluster(config, result)
    verdict = report.cluster_verdict(config, result, plan)
    assert "N = 8, the data-parallel group of 64 GPUs at tp = 8, pp = 1" in verdict
    assert "64 GPUs (8 per node) at tp = 8, pp = 1: data-parallel groups of N = 8" in config_line(config)
    assert "tp =" not in config_line(report.ReportConfig())


def test_the_reports_tp_pp_with_micro_batches_and_mixed_precision():
    from zerocalc import report
    from zerocalc.report.sweeps import volume_table

    # 128 GPUs at tp = 8, pp = 2: groups of 8 ranks holding Ψ/16; 4 micro-batches; bf16 gathers,
    # fp32 reductions
    config = report.ReportConfig(topology="dgx-h100", n=128, tp=8, pp=2, micro_batches=4, comm_dtype="bf16",
                                 grad_dtype="fp32", feasibility_steps=1)
    ring = Fraction(7, 8) * PSI / 16  # one ring of Ψ/16 on 8 ranks, elements sent per rank
    table = volume_table(config).set_index("scheme")
    assert table.loc["colocated", "bytes_per_rank"] == pytest.approx(float(ring * 2))
    # the paper's ZeRO-2: a fp32 reduce-scatter in each micro-batch, one bf16 all-gather per step
    assert table.loc["zero2", "bytes_per_rank"] == pytest.approx(float(4 * ring * 4 + ring * 2))
    basis = report.feasibility_result(config).plan_basis
    got = (basis["n"], basis["tp"], basis["pp"], basis["micro_batches"], basis["grad_bytes"])
    assert got == (8, 8, 2, 4, 4)


def test_report_refuses_a_layout_that_is_not_one(monkeypatch):
    from zerocalc import report

    calls = []
    monkeypatch.setattr(report, "write_report", lambda out, config, progress=None: calls.append(out))
    for args, option in ((["--n", "48", "--tp", "3"], "--tp"), (["--n", "60", "--pp", "8"], "--n"),
                         (["--tp", "0"], "--tp")):
        res = runner.invoke(app, ["report", "--topology", "dgx-h100", *args])
        assert res.exit_code == 2 and res.stderr.startswith(f"error: {option}"), res.output
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.output
    assert calls == []


def test_plan_under_mixed_precision_prices_each_side_at_its_width():
    # bf16 parameters, fp32 gradient reduction (FSDP2 reduce_dtype, Megatron grad_reduce_in_fp32)
    res = run_feasibility(FeasibilityConfig(n=4, steps=0), ["dp", "deepspeed-zero2", "zero2", "colocated"],
                          plan_psi=PSI, plan_comm_bytes=2, plan_topology="dgx-h100", plan_n=N,
                          plan_param_bytes=2, plan_grad_bytes=4)
    ring = Fraction(N - 1, N) * PSI  # elements one ring moves per rank
    # ZeRO-2 as shipped all-reduces the fp32 gradients (2 rings), the paper reduce-scatters them (1 ring)
    assert _item(res, "deepspeed-zero2", "zero2").bytes_saved_per_rank == pytest.approx(float(ring * 4))
    # the #4582 proposal skips the fp32 reduce-scatter and keeps the bf16 all-gather
    assert _item(res, "zero2", "colocated").bytes_saved_per_rank == pytest.approx(float(ring * 4))
    # 1-bit compression of DDP's fp32 all-reduce: 1 bit of the 32 left
    one_bit = next(p for p in res.plan if p.action.startswith("error-feedback 1-bit"))
    assert one_bit.bytes_saved_per_rank == pytest.approx(float(2 * ring * 4 * Fraction(31, 32)))
    assert (res.plan_basis["param_bytes"], res.plan_basis["grad_bytes"]) == (2, 4)
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", str(N), "--psi", "7.5e9",
                            "--param-dtype", "bf16", "--grad-dtype", "fp32", "--schemes",
                            "deepspeed-zero2,zero2", "--format", "json"])
    table = {row["scheme"]: row for row in json.loads(r.stdout)}
    item = _item(res, "deepspeed-zero2", "zero2")
    assert item.from_time_s == pytest.approx(table["deepspeed-zero2"]["time_s_nccl"], rel=1e-9)
    assert item.from_time_s - item.time_saved_s == pytest.approx(table["zero2"]["time_s_nccl"], rel=1e-9)
    ab = run_feasibility(FeasibilityConfig(n=4, steps=0), ["deepspeed-zero2", "zero2"], plan_psi=PSI,
                         plan_comm_bytes=2, plan_topology="dgx-h100", plan_n=N, plan_param_bytes=2,
                         plan_grad_bytes=4, plan_time_model="ring")
    a = _item(ab, "deepspeed-zero2", "zero2")
    assert a.from_time_s == pytest.approx(table["deepspeed-zero2"]["time_s_ring"], rel=1e-9)
    assert a.from_time_s - a.time_saved_s == pytest.approx(table["zero2"]["time_s_ring"], rel=1e-9)


def test_cli_plan_dtypes():
    args = ["feasibility", "--steps", "0", "--schemes", "zero2", "--topology", "dgx-h100", "--plan-n", "64",
            "--dtype", "bf16"]
    r = runner.invoke(app, [*args, "--grad-dtype", "float32"])
    assert r.exit_code == 0 and "2-byte parameters and 4-byte gradients on the wire" in r.stdout
    r = runner.invoke(app, [*args, "--param-dtype", "fp33"])
    assert r.exit_code == 2 and "fp33" in r.output and len(r.output.strip().splitlines()) == 1


def test_the_reports_wire_dtypes_reach_its_table_and_plan():
    from zerocalc import report
    from zerocalc.report.config import config_line
    from zerocalc.report.sweeps import volume_table

    config = report.ReportConfig(topology="dgx-h100", n=N, comm_dtype="bf16", grad_dtype="fp32",
                                 feasibility_steps=1)
    result = report.feasibility_result(config)
    assert (result.plan_basis["param_bytes"], result.plan_basis["grad_bytes"]) == (2, 4)
    ring = Fraction(N - 1, N) * PSI
    table = volume_table(config).set_index("scheme")
    # ZeRO-2: the fp32 reduce-scatter and the bf16 all-gather; the proposal the all-gather alone
    assert table.loc["zero2", "bytes_per_rank"] == pytest.approx(float(ring * 4 + ring * 2))
    assert table.loc["colocated", "bytes_per_rank"] == pytest.approx(float(ring * 2))
    words = "bf16 parameters / fp32 gradients in the volume table, the plan and figure 2"
    assert words in config_line(config)
    with pytest.raises(Exception, match="fp33"):
        report.ReportConfig(grad_dtype="fp33")


@pytest.mark.slow
def test_report_of_a_mixed_precision_run(tmp_path):
    # bf16 gathers, fp32 reductions on 8 DGX H100 nodes: HYBRID_SHARD then sends what FULL_SHARD sends
    # (2·(7/8)Ψ·2 + (7/8)Ψ·4 + 2·(7/8)(Ψ/8)·4 = 7.875Ψ = 2·(63/64)Ψ·2 + (63/64)Ψ·4), and is slower
    pypdf = pytest.importorskip("pypdf")
    out = tmp_path / "r.pdf"
    r = runner.invoke(app, ["report", "-o", str(out), "--topology", "dgx-h100", "--dtype", "bf16",
                            "--grad-dtype", "fp32"])
    assert r.exit_code == 0, r.output
    text = " ".join(" ".join(p.extract_text().split()) for p in pypdf.PdfReader(str(out)).pages)
    assert ("(dgx-h100, bf16 parameters / fp32 gradients): skipping it sends 14.8 GB instead of ZeRO-2's "
            "44.3 GB") in text
    assert "Slower on this cluster (takes longer):" in text and "sends fewer bytes" not in text


def test_feasibility_takes_a_model_preset():
    # Llama 3 70B's count, from meta-llama/Meta-Llama-3-70B config.json (zerocalc.models' source)
    args = ["feasibility", "--steps", "0", "--schemes", "zero2", "--format", "json"]
    r = runner.invoke(app, [*args, "--model", "llama-3-70b"])
    assert r.exit_code == 0 and json.loads(r.stdout)["plan_basis"]["psi"] == 70_553_706_496
    r = runner.invoke(app, [*args, "--model", "llama-3-70b", "--psi", "7B"])
    assert r.exit_code == 2 and r.output.startswith("error: --model:")
