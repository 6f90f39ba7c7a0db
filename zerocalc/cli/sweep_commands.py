"""nccl-tests sweeps (and NCCL Inspector logs) in ``check`` and ``fit``: each sweep's rows, NCCL version and
topology (given, or stated by the file), and the comparison with NCCL's cost model per size; ``fit --out``'s
calibration is :mod:`zerocalc.cli.sweep_fit`. Each only wires options to library calls
(:mod:`zerocalc.validate.sweep`, :mod:`zerocalc.nccl`)."""

from __future__ import annotations

from collections import Counter

import typer

from zerocalc.cli.options import _json_default, _load_topology, _nan_to_none, _read_tuner, _read_tuners
from zerocalc.cli.sweep_dirs import _read_sweep
from zerocalc.rendering import _skip_notes
from zerocalc.sweep_summary_text import summary_markdown, summary_text
from zerocalc.sweep_text import _sweep_text, sweep_records, sweeps_markdown


def _sweep_inputs(paths: list[str], n: int | None, strict: bool):
    """Each nccl-tests file: (path, rows, op, group size, version the file states, skipped lines, the
    run's entry in ``meta["runs"]`` with ``n_how`` added: how the group size was told)."""

    from zerocalc.errors import ConfigError, TraceFormatError
    from zerocalc.nccl.predict import cuda_build_from_text, version_from_text
    from zerocalc.traces.nccl_tests import cputime_refusal
    from zerocalc.validate.sweep import sweep_op

    if n is not None and n < 1:
        raise ConfigError("must be a whole number ≥ 1", option="--n")
    from zerocalc.cli.inspector_sweeps import inspector_files, inspector_inputs

    inspected = inspector_files(paths)
    out = inspector_inputs(inspected, n, strict) if inspected else []
    for path in paths:
        if path in inspected:
            continue
        try:
            text, res = _read_sweep(path, strict)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
        refusal = cputime_refusal(res.rows, path)
        if refusal is not None:
            raise refusal
        if any(sweep_op(r) is None for r in res.rows):
            why = next((m["op_how"] for m in res.meta.get("runs", ()) if m["op"] is None and m.get("op_how")),
                       None)
            if why and why.startswith("the file names "):  # a test its table's columns deny
                raise TraceFormatError(path, None, f"cannot tell the collective ({why})")
            raise TraceFormatError(path, None, "cannot tell the collective (no <op>_perf in the file or "
                                               "its name" + (f"; its table: {why}" if why else "") + ")")
        groups: dict[tuple, list] = {}
        for r in res.rows:  # one sweep per run, collective, group size and series the file holds
            p = n or r.get("group_size") or res.meta.get("world_size")
            groups.setdefault((r.get("run"), sweep_op(r), p, _series(r)), []).append(r)
        # a run that prints one series (dtype, reduction) is one sweep, as before; nccl-tests' -d all /
        # -o all print several in one table, each a sweep of its own
        series_of = Counter(k[:3] for k in groups)
        runs = {m["run"]: m for m in res.meta.get("runs", ())}
        for (run, op, p, series), rows in groups.items():
            meta = dict(runs.get(run, {}))
            if series_of[(run, op, p)] > 1:
                meta["series"] = " ".join(x for x in series if x)
            p, meta["n_how"] = _group_size(path, rows, op, p, n, meta)
            version = rows[0].get("nccl_version") or version_from_text(text)  # the run's own
            meta["nccl_cuda"] = cuda_build_from_text(text)
            out.append((path, rows, op, int(p), version, res.skipped, meta))
    return out


def _series(row) -> tuple[str, str]:
    """The series a row belongs to in an nccl-tests table: its data type and reduction (nccl-tests
    ``-d`` / ``-o``; empty where the layout has none)."""
    return str(row.get("dtype") or ""), str(row.get("redop") or "")


def _group_size(path: str, rows: list, op: str, p: int | None, n: int | None, run: dict) -> tuple[int, str]:
    """A sweep's group size and how it was told (JSON ``n_how``): ``--n``, the file's ``# Rank`` lines,
    all_gather's / reduce_scatter's size / count, else its busbw / algbw ratio
    (:func:`zerocalc.traces.busbw.ranks_from_bandwidth`; a file that cannot tell is refused naming
    ``--n``). Where the file lists ranks and its bandwidths tell n too, the two must agree: an old
    nccl-tests run under MPI with ``-g`` (each host numbering its own ranks from 0) is refused naming
    ``--n``; lines that name a rank past their count (``#  Rank 71`` alone) are an excerpt whose ranks its
    bandwidths tell, refused when those are no more than the rank named. One rank is refused too."""
    from zerocalc.errors import ConfigError, TraceFormatError
    from zerocalc.traces.busbw import ranks_from_bandwidth

    if n is not None:
        return _at_least_two(path, n, "given (--n)"), "given (--n)"
    try:
        got = ranks_from_bandwidth(rows, op, file=path)
    except TraceFormatError as exc:
        if not p:
            raise ConfigError(str(exc), option="--n") from None
        got = None  # the bandwidths cannot tell (factor 1, or too small): the file's count stands
    if not p:
        assert got is not None
        last = run.get("last_rank")
        if last is not None and got.n <= last:  # an excerpt naming a rank its bandwidths do not have
            raise ConfigError(f"{path}: its # Rank lines name rank {last} but its busbw/algbw gives {got.n} "
                              f"ranks ({got.how}); give --n", option="--n")
        return _at_least_two(path, got.n, got.how), got.how
    stated = (run.get("nccl_info") or {}).get("ranks")
    how = (f"the JSON report's devices ({p}: nthreads × ngpus per process)"
           if run.get("layout") == "json" and run.get("ranks_listed") == p
           else f"the file's # Rank lines ({p})" if run.get("ranks_listed") == p
           else f"the file's NCCL INFO lines (nRanks {p}, line {stated[1]})"
           if not run.get("ranks_listed") and stated and stated[0] == p
           else "size / count (nccl-tests prints the total size and one rank's count)")
    if got is not None and got.n != p:
        raise ConfigError(f"{path}: {how} give {p} ranks but its busbw/algbw gives {got.n} ({got.how}); "
                          "give --n", option="--n")
    k = run.get("rank0_processes") or 0
    if p == 1 and k > 1:  # several processes, each the rank 0 of a run of one rank (_devices)
        raise ConfigError(f"{path}: {k} processes each print themselves rank 0 of a one-rank run: nccl-tests "
                          "built without MPI (MPI=1) and started once per GPU times a communicator of one "
                          "rank in each process, not one of all of them; rebuild it with MPI=1", option="--n")
    return _at_least_two(path, int(p), how), how


def _at_least_two(path: str, n: int, how: str) -> int:
    """``n``, a sweep's group size, when it is 2 or more: on one rank NCCL copies locally (no ring, tree or
    network; its model's step counts are 0) and the file's rows are not communication to price."""
    from zerocalc.errors import ConfigError

    if n < 2:
        raise ConfigError(f"{path}: one rank ({how}): a run of one rank moves no data between GPUs, and "
                          "NCCL's model prices communication between 2 ranks or more; if the run had more "
                          "ranks than the file shows, give --n with them", option="--n")
    return n


#: the NCCL a file that states no version is priced at when its table is in nccl-tests' layout before v2.13
PRE_2_13_LAYOUT_NCCL = "2.12.12"


def _tests_release_at_least(tests_version: str | None, release: tuple[int, int]) -> bool:
    """Whether a stated nccl-tests (or rccl-tests) version such as ``2.19.6`` or ``2.17.9-develop:2596ca5``
    is ``release`` (major, minor) or later; False when none is stated or it does not parse."""
    parts = (tests_version or "").split("-")[0].split(".")
    if len(parts) < 2 or not all(e.isdigit() for e in parts[:2]):
        return False
    return (int(parts[0]), int(parts[1])) >= release


def _sweep_version(path: str, given: str | None, stated: str | None, layout: str | None = None,
                   topo=None, tests_version: str | None = None) -> tuple[str, list[str], str]:
    """The NCCL version a sweep is priced at, its notes and how it was chosen (JSON ``nccl_version_how``).

    A file that states none but whose table is in nccl-tests' layout before v2.13 (an ``error`` column where
    later ones print ``#wrong``; nccl-tests' "Resync with NCCL 2.13", Aug 2022,
    :data:`zerocalc.traces.schema.NCCL_TESTS_LAYOUTS`) ran a build of the NCCL 2.12 era or before: it is
    priced as :data:`PRE_2_13_LAYOUT_NCCL`, the last release of that era, and says so; unless it states
    its nccl-tests release (``tests_version``), 2.13 or later (the ``# nccl-tests version`` line itself
    came in Oct 2025, nccl-tests' "Add PRINT of nccl-tests, NCCL header and library versions"): then its
    table was cut to those columns after the run, not printed by an old build. Any other file is priced
    as the latest modelled release. On ``topo`` (where placed) a calibration's release comes first
    (``zerocalc fit --out`` records it: its pairs are that release's choices), and AMD GPUs default to
    RCCL's release."""
    from zerocalc.nccl import LATEST
    from zerocalc.topology.machine import calibrated_version

    if given:
        return given, [], "given (--nccl-version)"
    if stated:
        return stated, [], "stated by the file"
    lib = "RCCL" if topo is not None and topo.gpu_arch is not None else "NCCL"
    fitted = calibrated_version(topo.nccl_calibration) if topo is not None else None
    if fitted:
        return fitted, [f"{path} states no {lib} version; priced as {lib} {fitted}, the release "
                        f"{topo.name}'s calibration was fitted at (--nccl-version to choose)"], \
            "default: the version the topology's calibration was fitted at (the file states none)"
    if lib == "RCCL":  # AMD GPUs: RCCL (nccl.rccl)
        from zerocalc.nccl.rccl import RCCL_LATEST, rccl_default_for

        rel = rccl_default_for(topo.gpu_arch)
        v = rel.name
        if rel is RCCL_LATEST:
            return v, [f"{path} states no RCCL version; priced as RCCL {v} (--nccl-version to choose)"], \
                f"default: RCCL {v}, zerocalc's default (the file states none)"
        why = (f"RCCL {v} (ROCm {rel.rocm}) is the first modelled release that builds for {topo.gpu_arch}; "
               f"zerocalc's default, RCCL {RCCL_LATEST.name} (ROCm {RCCL_LATEST.rocm}), does not")
        return v, [f"{path} states no RCCL version; priced as RCCL {v}: {why} (--nccl-version to choose)"], \
            f"default: RCCL {v}, the first modelled release for {topo.gpu_arch} (the file states none)"
    if str(layout or "").startswith("pre2022") and not _tests_release_at_least(tests_version, (2, 13)):
        v = PRE_2_13_LAYOUT_NCCL
        return v, [f"{path} states no NCCL version; its table is in nccl-tests' layout before v2.13 (an "
                   f"'error' column, not '#wrong'), of the NCCL 2.12 era or before: priced as NCCL {v}, the "
                   "last release of that era (--nccl-version to choose)"], \
            "default: the NCCL of the file's nccl-tests layout (before v2.13: NCCL 2.12 or before)"
    v = LATEST.tag.lstrip("v").split("-")[0]
    return v, [f"{path} states no NCCL version; priced as NCCL {v} (--nccl-version to choose)"], \
        "default: the latest modelled (the file states none)"


def _sweep_topology(given, path: str, run: dict, group_size: int | None = None):
    """The topology a sweep is priced on and how it was chosen (JSON ``topology_how``): ``given`` (a
    loaded ``--topology``) always wins, its nodes holding the ranks the file lists per host when fewer
    (:func:`zerocalc.topology.devices.nodes_as_listed`), or the ranks per node its NCCL INFO lines state
    where it lists no hosts (:func:`zerocalc.validate.sweep_info.nodes_as_stated`); else the preset the
    run's device lines describe
    (:func:`zerocalc.topology.devices.preset_for_devices`; ``group_size``: the sweep's ranks, more than
    the device lines list when they are an excerpt), an unnamed GPU named by its INFO lines where they
    tell it (:func:`zerocalc.topology.devices.gpus_named_by_info`), a multi-node NVLink preset's hosts
    split into the NVLink domains its lines tell (:func:`zerocalc.topology.domains.nvlink_domains`)."""
    from zerocalc.topology.devices import gpus_named_by_info, nodes_as_listed, preset_for_devices
    from zerocalc.topology.domains import nvlink_domains
    from zerocalc.validate.sweep_info import nodes_as_stated

    if given is not None:
        if not run.get("hosts") and group_size:  # no # Rank lines: the INFO lines may state the nodes
            stated = nodes_as_stated(given, run.get("nccl_info") or {}, group_size)
            if stated is not None:
                return stated
        topo, how = nodes_as_listed(given, run.get("hosts") or {}, group_size)
        split = nvlink_domains(topo, run.get("hosts") or {}, run.get("nccl_info"), group_size)
        return (topo, how) if split is None else (split[0], f"{how}; {split[1]}")
    gpus, named = gpus_named_by_info(run.get("gpus") or {}, run.get("nccl_info"))
    topo, how = preset_for_devices(gpus, run.get("hosts") or {}, where=path,
                                   network=run.get("network") or {},
                                   shared_devices=run.get("shared_devices") or (), group_size=group_size,
                                   instance=(run.get("nccl_info") or {}).get("ec2_platform"),
                                   root_bus_hosts=run.get("root_bus_hosts") or (),
                                   pci_buses=run.get("pci_buses"),
                                   bus_ids=run.get("bus_ids"))
    split = nvlink_domains(topo, run.get("hosts") or {}, run.get("nccl_info"), group_size)
    return (topo, named + how) if split is None else (split[0], f"{named}{how}; {split[1]}")


def _sweep_check(paths, topology, nccl_version, nccl_algo, nccl_proto, n, fmt, strict,
                 nccl_tuner=None, ofi_tuner=None, local_register=None, nccl_env=None) -> None:
    from zerocalc.errors import ConfigError, UnpricedOpError
    from zerocalc.nccl.env import restrictions
    from zerocalc.nccl.env_given import parse_given
    from zerocalc.nccl.ofi_tuner import ofi_tuner as ofi_release

    if ofi_tuner is not None:
        ofi_release(ofi_tuner)  # an unknown or unmodelled release is refused before any file is read
        if nccl_tuner is not None:
            raise ConfigError("NCCL loads one tuner plugin: give --nccl-tuner or --ofi-tuner, not both",
                              option="--ofi-tuner")
    given = _load_topology(topology, None, None, None, None) if topology is not None else None
    restrictions(nccl_algo, nccl_proto)  # a bad list is refused before any file is read
    env_given = parse_given(nccl_env, nccl_algo, nccl_proto)
    if ofi_tuner is not None and given is not None:
        _read_tuners(None, ofi_tuner, given)  # a topology naming tuner rules is refused, as table refuses it
    tuner = _read_tuner(nccl_tuner, given) if given is not None else None
    if given is None and nccl_tuner is not None:
        raise ConfigError("prices a tuner's rules on a topology; give --topology too", option="--nccl-tuner")
    sweeps, texts, unpriced, hosts = [], [], [], []
    for path, rows, op, p, stated, skipped, run in _sweep_inputs(paths, n, strict):
        hosts.append(_listed_hosts(run, p, stated))
        try:
            d, _ = _check_one(path, rows, op, p, stated, skipped, run, given=given, tuner=tuner,
                              nccl_version=nccl_version, nccl_algo=nccl_algo, nccl_proto=nccl_proto,
                              ofi_tuner=ofi_tuner, local_register=local_register, nccl_env=env_given)
        except UnpricedOpError as e:  # one collective of several the library's model does not price
            unpriced.append(e)
            d = {"file": path, "op": op, "group_size": p, "nccl_version": nccl_version or stated,
                 "rows": [], "notes": [f"not priced: {e.message}"]}
            sweeps.append(d)
            texts.append(f"{path}: {op} on {p} ranks: not priced: {e.message}")
            continue
        sweeps.append(d)
        texts.append(_sweep_text(d))
    if unpriced and len(unpriced) == len(sweeps):
        raise unpriced[0]
    from zerocalc.validate.sweep_summary import sweeps_summary

    summary = sweeps_summary(sweeps, hosts)
    if fmt == "json":
        import json

        typer.echo(json.dumps(_nan_to_none({"sweeps": sweeps, "summary": summary}), indent=2, allow_nan=False,
                              default=_json_default))
    elif fmt == "csv":
        import pandas as pd

        from zerocalc.sweep_text import SWEEP_CSV_COLUMNS

        typer.echo(pd.DataFrame(sweep_records(sweeps), columns=list(SWEEP_CSV_COLUMNS)).to_csv(index=False),
                   nl=False)
    elif fmt == "markdown":  # several sweeps: their summary closes the output
        typer.echo(sweeps_markdown(sweeps) + (f"\n\n{summary_markdown(summary)}" if len(sweeps) > 1 else ""))
    else:
        typer.echo("\n\n".join(texts + ([summary_text(summary)] if len(sweeps) > 1 else [])))


def _listed_hosts(run: dict, p: int, stated: str | None) -> int | None:
    """How many hosts a sweep ran on, as its ``# Rank`` lines list them (told apart where two ranks share
    one host name and GPU, :func:`zerocalc.topology.renamed_hosts.hosts_apart`); ``None`` where they do not
    list the host of each of its ``p`` ranks."""
    from zerocalc.topology.renamed_hosts import hosts_apart

    apart = hosts_apart(run, stated)
    listed = (apart[0] if apart is not None else run).get("hosts") or {}
    return len(listed) if listed and sum(listed.values()) == p else None


def _network_path(topo, given, run: dict, info: dict, p: int):
    """``topo`` with GPUDirect RDMA on or off as the run's lines state it
    (:func:`zerocalc.topology.devices.with_stated_gdr`), else, on the preset its device lines chose, off for
    one GPU of a GCP RDMA VM on each host (:func:`zerocalc.topology.slots.with_gcp_slice`); with the
    rendezvous (Slingshot's, EFA's) of the network its lines name
    (:func:`zerocalc.validate.sweep_info.network_as_stated`); the words to add to ``topology_how`` and the
    slice's own (for its note; '' when it does not apply)."""
    from zerocalc.topology.devices import with_stated_gdr
    from zerocalc.topology.slots import with_gcp_slice
    from zerocalc.validate.sweep_info import network_as_stated

    topo, gdr_how = with_stated_gdr(topo, run.get("nccl_env"), info)
    how = f"; {gdr_how}" if gdr_how and p > topo.gpus_per_node else ""
    topo, net_how = network_as_stated(topo, run.get("network"))
    how += f"; {net_how}" if net_how and p > topo.gpus_per_node else ""
    slice_how = ""
    if given is None:
        topo, slice_how = with_gcp_slice(topo, run.get("bus_ids"), p)
    return topo, how + (f"; {slice_how}" if slice_how else ""), slice_how


def _placed(given, path: str, run: dict, p: int, stated: str | None,
            nccl_env: dict | None = None) -> tuple[dict, object, str]:
    """``run`` with the hosts its ranks must have been on where its lines put two ranks on one GPU of one
    host under an NCCL that refuses it (:func:`zerocalc.topology.renamed_hosts.hosts_apart`), its
    ``nccl_env`` with ``--nccl-env``'s variables set over it (``nccl_env``, :func:`zerocalc.nccl.env_given.
    with_given`; the notes on what they replaced as ``nccl_env_notes``), and the topology it is priced on
    with how it was chosen (:func:`_sweep_topology`)."""
    from zerocalc.nccl.env_given import with_given
    from zerocalc.topology.renamed_hosts import hosts_apart

    if given is None and run.get("layout") == "nccl_inspector":
        from zerocalc.errors import ConfigError

        raise ConfigError(f"{path}: an NCCL Inspector log names no GPU or network: give the cluster it ran "
                          "on (a preset or a TOML file)", option="--topology")
    apart = hosts_apart(run, stated)
    run = run if apart is None else apart[0]
    if nccl_env:
        env, env_notes = with_given(run.get("nccl_env"), nccl_env)
        run = {**run, "nccl_env": env, "nccl_env_notes": env_notes}
    topo, how = _sweep_topology(given, path, run, p)
    return run, topo, how if apart is None else f"{how}; {apart[1]}"


def _check_one(path, rows, op, p, stated, skipped, run, *, given, tuner, nccl_version, nccl_algo, nccl_proto,
               ofi_tuner, local_register=None, nccl_env=None, chosen=None):
    """One sweep of a file against the model: the topology and release it is priced on, the variables and
    INFO lines that move its price, its rows (:func:`zerocalc.validate.sweep.compare_sweep`) and its notes;
    the JSON object and the comparison. ``local_register``: ``--local-register`` (nccl-tests ``-R``), else
    the one the file's command line gives; ``nccl_env``: ``--nccl-env``'s variables
    (:func:`zerocalc.nccl.env_given.parse_given`), set over the file's; ``chosen``: how ``given`` was chosen
    where no ``--topology`` gave it (:func:`zerocalc.validate.given.topology_note`)."""
    from zerocalc.nccl.env import settings
    from zerocalc.nccl.ofi_tuner import platform_of
    from zerocalc.topology import placement
    from zerocalc.validate.sweep import P2P_OPS, compare_sweep
    from zerocalc.validate.sweep_info import coll_lines_remark, ofi_tuner_stated, stated_choices, tuner_note

    run, topo, topology_how = _placed(given, path, run, p, stated, nccl_env)
    version, notes, version_how = _sweep_version(path, nccl_version, stated, run.get("layout"), topo,
                                                 run.get("nccl_tests_version"))
    notes = _given_notes(path, run, rows, op, p, given, nccl_version, stated, topo, chosen) + notes
    info = run.get("nccl_info") or {}
    topo, topology_how, info_notes, slice_how = _as_stated(topo, topology_how, given, run, info, p)
    env = settings(topo, version, nccl_algo, nccl_proto, tuner_given=tuner is not None,
                   stated=run.get("nccl_env"), where=path, info=info, p2p=op in P2P_OPS)
    ofi, ofi_notes = (None, []) if tuner is not None else ofi_tuner_stated(
        ofi_tuner, info, run.get("nccl_env"), version,
        efa="efa" in (run.get("network") or {}) or topo.name.startswith("aws-"),
        restricted=env.algo_enable is not None or env.proto_enable is not None,
        platform=platform_of(topo.name), n_nodes=-(-p // topo.gpus_per_node))
    register = local_register if local_register is not None else run.get("local_register")
    cmp = compare_sweep(rows, topo, op=op, group_size=p, nccl_version=version,
                        algo_enable=env.algo_enable, proto_enable=env.proto_enable,
                        nvls_enable=env.nvls_enable, tuner=tuner,
                        channels=(env.min_channels, env.max_channels), launch_env=env.launch,
                        gpus_per_thread=run.get("gpus_per_thread"), agg_iters=run.get("agg_iters"),
                        graph=run.get("graph"), ofi_tuner=ofi,
                        stated_channels=info.get("comm_channels") or info.get("ring_channels"),
                        stated_graphs=info, stated_p2p=info.get("p2p_channels"),
                        stated_nvls=info.get("nvls_channels"), p2p_env=env.p2p,
                        stated_chunk=info.get("p2p_chunk_bytes"), cuda_build=run.get("nccl_cuda"),
                        dtype=rows[0].get("dtype"), redop=rows[0].get("redop"),
                        local_register=register)
    d = cmp.as_dict()
    sizes = {r["size_bytes"]: r["count"] * (r.get("elem_bytes") or 0) for r in rows}
    info_notes += stated_choices(d["rows"], sizes, info.get("tuning") or [], op)
    d["file"], d["topology"], d["topology_how"] = path, topo.name, topology_how
    d["nodes"], d["ranks_per_node"] = placement(topo.gpus_per_node, p)  # the shape NCCL's model priced
    d["nccl_version_how"] = version_how
    if run.get("series"):
        d["series"] = run["series"]
    d["n_how"] = run.get("n_how")
    d["dtype"], d["redop"] = rows[0].get("dtype"), rows[0].get("redop")  # the type NCCL's choice reads
    d["gpus_per_thread"] = run.get("gpus_per_thread")
    d["agg_iters"], d["graph"] = run.get("agg_iters"), run.get("graph")
    d["local_register"] = register
    cluster = _cluster_notes(d, op, topo, p, run, given, slice_how)
    d["notes"] = (notes + _told_notes(run, op) + run.get("nccl_env_notes", []) + list(env.notes) + info_notes
                  + tuner_note(info) + ofi_notes + d["notes"] + cluster + _skip_notes(skipped))
    d["nccl_info"] = info
    d["also_in_file"] = coll_lines_remark(info, path)
    if run.get("inspector"):  # an NCCL Inspector log: its communicator, and each size's calls and ranks
        from zerocalc.cli.inspector_sweeps import with_inspector_fields

        with_inspector_fields(d, run, rows, nccl=topo.gpu_arch is None)
    return d, cmp


def _told_notes(run: dict, op: str) -> list[str]:
    """How the file told the sweep's collective and its time columns, where it did not say so plainly."""
    how = run.get("op_how") if run.get("op") else None
    told = ([] if not how else [how] if how.startswith("the file names ")
            else [f"the file names no test (no <op>_perf): {op} told by its table ({how})"])
    if str(run.get("layout") or "").endswith("-inplace"):
        told.append("the table has one group of time columns, read as the in-place one (rccl-tests -O 0 "
                    "prints the in-place group alone): measured is the in-place time")
    return told


def _cluster_notes(d: dict, op: str, topo, p: int, run: dict, given,
                   slice_how: str) -> list[str]:
    """The notes on the cluster the sweep ``d`` (its JSON) of ``op`` was priced on: GPUDirect, a GCP
    slice, host memory, a socket NIC, the network's rendezvous and the launch terms of its ``-g``."""
    from zerocalc.nccl.tables import parse_version
    from zerocalc.topology.devices import gdr_unstated_note, host_memory_note, socket_nic_note
    from zerocalc.topology.slots import gcp_slice_note
    from zerocalc.validate.sweep import P2P_OPS, launch_note
    from zerocalc.validate.sweep_info import rendezvous_note

    gdr = [t for t in [gdr_unstated_note(topo, p), gcp_slice_note(slice_how), host_memory_note(topo, p),
                       socket_nic_note(topo, p, run.get("network")) if given is None else ""] if t]
    launch = [t for t in [launch_note(d["gpus_per_thread"], d["agg_iters"], d["graph"],
                                      parse_version(d["nccl_version"]) if d.get("nccl_version") else None)]
              if t and topo.gpu_arch is None]  # RCCL: its comparison says it prices no launch terms
    return gdr + (rendezvous_note(topo, p) if op not in P2P_OPS else []) + launch


def _given_notes(path, run, rows, op, p, given, nccl_version, stated, topo, chosen=None) -> list[str]:
    """Where the file disagrees with ``--n``, ``--nccl-version`` or ``--topology``
    (:mod:`zerocalc.validate.given`)."""
    from zerocalc.validate.given import ranks_note, topology_note, version_note

    lib = "RCCL" if topo.gpu_arch is not None else "NCCL"
    notes = [ranks_note(path, run, rows, op, p) if run.get("n_how") == "given (--n)" else None,
             version_note(path, nccl_version, stated, lib) if nccl_version else None,
             topology_note(given, run, lambda: _sweep_topology(None, path, run, p)[0], chosen)
             if given else None]
    return [t for t in notes if t]


def _as_stated(topo, topology_how: str, given, run, info, p: int):
    """The topology as the file states it: NCCL's latencies from its INFO lines, its P2P and NIC variables
    (the NICs only on a preset the file picked), and its network path; ``(topo, topology_how, notes,
    slice_how)``."""
    from zerocalc.topology.devices import with_stated_nics, with_stated_p2p
    from zerocalc.validate.sweep_info import latency_as_stated

    topo, notes = latency_as_stated(topo, info, p)
    topo, p2p_how = with_stated_p2p(topo, run.get("nccl_env"), info)
    if p2p_how:
        topology_how += f"; {p2p_how}"
    topo, nics_how = with_stated_nics(topo, run.get("nccl_env"), p) if given is None else (topo, "")
    if nics_how:
        topology_how += f"; {nics_how}"
    topo, path_how, slice_how = _network_path(topo, given, run, info, p)
    return topo, topology_how + path_how, notes, slice_how
