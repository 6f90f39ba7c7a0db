"""A directory of nccl-tests outputs given to ``check`` and ``fit`` (with or without ``--out``): each
file in it a sweep, as if named one by one, in the order of their names; a directory that mixes other files
in is read as traces, as before. The rows are held against the files counted with a plain split
(tests/sweep_files.py)."""

from __future__ import annotations

import json
import shutil

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


def test_a_directory_mixing_other_files_in_is_read_as_traces(tmp_path):
    d = _dir(tmp_path)
    (d / "notes.txt").write_text("two runs of the same week\n")
    res = runner.invoke(app, ["check", str(d), "--format", "json"])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_fit_takes_the_directory_file_by_file(tmp_path):
    d = _dir(tmp_path)
    res = runner.invoke(app, ["fit", str(d), "--format", "json"])
    assert res.exit_code == 0, res.output
    named = runner.invoke(app, ["fit", *(str(d / n) for n in FILES), "--format", "json"])
    assert json.loads(res.stdout) == json.loads(named.stdout)
    # the H100 all-reduce is fitted; send/recv has no collective to fit an α-β ring to, and says so
    assert "nothing to fit" in res.stderr and FILES[1] in res.stderr
