"""What a sweep's NCCL INFO lines change in how ``check`` prices it (:mod:`zerocalc.traces.nccl_info`).

- The network latency NCCL chose with (aws-ofi-nccl's ``Internode latency set at X us``): NCCL's model
  adds it to every network hop when it chooses (``src/graph/tuning.cc``, ``latencyInter``). Where it
  differs from the topology's ``net_latency_us`` the sweep is chosen with the file's figure; the time a
  hop takes stays the topology's (its ``net_wire_latency_us``, else its ``net_latency_us``), since the
  plugin's figure steers NCCL and is not what the wire takes (aws-ofi-nccl ``include/nccl_ofi_tuner.h``,
  "different from the network plugin's param for net latency by design").
- A tuner plugin NCCL loaded (``Using tuner plugin``): the plugin, not NCCL's model, chose each call's
  algorithm and protocol (NCCL ``src/enqueue.cc``: ``tuner->getCollInfo`` rewrites the cost table NCCL
  picks from). zerocalc prices NCCL's own choice and says so; it does not model a plugin it is not given
  the rules of (``--nccl-tuner``), except aws-ofi-nccl's (``nccl_ofi_tuner``), whose releases
  zerocalc models (:func:`ofi_tuner_stated`, :mod:`zerocalc.nccl.ofi_tuner`).
- The channels and graphs NCCL states it set up (``"N coll channels, ..."`` with its nvls and p2p counts, the
  ring lines, the GRAPH lines): :func:`zerocalc.validate.sweep.compare_sweep` prices them where they differ
  from the derived ones, and the notes here say which line moved a price (:func:`stated_graph_notes`,
  :func:`stated_channels_notes`, :func:`stated_nvls_notes`, :func:`stated_p2p_notes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from zerocalc.nccl import ofi_cxi, ofi_efa
from zerocalc.nccl.tables import Algorithm


def nodes_as_stated(topo: Any, info: Mapping[str, Any], group_size: int) -> tuple[Any, str] | None:
    """A given topology with nodes of the ranks per node the file's INFO lines state (``nNodes M
    localRanks k``, NCCL ``src/init.cc``), for a run whose ``# Rank`` lines name no hosts: ``k`` fewer than
    the topology's GPUs per node, on several nodes, ``M × k`` the sweep's ranks
    (:func:`zerocalc.topology.devices.nodes_of`); ``None`` when they do not say so. With the sentence for
    JSON ``topology_how``."""
    from zerocalc.topology.devices import nodes_of

    nodes, local = info.get("nodes"), info.get("local_ranks")
    if not nodes or not local or nodes[0] < 2 or nodes[0] * local[0] != group_size \
            or local[0] >= topo.gpus_per_node:
        return None
    shaped, words = nodes_of(topo, local[0])
    said = info.get("said_by") or "the file's NCCL INFO lines"
    return shaped, (f"given (--topology); {words}, as {said} state {local[0]} ranks on "
                    f"each of {nodes[0]} nodes (line {nodes[1]})")


#: The networks whose messages above an eager limit wait on the receiver (``net_eager_bytes``), by the
#: kind a run's NCCL lines name (:mod:`zerocalc.traces.nccl_info`): the limit and its words.
_EAGER_NETWORKS = {"slingshot": (ofi_cxi.EAGER_BYTES, "HPE Slingshot", "libfabric cxi's rendezvous"),
                   "efa": (ofi_efa.EAGER_BYTES, "AWS EFA", "aws-ofi-nccl's handshake")}


def network_as_stated(topo: Any, network: Mapping[str, Sequence] | None) -> tuple[Any, str]:
    """``topo`` with the eager limit of its network (its ``net_eager_bytes``: HPE Slingshot's cxi provider,
    :mod:`zerocalc.nccl.ofi_cxi`; AWS EFA, :mod:`zerocalc.nccl.ofi_efa`) as the run's NCCL lines show its
    network (``network``: kind → the lines naming it, :mod:`zerocalc.traces.nccl_info`): set where they
    name one of those (aws-ofi-nccl's ``Selected provider is cxi`` or its EFA lines) on an NVIDIA topology
    without a limit, dropped where they name only other networks (InfiniBand, sockets) on one with it;
    with the words for ``topology_how`` ('' where unchanged)."""
    kinds = set(network or {})
    named = sorted(kinds & set(_EAGER_NETWORKS))
    if len(named) == 1 and topo.net_eager_bytes is None and topo.gpu_arch is None:
        eager, name, how = _EAGER_NETWORKS[named[0]]
        line = network[named[0]][0]
        return (replace(topo, net_eager_bytes=eager),
                f"{name} as the file's NCCL lines name it (line {line}): a network message above "
                f"{eager} bytes goes by {how}")
    other = sorted(kinds - set(_EAGER_NETWORKS))
    if other and not named and topo.net_eager_bytes is not None:
        line = network[other[0]][0]
        return (replace(topo, net_eager_bytes=None),
                f"no rendezvous (Slingshot's, EFA's): the file's NCCL lines name another network "
                f"(line {line})")
    return topo, ""


def rendezvous_note(topo: Any, group_size: int) -> list[str]:
    """The note that a sweep across nodes is timed with the network's rendezvous
    (:mod:`zerocalc.nccl.ofi_cxi`, :mod:`zerocalc.nccl.ofi_efa`), where the topology has one
    (``net_eager_bytes``)."""
    if topo.net_eager_bytes is None or group_size <= topo.gpus_per_node:
        return []
    return [f"network messages above {topo.net_eager_bytes} bytes are timed with a rendezvous round trip "
            f"each (libfabric's cxi provider on HPE Slingshot: the payload read once matched; aws-ofi-nccl "
            f"on AWS EFA: the payload sent once the receiver's message has come), as many as follow one "
            f"another on a call's path; NCCL chooses without it"]


def latency_as_stated(topo: Any, info: Mapping[str, Any], group_size: int) -> tuple[Any, list[str]]:
    """``topo`` with the network latency NCCL chose with where the file's INFO lines state another
    than its ``net_latency_us`` for a sweep across nodes (its ``nNodes``, else its ``group_size`` over
    the topology's GPUs per node), and the note saying so; else ``topo`` and no note."""
    stated = info.get("net_latency_us")
    nodes = info["nodes"][0] if info.get("nodes") else -(-group_size // topo.gpus_per_node)
    if not stated or nodes < 2:
        return topo, []
    told, line = float(stated[0]), stated[1]
    preset = float(topo.net_latency_us or 0.0)
    if abs(told - preset) < 0.05:
        return topo, []
    wire = topo.net_wire_latency_us if topo.net_wire_latency_us is not None else preset
    topo = replace(topo, net_latency_us=told, net_wire_latency_us=wire)
    return topo, [f"NCCL chose with the {told:g} µs network latency its plugin reported (line {line}: "
                  f"\"Internode latency set at {told:.1f} us\"), not the {preset:g} µs of topology "
                  f"{topo.name}: chosen with the file's, network hops still timed at {wire:g} µs"]


def tuner_note(info: Mapping[str, Any]) -> list[str]:
    """The note on a tuner plugin the file's INFO lines show NCCL loading (none when they show none, or
    when it is aws-ofi-nccl's and did not fall back: :func:`ofi_tuner_stated` says what it did)."""
    from zerocalc.nccl.ofi_tuner import PLUGIN_NAME

    plugin = info.get("tuner_plugin")
    if not plugin:
        return []
    name, line = plugin
    fallback = info.get("tuner_fallback")
    if name == PLUGIN_NAME and not fallback:
        return []
    if fallback:
        return [f"tuner plugin '{name}' loaded (line {line}) but fell back to NCCL's own choice (line "
                f"{fallback[1]}): NCCL's model priced"]
    return [f"a tuner plugin ('{name}', line {line}) chose each call's algorithm and protocol, not NCCL's "
            f"model: the NCCL choice column is what NCCL's model would run (zerocalc does not model this "
            f"plugin; --nccl-tuner prices the rules of NCCL's example tuner)"]


def ofi_tuner_stated(given: str | None, info: Mapping[str, Any], env: Mapping[str, Any] | None,
                     nccl_version: str, efa: bool, restricted: bool, platform: str | None = None,
                     n_nodes: int = 1) -> tuple[Any, list[str]]:
    """aws-ofi-nccl's tuner plugin to price a sweep under (:class:`zerocalc.nccl.ofi_tuner.OfiTuner`, or
    ``None``: NCCL's own choice) and the notes saying why.

    ``given`` (``--ofi-tuner``) names the release; else the file's INFO lines say NCCL loaded it (``Using
    tuner plugin: 'nccl_ofi_tuner'``, without a fall-back line) or its ``NCCL_TUNER_PLUGIN`` names an
    aws-ofi-nccl tuner library (``libnccl-ofi-tuner.so``), and its ``NET/OFI Initializing aws-ofi-nccl X``
    line the release. What the file does not state is not guessed: a note says so. ``efa``: the run went
    over AWS EFA; ``restricted``: ``NCCL_ALGO`` or ``NCCL_PROTO`` is set; ``platform``: the EC2 platform
    of the topology (:func:`zerocalc.nccl.ofi_tuner.platform_of`), unless the file's INFO lines state the
    instance type the plugin read (``ec2_platform``), ``n_nodes`` its nodes. A release whose
    answer there zerocalc does not model (:meth:`~zerocalc.nccl.ofi_tuner.OfiTuner.coverage`) is a
    :class:`ConfigError` when given, else a note."""
    from zerocalc.errors import ConfigError
    from zerocalc.nccl.env_given import where_set
    from zerocalc.nccl.ofi_tuner import PLUGIN_NAME, ofi_tuner, platform_of_instance
    from zerocalc.nccl.tables import parse_version

    instance = info.get("ec2_platform")
    if instance:
        platform = platform_of_instance(instance[0])

    if given is not None:
        t = replace(ofi_tuner(given), platform=platform)
        covered, why = t.coverage(n_nodes, platform is not None)
        if covered is None:
            raise ConfigError(f"{t.name}'s tuner on {n_nodes} nodes: {why}", option="--ofi-tuner")
        return t, [f"priced under {t.name}'s tuner plugin, as --ofi-tuner says"]
    plugin, env = info.get("tuner_plugin"), env or {}
    named = env.get("NCCL_TUNER_PLUGIN")
    by_env = named is not None and "ofi" in str(named[0]).lower()
    if plugin and plugin[0] == PLUGIN_NAME:
        if info.get("tuner_fallback"):
            return None, []
        how = f"NCCL loaded it (line {plugin[1]}: \"Using tuner plugin '{PLUGIN_NAME}'\")"
    elif by_env and not plugin:
        how = f"NCCL_TUNER_PLUGIN={named[0]}{where_set(named[1])}"
    else:
        if efa and not plugin and not info:
            v = parse_version(nccl_version)
            loads = ("NCCL 2.21 and later also load it by default from aws-ofi-nccl's net plugin, which "
                     "holds it from v1.16.0" if v >= (2, 21, 0) else
                     f"NCCL {nccl_version} loads one only when NCCL_TUNER_PLUGIN names it")
            return None, [f"the file has no NCCL INFO lines: whether aws-ofi-nccl's tuner plugin ran is not "
                          f"stated ({loads}); NCCL's own choice priced (--ofi-tuner VERSION prices a "
                          f"release's tuner)"]
        return None, []
    if parse_version(nccl_version) < (2, 19, 0):
        return None, [f"aws-ofi-nccl's tuner plugin named ({how}), but NCCL {nccl_version} loads no tuner "
                      f"plugin (first in NCCL 2.19): NCCL's own choice priced"]
    stated = info.get("ofi_version")
    if not stated:
        return None, [f"aws-ofi-nccl's tuner plugin chose each call ({how}), but the file does not say which "
                      f"aws-ofi-nccl release ran (no \"NET/OFI Initializing aws-ofi-nccl\" line): NCCL's own "
                      f"choice priced (--ofi-tuner VERSION prices a release's tuner)"]
    try:
        t = replace(ofi_tuner(stated[0]), platform=platform)
    except ConfigError as exc:
        return None, [f"{how}; line {stated[1]}: {exc.message}: NCCL's own choice priced"]
    covered, why = t.coverage(n_nodes, platform is not None)
    if covered is None:
        return None, [f"{how}; {t.name} (line {stated[1]}) on {n_nodes} nodes: {why}: NCCL's own choice "
                      f"priced"]
    if restricted and parse_version(nccl_version) < (2, 21, 0):
        return None, [f"{how}, but {t.name}'s tuner refuses to load under NCCL_ALGO / NCCL_PROTO with tuner "
                      f"API v1 (NCCL {nccl_version}): NCCL's own choice priced"]
    on = f" on {instance[0]} (line {instance[1]})" if instance else ""
    return t, [f"{t.name} (line {stated[1]}) tuner plugin{on}: {how}"]


def coll_lines_remark(info: Mapping[str, Any], path: str) -> str:
    """What the first output line says of a sweep whose file also holds NCCL's per-call COLL lines
    (``NCCL_DEBUG_SUBSYS=COLL``): the table is what is compared, and how to read the calls instead."""
    n = info.get("coll_lines") or 0
    if not n:
        return ""
    return (f"the nccl-tests table compared, not its {n} NCCL COLL line{'s' if n != 1 else ''} "
            f"(zerocalc trace summary --trace-format nccl-log {path} reads those)")


#: nccl-tests' test → the collective NCCL's TUNING lines name (``ncclFuncToString``, NCCL v2.23+).
_FUNC = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
         "broadcast": "Broadcast", "reduce": "Reduce"}


def stated_choices(rows: list[dict], sizes: Mapping[int, int], tuning: list[Mapping[str, Any]],
                   op: str) -> list[str]:
    """Give each compared row the choice NCCL's TUNING lines state for its calls (``nccl_stated``:
    ``algorithm``, ``protocol``, ``time_s`` (NCCL's own model's, where the release prints it), ``channels``,
    ``line``) and say how the model's choice compares. ``sizes``: each row's size → its bytes per call
    as NCCL counts them (``count`` × element: the size for all_reduce, one rank's part for all_gather and
    reduce_scatter); a TUNING line naming another collective is not this sweep's."""
    if not tuning:
        return []
    func = _FUNC.get(op)
    by_bytes = {t["bytes"]: t for t in tuning if t.get("op") in (None, func)}
    stated = same = 0
    differ = []
    for r in rows:
        t = by_bytes.get(sizes.get(r["bytes"], -1))
        if t is None:
            continue
        stated += 1
        r["nccl_stated"] = {"algorithm": t["algorithm"], "protocol": t["protocol"],
                            "time_s": t["time_us"] * 1e-6 if t.get("time_us") is not None else None,
                            "channels": t.get("channels"), "line": t["line"]}
        if (t["algorithm"], t["protocol"]) == (r["algorithm"], r["protocol"]):
            same += 1
        else:
            differ.append(r)
    if not stated:
        return []
    from zerocalc.units import format_bytes

    note = (f"NCCL's TUNING lines state its choice at {stated} of {len(rows)} sizes: the model chooses the "
            f"same at {same}")
    if differ:
        shown = ", ".join(f"{format_bytes(r['bytes'])} ({r['nccl_stated']['algorithm']}/"
                          f"{r['nccl_stated']['protocol']}, line {r['nccl_stated']['line']})"
                          for r in differ[:4])
        more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
        note += f"; NCCL ran otherwise at {shown}{more}"
    return [note]


#: The graphs a GRAPH line states (:mod:`zerocalc.traces.nccl_info`) → the algorithms priced on each (NVLS and
#: NVLS Tree run on the one NVLS graph, ``graphs[NCCL_ALGO_NVLS_TREE] = nvlsGraph`` in ``src/init.cc``).
_GRAPH_KEYS = {"ring_graph": (Algorithm.RING,), "tree_graph": (Algorithm.TREE,),
               "nvls_graph": (Algorithm.NVLS, Algorithm.NVLS_TREE),
               "collnet_direct_graph": (Algorithm.COLLNET_DIRECT,)}


def _stated_graphs(stated: Mapping[str, Sequence] | None) -> dict:
    """``{algorithm: (nChannels, bwIntra, bwInter)}`` of each graph the GRAPH lines state."""
    return {a: tuple(v[0]) for k, v in (stated or {}).items() if k in _GRAPH_KEYS for a in _GRAPH_KEYS[k]}


def stated_graph_notes(tuning, stated: Mapping[str, Sequence] | None) -> list[str]:
    """A note for each graph a GRAPH line stated (``ring_graph`` / ``tree_graph`` / ``nvls_graph`` /
    ``collnet_direct_graph``: ``[[nChannels, bwIntra, bwInter], line]``) that differs from the derived one and
    was priced."""
    out, seen = [], set()
    for a, derived, told in tuning.stated_graphs:
        key = next(k for k, v in _GRAPH_KEYS.items() if a in v)
        if key in seen:
            continue
        seen.add(key)
        name = " / ".join(x.value for x in _GRAPH_KEYS[key])
        line = (stated or {}).get(key, [None, None])[1]
        out.append(f"NCCL's {name} graph (its GRAPH line, line {line}) priced: {told[0]:g} channels of "
                   f"{told[1]:g}/{told[2]:g} GB/s (intra/inter), not the derived {derived[0]:g} of "
                   f"{derived[1]:g}/{derived[2]:g}")
    return out


def stated_nvls_notes(tuning, stated: Sequence | None) -> list[str]:
    """What the ``comm->nvlsChannels`` an INFO line states (``[count, line]``) changed in ``tuning``
    (:func:`zerocalc.nccl.model.tune`'s ``stated_nvls``): none where it agrees with the derived count."""
    if not stated or tuning.stated_nvls is None:
        return []
    (count, derived), line = tuning.stated_nvls, stated[1]
    era = tuning.release.era
    if count == 0:
        return [f"NCCL states 0 nvls channels (line {line}): the communicator has no NVLS support, so NVLS "
                f"and NVLS Tree are left out (the topology describes NVLink SHARP: {derived} NVLS channels "
                "derived)"]
    if derived == 0:
        return [f"NCCL states {count} nvls channels (line {line}): it found NVLink SHARP, which the topology "
                "does not describe; NVLS and NVLS Tree not priced (no NVLS graph to price them on)"]
    if 20 <= era <= 27:
        return [f"NCCL's {count} nvls channels (line {line}), not the derived {derived}, priced where NCCL "
                f"{tuning.release.name} raises the communicator's channels to them (ncclTopoPostset): "
                f"comm->nChannels {tuning.comm_channels}"]
    return [f"NCCL's {count} nvls channels (line {line}), not the derived {derived}: NCCL "
            f"{tuning.release.name}'s model does not read them (it prices NVLS on its graph's channels), so "
            "nothing priced moves"]


def stated_channels_notes(tuning, stated: tuple[int, int] | None) -> list[str]:
    """What the ``comm->nChannels`` an INFO line states (``(count, line)``) changed in ``tuning``: a note
    where it differs from the derived count (priced, or not where no graph count gives it), none where
    they agree."""
    if not stated:
        return []
    count, line = stated
    if tuning.stated_channels is not None:
        derived = tuning.stated_channels[1]
        g = tuning.machine.graphs[Algorithm.RING].n_channels
        return [f"NCCL's count of the communicator's channels, {count} (line {line}), priced: "
                f"comm->nChannels {count}, "
                f"not the {derived} derived from the graphs (priced as Ring and Tree graphs of {g:g} "
                "channels each)"]
    if count != tuning.comm_channels:
        return [f"NCCL's count of the communicator's channels, {count} (line {line}), not priced: no graph "
                "channel count "
                f"gives it on this topology (derived comm->nChannels {tuning.comm_channels})"]
    return []


def stated_p2p_notes(derived_channels: int, stated_channels: tuple[int, int] | None, derived, priced,
                     stated_p2p: Sequence | None, stated_chunk: Sequence | None = None) -> list[str]:
    """What the channel counts a p2p sweep's INFO lines state changed (:func:`_compare_p2p`): a note where
    the ``comm->nChannels`` stated differs from the derived one, and where the ``p2p channels`` / ``p2p
    channels per peer`` of NCCL's line (``ncclTopoComputeP2pChannels``, printed by ``src/graph/paths.cc``
    v2.8-v2.16, ``src/init.cc`` v2.17-v2.30) differ from those zerocalc derives (:func:`zerocalc.nccl.p2p.
    p2p_comm`), and where the ``P2P Chunksize set to`` line (``comm->p2pChunkSize``, ``src/init.cc``
    v2.16-v2.30) differs from the derived step; none where they agree."""
    out = []
    if stated_channels and stated_channels[0] != derived_channels and not stated_p2p:
        out.append(f"NCCL's count of the communicator's channels, {stated_channels[0]} (line "
                   f"{stated_channels[1]}), priced: the p2p channels start from it, not from the derived "
                   f"{derived_channels}")
    if stated_p2p:
        (told, per_peer), line = stated_p2p
        if (told, per_peer) != (derived.p2p_channels, derived.per_peer):
            out.append(f"NCCL's p2p channels (line {line}: \"{told} p2p channels, {per_peer} p2p channels "
                       f"per peer\") priced: {priced.p2p_channels} p2p channels, {priced.per_peer} per peer, "
                       f"not the derived {derived.p2p_channels} and {derived.per_peer}")
    if stated_chunk and priced.chunk_bytes != derived.chunk_bytes:
        out.append(f"NCCL's p2p step (line {stated_chunk[1]}: \"P2P Chunksize set to {stated_chunk[0]}\") "
                   f"priced: {priced.chunk_bytes} bytes, not the derived {derived.chunk_bytes}")
    return out
