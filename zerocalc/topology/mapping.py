"""A topology to and from a mapping (a TOML table): checked reading with errors naming the key,
writing back as a mapping or TOML text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zerocalc.errors import ConfigError
from zerocalc.topology.machine import (
    _CALIBRATION_KEYS,
    _ENV_KEYS,
    GB,
    HARDWARE_FIELDS,
    IN_NETWORK_REDUCTIONS,
    Calibration,
    Link,
    NcclEnv,
    Topology,
)

_TOP_KEYS = ("name", "title", "gpus_per_node", "gamma_s_per_byte", "intra", "inter", "source",
             *HARDWARE_FIELDS, "nccl_calibration", "nccl_env", "nccl_tuner")
_TIER_KEYS = ("alpha_us", "bw_GBps")


def _number(table: Mapping[str, Any], key: str, fail, *, positive: bool) -> float:
    if key not in table:
        fail(f"missing key {key!r}")
    v = table[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0 \
            or (positive and v == 0):
        fail(f"{key} must be {'positive' if positive else 'non-negative'}, got {v!r}")
    return float(v)


def topology_from_mapping(data: Mapping[str, Any], *, where: str = "topology",
                          option: str | None = None) -> Topology:
    """A topology from a parsed TOML document (the CLI reads the file)::

        name = "my-cluster"          # optional
        title = "..."                # optional
        source = "..."               # optional
        gpus_per_node = 8
        gamma_s_per_byte = 0.0       # optional
        # optional hardware facts NCCL's model reads (see HARDWARE_FIELDS):
        compute_capability = 90
        nvlink_gen = 4
        nvlinks_per_gpu = 18
        nvswitch_gen = 3
        pcie_gen = 5
        nics_per_node = 8
        nic_Gbps = 400
        cpu_vendor = "intel"
        in_network_reduction = ["nvls"]
        # optional, PCIe-only nodes (NCCL's search through the PCI tree; zerocalc.nccl.pcie):
        # cpu_sockets = 2, gpus_per_pcie_switch = 4, gpu_p2p = false, smp_GBps = 10, p2p_level = "SYS"
        # optional, NICs the GPUs reach only through host memory (no GPUDirect RDMA):
        # gpudirect_rdma = false
        # optional, a node that is an NVLink domain of several hosts (multi-node NVLink):
        # gpus_per_host = 4
        # optional, NICs on the host CPU reached over NVLink-C2C (Grace Hopper, GB200): nic_via_c2c = true
        # optional, a TCP network whose connections spread messages over flows (GCP TCPXO): net_flows = 2,
        # and the NCCL_BUFFSIZE its profile sets: nccl_buffsize = 8388608; where it cuts a message into
        # pieces over its flows (GCP TCPX: NCCL_DYNAMIC_CHUNK_SIZE), their size: net_flow_piece = 524288
        [intra]                      # one GPU's link inside a node, one direction
        alpha_us = 3.4
        bw_GBps = 300
        [inter]                      # the whole node's injection bandwidth, one direction
        alpha_us = 14
        bw_GBps = 200
        # optional: a tuner plugin's rules (NCCL's example tuner CSV, relative to this file) and the
        # provider's NCCL environment per NCCL release (see NcclEnv)
        # nccl_tuner = "rules.csv"             (a top-level key, before the tables)
        [[nccl_env]]
        min_version = "2.21"
        max_version = "2.21"
        NCCL_ALGO = "Ring,Tree"
        NCCL_PROTO = "Simple"
        NCCL_NVLS_ENABLE = 0
        source = "..."

    Any other key, at the top or in a tier, is refused by name (a misspelt ``bw_GBPS`` would
    otherwise be ignored). Every error is a :class:`ConfigError` for ``option`` whose message
    starts with ``where`` (the file name): ``--topology: lab.toml: [intra] bw_GBps must be
    positive, got 0``.
    """
    def fail(message: str, tier: str | None = None):
        raise ConfigError(f"{where}: {'[' + tier + '] ' if tier else ''}{message}", option=option)

    if not isinstance(data, Mapping):
        fail("expected a table")
    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        fail(f"unknown keys: {', '.join(map(repr, unknown))} (known: {', '.join(_TOP_KEYS)})")
    tiers = _tiers(data, fail)
    g = data.get("gpus_per_node")
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        fail(f"gpus_per_node must be a whole number ≥ 1, got {g!r}")
    gamma = _number(data, "gamma_s_per_byte", fail, positive=False) if "gamma_s_per_byte" in data else 0.0
    name = str(data.get("name", "custom"))
    hardware = {key: _hardware_value(key, data[key], fail) for key in HARDWARE_FIELDS if key in data}
    calibration = _calibration(data.get("nccl_calibration", []), fail)
    env = _nccl_env(data.get("nccl_env", []), fail)
    tuner = data.get("nccl_tuner")
    if tuner is not None and (not isinstance(tuner, str) or not tuner.strip()):
        fail(f"nccl_tuner must be a file name (a tuner configuration, see --nccl-tuner), got {tuner!r}")
    try:
        return Topology(name, str(data.get("title", name)), g, tiers["intra"], tiers["inter"], gamma,
                        str(data.get("source", where)), **hardware, nccl_calibration=calibration,
                        nccl_env=env, nccl_tuner=tuner)
    except ConfigError as exc:
        fail(f"{exc.option}: {exc.message}")


def _tiers(data: Mapping[str, Any], fail) -> dict[str, Link]:
    """The ``[intra]`` and ``[inter]`` links of a topology document, each key checked."""
    tiers = {}
    for tier in ("intra", "inter"):
        t = data.get(tier)
        if not isinstance(t, Mapping):
            fail(f"missing table [{tier}] with alpha_us and bw_GBps")
        bad = sorted(set(t) - set(_TIER_KEYS))
        if bad:
            fail(f"unknown keys: {', '.join(map(repr, bad))} (known: {', '.join(_TIER_KEYS)})", tier)

        def fail_tier(message: str, tier: str = tier):
            fail(message, tier)

        tiers[tier] = Link.from_units(_number(t, "alpha_us", fail_tier, positive=False),
                                      _number(t, "bw_GBps", fail_tier, positive=True))
    return tiers


def _hardware_value(key: str, v: Any, fail) -> Any:
    """One hardware field from TOML, checked for its type (range checks are the dataclass's)."""
    if key in ("gpu", "cpu_vendor", "gpu_arch", "p2p_level"):
        if not isinstance(v, str):
            fail(f"{key} must be a string, got {v!r}")
        return v.lower() if key in ("cpu_vendor", "gpu_arch") else v.upper() if key == "p2p_level" else v
    if key == "in_network_reduction":
        if isinstance(v, str):
            v = [v] if v else []
        if not isinstance(v, list) or not all(isinstance(k, str) for k in v):
            fail(f"{key} must be a list of names ({', '.join(IN_NETWORK_REDUCTIONS)}), got {v!r}")
        return tuple(dict.fromkeys(k.lower() for k in v))
    if key in ("gpu_p2p", "gpudirect_rdma", "nic_via_c2c"):
        if not isinstance(v, bool):
            fail(f"{key} must be true or false, got {v!r}")
        return v
    if key in ("cpu_sockets", "gpus_per_pcie_switch", "gpus_per_host", "net_flows", "nccl_buffsize",
               "net_flow_piece") and (
            isinstance(v, bool) or not isinstance(v, int) or v < 1):
        fail(f"{key} must be a whole number ≥ 1, got {v!r}")
    if key in ("nic_Gbps", "smp_GBps", "net_latency_us", "net_wire_latency_us"):
        if key not in ("nic_Gbps", "smp_GBps") and isinstance(v, int | float) and not isinstance(v, bool) \
                and v == 0:
            return 0.0
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            fail(f"{key} must be a positive number, got {v!r}")
        return float(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        hint = (f" (NCCL's form, major × 10 + minor: {round(v * 10)} for {v})"
                if key == "compute_capability" and isinstance(v, float) and 0 < v < 20 else "")
        fail(f"{key} must be a whole number ≥ 0, got {v!r}{hint}")
    return v


def _tables(items: Any, name: str, keys: tuple[str, ...], required: tuple[str, ...], fail):
    """Each table of a ``[[name]]`` array with where it is (``[[name]] #i``), every ``required`` key
    present and none but ``keys``; anything else is refused through ``fail``."""
    if not isinstance(items, list):
        fail(f"{name} must be an array of tables ([[{name}]])")
    for i, t in enumerate(items, 1):
        where = f"[[{name}]] #{i}"
        if not isinstance(t, Mapping):
            fail(f"{where} must be a table")
        unknown = sorted(set(t) - set(keys))
        missing = [k for k in required if k not in t]
        if unknown or missing:
            what = (f"unknown keys {', '.join(map(repr, unknown))}" if unknown
                    else f"missing key {missing[0]!r}")
            fail(f"{where}: {what} (keys: {', '.join(keys)})")
        yield where, t


def _calibration(items: Any, fail) -> tuple[Calibration, ...]:
    """``[[nccl_calibration]]`` tables → :class:`Calibration` (op, ranks, algorithm, protocol and either
    ``alpha_us`` and ``bw_GBps`` or ``model_scale`` required, no key unknown)."""
    out = []
    for where, t in _tables(items, "nccl_calibration", _CALIBRATION_KEYS, _CALIBRATION_KEYS[:4], fail):
        missing = [k for k in ("alpha_us", "bw_GBps") if k not in t and "model_scale" not in t]
        if missing:
            fail(f"{where}: missing key {missing[0]!r} (keys: {', '.join(_CALIBRATION_KEYS)})")
        try:
            names = {key: _calibration_name(key, t[key]) for key in ("op", "algorithm", "protocol")}
            out.append(Calibration(names["op"], t["ranks"], names["algorithm"], names["protocol"],
                                   t.get("alpha_us", 0.0), t.get("bw_GBps", 0.0),
                                   str(t.get("nccl_version", "")), str(t.get("dtype", "")),
                                   str(t.get("redop", "")), t.get("nodes", 0), t.get("ranks_per_node", 0),
                                   t.get("model_scale", 0.0)))
        except ConfigError as exc:
            fail(f"{where}: {exc.message}")
    return tuple(out)


def _calibration_name(key: str, value: Any) -> str:
    """A calibration's ``op``, ``algorithm`` or ``protocol`` in the spelling the model matches it by
    (NCCL's ``ncclAlgoStr`` / ``ncclProtoStr``, zerocalc's collective names; any case), or a
    :class:`ConfigError` naming the known ones: a name nothing matches would leave its fit unused."""
    from zerocalc.nccl.p2p import ALGORITHM as P2P
    from zerocalc.nccl.p2p import P2pOp
    from zerocalc.nccl.predict import ANY
    from zerocalc.nccl.rccl import MSCCL
    from zerocalc.nccl.release import Algorithm, Collective, Protocol

    known = {"op": [*Collective, *P2pOp], "algorithm": [*Algorithm, P2P, MSCCL, ANY],
             "protocol": [*Protocol, ANY]}[key]
    names = {str(k).lower(): str(k) for k in known}
    if not isinstance(value, str) or value.strip().lower() not in names:
        raise ConfigError(f"{key} must be one of {', '.join(names.values())}, got {value!r}",
                          option="nccl_calibration")
    return names[value.strip().lower()]


def _nccl_env(items: Any, fail) -> tuple[NcclEnv, ...]:
    """``[[nccl_env]]`` tables → :class:`NcclEnv` (versions required, no unknown key; the lists'
    grammar is checked where the model reads them)."""
    out = []
    for where, t in _tables(items, "nccl_env", tuple(_ENV_KEYS), ("min_version", "max_version"), fail):
        kw: dict[str, Any] = {}
        for key, attr in _ENV_KEYS.items():
            if key not in t:
                continue
            v = t[key]
            if key == "NCCL_NVLS_ENABLE":
                if isinstance(v, bool) or v not in (0, 1):
                    fail(f"{where}: NCCL_NVLS_ENABLE must be 0 or 1, got {v!r}")
                v = bool(v)
            elif key in ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"):
                if isinstance(v, bool) or not isinstance(v, int) or v < (0 if "MIN" in key else 1):
                    fail(f"{where}: {key} must be a whole number ≥ {0 if 'MIN' in key else 1}, got {v!r}")
            elif not isinstance(v, str):
                fail(f"{where}: {key} must be a string, got {v!r}")
            kw[attr] = v
        out.append(NcclEnv(**kw))
    return tuple(out)


def topology_to_mapping(topo: Topology) -> dict[str, Any]:
    """A topology as the TOML-shaped mapping :func:`topology_from_mapping` reads back."""
    out: dict[str, Any] = {"name": topo.name, "title": topo.title, "source": topo.source,
                           "gpus_per_node": topo.gpus_per_node}
    if topo.gamma_s_per_byte:
        out["gamma_s_per_byte"] = topo.gamma_s_per_byte
    out.update(topo.hardware())
    for tier, link in (("intra", topo.intra), ("inter", topo.inter)):
        out[tier] = {"alpha_us": link.alpha_s * 1e6, "bw_GBps": link.bw_Bps / GB}
    if topo.nccl_tuner:
        out["nccl_tuner"] = topo.nccl_tuner
    if topo.nccl_calibration:
        out["nccl_calibration"] = [{k: getattr(c, k) for k in _CALIBRATION_KEYS
                                    if getattr(c, k) or (k in _CALIBRATION_KEYS[:7] and not c.model_scale)}
                                   for c in topo.nccl_calibration]
    if topo.nccl_env:
        out["nccl_env"] = [{key: (int(v) if isinstance(v, bool) else v) for key, attr in _ENV_KEYS.items()
                            if (v := getattr(e, attr)) not in (None, "")} for e in topo.nccl_env]
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("inf" if v > 0 else "nan")
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def topology_to_toml(topo: Topology, header: str = "") -> str:
    """The TOML text of :func:`topology_to_mapping` (read back by :func:`topology_from_mapping`);
    ``header`` becomes comment lines at the top."""
    data = topology_to_mapping(topo)
    lines = [f"# {h}" for h in header.splitlines()]
    tables = {k: v for k, v in data.items() if isinstance(v, Mapping)}
    arrays = {k: v for k, v in data.items() if isinstance(v, list) and v and isinstance(v[0], Mapping)}
    for k, v in data.items():
        if k not in tables and k not in arrays:
            lines.append(f"{k} = {_toml_value(v)}")
    for k, v in tables.items():
        lines += ["", f"[{k}]", *(f"{kk} = {_toml_value(vv)}" for kk, vv in v.items())]
    for k, items in arrays.items():
        for item in items:
            lines += ["", f"[[{k}]]", *(f"{kk} = {_toml_value(vv)}" for kk, vv in item.items())]
    return "\n".join(lines) + "\n"
