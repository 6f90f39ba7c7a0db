"""Section: NCCL's own cost model (zerocalc.nccl) against the bundled nccl-tests sweeps, per size."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from zerocalc.report.sections import title

if TYPE_CHECKING:
    from zerocalc.report.config import Progress, ReportConfig, ReportData
    from zerocalc.report.layout import Writer

#: Bundled sweeps (``zerocalc/data/traces/nccl-tests``), the preset describing the hardware each ran on
#: (provenance in that directory's README) and the ranks when the file does not list them.
SWEEPS: tuple[tuple[str, str, int | None, str], ...] = (
    ("all_reduce_perf-16xH100-2nodes-infiniband.txt", "dgx-h100", 16, "all-reduce 16×H100 IB"),
    ("all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt", "dgx-b200", 16, "all-reduce 16×B200 IB"),
    ("all_gather_perf-16xH100-a3mega.txt", "gcp-a3-mega", None, "all-gather 16×H100 TCPXO"),
    ("all_reduce_perf-16xH100-2nodes.txt", "gcp-a3-mega", None, "all-reduce 16×H100 TCPXO"),
)


def collect(config: ReportConfig, data: ReportData, say: Progress) -> None:
    """Each bundled sweep compared size by size with NCCL's model on its preset (zerocalc.validate.sweep)."""
    from importlib.resources import files

    from zerocalc.nccl import LATEST
    from zerocalc.nccl.predict import version_from_text
    from zerocalc.topology import get_topology
    from zerocalc.traces.nccl_tests import parse
    from zerocalc.validate.sweep import compare_sweep

    say("comparing NCCL's cost model with the bundled nccl-tests sweeps")
    root = files("zerocalc") / "data" / "traces" / "nccl-tests"
    frames, summary = [], []
    for name, preset, ranks, label in SWEEPS:
        text = (root / name).read_text(encoding="utf-8").splitlines(True)
        res = parse(iter(text), name)
        stated = version_from_text(text)
        version = stated or LATEST.tag.lstrip("v").split("-")[0]
        cmp = compare_sweep(res.rows, get_topology(preset), op=res.rows[0]["op"],
                            group_size=ranks or int(res.meta["world_size"]), nccl_version=version)
        df = pd.DataFrame(cmp.rows)
        df["sweep"] = label
        frames.append(df)
        before = df["textbook_s"] / df["measured_s"]
        summary.append({
            "sweep": label, "preset": preset, "version": version + ("" if stated else " (assumed)"),
            "sizes": len(df), "inside": int(((df["ratio"] >= 0.5) & (df["ratio"] <= 2)).sum()),
            "min": df["ratio"].min(), "median_size": cmp.median_size_ratio(), "max": df["ratio"].max(),
            "before_min": before.min(), "before_max": before.max()})
    data.extra["nccl_sweeps"] = pd.concat(frames, ignore_index=True)
    data.extra["nccl_sweep_summary"] = pd.DataFrame(summary)


def draw(w: Writer, data: ReportData) -> None:
    from zerocalc import plots

    w.heading(title("nccl_sweeps"))
    w.paragraph(
        "zerocalc's textbook α-β model charges every ring step the Simple protocol's latency and prices "
        "bandwidth from the datasheet. NCCL itself picks, per call, the algorithm (Ring, Tree, NVLS, NVLS "
        "Tree, CollNet, PAT) and protocol (LL, LL128, Simple) of least predicted time from its own model "
        "(src/graph/tuning.cc and src/enqueue.cc). zerocalc.nccl transcribes that model with the tables of "
        "NCCL 2.19, 2.26 and 2.30, deriving the channels and per-channel bandwidths NCCL's topology search "
        "would "
        "find from the topology's NICs, NVLink and PCIe figures. Below, public nccl-tests sweeps against it, "
        "each with the preset describing its hardware and the NCCL version it states (the latest modelled "
        "where it states none). Ratio = predicted / out-of-place measured time; IB = InfiniBand, TCPXO = "
        "GCP's GPUDirect-TCPXO.")
    s = data.extra["nccl_sweep_summary"]
    w.table(["sweep", "preset", "NCCL", "sizes in 0.5-2x", "min", "at median size", "max", "textbook α-β"],
            [[r.sweep, r.preset, r.version, f"{r.inside} of {r.sizes}", f"{r.min:.2f}",
              f"{r.median_size:.2f}", f"{r.max:.2f}", f"{r.before_min:.2f}-{r.before_max:.2f}"]
             for r in s.itertuples()],
            align="lllrrrrr", size=7.5)
    df = data.extra["nccl_sweeps"]
    stock, tuned = s.iloc[:-1], SWEEPS[-1][3]
    big = df[(df["sweep"] == tuned) & (df["bytes"] >= 512 << 20)]["ratio"]
    w.figure(4.4, lambda sf: plots.plot_nccl_sweeps(df, fig=sf), caption=(
        "Time per call against message size: measured (points), NCCL's model (line) and the textbook ring "
        "α-β (dashed); below, predicted / measured, the shaded band 0.5-2x. The first three sweeps fall in "
        f"the band at {int(stock['inside'].sum())} of {int(stock['sizes'].sum())} sizes. The last ran on "
        "GCP's "
        "GPUDirect-TCPXO, whose recommended NCCL environment loads Google's tuner plugin: NCCL's stock "
        f"tables predict its sizes from 512 MiB up ({big.min():.2f}-{big.max():.2f}x) but not the per-call "
        "cost below; zerocalc fit --out calibrates such a cluster from one sweep."))
