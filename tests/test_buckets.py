"""``--bucket implementation``: each gradient reduction in its implementation's default bucket (PyTorch DDP's
``bucket_cap_mb`` 25, torch/nn/parallel/distributed.py; DeepSpeed's ``reduce_bucket_size`` 5e8 elements,
deepspeed/runtime/zero/config.py), other phases one call. Expected counts are derived by hand from those
defaults."""

import json
import math

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.steps import phase_calls

runner = CliRunner()
PSI = 7.5e9


def _calls(scheme, comm_bytes=2.0, grad_bytes=None):
    return [(ph.collective.value, n_bytes, calls) for ph, _, n_bytes, _, calls in phase_calls(
        scheme, psi=PSI, n=64, gpus_per_node=8, comm_bytes=comm_bytes, grad_bytes=grad_bytes,
        call_bytes="implementation")]


def test_each_implementation_cuts_its_gradient_reduction_into_its_buckets():
    # DDP: 15 GB of fp16 gradients in buckets of 25 MiB = 26,214,400 bytes: ⌈15e9 / 26214400⌉ = 573 calls
    ((coll, size, calls),) = _calls("dp")
    assert (coll, calls) == ("all_reduce", 573) and size == pytest.approx(15e9 / 573)
    # DeepSpeed ZeRO-2: 5e8 fp16 elements = 1 GB a bucket, 15 of them; its parameter all-gather stays whole
    assert _calls("deepspeed-zero2") == [("all_reduce", pytest.approx(1e9), 15), ("all_gather", 15e9, 1)]
    assert _calls("deepspeed-zero12") == _calls("deepspeed-zero2")  # the alias is the same implementation
    # fp32 gradients: the bucket is 5e8 elements, 2 GB, so still 15 calls of the 30 GB vector
    assert _calls("deepspeed-zero2", grad_bytes=4.0)[0] == ("all_reduce", pytest.approx(2e9), 15)
    # DeepSpeed ZeRO-3 and the paper's ZeRO-2 (DeepSpeed's design): the reduce-scatter in buckets
    assert [c for c in _calls("deepspeed-zero3") if c[0] == "reduce_scatter"] == [
        ("reduce_scatter", pytest.approx(1e9), 15)]
    assert _calls("zero2")[0] == ("reduce_scatter", pytest.approx(1e9), 15)
    # FSDP's calls follow its wrapped units, which the model does not know: whole; the proposal
    # reduces nothing
    assert all(calls == 1 for _, _, calls in _calls("fsdp-full-shard"))
    assert _calls("colocated") == [("all_gather", 15e9, 1)]
    # ZeroRedundancyOptimizer under DDP: DDP's buckets for the all-reduce, one broadcast per owner
    (ar, bc) = _calls("torch-zero1")
    assert ar[2] == 573 and bc[2] == 64 and bc[1] == pytest.approx(15e9 / 64)
    assert math.ceil(15e9 / (25 * 2**20)) == 573


def _table(*args):
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "64", "--format", "json", "--schemes",
                            "dp,deepspeed-zero2,fsdp-full-shard", *args])
    assert r.exit_code == 0, r.output
    return {row["scheme"]: row for row in json.loads(r.stdout)}


def test_table_prices_each_scheme_in_its_own_buckets():
    impl, ddp, whole = _table("--bucket", "Implementation"), _table("--bucket", "25MiB"), _table()
    assert impl["dp"]["time_s_nccl"] == pytest.approx(ddp["dp"]["time_s_nccl"], rel=1e-12)
    assert impl["fsdp-full-shard"]["time_s_nccl"] == pytest.approx(whole["fsdp-full-shard"]["time_s_nccl"],
                                                                   rel=1e-12)
    assert impl["dp"]["nccl_buckets"] == "implementation" and "nccl_call_bytes" not in impl["dp"]
    assert "nccl_buckets" not in whole["dp"]
    r = runner.invoke(app, ["table", "--topology", "dgx-h100", "--bucket", "implementation"])
    assert "each gradient reduction in its implementation's default buckets" in r.stdout


def test_the_plan_and_the_report_take_it():
    from zerocalc import report
    from zerocalc.report.config import nccl_words

    config = report.ReportConfig(topology="dgx-h100", n=64, bucket_bytes="implementation",
                                 feasibility_steps=1)
    result = report.feasibility_result(config)
    basis = result.plan_basis
    assert basis["implementation_buckets"] is True and basis["call_bytes"] is None
    assert "(--bucket implementation)" in basis["time_model_name"]
    assert "each gradient reduction in its implementation's default buckets" in nccl_words(config)
    r = runner.invoke(app, ["feasibility", "--steps", "0", "--schemes", "dp", "--topology", "dgx-h100",
                            "--plan-n", "64", "--bucket", "implementation", "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["plan_basis"]["implementation_buckets"] is True


def test_a_word_that_is_not_implementation_is_refused(tmp_path):
    for args in (["table", "--bucket", "impl"],
                 ["feasibility", "--steps", "0", "--bucket", "implementations"],
                 ["report", "--bucket", "ddp", "-o", str(tmp_path / "r.pdf")]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and r.output.startswith("error: --bucket:"), r.output
        assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "r.pdf").exists()


def test_json_collectives_say_how_nccl_runs_each_phase():
    rows = _table("--bucket", "implementation")
    (ar,) = rows["dp"]["collectives"]
    assert ar["nccl"]["calls"] == 573 and ar["nccl"]["algorithm"] == "NVLSTree"
    assert ar["nccl"]["bytes_per_call"] == pytest.approx(15e9 / 573)
    for row in rows.values():  # the phases' seconds add up to the scheme's
        total = sum(c["nccl"]["time_s"] for c in row["collectives"])
        assert total == pytest.approx(row["time_s_nccl"], rel=1e-12)
    ds_ar, ds_ag = rows["deepspeed-zero2"]["collectives"]
    assert (ds_ar["nccl"]["calls"], ds_ag["nccl"]["calls"]) == (15, 1)
    # RCCL's model on AMD GPUs fills the same fields
    r = runner.invoke(app, ["table", "--topology", "amd-mi300x", "--n", "16", "--schemes", "dp", "--format",
                            "json"])
    (amd,) = json.loads(r.stdout)[0]["collectives"]
    assert amd["nccl"]["calls"] == 1 and amd["nccl"]["protocol"]


def test_no_nccl_field_without_nccl_columns(tmp_path):
    old = tmp_path / "ab.toml"
    old.write_text("gpus_per_node = 8\n[intra]\nalpha_us = 3\nbw_GBps = 300\n[inter]\nalpha_us = 14\n"
                   "bw_GBps = 200\n")
    r = runner.invoke(app, ["table", "--topology", str(old), "--n", "16", "--schemes", "dp", "--format",
                            "json"])
    assert r.exit_code == 0
    (row,) = json.loads(r.stdout)
    assert "time_s_nccl" not in row and all("nccl" not in c for c in row["collectives"])
