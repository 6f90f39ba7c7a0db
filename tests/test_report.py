"""The design-review report: the data behind its figures, its pages and its text.

Expected values are derived here by hand from the sources (ZeRO §3.1, §5, §7 and Table 1;
Thakur, Rabenseifner & Gropp 2005 for the ring cost), never taken from zerocalc's output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pypdf = pytest.importorskip("pypdf")

from zerocalc import report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "reports" / "zero-colocation-review.pdf"
CONFIG = report.ReportConfig()  # Ψ = 7.5e9, N = 64, 8 per node, dgx-a100, fp16, K = 12


def _text(path: Path) -> list[str]:
    return [page.extract_text() for page in pypdf.PdfReader(str(path)).pages]


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Path, report.ReportData, list[str]]:
    path = tmp_path_factory.mktemp("report") / "review.pdf"
    data = report.write_report(path, CONFIG)
    return path, data, _text(path)


# -- the data behind the figures ------------------------------------------------------------


def test_bytes_vs_n_matches_ring_volumes_derived_by_hand():
    df = report.bytes_vs_n(CONFIG)
    psi, b = 7.5e9, 2.0  # fp16 on the wire
    # ZeRO §7 with the ring factor kept: dp 2(N-1)/N Ψ, zero2 the same, zero3 3(N-1)/N Ψ, the
    # #4582 proposal keeps only the all-gather, (N-1)/N Ψ; DeepSpeed ZeRO-2 all-reduce + all-gather
    # 3(N-1)/N Ψ (ZeRO-1 the same at one micro-batch).
    factor = {"dp": 2, "zero2": 2, "zero3": 3, "colocated": 1, "deepspeed-zero2": 3}
    for scheme, f in factor.items():
        g = df[df["scheme"] == scheme].sort_values("n")
        n = g["n"].to_numpy(dtype=float)
        assert list(n) == list(report.N_SWEEP)
        np.testing.assert_allclose(g["bytes_per_rank"], f * (n - 1) / n * psi * b, rtol=1e-12)
        np.testing.assert_allclose(g["bytes_per_rank_over_psi"], f * (n - 1) / n, rtol=1e-12)
    assert set(df["scheme"]) == set(report.FIGURE_SCHEMES)


def test_figures_against_n_on_nodes_that_do_not_divide_every_n():
    """A report of N = 72 on 72-GPU NVL72 racks was refused ("N = 128 is not a multiple of the 72 GPUs per
    node"): figures 1 and 3 sweep N to 1024. Each N now runs on whole nodes, the largest fill of a rack that
    divides it: 64 GPUs a node from N = 128. fsdp-hybrid (HSDP) shards within a node, so at N = 128 its
    H = 64 and R = 2: all-gathers of 2Ψ and a reduce-scatter of Ψ in the node, 3(H-1)/H Ψb, and an
    all-reduce of Ψ/H across R, 2(R-1)/R Ψ/H b: (189 + 1)/64 Ψb; data parallelism's ring 2(N-1)/N Ψb
    whatever the node."""
    from zerocalc.report.sections.figures import _partial_nodes

    config = report.ReportConfig(topology="gb200-nvl72", n=72, gpus_per_node=72)
    df = report.bytes_vs_n(config).set_index(["scheme", "n"])["bytes_per_rank_over_psi"]
    assert df[("fsdp-hybrid", 128)] == pytest.approx(190 / 64, rel=1e-12)
    assert df[("fsdp-hybrid", 64)] == pytest.approx(3 * 63 / 64, rel=1e-12)  # one partial node: H = N
    for n in report.N_SWEEP:
        assert df[("dp", n)] == pytest.approx(2 * (n - 1) / n, rel=1e-12)
    memory = report.memory_vs_n(config)
    assert sorted(set(memory["n"])) == list(report.N_SWEEP)
    assert _partial_nodes(config) == (" Nodes of 72 GPUs do not divide N = 128, 256, 512, 1024: there "
                                      "each node holds the largest fill that does (64 GPUs), the nodes "
                                      "fsdp-hybrid and zeropp shard within.")
    assert _partial_nodes(CONFIG) == ""  # 8 GPUs a node divide every N of the sweep from 8


@pytest.mark.parametrize(("config", "fills"), [
    # 12 GPUs at pp = 2: a data-parallel group of 6 must cover whole nodes, so gh200's 4-GPU nodes hold 3
    (dict(topology="abci-a", n=12, gpus_per_node=3, pp=2), {"gh200": 3, "dgx-h100": 6, "gb200-nvl72": 12}),
    # 6 GPUs at tp = 2: gh200's 4 does not divide 6, and its next fill, 3, would split a tensor-parallel
    # pair across nodes (tp = 2 neither divides 3 nor is a multiple of it): 2
    (dict(topology="leonardo-booster", n=6, gpus_per_node=6, tp=2), {"gh200": 2, "dgx-h100": 6}),
])
def test_figure_2_gives_each_preset_a_node_fill_the_layout_allows(config, fills):
    """Figure 2 prices every preset at the report's N on the preset's own node, the largest fill dividing N;
    under tp or pp that fill must also lay out the groups (tensor-parallel ranks within a node or whole
    nodes of them, each data-parallel group on whole nodes): the report refused these valid configurations
    ("tp = 2 neither divides nor is a multiple of the 3 GPUs per node", of gh200's fill, not the user's)."""
    from zerocalc.report.config import figure_gpus_per_node

    c = report.ReportConfig(**config)
    for preset, fill in fills.items():
        assert figure_gpus_per_node(c, preset) == fill
    df = report.time_vs_psi(c)
    assert set(fills) <= set(df["topology"])


def test_memory_vs_n_matches_zero_section_5_formulas():
    df = report.memory_vs_n(CONFIG)
    psi, k = 7.5e9, 12.0
    formulas = {  # ZeRO §3.1 / §5, fp16 parameters and gradients
        "dp": lambda n: (2 + 2 + k) * psi + 0 * n,
        "zero1": lambda n: 4 * psi + k * psi / n,
        "zero2": lambda n: 2 * psi + (2 + k) * psi / n,
        "zero3": lambda n: (4 + k) * psi / n,
    }
    for scheme, f in formulas.items():
        g = df[df["scheme"] == scheme].sort_values("n")
        np.testing.assert_allclose(g["memory_bytes_per_rank"], f(g["n"].to_numpy(dtype=float)), rtol=1e-12)


def test_zero_table1_points_are_the_printed_cells_and_the_model_meets_them():
    points = report.zero_table1_points()
    assert len(points) == 18 and set(points["scheme"]) == {"zero1", "zero2", "zero3"}
    printed = {(4, "zero2"): 41.3, (64, "zero3"): 1.88, (1024, "zero1"): 30.1}  # ZeRO Table 1, 7.5B column
    for (n, scheme), gb in printed.items():
        row = points[(points["n"] == n) & (points["scheme"] == scheme)]
        assert row["memory_bytes_per_rank"].item() == pytest.approx(gb * 1e9)
    model = report.memory_vs_n(CONFIG, n_values=(1, 4, 16, 64, 256, 1024))
    merged = points.merge(model, on=["scheme", "n"], suffixes=("_paper", "_model"))
    assert len(merged) == 18
    for _, r in merged.iterrows():
        paper_gb = r["memory_bytes_per_rank_paper"] / 1e9
        text = f"{paper_gb:g}"
        decimals = len(text.split(".")[1]) if "." in text else 0
        # The printed cell is the model rounded to the digits shown (half a unit in the last place).
        assert abs(r["memory_bytes_per_rank_model"] / 1e9 - paper_gb) <= 0.5 * 10**-decimals + 1e-9, r


def test_time_vs_psi_ring_on_one_node_matches_the_textbook_formula():
    from zerocalc.topology import PRESETS

    cfg = report.ReportConfig(n=8)  # one DGX node: every phase stays on the intra-node links
    df = report.time_vs_psi(cfg, psi_values=(1e6, 1e9), topologies=["dgx-a100"],
                            schemes=("zero2", "colocated"))
    assert set(df["algorithm"]) >= {"ring", "recursive", "tree", "hierarchical"}
    values = PRESETS["dgx-a100"].values()
    alpha, bw, gamma = values["alpha_intra"], values["bw_intra"], values.get("gamma", 0.0)
    p, b = 8, 2.0
    ring = df[df["algorithm"] == "ring"]
    for _, r in ring.iterrows():
        nbytes = r["psi"] * b
        # Thakur et al. 2005: ring reduce-scatter (p-1)α + (p-1)/p·n(β+γ);
        # ring all-gather (p-1)α + (p-1)/p·nβ.
        ag = (p - 1) * alpha + (p - 1) / p * nbytes / bw
        rs = (p - 1) * alpha + (p - 1) / p * nbytes * (1 / bw + gamma)
        expected = {"zero2": rs + ag, "colocated": ag}[r["scheme"]]
        assert r["time_s"] == pytest.approx(expected, rel=1e-9)
    assert len(df) == 2 * 2 * df["algorithm"].nunique()


def test_time_vs_psi_prices_each_preset_on_its_own_node():
    """Figure 2 at the report's 8 GPUs per node: a preset whose node is another size is priced on its
    own node. The NVL72 rack's 64 GPUs are one NVLink domain (no network hop); gh200's nodes hold 4."""
    from zerocalc.topology import PRESETS

    cfg = report.ReportConfig(n=64)
    df = report.time_vs_psi(cfg, psi_values=(1e9,), topologies=["gb200-nvl72", "gh200"],
                            schemes=("colocated",))
    ring = df[df["algorithm"] == "ring"].set_index("topology")["time_s"]
    link = PRESETS["gb200-nvl72"].intra
    p, nbytes = 64, 1e9 * 2.0
    # Thakur et al. 2005: ring all-gather (p-1)α + (p-1)/p·nβ, all on the rack's NVLink
    assert ring["gb200-nvl72"] == pytest.approx((p - 1) * link.alpha_s + (p - 1) / p * nbytes / link.bw_Bps,
                                                rel=1e-9)
    from zerocalc.report.config import figure_gpus_per_node

    assert figure_gpus_per_node(cfg, "gh200") == 4  # the Cray EX254n node of 4 GH200
    assert figure_gpus_per_node(cfg, "dgx-h100") == 8
    assert figure_gpus_per_node(report.ReportConfig(n=64, topology="gh200"), "gh200") == 8  # --gpus-per-node
    # whole nodes: 256 GPUs fill NVL72 racks 64 at a time; 36 fill 8-GPU nodes 6 at a time
    assert figure_gpus_per_node(report.ReportConfig(n=256), "gb200-nvl72") == 64
    assert figure_gpus_per_node(report.ReportConfig(n=36, gpus_per_node=4), "dgx-h100") == 6
    df = report.time_vs_psi(report.ReportConfig(n=256), psi_values=(1e9,), topologies=["gb200-nvl72"],
                            schemes=("colocated",))
    assert len(df) and (df["n"] == 256).all()


def test_divergence_data_separates_the_proposal_from_the_exact_schemes(generated):
    _path, data, _pages = generated
    df = data.extra["divergence"]
    steps = report.ReportConfig().feasibility_steps
    by_case = {case: g.sort_values("step")["max_rel_diff"].to_numpy() for case, g in df.groupby("case")}
    assert len(by_case) == 4 and all(len(v) == steps for v in by_case.values())
    distinct = next(v for k, v in by_case.items() if "distinct" in k)
    n1 = next(v for k, v in by_case.items() if k.endswith("N = 1"))
    exact = next(v for k, v in by_case.items() if "exact" in k)
    # Each shard trained on 1/N of the batch: off from the first step, far above rounding.
    assert distinct.min() > 1e-3 and distinct[-1] > distinct[0]
    # One rank: nothing to reduce, the proposal IS data parallel; exact schemes stay at rounding level.
    assert n1.max() == 0.0 and exact.max() < 1e-12


def test_plan_is_priced_on_the_cluster_by_the_volume_table(generated):
    _path, data, _pages = generated
    plan = data.extra["plan"].set_index("to_scheme")
    # deepspeed-zero2 → zero2 (and deepspeed-zero1 → zero1, at one micro-batch) removes the all-reduce's
    # surplus: 3(N-1)/N Ψb - 2(N-1)/N Ψb = (N-1)/N Ψb.
    n, psi, b = 64, 7.5e9, 2.0
    for src, dst in (("deepspeed-zero2", "zero2"), ("deepspeed-zero1", "zero1")):
        row = plan.loc[dst]
        row = row[row["from_scheme"] == src].iloc[0] if isinstance(row, pd.DataFrame) else row
        assert row["from_scheme"] == src
        assert row["bytes_saved_per_rank"] == pytest.approx((n - 1) / n * psi * b, rel=1e-12)
        assert row["update"] == "exact" and row["time_saved_s"] > 0
    assert (data.extra["plan"]["rank"].to_numpy() == np.arange(1, len(plan) + 1)).all()


def test_validation_data_from_the_bundled_traces(generated):
    _path, data, _pages = generated
    val = data.extra["validation"]
    resnet = val[val["trace"] == "resnet50-ddp"]
    # HTA's ResNet-50 DDP trace, rank 0 of 2: per step 5 fp32 all-reduce buckets summing to
    # 25,557,032 elements (SOURCES.md); ring all-reduce on 2 ranks sends 2(2-1)/2 × 4 B per element.
    assert list(resnet["op"]) == ["all_reduce"] and list(resnet["scheme"]) == ["dp"]
    assert resnet["measured_bytes"].item() == 25_557_032 * 4
    assert resnet["residual_bytes"].item() == 0
    ds = val[val["trace"] == "deepspeed-zero3"]
    assert set(ds["op"]) == {"all_gather", "reduce_scatter"}
    # Ψ = 377,856 fp32 on 4 ranks: reduce-scatter and all-gather each (4-1)/4 × 377,856 × 4 B per rank.
    assert (ds["measured_bytes"] == 0.75 * 377_856 * 4).all()


def test_fit_points_of_a_broadcast_sweep_use_the_fitted_model(tmp_path):
    # A broadcast_perf sweep on p = 8 ranks whose times follow the ring α-β model exactly:
    # t = (p-1)·α + n·β (nccl-tests doc/PERFORMANCE.md: a broadcast's bus-bandwidth factor is 1),
    # α = 5 µs per hop, 1/β = 100 GB/s, n = 8 B … 1 GiB. Fitted and measured time must then agree
    # at every size, and the fit's bus bandwidth is 100 GB/s.
    p, alpha, beta = 8, 5e-6, 1 / 100e9
    ranks = [f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on host device {r:2d} [0000:0{r}:00] GPU"
             for r in range(p)]
    rows = []
    for k in range(3, 31):
        n = 2**k
        t_us = ((p - 1) * alpha + n * beta) * 1e6
        algbw = n / (t_us * 1e-6) / 1e9
        rows.append(f"{n:>12} {n // 4:>12} float none 0 {t_us:.6f} {algbw:.2f} {algbw:.2f} 0 "
                    f"{t_us:.6f} {algbw:.2f} {algbw:.2f} 0")
    path = tmp_path / "broadcast_perf.txt"
    path.write_text("# broadcast_perf -b 8 -e 1G -f 2 -g 1\n#\n# Using devices\n" + "\n".join(ranks)
                    + "\n#\n" + "\n".join(rows) + "\n")
    summary, points = report.nccl_tests_fit(path)
    assert summary["busbw_GBps"].item() == pytest.approx(100.0, rel=1e-6)
    assert len(points) == 28
    assert points["predicted_s"].to_numpy() == pytest.approx(points["measured_s"].to_numpy(), rel=1e-6)


# -- the PDF ------------------------------------------------------------------------------------


def test_every_section_and_the_verdict_are_in_the_text(generated):
    _path, data, pages = generated
    text = "\n".join(pages)
    for title in report.SECTION_TITLES:
        assert title in text, title
    assert "#4582" in pages[0]
    verdict = " ".join(data.extra["feasibility"].verdict.split())
    assert verdict[:60] in " ".join(text.split())
    assert "No: the reduce-scatter is the sum of gradients over ranks" in " ".join(pages[0].split())


def test_page_count_and_metadata(generated):
    path, _data, pages = generated
    assert 9 <= len(pages) <= 25  # the presets table holds 36 machines
    assert f"page {len(pages)} of {len(pages)}" in pages[-1]
    meta = pypdf.PdfReader(str(path)).metadata
    assert "/CreationDate" not in meta and "/ModDate" not in meta
    assert meta["/Creator"] == "zerocalc"


def test_fonts_are_embedded(generated):
    path, _data, _pages = generated
    reader = pypdf.PdfReader(str(path))
    fonts = {}
    for page in reader.pages:
        for font in page["/Resources"]["/Font"].values():
            font = font.get_object()
            fonts[font["/BaseFont"]] = font
    assert fonts
    for name, font in fonts.items():
        desc = font.get("/FontDescriptor")
        if desc is None:  # Type 3 / Type 0 wrappers keep their descriptor one level down
            desc = font["/DescendantFonts"][0].get_object()["/FontDescriptor"]
        desc = desc.get_object()
        assert any(k in desc for k in ("/FontFile", "/FontFile2", "/FontFile3")), name


def test_committed_report_is_current(generated):
    """reports/zero-colocation-review.pdf is what `zerocalc report` writes today, page by page."""
    _path, _data, pages = generated
    assert COMMITTED.exists(), "run `zerocalc report` and commit reports/zero-colocation-review.pdf"
    committed = _text(COMMITTED)
    assert len(committed) == len(pages)
    for k, (old, new) in enumerate(zip(committed, pages, strict=True), start=1):
        assert old == new, f"page {k} differs: regenerate with `zerocalc report`"


def test_no_rounding_noise_digits_in_the_text(generated):
    """Differences at float64 rounding level depend on the machine's BLAS: shown as "< 1e-12", never
    as digits (the committed PDF must read the same on every machine); the JSON keeps the values."""
    import re

    _path, data, pages = generated
    text = " ".join(" ".join(pages).split())
    assert not re.search(r"\d\.\d+e-(1[3-9]|[2-9]\d)", text)  # (figure 4's axis ticks, 1e-15, are fixed)
    records = data.extra["feasibility"].records()
    assert any(0 < r["max_rel_diff"] < 1e-12 for r in records)  # there is noise to hide
    assert "< 1e-12" in text


def test_volume_table_has_every_scheme(generated):
    _path, data, pages = generated
    assert isinstance(data.table, pd.DataFrame)
    from zerocalc.schemes import SCHEME_NAMES

    assert list(data.table["scheme"]) == list(SCHEME_NAMES)
    text = "\n".join(pages)
    for name in SCHEME_NAMES:
        assert name in text


def test_cli_report_writes_the_pdf_and_refuses_bad_input(tmp_path):
    from typer.testing import CliRunner

    from zerocalc.cli import app

    runner = CliRunner()
    bad = runner.invoke(app, ["report", "-o", str(tmp_path / "x.pdf"), "--trace", str(tmp_path / "missing")])
    assert bad.exit_code == 2 and "--trace" in bad.output and "Traceback" not in bad.output
    bad = runner.invoke(app, ["report", "-o", str(tmp_path / "x.pdf"), "--psi", "banana"])
    assert bad.exit_code == 2 and "--psi" in bad.output
    assert not (tmp_path / "x.pdf").exists()


def test_report_never_overwrites_an_input_or_a_non_pdf(tmp_path):
    """An input trace, a directory or any existing non-PDF file is refused before any work is done."""
    import shutil

    from typer.testing import CliRunner

    from zerocalc.cli import app

    trace = tmp_path / "rank0.json.gz"
    shutil.copy(Path(__file__).parent / "data" / "traces" / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz",
                trace)
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    before = trace.read_bytes()
    runner = CliRunner()
    for out, why in [(trace, "input trace"), (tmp_path, "directory"), (notes, "not a PDF")]:
        res = runner.invoke(app, ["report", "-o", str(out), "--trace", str(trace)])
        assert res.exit_code == 2, res.output
        assert why in res.stderr and res.stderr.count("\n") == 1
    assert trace.read_bytes() == before and notes.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "rank0.json.gz"]


# -- the verdict priced on the chosen cluster, the CLI's cluster options --------------------------


def test_in_short_is_one_sentence_and_at_most_five_bullets_about_the_cluster(generated):
    from zerocalc.report.summary import MAX_BULLETS, in_short

    _path, data, pages = generated
    lead, bullets = in_short(data)
    # one sentence: a single full stop, at the end
    assert lead.endswith(".") and lead.count(". ") == 0 and "No: the reduce-scatter" in lead
    assert 1 <= len(bullets) <= MAX_BULLETS == 5 and all(len(b) <= 200 for b in bullets)
    box = " ".join(pages[0].split("In short")[1].split("1. The question")[0].split())
    assert " ".join(lead.split()) in box
    # deepspeed-zero2 → zero2 saves the all-reduce's surplus (N-1)/N·Ψ·b (see the plan test above):
    # N = 64, Ψ = 7.5e9, b = 2: 63/64 × 15e9 B = 14.77 GB, written with three digits; ZeRO-2 sends
    # 2·63/64·15e9 = 29.53 GB, the proposal half of it; ZeRO-2 memory 2Ψ + 14Ψ/64 = 16.64 GB.
    assert "Ψ = 7.5B on 64 GPUs (dgx-a100, fp16)" in box
    assert "skipping it sends 14.8 GB instead of ZeRO-2's 29.5 GB per GPU per step" in box
    # its times are the plan's (zero2 → colocated), under the model that priced the plan
    from zerocalc.units import format_seconds

    plan = data.extra["plan"]
    item = plan[(plan["from_scheme"] == "zero2") & (plan["to_scheme"] == "colocated")].iloc[0]
    t_z2, t_col = item["from_time_s"], item["from_time_s"] - item["time_saved_s"]
    assert f"({format_seconds(t_col)} instead of {format_seconds(t_z2)})" in box
    assert "(deepspeed-zero2 → zero2), 14.8 GB and" in box and "zero12" not in box
    assert "16.6 GB of model states per GPU" in box
    assert "ms" in box and "14.77" not in box and "7,500,000,000" not in box  # one number format
    # the simulation's toy sizes stay in section 7
    for toy in ("N = 4", "212 parameters", "1272", "1,272", "20 steps", "8-byte", "e-0", "e+0"):
        assert toy not in box, toy
    from zerocalc.report.sections import title

    verdict_page = next(p for p in pages if title("verdict") in p)
    assert "after 20 steps on N = 4 ranks" in " ".join(verdict_page.split())


def test_in_short_number_formats():
    from zerocalc.report.summary import format_count, format_size

    assert [format_count(x) for x in (7.5e9, 70e9, 175e9, 1.2e12, 350e6, 405e9)] == [
        "7.5B", "70B", "175B", "1.2T", "350M", "405B"]
    assert [format_size(x) for x in (14.77e9, 7.383e9, 999.6e6, 512, 0.0)] == [
        "14.8 GB", "7.38 GB", "1 GB", "512 B", "0 B"]


def test_plan_lists_changes_slower_on_the_cluster_apart_and_below(generated):
    """FSDP HYBRID_SHARD saves bytes but moves the all-reduce onto the inter-node links: on dgx-a100
    (N = 64) it is slower, so it is listed after every item that helps, in a table of its own."""
    _path, data, pages = generated
    plan = data.extra["plan"]
    slower = plan[plan["slower"]]
    assert "fsdp-hybrid" in set(slower["to_scheme"])
    assert (plan[~plan["slower"]]["time_saved_s"].dropna() >= 0).all()
    assert plan["rank"].max() == len(plan) and slower["rank"].min() > plan[~plan["slower"]]["rank"].max()
    text = " ".join(" ".join(pages).split())
    plan_part = text.split("Implementation plan, priced on the chosen cluster")[1]
    helps, below = plan_part.split("Slower on this cluster")[:2]
    # (the step's cell wraps, and the text runs across the row's other cells)
    assert "hierarchical partitioning: FSDP" not in helps
    assert "hierarchical partitioning: FSDP" in below.split("Evidence and caveats")[0]


def test_cluster_verdict_at_256_h100s():
    # QA repro: Ψ = 70e9, N = 256 on DGX H100, fp16. The best exact saving, deepspeed-zero2 → zero2,
    # is (N-1)/N·Ψ·b = 255/256 × 70e9 × 2 B = 139.45 GB per rank per step = 1.99 B per parameter.
    config = report.ReportConfig(psi=70e9, n=256, topology="dgx-h100")
    result = report.feasibility_result(config)
    verdict = report.cluster_verdict(config, result, report.plan_on_cluster(config, result))
    assert verdict.startswith(result.findings)
    tail = verdict[len(result.findings):]
    assert "(deepspeed-zero2 → zero2) saves 1.99 bytes per parameter" in tail
    assert "dgx-h100, N = 256" in tail and "139.45 GB per rank per step" in tail


def _report_config_from_cli(monkeypatch, tmp_path, *args):
    """The ReportConfig the CLI builds (write_report replaced, so no PDF is made)."""
    from typer.testing import CliRunner

    from zerocalc.cli import app

    seen = {}
    monkeypatch.setattr(report, "write_report",
                        lambda out, config, progress=None: seen.setdefault("c", config))
    r = CliRunner().invoke(app, ["report", "-o", str(tmp_path / "x.pdf"), *args])
    return r, seen.get("c")


def test_time_vs_psi_draws_a_custom_topology_first_with_its_own_links():
    """Figure 2 shows the report's own topology (read from TOML) before the presets, timed with its
    links; one that shares a preset's name is labelled apart from that preset."""
    from zerocalc.topology import PRESETS, Link, Topology

    lab = Topology(name="lab", title="lab", gpus_per_node=4, intra=Link(3e-6, 100e9), inter=Link(10e-6, 50e9))
    cfg = report.ReportConfig(n=4, gpus_per_node=4, topology=lab)  # one node of the lab machine
    df = report.time_vs_psi(cfg, psi_values=(1e6, 1e9), schemes=("colocated",))
    # each preset with links of its own (the others' figures cite the one they equal)
    own = [n for i, (n, t) in enumerate(PRESETS.items())
           if all((t.gpus_per_node, t.intra, t.inter) != (u.gpus_per_node, u.intra, u.inter)
                  for u in list(PRESETS.values())[:i])]
    assert {"dgx-a100", "dgx-h100", "aws-p4d", "pcie-gen4"} <= set(own) and "aws-p5" not in own
    assert list(dict.fromkeys(df["topology"])) == ["lab", *own]
    p, b = 4, 2.0
    for _, r in df[(df["topology"] == "lab") & (df["algorithm"] == "ring")].iterrows():
        # Thakur et al. 2005: ring all-gather (p-1)α + (p-1)/p·nβ, with the file's α and bandwidth
        assert r["time_s"] == pytest.approx((p - 1) * 3e-6 + (p - 1) / p * r["psi"] * b / 100e9, rel=1e-9)
    twin = Topology(name="dgx-a100", title="x", gpus_per_node=8, intra=Link(1e-6, 1e9), inter=Link(1e-6, 1e9))
    labels = list(dict.fromkeys(report.time_vs_psi(report.ReportConfig(topology=twin), psi_values=(1e6,),
                                                   schemes=("zero2",))["topology"]))
    assert labels == ["dgx-a100 (custom)", *own]
    assert list(dict.fromkeys(report.time_vs_psi(report.ReportConfig(), psi_values=(1e6,),
                                                  schemes=("zero2",))["topology"])) == own


def test_cli_report_takes_a_toml_topology_and_its_gpus_per_node(monkeypatch, tmp_path):
    f = tmp_path / "lab.toml"
    f.write_text('name = "lab"\ngpus_per_node = 4\n[intra]\nalpha_us = 3\nbw_GBps = 100\n'
                 '[inter]\nalpha_us = 10\nbw_GBps = 50\n')
    r, config = _report_config_from_cli(monkeypatch, tmp_path, "--topology", str(f))
    assert r.exit_code == 0, r.output
    # the file's figures in bytes/s and seconds (1 GB = 1e9 B), G from the file, not 8
    assert config.topology.name == "lab" and config.gpus_per_node == 4
    assert config.topology.inter.bw_Bps == 50e9 and config.topology.intra.alpha_s == pytest.approx(3e-6)
    r, config = _report_config_from_cli(monkeypatch, tmp_path, "--topology", str(f), "--gpus-per-node", "2")
    assert config.gpus_per_node == 2
    f.write_text('gpus_per_node = 4\n[intra]\nalpha_us = 3\nbw_GBps = 100\nnics = 2\n'
                 '[inter]\nalpha_us = 10\nbw_GBps = 50\n')
    r, config = _report_config_from_cli(monkeypatch, tmp_path, "--topology", str(f))
    assert r.exit_code == 2 and config is None
    assert f"--topology: {f}: [intra] unknown keys: 'nics'" in r.output


def test_cli_report_dtype_names_and_help(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from zerocalc.cli import app
    from zerocalc.dtypes import ALIASES, DTYPE_BYTES

    r, config = _report_config_from_cli(monkeypatch, tmp_path, "--dtype", "bfloat16")
    assert r.exit_code == 0 and config.comm_dtype == "bf16"
    help_text = " ".join(CliRunner().invoke(app, ["report", "--help"]).output.split())
    for name in (*DTYPE_BYTES, *ALIASES):
        assert f"{name}," in help_text or f"{name};" in help_text or f"{name} (" in help_text, name


@pytest.mark.parametrize(("n", "colocated"), [(1, "yes"), (64, "NO")])
def test_schemes_table_says_dp_update_at_the_reports_n(n, colocated):
    # On one rank the colocated update is the data-parallel one (nothing to sum across ranks), and
    # zeropp sends, so quantises, nothing. The schemes table follows the report's N.
    from types import SimpleNamespace

    from zerocalc.report.layout import Writer
    from zerocalc.report.sections import model

    tables = []
    w = Writer("test")
    w.table = lambda header, rows, **kw: tables.append((list(header), [list(r) for r in rows]))
    model.draw(w, SimpleNamespace(config=report.ReportConfig(n=n, gpus_per_node=1)))
    header, rows = next(t for t in tables if "DP update" in t[0])
    col = header.index("DP update")
    dp_update = {r[0]: r[col] for r in rows}
    assert dp_update["colocated"] == colocated and dp_update["zeropp"] == colocated
    assert dp_update["dp"] == "yes"


_ONE_RANK_LINE = ("node0:1000:1000 [0] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x78d056200000 "
                  "recvbuff 0x78d056200000 count {count} datatype 6 op 0 root 0 comm 0x78cfda045840 "
                  "[nranks=1] stream 0x78d07125e5e0")


def _one_rank_log(path: Path) -> Path:
    """One process, three steps of one 1,000,000-element fp16 all-reduce: a world of one rank."""
    path.write_text("\n".join(_ONE_RANK_LINE.format(op=s, count=1_000_000) for s in range(3)) + "\n")
    return path


def test_validation_leaves_out_a_trace_with_nothing_to_compare(tmp_path):
    """With N = 1 no scheme sends anything across ranks: no ratio exists, so the figure has no row
    for that trace (it used to make the report crash on a NaN axis limit)."""
    from zerocalc.report import validation_frame
    from zerocalc.traces import read_traces
    from zerocalc.validate import check

    ts = read_traces(_one_rank_log(tmp_path / "one.txt"))
    assert validation_frame({"one": check(ts.table, meta=ts.meta)}).empty


@pytest.mark.slow
def test_report_on_a_one_rank_trace_is_written(tmp_path):
    from typer.testing import CliRunner

    from zerocalc.cli import app

    out = tmp_path / "one.pdf"
    trace = _one_rank_log(tmp_path / "one.txt")
    res = CliRunner().invoke(app, ["report", "-o", str(out), "--trace", str(trace)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(b"%PDF-")


@pytest.mark.parametrize(("psi", "k", "overlaid"), [(7.5e9, 12.0, True), (70e9, 12.0, False),
                                                    (7.5e9, 16.0, False)])
def test_figure3_overlays_zero_table1_only_at_its_psi_and_k(monkeypatch, psi, k, overlaid):
    """ZeRO Table 1's cells are for Ψ = 7.5B and K = 12 (ZeRO §5): drawn over the model's lines for
    that model only, and the caption says which."""
    from types import SimpleNamespace

    from zerocalc import plots
    from zerocalc.report.sections import figures

    config = report.ReportConfig(psi=psi, k=k)
    points = report.table1_overlay(config)
    assert len(points) == (18 if overlaid else 0)
    drawn, captions = [], []
    monkeypatch.setattr(plots, "plot_memory_vs_n", lambda df, pts=None, fig=None: drawn.append(pts))
    w = SimpleNamespace(figure=lambda h, draw, caption=None: (draw(None), captions.append(caption)))
    data = SimpleNamespace(config=config, memory_vs_n=report.memory_vs_n(config), memory_points=points)
    figures._memory_figure(w, data)
    assert (drawn[0] is not None and len(drawn[0]) == 18) if overlaid else drawn[0] is None
    assert ("overlaid as unfilled markers" in captions[0]) == overlaid
    assert ("not overlaid here" in captions[0]) == (not overlaid)


@pytest.mark.parametrize(("steps", "equivalent", "start"), [
    (20, False, "No: the reduce-scatter is the sum of gradients over ranks"),
    (20, True, "Only where there is nothing to sum"),
    (0, None, "Not decided: no training step was simulated")])
def test_in_short_verdict_follows_the_simulation(steps, equivalent, start):
    """The lead sentence is the simulation's answer: diverged (the default), equal to data-parallel
    training (ranks with nothing to sum, e.g. N = 1), or no step compared."""
    from types import SimpleNamespace

    from zerocalc.report.summary import verdict_sentence

    run = SimpleNamespace(scheme="colocated", steps=steps, equivalent=equivalent)
    data = SimpleNamespace(extra={"feasibility": SimpleNamespace(runs=[run])})
    sentence = verdict_sentence(data)
    assert sentence.startswith(start) and sentence.endswith(".") and ". " not in sentence


def test_a_table_too_wide_for_the_page_wraps_its_prose_column_instead_of_running_off():
    """A cell of 300 characters (a symbol's long meaning, say) would put the table past the right
    margin even at the smallest size: its column is wrapped and every line stays inside the text."""
    from zerocalc.report.layout import Writer
    from zerocalc.report.page import MARGIN_X, MONO_EM, TEXT_W

    drawn = []
    w = Writer("test")
    w.text = lambda x, y, s, size, **kw: drawn.append((x, s, size, kw.get("ha", "left")))
    long = " ".join(["word"] * 60)
    w.table(["symbol", "meaning", "unit"], [["b_p", long, "bytes/element"], ["N", "ranks", "ranks"]],
            align="lll", size=7.5)
    right = max(x + (0 if ha == "right" else len(s) * size * MONO_EM / 72) for x, s, size, ha in drawn)
    assert right <= MARGIN_X + TEXT_W + 1e-6
    assert any(s == "bytes/element" for _x, s, _size, _ha in drawn)  # the last column is drawn, on the page
    assert sum(1 for _x, s, _size, _ha in drawn if s.startswith("word")) > 1  # the long cell is wrapped


def test_micro_batch_section_prices_each_rule():
    # The section's table: DeepSpeed ZeRO-1 pays the same per optimizer step at k = 8 as at k = 1
    # (boundary all-reduce), ZeRO-2 (2k + 1)/3 times (all-reduce every micro-batch, one all-gather).
    from zerocalc.report.config import ReportConfig
    from zerocalc.report.sections import micro_batches

    class _Data:
        extra: dict = {}

    cfg = ReportConfig()
    data = _Data()
    micro_batches.collect(cfg, data, lambda *_: None)
    df = data.extra["micro_batches"].set_index(["label", "micro_batches"])["bytes_per_rank"]
    assert df[("deepspeed-zero1", 8)] == pytest.approx(df[("deepspeed-zero1", 1)])
    assert df[("deepspeed-zero2", 8)] == pytest.approx(df[("deepspeed-zero2", 1)] * 17 / 3)
    assert df[("dp (DDP no_sync)", 32)] == pytest.approx(df[("dp (DDP)", 1)])


def test_in_short_flags_model_states_above_the_gpu_memory(generated):
    import dataclasses

    from zerocalc.report.summary import in_short

    _path, data, _pages = generated
    # ZeRO-2 and the proposal keep 2Ψ + 14Ψ/N of model states: 15 GB + 1.64 GB = 16.6 GB at Ψ = 7.5e9,
    # N = 64 (the bullet of the test above); a 16 GB GPU holds neither, an 80 GB one both
    def memory_bullet(gpu):
        d = dataclasses.replace(data, config=dataclasses.replace(data.config, gpu_memory_bytes=gpu))
        return next(b for b in in_short(d)[1] if b.startswith("Memory"))

    small, large = memory_bullet(16e9), memory_bullet(80e9)
    assert small.endswith("16.6 GB of model states per GPU, above the GPU's 16 GB: neither fits.")
    assert "above" not in large and large == memory_bullet(None)  # dgx-a100 states no GPU memory
    with pytest.raises(ValueError, match="--gpu-memory"):
        dataclasses.replace(data.config, gpu_memory_bytes=-1.0)


def test_report_refuses_a_bad_gpu_memory_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from zerocalc.cli import app

    r = CliRunner().invoke(app, ["report", "-o", str(tmp_path / "r.pdf"), "--gpu-memory", "lots"])
    assert r.exit_code == 2 and "--gpu-memory" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.pdf").exists()
