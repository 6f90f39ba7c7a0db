"""check on DDP with a comm hook that reduces the gradients compressed (PyTorch's PowerSGD hook): Ψ is the
gradients DDP copies into its buckets (``torch::distributed::reducer`` copies in the trace,
:mod:`zerocalc.validate.comm_hooks`), not the low-rank factors' count the all-reduces carry, and no exact
scheme is said to match.

Expected values come from each run's run.json (the model's layers, so its parameter count), from
count_calls.py (plain json/gzip, no zerocalc: the all-reduces' elements in expected.json, the bucket copies
by ``count_bucket_copies``) and from the ring all-reduce's 2(N-1)/N by hand."""

import gzip
import json

import numpy as np
import pytest
from real_runs import RUNS, count_calls
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces.kineto import parse_bytes
from zerocalc.traces.kineto_events import bucket_copy_elements
from zerocalc.validate.columns import Codes
from zerocalc.validate.comm_hooks import COMPRESSED_BELOW, compressed

runner = CliRunner()
POWERSGD = "ddp-powersgd-rank1"


def _check(path, *args) -> dict:
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("case", [POWERSGD, "ddp-zero-ro-fp16-hook", "ddp-ga4-sync-every",
                                  "ddp-no-record-shapes", "hf-trainer-gpt2-ddp-ga2-log-every-2", "fsdp2-tp2"])
def test_the_reader_counts_ddps_bucket_copies_as_the_plain_counter_does(case):
    counted = count_calls().count_bucket_copies(str(RUNS / case))
    for path in sorted((RUNS / case).glob("rank*.json.gz")):
        rank = path.name[len("rank"):-len(".json.gz")]
        meta = parse_bytes(gzip.decompress(path.read_bytes()), path.name).meta
        want = counted.get(rank, {}).get("elements")  # none where DDP copies nothing or no shapes were kept
        assert meta.get("ddp_bucket_elements") == want, (case, rank)
    assert bucket_copy_elements(None) is None and bucket_copy_elements({"Input Dims": [[], []]}) is None


@pytest.mark.parametrize("case", [POWERSGD, POWERSGD + "-ga4-no-sync"])
def test_powersgds_run_is_priced_on_the_models_gradients_and_matches_no_exact_scheme(case):
    run = json.loads((RUNS / case / "run.json").read_text())
    psi, n = run["model"]["psi"], run["world_size"]
    expected = json.loads((RUNS / case / "expected.json").read_text())
    per_step = {s: sum(r["in_elems"] * r["calls"] for r in rows)
                for s, rows in expected["per_step_all_ranks"].items()}
    (carried,) = set(per_step.values())  # the biases, the one all-reduce the profiler records a step
    assert carried == run["reduced_per_step"]["uncompressed (biases)"]
    copies = count_calls().count_bucket_copies(str(RUNS / case))
    assert {c["elements"] for c in copies.values()} == {psi * len(per_step)}  # every gradient, every step

    out = _check(RUNS / case)
    assert (out["psi"], out["psi_inferred"], out["n"]) == (psi, carried, n)
    assert out["matches"] == []
    dp = next(c for c in out["schemes"] if c["scheme"] == "dp")
    ring = 2 * (n - 1) / n  # a ring all-reduce sends 2(N-1)/N of its elements per rank
    assert dp["predicted_bytes_per_rank_per_step"] == pytest.approx(ring * psi * 4)
    assert dp["measured_bytes_per_rank_per_step"] == pytest.approx(ring * carried * 4)
    assert not dp["pattern_match"]
    least = (n - 1) * psi // n
    assert any(f"(N-1)/N·Ψ = {least:,}" in t for t in out["notes"])
    assert "DDP copies into its buckets" in out["psi_how"] and f"carry {carried:,}" in out["psi_how"]

    given = _check(RUNS / case, "--psi", str(psi))
    assert given["psi"] == psi and given["psi_how"].startswith(f"Ψ = {psi:,}: from --psi")


@pytest.mark.parametrize("case", ["ddp-zero-ro-fp16-hook", "ddp-bf16", "ddp-ga4-sync-every"])
def test_a_hook_that_only_casts_or_none_keeps_psi_as_the_calls_carry_it(case):
    run = json.loads((RUNS / case / "run.json").read_text())
    out = _check(RUNS / case)
    assert out["psi"] == out["psi_inferred"] == run["model"]["psi"]
    assert "inferred from the trace" in out["psi_how"]


def test_half_of_what_ddp_copied_is_no_compression():
    files = Codes(np.array([0, 0, 1, 1]), ("rank0", "rank1"))
    grad, full = np.ones(4, dtype=bool), np.array([30.0, 30.0, 30.0, 30.0])
    meta = {"rank0": {"ddp_bucket_elements": 120}, "rank1": {"ddp_bucket_elements": 120}}
    assert COMPRESSED_BELOW == 0.5
    assert compressed(meta, files, grad, full, 30, None) is None  # 60 of 120 each
    meta = {"rank0": {"ddp_bucket_elements": 150}, "rank1": {"ddp_bucket_elements": 150}}
    got = compressed(meta, files, grad, full, 30, None)
    assert got is not None and got.psi == 75 and got.share == pytest.approx(0.4)  # 30 a step of 75
    assert compressed({"rank0": {}, "rank1": {}}, files, grad, full, 30, None) is None
