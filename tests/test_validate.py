"""validate: ring accounting, α-β fit, measured volume and scheme comparison on real traces.

Expected numbers are worked out by hand from the files in tests/data/traces (the
arithmetic is written next to each assertion), never taken from zerocalc's output.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sympy

from zerocalc import collectives
from zerocalc.errors import TraceMismatchError
from zerocalc.evaluate import model_bytes_per_rank
from zerocalc.schemes import SCHEME_NAMES, get_scheme
from zerocalc.traces import read_traces
from zerocalc.validate import (
    check,
    fit_alpha_beta,
    fit_table,
    measure,
    predicted_pattern,
    ring_bytes_factor,
)

DATA = Path(__file__).parent / "data" / "traces"
RESNET = DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"
GLOO = DATA / "deepspeed-gloo-zero3-n4"
H100 = DATA / "nccl-tests" / "all_reduce_perf-16xH100-2nodes.txt"


def _read(paths):
    ts = read_traces(paths)
    return ts.table, ts.meta


# --- ring accounting agrees with the model ---------------------------------------------------


@pytest.mark.parametrize(
    "op", ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all"])
@pytest.mark.parametrize("p", [2, 4, 16])
def test_ring_factor_is_the_models_ring_accounting(op, p):
    n = sympy.Symbol("n", positive=True)
    model = collectives.bytes_sent_per_rank(op, n, p) / n
    assert sympy.simplify(model - sympy.Rational(ring_bytes_factor(op, p)).limit_denominator(1000)) == 0


@pytest.mark.parametrize("scheme", SCHEME_NAMES)
def test_predicted_pattern_sums_to_the_model_volume(scheme):
    # Ψ = 377,856, N = 4 on one node (G = 4), fp32: the gloo run's configuration
    pat = predicted_pattern(get_scheme(scheme), psi=377856, n=4, g=4, comm_bytes=4.0)
    total = sum(b for *_, b in pat)
    model = model_bytes_per_rank(scheme, psi=377856, n=4, gpus_per_node=4, comm_bytes=4.0)
    assert total == pytest.approx(model)


# --- α-β fit -------------------------------------------------------------------------------------


def test_fit_recovers_alpha_beta_of_an_exact_ring_model():
    # t = 2(p-1)α + 2(p-1)/p·n·β with α = 5 µs, 1/β = 100 GB/s, p = 8, sizes 8 B … 8 GiB
    p, alpha, beta = 8, 5e-6, 1 / 100e9
    n = 2.0 ** np.arange(3, 34)
    t = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta
    f = fit_alpha_beta(n, t, op="all_reduce", group_size=p)
    assert f.method == "regimes"
    assert f.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert f.busbw_Bps == pytest.approx(100e9, rel=1e-6)
    assert f.latency_s == pytest.approx(14 * alpha, rel=1e-6)  # 2(p-1) = 14 ring steps


def _h100_rows():
    """(size B, out-of-place time s, busbw GB/s) read straight off the nccl-tests text."""
    rows = []
    for line in H100.read_text().splitlines():
        tok = line.split()
        if tok and re.fullmatch(r"\d+", tok[0]) and len(tok) >= 13:
            rows.append((float(tok[0]), float(tok[5]) * 1e-6, float(tok[7])))
    return rows


def test_h100_sweep_fit_agrees_with_the_busbw_column_and_small_times():
    rows = _h100_rows()
    assert len(rows) == 31  # 8 B … 8 GiB, factor 2
    (f,) = fit_table(read_traces(H100).table)
    assert (f.op, f.group_size, f.method) == ("all_reduce", 16, "regimes")
    # Largest sizes: busbw column 318.40 (2 GiB), 330.58 (4 GiB), 338.82 (8 GiB) GB/s.
    assert 318.40e9 <= f.busbw_Bps <= 345e9
    assert abs(f.busbw_Bps - 338.82e9) <= 3 * f.busbw_se_Bps + 5e9
    assert f.reported_busbw_GBps == 338.82
    # Small messages 8 B … 4 KiB take 123.0–147.1 µs (median of the ten: (125.8+126.6)/2 = 126.2 µs);
    # a ring all-reduce on 16 ranks has 2·15 = 30 latency steps.
    small = sorted(t for n, t, _ in rows if n <= 4096)
    assert small[0] == pytest.approx(123.0e-6) and small[-1] == pytest.approx(147.1e-6)
    assert f.latency_s == pytest.approx(126.2e-6, rel=0.05)
    assert f.alpha_s == pytest.approx(f.latency_s / 30)
    assert 0 < f.latency_se_s < 0.05 * f.latency_s and 0 < f.busbw_se_Bps < 0.05 * f.busbw_Bps


def test_fit_needs_two_sizes():
    with pytest.raises(TraceMismatchError, match="two sizes"):
        fit_alpha_beta([1e6, 1e6], [1e-3, 1.1e-3], op="all_reduce", group_size=4)


# --- ResNet-50 DDP --------------------------------------------------------------------------------

# Five fp32 buckets per step: 2,049,000 + 7,875,584 + 6,563,840 + 6,637,568 + 2,431,040 = 25,557,032.
RESNET_PSI = 2049000 + 7875584 + 6563840 + 6637568 + 2431040
# N = 2: a ring all-reduce sends 2(N-1)/N = 1 full vector per rank: 25,557,032 × 4 B.
RESNET_BYTES = 2 * (2 - 1) / 2 * RESNET_PSI * 4
# Broadcasts per step: 53,120 fp32 + 53 int64, (N-1)/N = 1/2 of each.
RESNET_BUFFERS = 53120 * 4 / 2 + 53 * 8 / 2


@pytest.mark.parametrize("psi", [None, RESNET_PSI])
def test_resnet_checks_as_dp(psi):
    table, meta = _read(RESNET)
    res = check(table, psi=psi, meta=meta)
    m = res.measurement
    assert RESNET_PSI == 25_557_032
    assert m.psi == RESNET_PSI and m.psi_trace == RESNET_PSI and m.n == 2 and m.steps == 3
    assert ("inferred" in m.psi_how) == (psi is None)
    assert m.bytes_per_rank_per_step == pytest.approx(RESNET_BYTES)
    cats = m.categories.set_index("category")
    assert cats.at["buffers", "bytes_per_rank_per_step"] == pytest.approx(RESNET_BUFFERS)
    assert cats.at["buffers", "calls_per_rank_per_step"] == 2
    assert res.matches[0] == "dp" and res.matches == ("dp",)
    dp = next(c for c in res.comparisons if c.scheme == "dp")
    assert round(dp.ratio, 3) == 1.000 and dp.pattern_match
    dz = next(c for c in res.comparisons if c.scheme == "deepspeed-zero2")
    assert dz.ratio == pytest.approx(2 / 3) and "no all-gather" in dz.explanation  # AR 2Ψ vs AR 2Ψ + AG Ψ


def test_resnet_psi_contradiction_is_an_error():
    table, meta = _read(RESNET)
    with pytest.raises(TraceMismatchError, match="contradicts the trace"):
        measure(table, psi=7_500_000_000, meta=meta)


# --- DeepSpeed ZeRO-3 over gloo ------------------------------------------------------------------

GLOO_PSI = 377_856  # 256·512+512 + 512·384+384 + 384·128+128
# Per step: one all-gather and one reduce-scatter of the full 377,856 fp32 vector, N = 4:
# each (4-1)/4 · 377,856 · 4 B = 1,133,568 B, together 2,267,136 B.
GLOO_BYTES = 2 * 3 / 4 * GLOO_PSI * 4


def test_gloo_zero3_run_matches_the_two_collective_schemes():
    assert 256 * 512 + 512 + 512 * 384 + 384 + 384 * 128 + 128 == GLOO_PSI
    table, meta = _read(sorted(GLOO.glob("rank*.json.gz")))
    res = check(table, psi=GLOO_PSI, n=4, meta=meta)
    m = res.measurement
    assert m.steps == 3 and m.bytes_per_rank_per_step == pytest.approx(GLOO_BYTES)
    cats = m.categories.set_index("category")
    # scalar: one 0-d fp64 all-reduce per step, 2·3/4·8 B = 12 B
    assert cats.at["scalar", "bytes_per_rank_per_step"] == pytest.approx(12)
    # one-off: 3 × (1 + 12) int64 broadcasts in the first profiled step, 3/4 · 3 · 13 · 8 B = 234 B
    assert cats.at["one_off", "bytes_per_rank_per_step"] == pytest.approx(234)
    # DeepSpeed ZeRO-3 (the scheme that ran) gathers once: its backward re-gather is skipped below
    # stage3_max_reuse_distance; the trace cannot tell it from the other all-gather + reduce-scatter schemes
    assert set(res.matches) == {"zero1", "zero2", "deepspeed-zero3", "fsdp-shard-grad-op"}
    # the same two collectives of Ψ each: where the step boundary falls is no evidence, so no order among them
    assert res.matches == ("zero1", "zero2", "deepspeed-zero3", "fsdp-shard-grad-op")
    assert [set(g) for g in res.indistinguishable] == [
        {"zero1", "zero2", "deepspeed-zero3", "fsdp-shard-grad-op"}]
    by = {c.scheme: c for c in res.comparisons}
    assert by["zero3"].ratio == pytest.approx(2 / 3) and not by["zero3"].pattern_match
    assert "2Ψ" in by["zero3"].explanation  # the paper gathers twice per step, the run once
    # ... because DeepSpeed keeps the forward gather for backward (stage3_max_reuse_distance = 1e9 by
    # default, and Ψ = 377,856 is far below it): the explanation must say so.
    assert "stage3_max_reuse_distance" in by["zero3"].explanation
    assert "stage3_max_reuse_distance" not in by["deepspeed-zero2"].explanation
    assert by["dp"].ratio == pytest.approx(1.0) and not by["dp"].pattern_match


@pytest.mark.parametrize("steps", [None, 3])
def test_gloo_without_step_markers_finds_three_steps(steps):
    table, meta = _read(sorted((GLOO / "no-step-markers").glob("rank*.json.gz")))
    m = measure(table.assign(step=pd.NA), steps=steps, meta=meta)  # no marker, nor the optimizer's steps
    assert m.steps == 3 and m.psi == GLOO_PSI and m.n == 4
    assert ("--steps" in m.steps_how) == (steps is not None)
    assert "6 call(s) before" in m.steps_how  # the six broadcasts before the first step
    assert m.bytes_per_rank_per_step == pytest.approx(GLOO_BYTES)


def test_gloo_without_step_markers_takes_the_optimizers_steps():
    # the same trace: no ProfilerStep, three optimizer steps annotated (Optimizer.step#Adam.step), so two
    # steps from one's end to the next's; --steps 3 (not the optimizer's 2) reads it as it repeats
    table, meta = _read(sorted((GLOO / "no-step-markers").glob("rank*.json.gz")))
    m = measure(table, meta=meta)
    assert m.steps == 2 and m.psi == GLOO_PSI and m.n == 4 and "Optimizer.step#" in m.steps_how
    assert m.bytes_per_rank_per_step == pytest.approx(GLOO_BYTES)
    m3 = measure(table, steps=3, meta=meta)
    assert m3.steps == 3 and "6 call(s) before" in m3.steps_how


def test_steps_that_do_not_repeat_are_refused():
    table, meta = _read(sorted((GLOO / "no-step-markers").glob("rank*.json.gz")))
    with pytest.raises(TraceMismatchError, match="--steps 4"):
        measure(table, steps=4, meta=meta)


# --- DLRM, 8 ranks: all-to-all reported apart ------------------------------------------------------


def test_dlrm_all_to_all_is_unexplained_not_dropped():
    table, meta = _read(DATA / "kineto" / "dlrm-v100-8ranks")
    m = measure(table, meta=meta)
    assert m.n == 8 and len(m.ranks) == 8
    assert m.psi == 394241 + 112 + 226960  # three fp32 all-reduce buckets per step
    assert m.bytes_per_rank_per_step == pytest.approx(2 * 7 / 8 * (394241 + 112 + 226960) * 4)
    cats = m.categories.set_index("category")
    assert cats.at["unexplained", "calls_per_rank_per_step"] == 5  # 5 all-to-alls per rank
    assert any("all-to-all" in t for t in m.notes)


def test_a_trace_that_names_no_group_says_n_is_its_world_and_takes_n_from_the_user():
    # the DLRM trace's schema records sizes in Input Dims and no group (test_traces_kineto): N is the
    # world's 8 by assumption, and said so; --n 4 is the user's word, not a contradiction of the trace
    table, meta = _read(DATA / "kineto" / "dlrm-v100-8ranks")
    assert table["group_size"].isna().all()
    m = measure(table, meta=meta)
    assert m.n == 8 and "no call records its group" in m.n_how and "give --n" in m.n_how
    m4 = measure(table, meta=meta, n=4)
    assert m4.n == 4 and "no call in the trace records its group" in m4.n_how
    assert m4.bytes_per_rank_per_step == pytest.approx(2 * 3 / 4 * (394241 + 112 + 226960) * 4)
    # but no group size the world of 8 does not split into
    for bad in (3, 16):
        with pytest.raises(TraceMismatchError, match=f"--n {bad} contradicts the trace: no call records"):
            measure(table, meta=meta, n=bad)
    # a trace whose calls record their groups keeps refusing an --n it contradicts
    table, meta = _read(RESNET)
    with pytest.raises(TraceMismatchError, match="--n 8 contradicts"):
        measure(table, meta=meta, n=8)


def test_mixed_world_sizes_are_refused():
    table, meta = _read(RESNET)
    bad = {f: dict(v, world_size=4) for f, v in meta.items()}
    bad["other-run.json"] = {"world_size": 2}
    with pytest.raises(TraceMismatchError, match="different world sizes"):
        measure(table, meta=bad)


def test_joint_fit_uncertainty_matches_weighted_polyfit():
    """The bf16 all-gather sweep on 2 GPUs has bandwidth-bound sizes only, so α and β are fitted
    jointly. On 2 ranks an all-gather has one latency step and busbw factor (p-1)/p = 1/2, so the
    model is t = α + β·n/2: a straight line, which numpy's weighted polyfit (weights 1/t, the
    relative error) fits independently, with its own covariance. The two must agree, uncertainty
    included (a rank-deficient covariance once reported ± 5e-16 µs here)."""
    text = (DATA / "nccl-tests" / "all_gather_perf-bf16-2gpu.txt").read_text()
    rows = [ln.split() for ln in text.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    size = np.array([float(r[0]) for r in rows])
    t = np.array([float(r[5]) for r in rows]) * 1e-6  # out-of-place time(us)
    (beta, alpha), cov = np.polyfit(size / 2, t, 1, w=1 / t, cov=True)
    fit = fit_alpha_beta(size, t, op="all_gather", group_size=2)
    assert fit.method == "joint"
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert fit.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    assert fit.alpha_se_s == pytest.approx(np.sqrt(cov[1, 1]), rel=1e-3)
    assert fit.busbw_se_Bps == pytest.approx(np.sqrt(cov[0, 0]) / beta**2, rel=1e-3)
