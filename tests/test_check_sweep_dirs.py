"""A directory of nccl-tests outputs given to ``check`` and ``fit`` (with or without ``--out``): each
file in it a sweep, as if named one by one, in the order of their names; the files kept beside them that
yield no sweep (a job script naming ``<op>_perf``, notes, binary data, other JSON or CSV) skipped, each
named on stderr; a directory of per-rank traces, or one that mixes them in, is read as traces, as before.
The rows are held against the files counted with a plain split (tests/sweep_files.py)."""

from __future__ import annotations

import json
import shutil

import pytest
from sweep_files import DATA, file_rows
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
#: Together AI's H100 ring run (-g 8, NCCL 2.26.2) and its B200 send/recv ring on 2 hosts (NCCL 2.29.7)
FILES = ["all_reduce_perf-8xH100-g8-ring-nccl2.26.2.out", "sendrecv_perf-16xB200-2nodes-run3-nccl2.29.7.out"]


def _dir(tmp_path, names=FILES):
    d = tmp_path / "sweeps"
    d.mkdir()
    for n in names:
        shutil.copy(DATA / n, d / n)
    return d


def test_a_directory_of_sweeps_is_checked_file_by_file(tmp_path):
    d = _dir(tmp_path)
    res = runner.invoke(app, ["check", str(d), "--format", "json"])
    assert res.exit_code == 0, res.output
    sweeps = json.loads(res.stdout)["sweeps"]
    named = runner.invoke(app, ["check", *(str(d / n) for n in FILES), "--format", "json"])
    assert json.loads(named.stdout)["sweeps"] == sweeps
    # the H100 file one sweep; the B200 file its sweep and a 64 MiB run of its own
    assert [(s["file"], s["op"], s["group_size"]) for s in sweeps] == [
        (str(d / FILES[0]), "all_reduce", 8), (str(d / FILES[1]), "sendrecv", 16),
        (str(d / FILES[1]), "sendrecv", 16)]
    counted = {n: [s for s, _, _ in file_rows(n)] for n in FILES}
    assert [r["bytes"] for r in sweeps[0]["rows"]] == counted[FILES[0]]
    assert [r["bytes"] for s in sweeps[1:] for r in s["rows"]] == counted[FILES[1]]


def test_fit_out_takes_the_directory_too(tmp_path):
    d = _dir(tmp_path, FILES[:1])
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(d), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert FILES[0] in out.read_text()


#: Together AI's H100 all-reduce on 2 hosts over InfiniBand (NCCL 2.26.2)
SWEEP = "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"
#: what a folder of runs holds beside the outputs: none of them an nccl-tests sweep
OTHERS = {
    "README.md": "# results\n",
    "nccl.sbatch": "#!/bin/bash\n#SBATCH --nodes=2\nsrun all_reduce_perf -b 8 -e 8G -f 2 -g 1\n",
    "run.sh": "#!/bin/bash\nmpirun -np 16 all_reduce_perf -b 8 -e 8G -f 2\n",
    "summary.csv": "size,busbw\n8,0.01\n",
    "job.json": '{"job": 1234, "nodes": 2}\n',
    "core.bin": bytes(range(256)) * 4,
}


def _cluttered(tmp_path, name="run"):
    d = tmp_path / name
    d.mkdir()
    shutil.copy(DATA / SWEEP, d / SWEEP)
    for n, body in OTHERS.items():
        (d / n).write_bytes(body if isinstance(body, bytes) else body.encode())
    return d


def _skipped(stderr, d):
    """The files the ``skipped: PATH: reason`` lines of ``stderr`` name, each line once."""
    lines = [t for t in stderr.splitlines() if t.startswith("skipped: ")]
    return sorted(t.removeprefix("skipped: ").split(": ")[0].removeprefix(f"{d}/") for t in lines)


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_files_beside_the_sweeps_are_skipped_and_said(tmp_path, fmt):
    d = _cluttered(tmp_path)
    res = runner.invoke(app, ["check", str(d), "--format", fmt])
    assert res.exit_code == 0, res.output
    alone = runner.invoke(app, ["check", str(d / SWEEP), "--format", fmt])
    assert alone.exit_code == 0 and res.stdout == alone.stdout  # notes on stderr: the output as parseable
    assert _skipped(res.stderr, d) == sorted(OTHERS)
    assert "skipped" not in alone.stderr
    if fmt == "json":
        (sweep,) = json.loads(res.stdout)["sweeps"]
        assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in file_rows(SWEEP)]
    # the script names all_reduce_perf (taken for nccl-tests output by its head): skipped for its rows
    assert f"skipped: {d / 'run.sh'}: no nccl-tests result rows" in res.stderr.splitlines()


def test_fit_skips_them_too(tmp_path):
    d = _cluttered(tmp_path)
    res = runner.invoke(app, ["fit", str(d), "--format", "json"])
    assert res.exit_code == 0, res.output
    alone = runner.invoke(app, ["fit", str(d / SWEEP), "--format", "json"])
    assert json.loads(res.stdout) == json.loads(alone.stdout)
    assert _skipped(res.stderr, d) == sorted(OTHERS)


def test_fit_out_skips_them_too(tmp_path):
    d = _cluttered(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    res = runner.invoke(app, ["fit", str(d), "--out", str(tmp_path / "a" / "c.toml")])
    assert res.exit_code == 0, res.output
    alone = runner.invoke(app, ["fit", str(d / SWEEP), "--out", str(tmp_path / "b" / "c.toml")])
    assert alone.exit_code == 0, alone.output
    assert (tmp_path / "a" / "c.toml").read_text() == (tmp_path / "b" / "c.toml").read_text()
    assert _skipped(res.stderr, d) == sorted(OTHERS)


@pytest.mark.parametrize("args", [[], ["--topology", "dgx-h100"], ["fit"], ["fit", "--out", "c.toml"]])
def test_a_directory_of_no_sweep_is_refused_in_one_line(tmp_path, args):
    d = _cluttered(tmp_path)
    (d / SWEEP).unlink()
    cmd = ["fit", str(d), *args[1:]] if args[:1] == ["fit"] else ["check", str(d), *args]
    res = runner.invoke(app, [c if c != "c.toml" else str(tmp_path / c) for c in cmd])
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert not (tmp_path / "c.toml").exists()


@pytest.mark.parametrize("args", [["check"], ["fit", "--out", "c.toml"], ["check", "--format", "json"]])
def test_a_file_named_that_is_no_sweep_is_refused(tmp_path, args):
    d = _cluttered(tmp_path)
    cmd = [c if c != "c.toml" else str(tmp_path / c) for c in args]
    res = runner.invoke(app, [cmd[0], str(d / SWEEP), str(d / "run.sh"), *cmd[1:]])
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [f"error: {d / 'run.sh'}: no nccl-tests result rows"]


def test_a_directory_of_kineto_traces_is_still_read_as_traces(tmp_path):
    ranks = DATA.parent / "kineto" / "dlrm-v100-8ranks"
    res = runner.invoke(app, ["check", str(ranks), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "sweeps" not in json.loads(res.stdout) and "skipped" not in res.stderr
    # an nccl-tests output among the ranks' traces: the directory is still one run of traces (and the
    # sweep's 16 ranks are not the traces' 8)
    d = tmp_path / "ranks"
    shutil.copytree(ranks, d)
    shutil.copy(DATA / SWEEP, d / SWEEP)
    res = runner.invoke(app, ["check", str(d), "--format", "json"])
    assert res.exit_code == 2 and "disagree on the world size" in res.output, res.output


def test_fit_takes_the_directory_file_by_file(tmp_path):
    d = _dir(tmp_path)
    res = runner.invoke(app, ["fit", str(d), "--format", "json"])
    assert res.exit_code == 0, res.output
    named = runner.invoke(app, ["fit", *(str(d / n) for n in FILES), "--format", "json"])
    assert json.loads(res.stdout) == json.loads(named.stdout)
    # the H100 all-reduce is fitted; send/recv has no collective to fit an α-β ring to, and says so
    assert "nothing to fit" in res.stderr and FILES[1] in res.stderr
