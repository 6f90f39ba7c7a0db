"""NCCL's symmetric kernels (nccl-tests -R 2): the model against hand computation from NCCL's own formulas
(src/symmetric.cc v2.27.3, src/sym_kernels.cc v2.28.3-v2.30.7, src/scheduler/symmetric_sched.cc), the
trigger on the file's command line and the check option."""

from __future__ import annotations

import io
import json
import math

import pytest
from sweep_files import DATA, check_json, file_rows, runner, with_lines_before_table

from zerocalc.cli import app
from zerocalc.nccl.symmetric import KERNELS as K
from zerocalc.nccl.symmetric import Call, falls_back, pick, query, unsupported
from zerocalc.nccl.tables import Collective
from zerocalc.traces.nccl_tests import parse

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
GIB_US = 2**30 / 1e6  # NCCL's GBps: bytes per µs of one GiB/s (queryModel)
H100_FILE = "all_reduce_perf-8xH100-dgx-1node-dgxc-benchmarking.txt"


def kernel(name):
    return next(k for k in K if k.name == name)


def by_hand(bus_bytes, base_us, blocks, sm_gib, mult, peak_gib):
    """NCCL's ``model()`` written out from the source: baseLat + softplus(busBytes/bw - 1, 1),
    bw = softmin(nSMs * smBw * busMultiplier, peakBw, smBw)."""
    sm, peak = sm_gib * GIB_US, peak_gib * GIB_US
    x = blocks * sm * mult
    bw = peak - sm * math.log1p((math.exp(peak / sm) - 1) * math.exp(-x / sm))
    z = bus_bytes / bw - 1
    return base_us + (z if z >= 100 else math.log1p(math.exp(z)))  # softplus: x itself from 100 on


def test_hopper_allreduce_8_bytes_is_the_ll_kernel_on_one_block():
    # 8 ranks, 8 B, no NVLS: AGxLL_R, busBytes = 8 x 8 x 9; Hopper baseLat 4.5 µs, smBw 65, peak 320 GiB/s;
    # one block is within 2.5 % of 64 blocks' time
    one, full = by_hand(576, 4.5, 1, 65, 1, 320), by_hand(576, 4.5, 64, 65, 1, 320)
    assert one <= 1.025 * full
    c = pick(Call(AR, 8, 8, 90, False), (2, 27, 7))
    assert (c.kernel.name, c.blocks) == ("AllReduce_AGxLL_R", 1)
    assert c.time_s * 1e6 == pytest.approx(one, rel=1e-9)
    assert c.time_s * 1e6 == pytest.approx(4.8155, abs=1e-3)


def test_hopper_allreduce_1_gib_is_bandwidth_bound_at_320_gib_per_s():
    # RSxLD_AGxST: busBytes = 2 n (N-1)/N; saturated, time -> 7.8 + busBytes / 320 GiB/s - 1 µs; NCCL keeps
    # the fewest blocks within 2.5 % of that
    bus = 2 * 2**30 * 7 // 8
    floor = 7.8 + bus / (320 * GIB_US) - 1
    c = pick(Call(AR, 2**30, 8, 90, False), (2, 28, 9))
    assert c.kernel.name == "AllReduce_RSxLD_AGxST"
    assert floor <= c.time_s * 1e6 <= 1.025 * floor * (1 + 1e-9)
    t, blocks = query(kernel("AllReduce_RSxLD_AGxST"), 2**30, 8, False)
    assert t == pytest.approx(by_hand(bus, 7.8, blocks, 65, 1, 320))
    assert by_hand(bus, 7.8, blocks - 1, 65, 1, 320) > 1.025 * by_hand(bus, 7.8, 64, 65, 1, 320)


def test_blackwell_nvls_allreduce_switches_from_ll_to_ldmc_between_32_and_64_kib():
    # B200 x8 with NVLS: AGxLLMC_R (busMultiplier 1.1, base 11 µs) against RSxLDMC_AGxSTMC (busBytes n/N + n,
    # busMultiplier N, at most divUp(32, 8) = 4 blocks, base 19.5 µs, peak 1000 GiB/s), weighed 2.5 % a block
    def weighed(name, n):
        t, b = query(kernel(name), n, 8, True)
        return t * (1 + 0.025 * b)

    for n, want in ((32768, "AllReduce_AGxLLMC_R"), (65536, "AllReduce_RSxLDMC_AGxSTMC")):
        other = ({"AllReduce_AGxLLMC_R", "AllReduce_RSxLDMC_AGxSTMC"} - {want}).pop()
        assert weighed(want, n) < weighed(other, n)
        assert pick(Call(AR, n, 8, 100, True), (2, 27, 7)).kernel.name == want
    t, b = query(kernel("AllReduce_RSxLDMC_AGxSTMC"), 65536, 8, True)
    assert b <= 4 and t == pytest.approx(by_hand(65536 // 8 + 65536, 19.5, b, 55, 8, 1000))
    t, b = query(kernel("AllReduce_AGxLLMC_R"), 32768, 8, True)
    assert t == pytest.approx(by_hand(8 * 32768 * 9, 11.0, b, 55, 1.1, 600))


def test_cells_of_1_kib_from_2_28():
    # an all-gather of 8 B per rank: 2.27 models 8 B, 2.28 rounds the count up to NCCL_SYM_KERNEL_CELL_SIZE
    c27, c28 = pick(Call(AG, 64, 8, 90, False), (2, 27, 7)), pick(Call(AG, 64, 8, 90, False), (2, 28, 3))
    assert c27.kernel.name == c28.kernel.name == "AllGather_LL"
    assert c27.time_s * 1e6 == pytest.approx(by_hand(8 * 8 * 9, 4.5, c27.blocks, 44, 1, 320))
    assert c28.time_s * 1e6 == pytest.approx(by_hand(8 * 1024 * 9, 4.5, c28.blocks, 44, 1, 320))


def test_multimem_needs_nvls_and_from_2_29_7_more_than_two_ranks():
    big = Call(AR, 2**28, 2, 90, True)
    assert pick(big, (2, 29, 3)).kernel.name == "AllReduce_RSxLDMC_AGxSTMC"
    assert pick(big, (2, 29, 7)).kernel.name == "AllReduce_RSxLD_AGxST"
    assert pick(Call(AR, 2**28, 8, 90, False), (2, 30, 7)).kernel.name == "AllReduce_RSxLD_AGxST"


def test_ll_kernels_stop_at_4_gib_and_every_kernel_at_64_gib():
    assert not pick(Call(AG, 4 << 30, 8, 90, False), (2, 30, 7)).kernel.ll
    assert pick(Call(AG, 64 << 30, 8, 90, False), (2, 30, 7)) is None
    # a group of several calls (-a 4) runs no LL kernel from 2.28, and 2.27 runs it on the legacy kernels
    grouped = Call(AR, 8, 8, 90, False, group_calls=4)
    assert not pick(grouped, (2, 28, 9)).kernel.ll
    assert falls_back(grouped, pick(grouped, (2, 27, 7)), (2, 27, 7), True) is not None


def test_types_and_reductions():
    assert unsupported(Call(AR, 8, 8, 90, False, "fp64"), (2, 28, 9)) is not None
    assert unsupported(Call(AR, 8, 8, 90, False, "int32"), (2, 28, 9)) is not None
    assert unsupported(Call(AG, 8, 8, 90, False, "fp64"), (2, 28, 9)) is None
    assert unsupported(Call(RS, 8, 8, 90, False, "bf16", "max"), (2, 28, 9)) is not None
    assert unsupported(Call(AR, 8, 8, 90, False, "fp32", "avg"), (2, 29, 7)) is not None
    assert unsupported(Call(AR, 8, 8, 90, False, "fp32", "avg"), (2, 30, 3)) is None
    assert unsupported(Call(AR, 8, 8, 90, False), (2, 26, 6)) is not None


def test_ll_fallback_of_2_29_2_to_2_29_3_only():
    call = Call(AR, 8, 8, 90, False, one_thread_multi_gpu=True)
    ll = pick(call, (2, 29, 3))
    assert ll.kernel.ll
    assert falls_back(call, ll, (2, 29, 3), True) is not None  # one thread, several GPUs
    one = Call(AR, 8, 8, 90, False)
    assert falls_back(one, ll, (2, 29, 3), False) is not None  # the legacy model picks another protocol
    assert falls_back(one, ll, (2, 29, 3), True) is None
    assert falls_back(call, ll, (2, 29, 7), False) is None  # registered buffers keep it from 2.29.7
    assert falls_back(call, ll, (2, 28, 9), False) is None


@pytest.mark.parametrize(("flag", "want"), [("-R 2", 2), ("-R2", 2), ("--local_register 2", 2),
                                            ("--local_register=2", 2), ("-R 1", 1), ("", None)])
def test_register_read_from_the_command_line(flag, want):
    text = (DATA / H100_FILE).read_text()
    head = f"+ mpirun -np 8 ./build/all_reduce_perf -b 8 -e 16G -f 2 -g 1 {flag}\n"
    res = parse(io.StringIO(head + text), "x.txt")
    runs = res.meta["runs"]
    assert [r["local_register"] for r in runs] == [want]


def test_register_not_read_from_another_command():
    text = (DATA / H100_FILE).read_text()
    res = parse(io.StringIO("cp -R 2 ./build\n" + text), "x.txt")
    assert [r["local_register"] for r in res.meta["runs"]] == [None]


def test_symmetric_downgrade_line_is_local_registration():
    text = (DATA / H100_FILE).read_text()
    head = ("./build/all_reduce_perf -b 8 -e 16G -R 2\n"
            "Option -R 2 (symmetric) is not supported before NCCL 2.27. Defaulting to local registration\n")
    res = parse(io.StringIO(head + text), "x.txt")
    assert [r["local_register"] for r in res.meta["runs"]] == [1]


def _symk_rows(sweep):
    return [r for r in sweep["rows"] if r["algorithm"] == "SYMK"]


def test_check_option_prices_every_row_on_a_symmetric_kernel():
    plain = check_json(H100_FILE, "--nccl-version", "2.28.9")
    sym = check_json(H100_FILE, "--nccl-version", "2.28.9", "--local-register", "2")
    assert not _symk_rows(plain) and plain.get("local_register") is None
    rows = _symk_rows(sym)
    assert len(rows) == len(file_rows(H100_FILE)) and sym["local_register"] == 2
    for r in rows:
        assert r["symk_kernel"].startswith("AllReduce_") and r["symk_kernel"].endswith(r["protocol"])
        assert r["predicted_s"] == pytest.approx(r["nccl_s"])  # one process per GPU: no launch terms
    small = min(rows, key=lambda r: r["bytes"])
    assert small["symk_kernel"] == "AllReduce_AGxLLMC_R"  # H100 with NVLS, 8 B
    assert any("symmetric kernels" in n and "sym_kernels.cc" in n for n in sym["notes"])


def test_check_option_zero_and_one_change_nothing():
    plain = check_json(H100_FILE, "--nccl-version", "2.28.9")
    for v in ("0", "1"):
        s = check_json(H100_FILE, "--nccl-version", "2.28.9", "--local-register", v)
        assert [r["predicted_s"] for r in s["rows"]] == [r["predicted_s"] for r in plain["rows"]]
    one = check_json(H100_FILE, "--nccl-version", "2.28.9", "--local-register", "1")
    assert any("-R 1" in n for n in one["notes"])


def test_before_2_27_a_note_and_the_legacy_price():
    plain = check_json(H100_FILE, "--nccl-version", "2.26.6")
    sym = check_json(H100_FILE, "--nccl-version", "2.26.6", "--local-register", "2")
    assert [r["predicted_s"] for r in sym["rows"]] == [r["predicted_s"] for r in plain["rows"]]
    assert any("-R 2" in n and "from 2.27" in n for n in sym["notes"])


def test_file_command_line_triggers_it(tmp_path):
    path = with_lines_before_table(tmp_path, H100_FILE, ["$ ./build/all_reduce_perf -b 8 -e 16G -f 2 -R2"])
    res = runner.invoke(app, ["check", str(path), "--format", "json", "--nccl-version", "2.30.7"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert len(_symk_rows(sweep)) == len(file_rows(H100_FILE))
    # the option overrides the file
    res = runner.invoke(app, ["check", str(path), "--format", "json", "--nccl-version", "2.30.7",
                              "--local-register", "0"])
    assert not _symk_rows(json.loads(res.stdout)["sweeps"][0])


@pytest.mark.parametrize("bad", ["3", "two", "-1", ""])
def test_bad_option_value_is_one_line_exit_2(bad):
    res = runner.invoke(app, ["check", str(DATA / H100_FILE), "--local-register", bad])
    assert res.exit_code == 2
    assert "--local-register" in res.output and len(res.output.strip().splitlines()) == 1


def test_grouped_calls_share_one_kernel_from_2_28():
    # -a 4 of 1 MiB all-reduces: one kernel on 4 MiB (whole 1 KiB cells), no LL kernel; per call a quarter
    c = pick(Call(AR, 1 << 20, 8, 90, False, group_calls=4), (2, 28, 9))
    assert not c.kernel.ll
    t, blocks = query(c.kernel, 4 << 20, 8, False)
    assert (c.time_s * 1e6 * 4, c.blocks) == (pytest.approx(t), blocks)


def test_ranks_across_nodes_keep_the_legacy_kernels():
    name = "all_reduce_perf-8xH100-2nodes-4pernode-g4.txt"
    plain = check_json(name, "--nccl-version", "2.28.9")
    sym = check_json(name, "--nccl-version", "2.28.9", "--local-register", "2")
    assert not _symk_rows(sym)
    assert [r["predicted_s"] for r in sym["rows"]] == [r["predicted_s"] for r in plain["rows"]]
    assert any("more than one NVLink domain" in n for n in sym["notes"])


def test_a_large_call_takes_no_less_than_the_links_rate():
    # NCCL's model of the multimem all-reduce takes its 480 GiB/s peak over nBytes/nRanks + nBytes (Hopper,
    # sym_kernels.cc), where the legacy model's bus bandwidth is over 2(n-1)/n of the bytes: at the largest
    # size the kernel's own time is well under the legacy one, and the call is priced at the links' rate,
    # the legacy time less its latency (a few tens of µs at most against milliseconds)
    plain = check_json(H100_FILE, "--nccl-version", "2.28.9")
    sym = check_json(H100_FILE, "--nccl-version", "2.28.9", "--local-register", "2")
    big, legacy = sym["rows"][-1], plain["rows"][-1]
    assert big["symk_kernel"] == "AllReduce_RSxLDMC_AGxSTMC"
    n = big["bytes"]
    assert big["symk_model_s"] * 1e6 == pytest.approx((n / 8 + n) / (480 * GIB_US), rel=0.03)
    assert big["symk_model_s"] < 0.75 * legacy["predicted_s"]
    assert legacy["predicted_s"] - 50e-6 <= big["predicted_s"] <= legacy["predicted_s"]
    small = sym["rows"][0]  # latency-bound: NCCL's own time for its LL kernel, under the legacy one
    assert small["predicted_s"] == pytest.approx(small["symk_model_s"])
    assert small["predicted_s"] < plain["rows"][0]["predicted_s"]
