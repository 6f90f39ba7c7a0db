"""The notes a priced nccl-tests sweep carries beside its rows (:func:`zerocalc.validate.sweep.
compare_sweep`): what the model rests on besides the release's own tables (NVLS figures of a later
release, the network's own latency, a tuner plugin, the pipeline fills it times), the graphs and channels
the file's INFO lines state, the CUDA build, and the channels a thread's launches run a call on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zerocalc.nccl.enabled import CUDA_11_8_PAIR
from zerocalc.nccl.model import Tuning
from zerocalc.nccl.nvls_pipeline import fill_priced, nvls_tree_hops
from zerocalc.nccl.ofi_tuner import OfiTuner
from zerocalc.nccl.tables import Algorithm, Collective, Protocol
from zerocalc.nccl.tree_pipeline import fill_priced as tree_fill_priced
from zerocalc.nccl.tune_model import (
    AMPERE_LL_HOP_US,
    NVL72_LL_HOP_US,
    ampere_ll_latency_us,
    ampere_tree_ll_hops_us,
    ll128_run_share,
    nvl72_ll_latency_us,
)
from zerocalc.nccl.tuner import TunerConfig
from zerocalc.topology import Topology
from zerocalc.validate.host_launch import channels_note, one_gpu_channels_note
from zerocalc.validate.sweep_info import stated_channels_notes, stated_graph_notes, stated_nvls_notes


def sweep_notes(tuning: Tuning, topo: Topology, coll: Collective, group_size: int, out: Sequence[Mapping], *,
                 api: int, tuner: TunerConfig | None, ofi_tuner: OfiTuner | None, stated: tuple,
                 launch: tuple) -> list[str]:
    """The notes on a priced sweep after its release's and symmetric kernels': failed checks, the graphs,
    channels and NVLS channels its INFO lines ``stated`` (graphs, channels, nvls), the CUDA build, the
    model's own terms, and the channels a thread's ``launch`` (-g, -a, -G) runs its calls on."""
    stated_graphs, stated_channels, stated_nvls = stated
    gpus_per_thread, agg_iters, graph = launch
    from zerocalc.validate.sweep import wrong_notes  # the row checks stay with the rows

    notes = wrong_notes(out)
    notes += stated_graph_notes(tuning, stated_graphs) + stated_channels_notes(tuning, stated_channels)
    notes += stated_nvls_notes(tuning, stated_nvls) + _cuda_build_notes(tuning)
    notes += _model_notes(tuning, topo, coll, group_size, out, api=api, tuner=tuner, ofi_tuner=ofi_tuner)
    return notes + [t for t in [channels_note(gpus_per_thread, tuning.release.era, out, agg_iters, graph),
                                one_gpu_channels_note(out)] if t]

def _cuda_build_notes(tuning: Tuning) -> list[str]:
    """What the CUDA release NCCL was built with turned off in ``tuning``, said in a note."""
    if any(e.why_disabled == CUDA_11_8_PAIR for e in tuning.entries.values()):
        return ["NCCL built with CUDA 11.8 (its version line): LL128 is off by default for a Ring "
                "all-reduce of 2 ranks on sm90 (src/graph/tuning.cc, v2.15.5-v2.30.7)"]
    return []

def _model_notes(tuning: Tuning, topo: Topology, coll: Collective, group_size: int, out: Sequence[Mapping],
                 *, api: int, tuner: TunerConfig | None, ofi_tuner: OfiTuner | None) -> list[str]:
    """What the priced rows rest on besides the release's own tables: NVLS figures of a later release, the
    network's own latency, a tuner plugin, a calibration that covers none of the rows."""
    release, notes = tuning.release, []
    if tuning.nvls_run is not None and any(r["algorithm"] in ("NVLS", "NVLSTree") for r in out):
        if tuning.machine.compute_capability < 100 or topo.mnnvl:
            gpus = "GB200-NV72" if tuning.machine.compute_capability >= 100 else "H100"
            what = (f"{'Hopper' if gpus == 'H100' else gpus}, which NCCL 2.28.3 corrected (\"Update tuning "
                    f"data for {gpus}\")")
        else:
            what = "Blackwell (nvlsEfficiency 0.74), which NCCL 2.28.3 brought in"
            own = tuning.machine.graphs.get(Algorithm.NVLS_TREE)
            run = tuning.nvls_run.machine.graphs.get(Algorithm.NVLS_TREE)
            if tuning.machine.n_nodes > 1 and own is not None and run is not None and run.run_bw_intra:
                what += (f", on the NVLS graph at the {run.bw_intra:g} GB/s bwIntra its GPUs' NVSwitch "
                         f"links hold (NCCL's search: {own.bw_intra:g}, the NIC's speed)")
        notes.append(f"NVLS / NVLS Tree calls timed with NCCL {tuning.nvls_run.release.name}'s figures for "
                     f"{what}; NCCL {release.name} chooses them with its own")
    notes += _nvls_fill_note(tuning, coll, out) + _tree_fill_note(tuning, coll, out)
    if tuning.wire_run is not None and out:
        told = topo.net_latency_us or 0
        wire = told if topo.net_wire_latency_us is None else topo.net_wire_latency_us
        if release.era < 12:
            notes.append(f"NCCL {release.name}'s model reads no network plugin latency (tuning.cc before "
                         f"v2.12.12): it chooses without one, and its network hops are timed with the "
                         f"network's {wire:g} µs, counted as NCCL 2.12-2.17 count it")
        else:
            notes.append(f"network hops timed with the network's own latency, {wire:g} µs per hop "
                         f"(net_wire_latency_us); NCCL chooses with the {told:g} µs its plugin reports")
    share = ll128_run_share(tuning.machine, Algorithm.RING, Protocol.LL128)
    if share < 1 and any((r["algorithm"], r["protocol"]) == ("Ring", "LL128") and not r["calibrated"]
                         for r in out):
        notes.append(f"Ring/LL128 calls timed at {share:g} of NCCL's LL128 bandwidth, as one-node A100 "
                     f"sweeps run them (seven public sweeps, four hosts); NCCL chooses with its own figure")
    if ampere_ll_latency_us(tuning.release, tuning.machine, coll, Protocol.LL) is not None and any(
            (r["algorithm"], r["protocol"]) == ("Ring", "LL") and not r["calibrated"] for r in out):
        notes.append(f"Ring/LL calls timed with {AMPERE_LL_HOP_US:g} µs a hop, as one-node A100 sweeps of "
                     f"one process per GPU run them (two public sweeps, NCCL 2.8.4 and 2.30.7); NCCL chooses "
                     f"with its table's hop")
    if nvl72_ll_latency_us(tuning.release, tuning.machine, coll, Protocol.LL) is not None and any(
            (r["algorithm"], r["protocol"]) == ("Ring", "LL") and not r["calibrated"] for r in out):
        notes.append(f"Ring/LL calls timed with {NVL72_LL_HOP_US:g} µs a hop, as sweeps of GB200 / GB300 in "
                     f"an NVL72 domain run them (four public sweeps, NCCL 2.28.7 and 2.30.7); NCCL chooses "
                     f"with its table's hop")
    if ampere_tree_ll_hops_us(tuning.release, tuning.machine, coll, Algorithm.TREE, Protocol.LL) and any(
            (r["algorithm"], r["protocol"]) == ("Tree", "LL") and not r["calibrated"] for r in out):
        notes.append(f"Tree/LL calls timed with {AMPERE_LL_HOP_US:g} µs for each NVLink hop of the chain in "
                     f"a node, the hop one-node A100 rings run at; NCCL chooses with its table's hop")
    if tuner is not None:
        notes.append(f"tuner rules of {tuner.source} priced as NCCL's example tuner plugin under tuner API "
                     f"v{api}{' (cost table)' if api >= 3 else ' (the plugin picks the pair)'}")
    if ofi_tuner is not None:
        notes.append(ofi_tuner_note(ofi_tuner, out, tuning.machine.n_nodes, api))
    if topo.nccl_calibration and not any(r["calibrated"] for r in out):
        notes.append(f"the topology's calibration is for other collectives or group sizes; "
                     f"{coll.value} on {group_size} ranks priced by NCCL's tables")
    return notes

def _tree_fill_note(tuning: Tuning, coll: Collective, out: Sequence[Mapping]) -> list[str]:
    """The note for Tree/LL128 rows timed with the chunk each network hop holds whole
    (:func:`zerocalc.nccl.tree_pipeline.fill_priced`)."""
    m = tuning.machine
    if not any(tree_fill_priced(coll, Algorithm(r["algorithm"]), Protocol(r["protocol"]), m.n_nodes)
               for r in out if not r.get("calibrated") and r["algorithm"] == Algorithm.TREE.value):
        return []
    hops = nvls_tree_hops(int(m.n_nodes))
    return [f"Tree/LL128 calls timed with the chunk each of their {hops} network hops holds whole before "
            f"passing it on (src/transport/net.cc sends a step once the GPU has filled it), nChannels x "
            f"chunk at the bus rate (src/enqueue.cc calcCollChunking; zerocalc.nccl.tree_pipeline); NCCL "
            f"chooses without it"]

def _nvls_fill_note(tuning: Tuning, coll: Collective, out: Sequence[Mapping]) -> list[str]:
    """The note for rows timed with their NVLS pipeline's fill (:func:`zerocalc.nccl.nvls_pipeline.
    fill_priced`: an all-reduce on Hopper or Blackwell, NVLS Tree across nodes and NVLS on one node)."""
    m = tuning.machine
    seen = [a for a in (Algorithm.NVLS_TREE, Algorithm.NVLS) if any(r["algorithm"] == a.value for r in out)
            and fill_priced(coll, a, m.n_nodes, m.compute_capability)]
    if not seen:
        return []
    names = " / ".join("NVLS Tree" if a == Algorithm.NVLS_TREE else a.value for a in seen)
    where = "on Blackwell" if m.compute_capability >= 100 else "on Hopper"
    return [f"{names} calls timed with their pipeline's fill {where}, up to two loops of nvlsChannels "
            f"x heads x chunk (src/enqueue.cc calcCollChunking; zerocalc.nccl.nvls_pipeline); NCCL chooses "
            f"without it"]

def ofi_tuner_note(ofi: OfiTuner, rows: Sequence[Mapping], n_nodes: int, api: int) -> str:
    """What aws-ofi-nccl's tuner did to a sweep: the pair it chose over which sizes, or that it left every
    call to NCCL's model (and why, for the v1.9 model on 2 nodes or fewer)."""
    spans: list[list] = []  # [pair, first bytes, last bytes, last row index] of each run chosen alike
    for i, r in enumerate(rows):
        if not r.get("ofi_tuner"):
            continue
        pair = f"{r['algorithm']}/{r['protocol']}"
        if spans and spans[-1][0] == pair and spans[-1][3] == i - 1:
            spans[-1][2], spans[-1][3] = r["bytes"], i
        else:
            spans.append([pair, r["bytes"], r["bytes"], i])
    head = f"{ofi.name}'s tuner plugin ({ofi.kind}, {ofi.source}; tuner API v{api})"
    if not spans:
        covered, why = ofi.coverage(n_nodes, ofi.platform is not None)
        why = (f" ({why})" if covered is False else " (it returns nothing on 2 nodes or fewer)"
               if ofi.kind == "model" and n_nodes <= 2 else " (no region or model of it covers these calls)")
        return f"{head} left every call to NCCL's own choice{why}: NCCL's model priced"
    chosen = "; ".join(f"{p} {size_words(lo)}" + (f"-{size_words(hi)}" if hi != lo else "")
                       for p, lo, hi, _ in spans)
    rest = sum(1 for r in rows if not r.get("ofi_tuner"))
    return (f"{head} chose {chosen}" + (f"; NCCL's own choice for the other {rest} size(s)" if rest else ""))

def size_words(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"
