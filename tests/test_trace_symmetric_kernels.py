"""A profiler trace whose NCCL calls ran on NCCL's symmetric kernels (NCCL 2.27 on, buffers registered as a
symmetric window): the kernels are linked to their calls and timed, and each call is priced on the kernel
that ran. The traces are the DLRM step's (facebookresearch/param, 8 ranks) with its all-reduce kernels
renamed as NCCL names its symmetric ones; the measured values are counted from those files, the predicted
ones derived by hand from NCCL's model of the kernel (``queryModel_lsa``, ``src/sym_kernels.cc``)."""

import gzip
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
DLRM = Path(__file__).parent / "data" / "traces" / "kineto" / "dlrm-v100-8ranks"
LEGACY = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
# kernel_cname, src/device/symmetric/generate.py: ncclSymDevKernel_<coll>_<algo>_<red>_<ty> in
# v2.27.3-v2.27.7, ncclSymkDevKernel_... from v2.28.3; the argument struct as each release's prototype()
# declares it
SYMK_2_28 = "ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_f32(ncclSymkDevWorkArgs4K)"
SYMK_2_27 = "ncclSymDevKernel_AllReduce_AGxLL_R_sum_f32(ncclSymDevArgs)"


def _renamed(tmp_path, name):
    """The DLRM step with its all-reduce kernels named ``name`` (its send/receive kernels as NCCL 2.19 on
    names them, so no name is of NCCL 2.18 or before)."""
    out = tmp_path / name.split("(")[0]
    out.mkdir()
    for f in sorted(DLRM.glob("rank*.json.gz")):
        text = gzip.decompress(f.read_bytes()).decode()
        assert text.count(LEGACY) == 3
        text = text.replace(LEGACY, name).replace("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
                                                  "ncclDevKernel_SendRecv")
        assert "ncclKernel_" not in text
        (out / f.name).write_bytes(gzip.compress(text.encode()))
    return out


def _durations_us(path, prefix):
    """Each rank's kernels named ``prefix``…, their durations (µs) in trace order, counted from the file."""
    out = []
    for f in sorted(path.glob("rank*.json.gz")):
        with gzip.open(f) as fh:
            events = json.load(fh)["traceEvents"]
        out.append([e["dur"] for e in events
                    if e.get("ph") == "X" and str(e.get("name", "")).startswith(prefix)])
    return out


def _check(path, *args):
    r = runner.invoke(app, ["check", str(path), "--topology", "dgx-h100", *args])
    assert r.exit_code == 0, r.output
    return r


GIB = (1 << 30) / 1e6  # bytes per µs of one GiB/s (queryModel's GBps)


def _lsa_us(bus_bytes, base_us, sm_bw_gib, peak_gib):
    """``queryModel_lsa`` on Hopper by hand: ``baseLat + softplus(busBytes / bw - 1)`` with ``bw =
    softmin(nSMs · smBw, peakBw, smBw)``, on the fewest blocks within 2.5 % of 64 blocks' time."""
    sm, peak = sm_bw_gib * GIB, peak_gib * GIB

    def t(blocks):
        bw = peak - sm * math.log1p((math.exp(peak / sm) - 1) * math.exp(-blocks))
        return base_us + math.log1p(math.exp(bus_bytes / bw - 1))

    return next(t(b) for b in range(1, 65) if t(b) <= 1.025 * t(64))


@pytest.mark.parametrize(("name", "kernel"), [
    (SYMK_2_28, "AllReduce_RSxLD_AGxST"),
    (SYMK_2_27, "AllReduce_AGxLL_R"),
    ("ncclSymkDevKernel_AllGather_LLMC", "AllGather_LLMC"),  # an all-gather's names no reduction or type
    ("ncclSymkDevKernel_ReduceScatter_LDMC_sum_bf16", "ReduceScatter_LDMC"),
    ("ncclSymkDevKernel_ReduceScatter_RailA2A_LsaLDMC_avg_f8e4m3", "ReduceScatter_RailA2A_LsaLDMC"),  # v2.30
    ("ncclSymkDevKernel_AllGather_GinHier_MCRing", "AllGather_GinHier_MCRing"),  # v2.29.2's network kernel
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", None),
    ("ncclKernel_AllReduce_RING_LL_Sum_float", None),
])
def test_symmetric_kernel_names_are_read_as_their_kernel(name, kernel):
    from zerocalc.nccl.symmetric import kernel_of
    from zerocalc.validate.nccl_timing import kernel_algorithm
    from zerocalc.validate.symmetric import ALGORITHM

    assert kernel_of(name) == kernel
    if kernel is not None:  # the algorithm a sweep's row on a symmetric kernel names too
        assert kernel_algorithm(name) == ALGORITHM == "SYMK"


def test_calls_on_symmetric_kernels_are_timed_on_the_kernel_that_ran(tmp_path):
    path = _renamed(tmp_path, SYMK_2_28)
    per_rank = _durations_us(path, "ncclSymkDevKernel_AllReduce")
    assert {len(k) for k in per_rank} == {3}
    t = json.loads(_check(path, "--format", "json").stdout)["nccl_timing"]
    # the kernels are the calls' own: the step's all-reduces measured as the files time them
    assert t["measured_step_time_s"] == pytest.approx(sum(sum(k) for k in per_rank) / 8 * 1e-6)
    fastest = sum(min(k[i] for k in per_rank) for i in range(3)) * 1e-6
    assert t["fastest_rank_step_time_s"] == pytest.approx(fastest)
    step = [c for c in t["calls"] if c["category"] == "step"]
    assert len(step) == 3
    for c in step:
        assert (c["ran_algorithm"], c["ran_kernel"], c["ran_pair"]) == (
            "SYMK", "AllReduce_RSxLD_AGxST", "SYMK/RSxLD_AGxST")
        assert not c["pair"].startswith("SYMK")  # the tuning model's own pick is a legacy pair
    # the 448 B all-reduce: no version stated and the kernels named as NCCL 2.28 on names them, so NCCL
    # 2.30.7 prices it; its count rounded up to a 1 KiB cell (NCCL_SYM_KERNEL_CELL_SIZE), bus bytes
    # 2 · 1024 · 7/8 = 1792; Hopper's RSxLD_AGxST: 7.8 µs base, 65 GiB/s an SM, 320 GiB/s peak
    (small,) = [c for c in step if c["bytes"] == 448]
    assert small["ran_predicted_s"] * 1e6 == pytest.approx(_lsa_us(1792, 7.8, 65, 320), rel=1e-6)
    assert small["ran_predicted_s"] * 1e6 == pytest.approx(8.12, abs=0.01)
    # the 1.58 MB one: 2 · n · 7/8 bus bytes on NVLink at up to 320 GiB/s, not less than the links take
    (big,) = [c for c in step if c["bytes"] == max(s["bytes"] for s in step)]
    n = -(-int(big["bytes"]) // 1024) * 1024
    assert big["ran_predicted_s"] * 1e6 >= _lsa_us(2 * n * 7 // 8, 7.8, 65, 320) - 1e-9


def test_the_text_names_the_symmetric_kernel_and_the_release_its_names_give(tmp_path):
    out = _check(_renamed(tmp_path, SYMK_2_28)).output
    assert ("the trace's kernels are NCCL's symmetric kernel AllReduce_RSxLD_AGxST (buffers registered as a "
            "symmetric window, NCCL 2.27 on), which NCCL's model of it times at 8.12 µs (SYMK/RSxLD_AGxST)"
            in out)
    assert "priced by the latest release modelled" in out
    # NCCL 2.27 names them ncclSymDevKernel_...: priced as its last release, its note says why
    old_path = _renamed(tmp_path, SYMK_2_27)
    old = _check(old_path)
    assert "timing by NCCL 2.27's own cost model" in old.output
    assert ("the trace states no NCCL version; its symmetric kernels are named ncclSymDevKernel_… (NCCL "
            "2.27; ncclSymkDevKernel_… from 2.28): its calls are priced as NCCL 2.27.7, the last release of "
            "that naming" in " ".join(old.output.split()))
    # AGxLL_R on 448 B (2.27 rounds no count up): LL bus bytes 8 · 448 · 9, 4.5 µs base
    t = json.loads(_check(old_path, "--format", "json").stdout)["nccl_timing"]
    (small,) = [c for c in t["calls"] if c["bytes"] == 448]
    assert small["ran_pair"] == "SYMK/AGxLL_R"
    assert small["ran_predicted_s"] * 1e6 == pytest.approx(_lsa_us(8 * 448 * 9, 4.5, 65, 320), rel=1e-6)


def test_a_symmetric_kernel_zerocalc_does_not_time_is_named_untimed(tmp_path):
    # v2.30's TMA all-reduce (NCCL_SYM_TMA_ENABLE) is read but not modelled
    path = _renamed(tmp_path, "ncclSymkDevKernel_AllReduce_RSxTmaLD_AGxTmaST_sum_f32(ncclSymkDevWorkArgs4K)")
    t = json.loads(_check(path, "--format", "json").stdout)["nccl_timing"]
    step = [c for c in t["calls"] if c["category"] == "step"]
    assert {(c["ran_pair"], c["ran_predicted_s"]) for c in step} == {("SYMK/RSxTmaLD_AGxTmaST", None)}
    assert "which zerocalc does not time" in _check(path).output


def test_a_release_stated_with_its_build_prices_the_symmetric_kernel_as_the_release(tmp_path):
    # NCCL prints its version with the CUDA build it was made for (2.28.3+cuda12.9), and --nccl-version
    # takes it so: the kernel is priced as 2.28.3 (count rounded to a 1 KiB cell), as without the suffix
    path = _renamed(tmp_path, SYMK_2_28)
    for version in ("2.28.3+cuda12.9", "2.28.3"):
        t = json.loads(_check(path, "--nccl-version", version, "--format", "json").stdout)["nccl_timing"]
        (small,) = [c for c in t["calls"] if c["bytes"] == 448]
        assert small["ran_predicted_s"] * 1e6 == pytest.approx(_lsa_us(1792, 7.8, 65, 320), rel=1e-6)
