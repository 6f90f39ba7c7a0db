"""Section: NCCL's own cost model (zerocalc.nccl) against the bundled nccl-tests sweeps, per size."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from zerocalc.report.sections import title

if TYPE_CHECKING:
    from zerocalc.report.config import Progress, ReportConfig, ReportData
    from zerocalc.report.layout import Writer

#: Bundled sweeps (``zerocalc/data/traces/nccl-tests``), the preset describing the hardware each ran on
#: (provenance in tests/data/traces/README.md), the ranks when the file does not list them, and the NCCL
#: version the run used when the file does not print it but its source states it (the TCPXO all-reduce:
#: its source repository's README lists libnccl.so.2.21.5, installed by the plugin installer v1.0.3).
SWEEPS: tuple[tuple[str, str, int | None, str, str | None], ...] = (
    ("all_reduce_perf-16xH100-2nodes-infiniband.txt", "dgx-h100", 16, "all-reduce 16×H100 IB", None),
    ("all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt", "dgx-b200", 16, "all-reduce 16×B200 IB", None),
    ("all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt", "dgx-h100", None, "all-reduce 16×H100 IB (HGX)",
     None),
    ("all_reduce_perf-8xA100-SXM4-40GB-oci.txt", "dgx-a100", None, "all-reduce 8×A100 NVSwitch", None),
    ("all_reduce_perf-8xA100-SXM4-80GB-g8-nccl2.19.3.txt", "dgx-a100", None, "all-reduce 8×A100-80GB -g 8",
     None),
    ("all_reduce_perf-2xRTX2080Ti-pcie3-shm.txt", "pcie-gen3", None, "all-reduce 2×RTX 2080 Ti PCIe", None),
    ("all_gather_perf-16xH100-a3mega.txt", "gcp-a3-mega", None, "all-gather 16×H100 TCPXO", None),
    ("all_reduce_perf-16xH100-2nodes.txt", "gcp-a3-mega", None, "all-reduce 16×H100 TCPXO", "2.21.5"),
)


def collect(config: ReportConfig, data: ReportData, say: Progress) -> None:
    """Each bundled sweep compared size by size with NCCL's model on its preset (zerocalc.validate.sweep)."""
    from importlib.resources import files

    from zerocalc.nccl import LATEST
    from zerocalc.nccl.env import settings
    from zerocalc.nccl.predict import version_from_text
    from zerocalc.topology import get_topology
    from zerocalc.topology.devices import preset_for_devices
    from zerocalc.traces.nccl_tests import parse
    from zerocalc.validate.sweep import compare_sweep

    say("comparing NCCL's cost model with the bundled nccl-tests sweeps")
    root = files("zerocalc") / "data" / "traces" / "nccl-tests"
    frames, summary = [], []
    for name, preset, ranks, label, source_version in SWEEPS:
        text = (root / name).read_text(encoding="utf-8").splitlines(True)
        res = parse(iter(text), name)
        stated = version_from_text(text)
        version = stated or source_version or LATEST.tag.lstrip("v").split("-")[0]
        topo = get_topology(preset)
        group = ranks or int(res.meta["world_size"])
        runs = res.meta.get("runs") or [{}]
        if topo.nvlink_gen == 0:  # a PCIe box: the card's own figures and peer-to-peer, as check takes them
            topo, _ = preset_for_devices(runs[0]["gpus"], runs[0]["hosts"], where=name, group_size=group,
                                         root_bus_hosts=runs[0].get("root_bus_hosts") or ())
        env = settings(topo, version, None, None, stated=runs[0].get("nccl_env"), where=name)
        launch = {k: runs[0].get(k) for k in ("gpus_per_thread", "agg_iters", "graph")}
        launch.update(dtype=res.rows[0].get("dtype"), redop=res.rows[0].get("redop"))  # read by the choice
        cmp = compare_sweep(res.rows, topo, op=res.rows[0]["op"], group_size=group, nccl_version=version,
                            algo_enable=env.algo_enable, proto_enable=env.proto_enable,
                            nvls_enable=env.nvls_enable, channels=(env.min_channels, env.max_channels),
                            launch_env=env.launch, **launch)
        df = pd.DataFrame(cmp.rows)
        if env.notes:  # the same sweep with NCCL's defaults: what the provider's environment changes
            stock = compare_sweep(res.rows, topo, op=res.rows[0]["op"], group_size=group,
                                  nccl_version=version, **launch)
            df["stock_ratio"] = [r["ratio"] for r in stock.rows]
        df["sweep"] = label
        frames.append(df)
        before = df["textbook_s"] / df["measured_s"]
        summary.append({
            "sweep": label, "preset": preset,
            "version": version + ("" if stated else " (source)" if source_version else " (assumed)"),
            "environment": "provider's" if env.notes else "NCCL defaults",
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
        "every NCCL release line from 2.8 to 2.30, deriving the channels and per-channel bandwidths NCCL's "
        "topology search would find from the topology's NICs, NVLink and PCIe figures. Below, public "
        "nccl-tests sweeps against it, "
        "each with the preset describing its hardware and the NCCL version it states (the latest modelled "
        "where it states none). Ratio = predicted / out-of-place measured time; IB = InfiniBand, TCPXO = "
        "GCP's GPUDirect-TCPXO.")
    s = data.extra["nccl_sweep_summary"]
    w.table(["sweep", "preset", "NCCL", "NCCL environment", "sizes in 0.5-2x", "min", "at median size", "max",
             "textbook α-β"],
            [[r.sweep, r.preset, r.version, r.environment, f"{r.inside} of {r.sizes}", f"{r.min:.2f}",
              f"{r.median_size:.2f}", f"{r.max:.2f}", f"{r.before_min:.2f}-{r.before_max:.2f}"]
             for r in s.itertuples()],
            align="llllrrrrr", size=7.0)
    df = data.extra["nccl_sweeps"]
    stock = s.iloc[:-1]
    _tcpxo(w, df)
    _launch(w, df)
    _pcie(w, df)
    columns = 3 if len(SWEEPS) <= 6 else 4  # two rows of panels fit a page
    rows = -(-len(SWEEPS) // columns)
    w.figure(3.8 * rows, lambda sf: plots.plot_nccl_sweeps(df, fig=sf, columns=columns), caption=(
        "Time per call against message size: measured (points), NCCL's model (line) and the textbook ring "
        "α-β (dashed); below, predicted / measured, the shaded band 0.5-2x. The first "
        f"{len(stock)} sweeps fall in "
        f"the band at {int(stock['inside'].sum())} of {int(stock['sizes'].sum())} sizes; the last, priced "
        "with the NCCL and environment it ran with, as said above. zerocalc check --nccl-tuner prices a "
        "tuner's rules when they are known; zerocalc fit --out calibrates a cluster from one sweep."))


def _tcpxo(w: Writer, df: pd.DataFrame) -> None:
    """The TCPXO all-reduce: the provider's NCCL profile, and what its closed tuner leaves unpriced."""
    last = df[df["sweep"] == SWEEPS[-1][3]]
    out = last[(last["ratio"] < 0.5) | (last["ratio"] > 2)]
    defaults = last["stock_ratio"]
    t = last.set_index("bytes")["measured_s"]
    step = t[32 << 20] / t[16 << 20] - 1
    w.paragraph(
        "The TCPXO all-reduce prints no NCCL version; its source repository installs NCCL 2.21.5 with GCP's "
        "GPUDirect-TCPXO plugin v1.0.3, whose NCCL profile (GCP's release notes) sets NCCL_ALGO=Ring,Tree, "
        "NCCL_PROTO=Simple and NCCL_NVLS_ENABLE=0; the gcp-a3-mega preset carries that profile per NCCL "
        f"release. With NCCL's defaults the sweep's ratios run {defaults.min():.2f}-{defaults.max():.2f} "
        f"({int(((defaults >= 0.5) & (defaults <= 2)).sum())} of {len(last)} sizes in the band); with the "
        f"profile {last['ratio'].min():.2f}-{last['ratio'].max():.2f}, "
        f"{len(last) - len(out)} of {len(last)} in the band"
        + (", out: " + ", ".join(f"{b / 2**20:g} MiB ({r:.2f}x)" for b, r in zip(out["bytes"], out["ratio"],
                                                                                   strict=True))
           if len(out) else "")
        + ". The profile also loads Google's tuner plugin, whose rules are not published: its choices are "
        f"not priced. From 16 to 32 MiB the measured time grows {step:.0%} for twice the bytes (the file's "
        "in-place times agree): a ring step of 16 MiB (a 64 KiB chunk a channel) is one message under the "
        "profile's 8 MiB NCCL_BUFFSIZE, which the TCPXO plugin sends on one of a connection's two flows, a "
        "step of 32 MiB two messages on both; zerocalc times the steps so (zerocalc.nccl.tcp_flows).")


def _launch(w: Writer, df: pd.DataFrame) -> None:
    """The two 8×A100 -g 8 sweeps: one thread launching every kernel, and the channels NCCL launches."""
    from zerocalc.validate.host_launch import (
        HOST_US_PER_CALL,
        HOST_US_PER_CHANNEL,
        HOST_US_PER_GPU,
        LAUNCH_STAGGER_US_PER_GPU,
    )
    from zerocalc.validate.sweep_summary import median_size_row

    a100 = df[df["sweep"] == SWEEPS[3][3]]
    small = a100[a100["bytes"] <= 32 << 10]
    large = a100[a100["bytes"] >= 256 << 20]["ratio"]
    mid = a100[(a100["bytes"] >= 256 << 10) & (a100["bytes"] <= 32 << 20)]
    alone = (mid[["nccl_s", "host_floor_s"]].max(axis=1) / mid["measured_s"])
    stagger = a100["launch_stagger_s"].iloc[0]
    second = df[df["sweep"] == SWEEPS[4][3]]
    median_row = median_size_row(second.to_dict("records"))
    second_mid = median_row["ratio"]
    second_alone = max(median_row["nccl_s"], median_row["host_floor_s"]) / median_row["measured_s"]
    w.paragraph(
        f"The 8×A100 sweep ran one thread driving all 8 GPUs (nccl-tests -g 8): its time is flat at "
        f"{small['measured_s'].min() * 1e6:.1f}-{small['measured_s'].max() * 1e6:.1f} µs up to 32 KiB. NCCL "
        "launches the 8 kernels of a call one after the other from that thread (src/group.cc doLaunches), "
        "and no algorithm completes before the last rank's kernel runs: each call is priced at NCCL's time "
        f"plus 7 launches of {LAUNCH_STAGGER_US_PER_GPU:g} µs ({stagger * 1e6:.1f} µs), and no less than "
        f"{HOST_US_PER_CALL:g} + 8 × {HOST_US_PER_GPU:g} µs. The per-GPU figures come from the -g 2-8 "
        f"latencies posted in NVIDIA/nccl-tests issue 123 (a DGX-A100), which rise {HOST_US_PER_GPU:g} µs "
        "per GPU, 1.2 µs of it NCCL's own ring (one NVLink hop each way per added rank); the per-call part "
        "is the median over fifteen -g runs of their smallest sizes' floor less that. From 256 KiB to 32 "
        "MiB, where NCCL's time exceeds the floor, the ratios are "
        f"{mid['ratio'].min():.2f}-{mid['ratio'].max():.2f} "
        f"({alone.min():.2f}-{alone.max():.2f} with the larger of the floor and NCCL's time alone); from "
        f"256 MiB up {large.min():.2f}-{large.max():.2f}. It prints no NCCL version: it is priced with the "
        f"latest tables. The next sweep, another host of 8 A100-SXM4-80GB run the same way (-g 8) at the "
        f"NCCL 2.19.3 it states, is priced alike: {second['ratio'].min():.2f}-{second['ratio'].max():.2f}, "
        f"{second_mid:.2f} at its median size ({second_alone:.2f} with the larger of the floor and NCCL's "
        "time alone). NCCL launches a small call on fewer channels than it prices it with (src/enqueue.cc, "
        "after its choice: one channel less while the bytes are under channels × threads × 8, Ring/LL's × "
        "nRanks, 32 KiB a channel here); such a call is timed on those, and under the stagger takes the "
        "later of NCCL's time on all channels plus the stagger and its time on the channels launched. "
        "Before NCCL 2.22 a call's work is one 512-byte struct per channel it runs on, which the host writes "
        "for each GPU before the launch (src/enqueue.cc; from 2.22 one struct per call, in the kernel's "
        f"arguments): under NCCL 2.21 and earlier the thread's floor grows by 8 × {HOST_US_PER_CHANNEL:g} µs "
        "per channel launched beyond the first, a figure fitted to seven -g 8 sweeps of three hosts whose "
        "time rises with the channels the call runs on, the same for every collective.")


def _pcie(w: Writer, df: pd.DataFrame) -> None:
    """The 2× RTX 2080 Ti: NCCL's ring through the PCI tree and host memory."""
    pcie = df[df["sweep"] == SWEEPS[5][3]]
    w.paragraph(
        "The two GeForce RTX 2080 Ti sit under one PCIe 3.0 switch (nvidia-smi topo: PIX) and their driver "
        "refuses peer-to-peer (NS): NCCL moves their data through host memory, both ring hops climbing the "
        "switch's one x16 link to the CPU, at 6/5 of their bandwidth through an Intel root complex "
        "(src/graph/search.cc followPath, topo.h INTEL_P2P_OVERHEAD). zerocalc.nccl.pcie searches that PCI "
        "tree as NCCL does: one channel of 5 GB/s, where the GPU's own 12 GB/s link alone would give twice "
        "that. Through host memory NCCL's figure leaves out an idle step: each of the 2 channels runs send, "
        "recvReduceCopySend, recv (src/device/all_reduce.h), the first and last one way only, for NCCL's 2 "
        "steps of both ways at once; the other channel fills half of it, so the bandwidth term is timed "
        "1.25 times NCCL's (zerocalc.nccl.pcie.host_staged_slowdown; 1.5 for an all-gather). "
        f"Its ratios run {pcie['ratio'].min():.2f}-{pcie['ratio'].max():.2f}; the pcie presets are "
        "two Intel sockets with four GPUs to a switch, the layout NCCL's own topology dump shows for 8 RTX "
        "4090 (NVIDIA/nccl-tests issue 307), and a TOML file gives another (cpu_sockets, "
        "gpus_per_pcie_switch, gpu_p2p, smp_GBps).")
