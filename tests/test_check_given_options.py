"""check's options against what the file itself says: --n, --nccl-version and --topology are priced as
given, and a note says where the file disagrees (before, each was priced in silence)."""

from __future__ import annotations

import json
import re

from sweep_files import DATA, runner

from zerocalc.cli import app

H100 = "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"


def _counted():
    """Ranks, ranks per host, GPU and NCCL library the file states, by a plain reading of its lines."""
    text = (DATA / H100).read_text()
    ranks = re.findall(r"^#\s+Rank\s+\d+ .* on (\S+) device\s+\d+ \[[0-9a-f:.]+\] (.+)$", text, re.M)
    hosts = {h for h, _ in ranks}
    per_host = max(sum(1 for h2, _ in ranks if h2 == h) for h in hosts)
    (library,) = set(re.findall(r"^NCCL version (\d+\.\d+\.\d+)\+", text, re.M))  # NCCL's own line
    return len(ranks), per_host, {g for _, g in ranks}, library


def _sweep(*args):
    res = runner.invoke(app, ["check", str(DATA / H100), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def test_the_file_counted_by_hand():
    assert _counted() == (16, 8, {"NVIDIA H100 80GB HBM3"}, "2.26.2")


def test_n_fewer_than_the_rank_lines_is_noted():
    ranks, _, _, _ = _counted()
    sweep = _sweep("--n", "8")
    assert sweep["group_size"] == 8
    (note,) = [t for t in sweep["notes"] if t.startswith("--n 8 disagrees")]
    assert f"its # Rank lines list {ranks} ranks" in note and f"busbw/algbw gives {ranks}" in note
    assert not any("disagrees" in t for t in _sweep("--n", str(ranks))["notes"])


def test_nccl_version_other_than_the_files_is_noted():
    *_, library = _counted()
    sweep = _sweep("--nccl-version", "2.18.6")
    assert sweep["nccl_version"] == "2.18.6"
    assert f"states NCCL {library}; priced as NCCL 2.18.6, as --nccl-version asks" in " ".join(sweep["notes"])
    for same in (library, library.rsplit(".", 1)[0]):  # 2.26 names the file's 2.26.2
        assert not any("as --nccl-version asks" in t for t in _sweep("--nccl-version", same)["notes"])


def test_topology_that_does_not_fit_the_file_is_noted():
    _, per_host, _, _ = _counted()
    # gh200: a node of 4 GH200 (the preset's source), not DGX H100's 8 H100 SXM5
    (note,) = [t for t in _sweep("--topology", "gh200")["notes"] if "does not fit" in t]
    assert "not gh200's H100 (GH200 superchip)" in note
    assert f"they list {per_host} ranks on one host, more than the 4 GPUs of a gh200 node" in note
    assert not any("does not fit" in t for t in _sweep("--topology", "dgx-h100")["notes"])


def test_nccl_algo_from_the_shell_is_said_where_it_restricts_the_choice():
    # NCCL_ALGO in zerocalc's own environment restricts NCCL's choice (typer envvar) as --nccl-algo does;
    # before, nothing in the output said so, and the rows simply changed
    res = runner.invoke(app, ["check", str(DATA / H100), "--format", "json"], env={"NCCL_ALGO": "ring"})
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert {r["algorithm"] for r in sweep["rows"]} == {"Ring"}
    assert any(t.startswith("priced under NCCL_ALGO=ring, as --nccl-algo") for t in sweep["notes"])
    table = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "16", "--schemes", "dp",
                                "--nccl-proto", "Simple"])
    assert "note: priced under NCCL_PROTO=Simple, as --nccl-algo / --nccl-proto" in table.stdout


def test_options_only_traces_read_are_refused_for_a_sweep():
    # before, check FILE --gpus-per-node 4 (or --schemes, --dtype, --psi ...) priced the sweep as if not given
    for args, flag in ((["--gpus-per-node", "4"], "--gpus-per-node"), (["--schemes", "dp"], "--schemes"),
                       (["--dtype", "fp32"], "--dtype"), (["--psi", "1B"], "--psi")):
        res = runner.invoke(app, ["check", str(DATA / H100), *args])
        assert res.exit_code == 2
        assert res.stderr.startswith(f"error: {flag}: reads traces against the schemes")
        assert len(res.stderr.strip().splitlines()) == 1
