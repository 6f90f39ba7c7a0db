"""check --topology on public nccl-tests sweeps, fit --out, table's NCCL columns (CLI)."""

import json
import tomllib

import numpy as np
import pytest
from sweep_files import DATA, check_json, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.topology import PRESETS

runner = CliRunner()

# file, preset the hardware matches, extra options, NCCL version the file states (None: none)
SWEEPS = [
    ("all_reduce_perf-16xH100-2nodes-infiniband.txt", "dgx-h100", ["--n", "16"], None),
    ("all_gather_perf-16xH100-a3mega.txt", "gcp-a3-mega", [], None),
    ("all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt", "dgx-b200", ["--n", "16"], "2.26.2"),
]
#: sizes outside 0.5-2x, with NCCL 2.26's tables: the B200 sweep's 512 B (0.49x) and 512 KiB (0.22x)
#: rows, whose out-of-place times (51.05 µs, 240.71 µs) are 1.37x and 1.91x the same size's in-place
#: time in the file (its 1 MiB row, 0.49x before NCCL's NVLS Tree correction timed it, is 0.52x)
OUTSIDE = {"all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt": {512, 524288}}


@pytest.mark.parametrize(("name", "preset", "extra", "version"), SWEEPS)
def test_public_sweeps_within_bands(name, preset, extra, version):
    sweep = check_json(name, "--topology", preset, *extra)
    assert sweep["group_size"] == 16
    if version:
        assert sweep["nccl_version"] == version
    inside = {r["bytes"] for r in sweep["rows"] if 0.5 <= r["ratio"] <= 2.0}
    assert {r["bytes"] for r in sweep["rows"]} - inside == OUTSIDE.get(name, set())
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_bundled_tcpxo_sweep_large_sizes_and_its_calibration(tmp_path):
    """The bundled 16xH100 sweep ran on GPUDirect-TCPXO (its source repository builds GCP A3 Mega), whose
    recommended NCCL environment loads a tuner plugin: NCCL's own tables predict its large sizes only."""
    name = "all_reduce_perf-16xH100-2nodes.txt"
    sweep = check_json(name, "--topology", "gcp-a3-mega")
    big = np.array([r["ratio"] for r in sweep["rows"] if r["bytes"] >= 256 << 20])
    assert ((big > 0.75) & (big < 1.25)).all(), big
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / name), "--out", str(out), "--topology", "gcp-a3-mega"])
    assert res.exit_code == 0, res.output
    cal = check_json(name, "--topology", str(out))
    assert 0.9 <= float(np.median([r["ratio"] for r in cal["rows"]])) <= 1.1
    assert all(r["calibrated"] for r in cal["rows"])


def test_bundled_tcpxo_sweep_at_the_nccl_and_environment_it_ran_with():
    """The run's NCCL is 2.21.5 (its source repository's README lists libnccl.so.2.21.5, installed by the
    TCPXO plugin installer v1.0.3 its startup script pulls, and runs this very command after sourcing that
    installer's nccl-env-profile.sh); GCP's release notes give that profile's NCCL_ALGO=Ring,Tree,
    NCCL_PROTO=Simple, NCCL_NVLS_ENABLE=0, which the gcp-a3-mega preset carries. Google's tuner plugin,
    which the profile also loads, is not priced: its rules are not published."""
    name = "all_reduce_perf-16xH100-2nodes.txt"
    sweep = check_json(name, "--topology", "gcp-a3-mega", "--nccl-version", "2.21.5")
    assert any("NCCL_PROTO=Simple" in n for n in sweep["notes"])
    pairs = {(r["algorithm"], r["protocol"]) for r in sweep["rows"]}
    assert pairs == {("Ring", "Simple"), ("Tree", "Simple")}
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"]), [r["ratio"] for r in sweep["rows"]]
    assert 0.8 <= float(np.median([r["ratio"] for r in sweep["rows"]])) <= 1.25
    # the median size (256 KiB, 167.1 µs in the file) within 0.8-1.25: from 16 KiB NCCL's estimate holds its
    # ring plateau (latency × 1.4), which the call runs on the 1-8 of its 16 channels it launches there
    assert 0.8 <= median_size_ratio(sweep) <= 1.25
    rows = {r["bytes"]: r for r in sweep["rows"]}
    assert rows[256 << 10]["launch_channels"] < 16
    assert rows[256 << 10]["nccl_all_channels_s"] > rows[256 << 10]["predicted_s"]


def test_tcpxo_ring_steps_of_one_message_ride_one_of_two_flows():
    """The file's own rows: its in-place times agree with the out-of-place ones within 3% from 4 to 16 MiB
    (not noise), and from 16 to 32 MiB the time grows 8% for twice the bytes. Over 16 channels and 16 ranks
    a ring step of 16 MiB is a 64 KiB chunk, one message under the profile's NCCL_BUFFSIZE of 8 MiB (slices
    of at least 8 MiB / 128, NCCL's prims_simple.h), on one of TCPXO's two flows; at 32 MiB two messages
    take both (zerocalc.nccl.tcp_flows): priced, the two sizes cost alike, and the 16 MiB row is inside
    0.5-2x (0.39x at the whole connection's rate)."""
    name = "all_reduce_perf-16xH100-2nodes.txt"
    rows = {s: (o, i) for s, o, i in file_rows(name)}
    assert all(abs(rows[s][1] / rows[s][0] - 1) < 0.03 for s in (4 << 20, 8 << 20, 16 << 20))
    assert rows[32 << 20][0] / rows[16 << 20][0] < 1.1
    sweep = check_json(name, "--topology", "gcp-a3-mega", "--nccl-version", "2.21.5")
    got = {r["bytes"]: r for r in sweep["rows"]}
    assert got[16 << 20]["launch_channels"] == 16 and got[32 << 20]["launch_channels"] == 16
    assert got[32 << 20]["predicted_s"] / got[16 << 20]["predicted_s"] < 1.1
    assert 0.5 <= got[16 << 20]["ratio"] <= 2.0


ALL_FOUR = [(n, p, e) for n, p, e, _ in SWEEPS] + [
    ("all_reduce_perf-16xH100-2nodes.txt", "gcp-a3-mega", ["--nccl-version", "2.21.5"])]


@pytest.mark.parametrize(("name", "preset", "extra"), ALL_FOUR)
def test_rows_whose_out_of_place_and_in_place_times_disagree_are_flagged(name, preset, extra):
    """NCCL prices an in-place run as the out-of-place one (same bytes, collective, communicator), so a row
    whose two times differ by more than 1.25x either way is the run's: flagged, counted from the file."""
    sweep = check_json(name, "--topology", preset, *extra)
    expected = {s for s, o, i in file_rows(name) if max(o / i, i / o) > 1.25}
    assert {r["bytes"] for r in sweep["rows"] if r["unsteady"]} == expected
    in_place = [i * 1e-6 for _, _, i in file_rows(name)]
    assert [r["in_place_s"] for r in sweep["rows"]] == pytest.approx(in_place)
    res = runner.invoke(app, ["check", str(DATA / name), "--topology", preset, *extra])
    marked = [line for line in res.stdout.splitlines() if "× in-place" in line]
    assert len(marked) == len(expected)


def test_the_b200_outliers_are_the_files_unsteady_rows():
    """The Lambda B200 sweep's 512 B and 512 KiB rows: out-of-place 51.05 and 240.71 µs against in-place
    37.17 and 125.73 µs in the file."""
    name = "all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt"
    sweep = check_json(name, "--topology", "dgx-b200", "--n", "16")
    assert {r["bytes"] for r in sweep["rows"] if r["unsteady"]} == {512, 524288}
    res = runner.invoke(app, ["check", str(DATA / name), "--topology", "dgx-b200", "--n", "16"])
    assert "! out-of-place 1.91× in-place" in res.stdout and "! out-of-place 1.37× in-place" in res.stdout
    assert "unsteady measurement" in res.stdout


def test_a3mega_allgather_at_the_nccl_and_environment_it_ran_with():
    """dstack's A3 Mega example (commit 5408601 of Apr 4 2025, the page this sweep is from) installs the TCPXO
    plugin installer v1.0.8-1 with its NCCL into /var/lib/tcpxo/lib64 and runs all_gather_perf after sourcing
    its nccl-env-profile-ll128.sh; GCP's notes for v1.0.8-1 give nccl-2.23 as the installer's NCCL (2.21.5 to
    2.23.4 qualified), and those for v1.0.9-1 that profile's NCCL_ALGO=Ring,Tree, NCCL_PROTO=Simple,LL128,
    NCCL_NVLS_ENABLE=0 (the gcp-a3-mega preset's 2.22-2.23 environment, with NCCL_MIN_NCHANNELS=4)."""
    name = "all_gather_perf-16xH100-a3mega.txt"
    sweep = check_json(name, "--topology", "gcp-a3-mega", "--nccl-version", "2.23.4")
    assert any("NCCL_PROTO=Simple,LL128" in n and "NCCL_MIN_NCHANNELS=4" in n for n in sweep["notes"])
    assert {r["protocol"] for r in sweep["rows"]} <= {"Simple", "LL128"}
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_fit_out_keeps_the_providers_environment(tmp_path):
    """fit --out fits the pairs NCCL picks under the preset's environment at the run's NCCL, and the TOML it
    writes carries that environment, so check prices the same pairs with the fit."""
    name, out = "all_reduce_perf-16xH100-2nodes.txt", tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / name), "--out", str(out), "--topology", "gcp-a3-mega",
                              "--nccl-version", "2.21.5"])
    assert res.exit_code == 0, res.output
    doc = tomllib.loads(out.read_text())
    assert doc["nccl_env"][0]["NCCL_PROTO"] == "Simple"
    assert {(c["algorithm"], c["protocol"]) for c in doc["nccl_calibration"]} >= {("Ring", "Simple")}
    cal = check_json(name, "--topology", str(out), "--nccl-version", "2.21.5")
    assert all(r["calibrated"] for r in cal["rows"])
    assert 0.9 <= float(np.median([r["ratio"] for r in cal["rows"]])) <= 1.1


def test_a_calibrated_topology_prices_at_the_release_it_was_fitted_at(tmp_path):
    """The file states no NCCL version; the fit was told 2.21.5 (the run's, see above). Check and table on
    the calibrated TOML then price at 2.21.5 without being told again (its environment, NCCL_PROTO=Simple,
    is keyed to 2.21), as they do when told; --nccl-version still chooses."""
    name, out = "all_reduce_perf-16xH100-2nodes.txt", tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / name), "--out", str(out), "--topology", "gcp-a3-mega",
                              "--nccl-version", "2.21.5"])
    assert res.exit_code == 0, res.output
    told = check_json(name, "--topology", str(out), "--nccl-version", "2.21.5")
    untold = check_json(name, "--topology", str(out))
    assert untold["nccl_version"] == "2.21.5" and "calibration" in untold["nccl_version_how"]
    assert [r["ratio"] for r in untold["rows"]] == [r["ratio"] for r in told["rows"]]
    assert {r["protocol"] for r in untold["rows"]} == {"Simple"}
    assert check_json(name, "--topology", str(out), "--nccl-version", "2.30.7")["nccl_version"] == "2.30.7"
    table = runner.invoke(app, ["table", "--topology", str(out), "--n", "16", "--schemes", "dp"])
    assert table.exit_code == 0 and "NCCL 2.21's own cost model" in table.stdout


@pytest.mark.parametrize(("name", "preset", "extra", "version"), SWEEPS)
def test_fit_out_calibrates_every_sweep(tmp_path, name, preset, extra, version):
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / name), "--out", str(out), "--topology", preset, *extra])
    assert res.exit_code == 0, res.output
    doc = tomllib.loads(out.read_text())
    assert doc["compute_capability"] and doc["nccl_calibration"]
    sweep = check_json(name, "--topology", str(out), *extra)
    assert 0.9 <= float(np.median([r["ratio"] for r in sweep["rows"]])) <= 1.1
    table = runner.invoke(app, ["table", "--topology", str(out), "--n", "16", "--schemes", "dp"])
    assert table.exit_code == 0 and "t NCCL" in table.stdout


def test_check_text_draws_the_ratio_per_size():
    res = runner.invoke(app, ["check", str(DATA / "all_gather_perf-16xH100-a3mega.txt"), "--topology",
                              "gcp-a3-mega"])
    assert res.exit_code == 0
    lines = [ln for ln in res.stdout.splitlines() if ln.rstrip().endswith("]") and "Ring/" in ln]
    assert len(lines) == len(file_rows("all_gather_perf-16xH100-a3mega.txt"))
    assert all("*" in ln.split("[")[-1] for ln in lines)
    assert "states no NCCL version" in res.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--topology", "dgx-h100", "--nccl-version", "2.4.8"], "--nccl-version: NCCL 2.4.8 is not modelled"),
    (["--topology", "dgx-a100", "--nccl-algo", "NVLS"], "NVLS/Simple: no NVLink SHARP"),
    (["--topology", "dgx-h100", "--nccl-proto", "LL256"], "NCCL_PROTO: unknown name 'll256'"),
])
def test_check_bad_input_one_line_exit_2(args, message):
    res = runner.invoke(app, ["check", str(DATA / "all_reduce_perf-16xH100-2nodes.txt"), *args])
    assert res.exit_code == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_old_toml_missing_field_and_fit_refuses_to_overwrite(tmp_path):
    old = tmp_path / "old.toml"
    old.write_text("gpus_per_node = 8\n[intra]\nalpha_us = 3\nbw_GBps = 300\n[inter]\nalpha_us = 14\n"
                   "bw_GBps = 200\n")
    res = runner.invoke(app, ["table", "--topology", str(old), "--n", "16"])  # old files still work
    assert res.exit_code == 0 and "no NCCL columns" in res.stdout
    for cmd in (["table", "--topology", str(old), "--nccl-version", "2.19.3"],
                ["check", str(DATA / "all_reduce_perf-16xH100-2nodes.txt"), "--topology", str(old)]):
        res = runner.invoke(app, cmd)
        assert res.exit_code == 2 and "does not give" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    res = runner.invoke(app, ["fit", str(DATA / "all_reduce_perf-16xH100-2nodes.txt"), "--out", str(old),
                              "--topology", str(old)])
    assert res.exit_code == 2 and "is an input" in res.stderr


def test_table_shows_nccl_choice_and_honours_restrictions():
    res = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "8", "--schemes", "dp"])
    assert res.exit_code == 0
    assert "AR NVLS/Simple" in res.stdout  # one H100 node, a 15 GB all-reduce: NVLink SHARP
    res = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "8", "--schemes", "dp"],
                        env={"NCCL_ALGO": "ring"})
    assert res.exit_code == 0 and "AR Ring/Simple" in res.stdout
    res = runner.invoke(app, ["table", "--topology", "dgx-a100", "--n", "8", "--nccl-algo", "nvls"])
    assert res.exit_code == 2 and "no NVLink SHARP" in res.stderr


def test_plot_nccl_sweeps_draws_one_column_per_sweep():
    import pandas as pd

    from zerocalc.plots import plot_nccl_sweeps

    rows = file_rows("all_gather_perf-16xH100-a3mega.txt")
    df = pd.DataFrame({"sweep": "a", "bytes": [s for s, _, _ in rows],
                       "measured_s": [t * 1e-6 for _, t, _ in rows]})
    df["predicted_s"], df["textbook_s"] = df["measured_s"] * 0.9, df["measured_s"] * 1.5
    fig = plot_nccl_sweeps(pd.concat([df, df.assign(sweep="b")]))
    assert len(fig.axes) == 4 and fig.axes[0].get_title() == "a"
    with pytest.raises(ValueError, match="textbook_s"):
        plot_nccl_sweeps(df.drop(columns="textbook_s"))
    # five sweeps in rows of three: two rows of (time, ratio) panels, the sixth place left empty
    fig = plot_nccl_sweeps(pd.concat([df.assign(sweep=n) for n in "abcde"]), columns=3)
    assert len(fig.axes) == 12
    tops = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in tops] == list("abcde")
    assert sum(not ax.get_visible() for ax in fig.axes) == 2


A100 = "all_reduce_perf-8xA100-SXM4-40GB-oci.txt"


@pytest.mark.parametrize(("version", "inside", "at_median"), [
    (None, 28, 0.859),  # the file states no NCCL version: the latest modelled (2.30.7)
    ("2.19.4", 28, 1.013),  # before 2.22: the floor grows with the channels launched (512 KiB: 16 of 24)
])
def test_oci_a100_single_node_sweep(version, inside, at_median):
    """OCI BM.GPU4.8 (8x A100-SXM4-40GB on NVSwitch), one process driving 8 GPUs (-g 8), 64 B-8 GiB, checked
    without --topology (dgx-a100 from its device lines). Each call is priced at NCCL's time plus the launch
    stagger of the thread's 8 kernels, 7 x 2.76 us (from NVIDIA/nccl-tests issue 123, not from this file),
    no less than 3.3 + 8 x 3.96 us: every size within 0.5-2x (under the larger of floor and NCCL's time alone,
    512 KiB-8 MiB were near 0.5 and the median size 0.54)."""
    sweep = check_json(A100, *(["--nccl-version", version] if version else []))
    assert (sweep["topology"], sweep["group_size"]) == ("dgx-a100", 8)
    assert sweep["gpus_per_thread"] == 8 and any("one thread drives 8 GPUs" in n for n in sweep["notes"])
    rows = file_rows(A100)
    assert len(sweep["rows"]) == len(rows) == 28
    assert sum(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"]) == inside
    assert median_size_ratio(sweep) == pytest.approx(at_median, abs=0.002)
    # every size from 256 MiB up within 0.8-1.25
    assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"] if r["bytes"] >= 256 << 20)
    # hand check, 8 GiB: Ring/Simple on 12 channels x 20 GB/s (SM80 NVLink, topo.h; 12 NVLinks per A100),
    # algorithm bandwidth = busBw x nRanks / (2 (nRanks - 1)) (tuning.cc, ring all-reduce), plus the
    # 19.32 us stagger (negligible here)
    big = sweep["rows"][-1]
    assert (big["bytes"], big["algorithm"], big["protocol"]) == (8589934592, "Ring", "Simple")
    hand = 8589934592 / (12 * 20e9 * 8 / 14)
    assert big["predicted_s"] == pytest.approx(hand, rel=0.002) and not big["host_bound"]
    assert big["ratio"] == pytest.approx(hand / (rows[-1][1] * 1e-6), rel=0.002)  # 0.98
    # hand check, 64 B: NCCL's Ring/LL 6.6 + 14 x 0.6 = 15.0 us (tuning.cc: base latency + 2 (nRanks - 1)
    # NVLink hops), its hops timed at the A100's 1.02 us (zerocalc.nccl.tune_model.AMPERE_LL_HOP_US):
    # 6.6 + 14 x 1.02 = 20.88 us, plus the stagger 7 x 2.76 = 19.32 us: 40.2 us, over the floor
    # 3.3 + 8 x 3.96 = 34.98 us; the file measures 32.01 us (this host is 3 us a call faster than the median
    # host's floor): 1.26x
    small = sweep["rows"][0]
    assert small["nccl_s"] == pytest.approx(20.88e-6, rel=0.01)
    assert small["launch_stagger_s"] == pytest.approx(19.32e-6, rel=1e-9)
    assert small["host_floor_s"] == pytest.approx(34.98e-6, rel=1e-6) and not small["host_bound"]
    assert small["predicted_s"] == pytest.approx(small["nccl_all_channels_s"] + 19.32e-6, rel=1e-9)
    assert small["ratio"] == pytest.approx(40.2 / rows[0][1], rel=0.003)
    assert all(r["predicted_s"] == pytest.approx(max(r["nccl_all_channels_s"] + 19.32e-6, r["nccl_s"],
                                                     r["host_floor_s"]))
               for r in sweep["rows"])
    # before NCCL 2.22 the floor grows by 8 x 0.206 us per channel launched beyond the first; 2.30 keeps it
    assert all(r["host_floor_s"] == pytest.approx(
        (34.98 + (8 * (r["launch_channels"] - 1) * 0.206 if version == "2.19.4" else 0)) * 1e-6)
        for r in sweep["rows"])


def test_oci_a100_sweep_at_the_nccl_of_the_image_it_ran_in():
    """The OCI page ran the sweep in the horovod/horovod Docker image with CUDA 11.3, whose NCCL is 2.9.9
    (tests/data/traces/README.md: that image's Dockerfile pins libnccl2 2.9.9-1+cuda11.3 from horovod v0.26.0
    on). Priced at that release: every size within 0.5-2x, the median size (512 KiB) within 0.8-1.25x.
    Hand checks: 512 KiB runs Ring/LL on 16 of the 24 channels (NCCL's thread threshold), so the thread's
    floor is 3.3 + 8 x 3.96 + 8 x 15 x 0.206 = 59.70 us (the work written per channel before 2.22), above
    NCCL's time plus the stagger; 8 GiB runs Ring/Simple at v2.9.9's Ampere bus cap of 235 GB/s
    (tuning.cc), the algorithm bandwidth 235 x 8 / 14, after the ring's latency 8.4 + 14 x 3.4 = 56 us
    (baseLat, NVLink hwLat of Ring/Simple)."""
    sweep = check_json(A100, "--nccl-version", "2.9.9")
    assert sweep["nccl_tables"] == "2.9" and sweep["gpus_per_thread"] == 8
    rows = {size: oop for size, oop, _ in file_rows(A100)}
    assert len(sweep["rows"]) == len(rows) == 28
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    mid = sorted(sweep["rows"], key=lambda r: r["bytes"])[13]
    assert (mid["bytes"], mid["algorithm"], mid["protocol"]) == (524288, "Ring", "LL")
    assert mid["launch_channels"] == 16
    assert mid["host_bound"] and mid["predicted_s"] == pytest.approx((3.3 + 8 * 3.96 + 8 * 15 * 0.206) * 1e-6)
    assert median_size_ratio(sweep) == pytest.approx(59.70 / rows[524288], rel=1e-3)  # 1.013
    assert 0.8 <= median_size_ratio(sweep) <= 1.25
    big = sweep["rows"][-1]
    hand = (8.4 + 14 * 3.4) * 1e-6 + 8589934592 / (235e9 * 8 / 14)
    assert (big["bytes"], big["algorithm"], big["protocol"]) == (8589934592, "Ring", "Simple")
    assert big["nccl_s"] == pytest.approx(hand, rel=1e-6)
    assert big["ratio"] == pytest.approx((hand + 19.32e-6) / (rows[8589934592] * 1e-6), rel=1e-3)  # 1.00


def test_host_floor_and_launch_stagger_per_gpu_from_the_published_g_sweep():
    """HOST_US_PER_GPU and LAUNCH_STAGGER_US_PER_GPU against their source, NVIDIA/nccl-tests issue 123:
    DGX-A100, NCCL_ALGO=Ring NCCL_MAX_NCHANNELS=1 all_reduce_perf -b 8 -e 128 -g G; times posted for
    G = 2..8. Least-squares slope by hand: mean G = 5, sum of (G - 5)^2 = 28. NCCL's own time of that ring
    (Ring/LL, 1 channel, G ranks, 8 B) is 6.6 + 2 (G - 1) x 0.6 us (tuning.cc baseLat[Ring][LL],
    hwLat[NVLINK][Ring][LL]): what it leaves of each posted time is the launch stagger."""
    from zerocalc.validate.sweep import (
        HOST_US_PER_GPU,
        LAUNCH_STAGGER_US_PER_GPU,
        host_floor_s,
        launch_stagger_s,
    )

    posted = {2: 10.0, 3: 13.76, 4: 16.88, 5: 20.8, 6: 25.2, 7: 29.5, 8: 33.7}
    mean_t = sum(posted.values()) / 7
    slope = sum((g - 5) * (t - mean_t) for g, t in posted.items()) / 28
    assert HOST_US_PER_GPU == pytest.approx(slope, abs=0.005)  # 3.961
    nccl = {g: 6.6 + 2 * (g - 1) * 0.6 for g in posted}
    left = {g: posted[g] - nccl[g] for g in posted}
    mean_left = sum(left.values()) / 7
    stagger = sum((g - 5) * (t - mean_left) for g, t in left.items()) / 28
    assert LAUNCH_STAGGER_US_PER_GPU == pytest.approx(stagger, abs=0.005)  # 2.761
    # the model, stagger plus NCCL's time and no less than the floor, against each posted time: within 10 %
    # under the per-GPU floor alone, and within 0.8-1.25x (1.04-1.14x) with the floor's per-call 3.3 us,
    # a median over hosts that this one undercuts by 1.6 us a call
    for g, t in posted.items():
        model = max(g * 3.96, (g - 1) * 2.76 + nccl[g])
        assert model == pytest.approx(t, rel=0.1)
        assert g * 3.96 < t  # no posted time under the per-GPU floor
        assert 1.0 < max(3.3 + g * 3.96, (g - 1) * 2.76 + nccl[g]) / t < 1.15
    assert host_floor_s(None) is None and host_floor_s(1) is None
    assert host_floor_s(4) == pytest.approx((3.3 + 4 * 3.96) * 1e-6)
    assert launch_stagger_s(None) is None and launch_stagger_s(1) is None
    assert launch_stagger_s(4) == pytest.approx(3 * 2.76e-6)
    # NCCL before 2.9: one cooperative multi-device launch for the process's GPUs (v2.8.4 src/init.cc GROUP)
    assert launch_stagger_s(4, version=(2, 8, 4)) == 0.0
    assert launch_stagger_s(4, version=(2, 9, 9)) == pytest.approx(3 * 2.76e-6)
    assert launch_stagger_s(4, agg_iters=2, version=(2, 8, 3)) is None
    assert launch_stagger_s(8, agg_iters=2) is None and launch_stagger_s(8, graph=1) is None


@pytest.mark.parametrize(("agg", "graph", "mode"), [
    (4, 0, "-a 4 (calls aggregated into one group)"),
    (1, 1, "-G 1 (iterations replayed as CUDA graphs)"),
])
def test_no_launch_floor_outside_the_default_launch_mode(tmp_path, agg, graph, mode):
    """The OCI -g 8 sweep's header line prints `agg iters: 1 ... graph: 0` (nccl-tests' default launch mode,
    the mode of the issue-123 figure). The same rows under -a 4 or -G 1 (the header rewritten) get no floor:
    each row is NCCL's time alone, and a note says why."""
    text = (DATA / A100).read_text()
    default = "agg iters: 1 validation: 1 graph: 0"
    assert text.count(default) == 1
    changed = tmp_path / A100
    changed.write_text(text.replace(default, f"agg iters: {agg} validation: 1 graph: {graph}"))
    res = runner.invoke(app, ["check", str(changed), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert (sweep["gpus_per_thread"], sweep["agg_iters"], sweep["graph"]) == (8, agg, graph)
    assert all(r["host_floor_s"] is None and not r["host_bound"] for r in sweep["rows"])
    assert all(r["launch_stagger_s"] is None for r in sweep["rows"])
    assert all(r["predicted_s"] == r["nccl_s"] for r in sweep["rows"])
    assert any(f"one thread drives 8 GPUs (nccl-tests -g 8) under {mode}" in n for n in sweep["notes"])
    base = check_json(A100)  # the file as published: default mode, the launch terms priced
    assert (base["agg_iters"], base["graph"]) == (1, 0)
    assert all(r["predicted_s"] > r["nccl_s"] for r in base["rows"])


def test_one_gpu_per_thread_sweeps_have_no_floor():
    """Sweeps run one process per GPU (-g 1) are NCCL's time alone."""
    sweep = check_json(XE9680)
    assert all(r["host_floor_s"] is None and not r["host_bound"] for r in sweep["rows"])
    assert all(r["launch_stagger_s"] is None for r in sweep["rows"])
    assert all(r["predicted_s"] == r["nccl_s"] for r in sweep["rows"])


XE9680 = "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"


def test_hgx_h100_two_node_ib_sweep_at_the_nccl_it_states():
    """Dell XE9680 pair (HGX H100, 8x ConnectX-7 400 Gb/s InfiniBand each; NVIDIA/nccl-tests issue 309),
    NCCL 2.26.2 as the file prints it, checked without --topology (dgx-h100 from its device lines)."""
    sweep = check_json(XE9680)
    assert (sweep["topology"], sweep["group_size"]) == ("dgx-h100", 16)
    assert (sweep["nccl_version"], sweep["nccl_version_how"]) == ("2.26.2", "stated by the file")
    rows = file_rows(XE9680)
    assert len(sweep["rows"]) == len(rows) == 32
    outside = {r["bytes"] for r in sweep["rows"] if not 0.5 <= r["ratio"] <= 2.0}
    # the two sizes out of band are the ones whose out-of-place time is 2.8x and 3.6x the in-place one
    assert outside == {8, 256}
    assert {s for s, oop, ip in rows if max(oop / ip, ip / oop) > 1.25} == outside
    assert {r["bytes"] for r in sweep["rows"] if r["unsteady"]} == outside
    assert 0.8 <= median_size_ratio(sweep) <= 1.25  # 1.06 at 256 KiB
    # hand check, 16 B (tuning.cc v2.26.2): Tree/LL, base 6.8 us + 2 x ((16/2 - 1) x 0.6 us NVLink hop
    # + log2(2 nodes) x 5.0 us network hop) = 25.2 us; the file measures 24.96 us
    small = sweep["rows"][1]
    assert (small["bytes"], small["algorithm"], small["protocol"]) == (16, "Tree", "LL")
    assert small["predicted_s"] == pytest.approx(25.2e-6, rel=0.01)
    assert small["ratio"] == pytest.approx(25.2 / 24.96, rel=0.01)
    # from 1 MiB NCCL 2.26 chooses NVLS Tree (its own figures); the call is timed with the corrected Hopper
    # NVLS Tree figures of NCCL 2.28+ (v2.30.7 tuning.cc): 16 GiB by hand, min(48 x 0.85 x 7/8 x 2, 2 x 48,
    # 57.7) = 57.7 GB/s per channel x 8 channels x 16/30, latency 25 + 2 x 20.9 us, and the pipeline's fill,
    # two loops of 16 MiB (zerocalc.nccl.nvls_pipeline); the file measures 68652 us
    assert all(r["algorithm"] == "NVLSTree" for r in sweep["rows"] if r["bytes"] >= 1 << 20)
    big = sweep["rows"][-1]
    hand = (25 + 2 * 20.9) * 1e-6 + (17179869184 + (32 << 20)) / (57.7 * 8 * 16 / 30 * 1e9)
    assert big["bytes"] == 17179869184 and big["predicted_s"] == pytest.approx(hand, rel=1e-6)
    assert big["ratio"] == pytest.approx(hand / 68652e-6, rel=1e-6)  # 1.02 (0.78 with 2.26's own figures)
    # 1-128 MiB with the pipeline's fill: 1.00-1.10x (0.82-1.06x with NCCL's treeCorrectionFactor)
    assert all(0.95 <= r["ratio"] <= 1.12 for r in sweep["rows"] if r["bytes"] >= 1 << 20)


def test_fit_out_starts_from_the_preset_the_device_lines_describe(tmp_path):
    """Without --topology, fit --out calibrates the preset check would price the sweep on: the OCI file's
    '#  Rank' lines name NVIDIA A100-SXM4-40GB, 8 ranks on one host (read from the file), so dgx-a100;
    the Nebius file has no device lines, so the default, dgx-h100, and the output says why."""
    oci, nebius = "all_reduce_perf-8xA100-SXM4-40GB-oci.txt", "all_reduce_perf-16xH100-2nodes-infiniband.txt"
    text = (DATA / oci).read_text()
    assert text.count("NVIDIA A100-SXM4-40GB") == 8 and "#  Rank" in text
    assert "#  Rank" not in (DATA / nebius).read_text()
    for name, extra, preset, how in ((oci, [], "dgx-a100", "from the file's device lines"),
                                     (nebius, ["--n", "16"], "dgx-h100", "names no GPU")):
        out = tmp_path / f"{preset}.toml"
        res = runner.invoke(app, ["fit", str(DATA / name), "--out", str(out), *extra])
        assert res.exit_code == 0, res.output
        first = res.output.splitlines()[0]
        assert first.startswith(f"topology {preset}, ") and how in first
        doc = tomllib.loads(out.read_text())
        assert doc["title"].startswith(PRESETS[preset].title)
