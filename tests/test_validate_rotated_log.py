"""A log rotated or split by line count (each part holding lines of every process) is one run.

The synthetic 128-rank Ray log (benchmarks/synth_nccl_log.py), cut into parts of 1,000 lines as
``split -l 1000`` cuts it: ``check`` on the parts finds the 128 processes of the whole log (not
128 per part) and the same steps and volume. Expected values are counted from the file.
"""

import importlib.util
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import read_traces

ROOT = Path(__file__).resolve().parent.parent


def _build(path: Path, init: bool = False) -> None:
    spec = importlib.util.spec_from_file_location("synth_nccl_log", ROOT / "benchmarks" / "synth_nccl_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.build(path, 1.5e6, init=init)


def _check(path: Path) -> dict:
    res = CliRunner().invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _split(whole: Path, parts: Path) -> list[str]:
    lines = whole.read_text().splitlines(keepends=True)
    parts.mkdir()
    for i in range(0, len(lines), 1000):  # split -l 1000: xaa, xab, ...
        (parts / f"xa{chr(ord('a') + i // 1000)}").write_text("".join(lines[i : i + 1000]))
    assert len(list(parts.iterdir())) > 4
    return lines


def test_a_log_split_by_line_count_checks_as_the_whole_log(tmp_path):
    whole, parts = tmp_path / "ray.log", tmp_path / "parts"
    _build(whole)
    lines = _split(whole, parts)
    processes = {m.group(1) for m in re.finditer(r" (\S+:\d+):\d+ \[\d+\] NCCL INFO", "".join(lines))}
    counts = [int(c) for c in re.findall(r" count (\d+) ", "".join(lines))]
    per_step = len(counts) // len(processes)  # every process: the same calls each step, in order
    one = sorted(processes)[0]
    first = [int(c) for ln in lines if f" {one}:" in ln for c in re.findall(r" count (\d+) ", ln)]
    whole_d, parts_d = _check(whole), _check(parts)
    assert len(processes) == 128 and len(parts_d["ranks"]) == 128
    assert parts_d["psi"] == whole_d["psi"] == sum(first[: 8])
    assert parts_d["steps"] == whole_d["steps"] == per_step // 8
    # the same answer: only the parts' names differ
    assert parts_d == whole_d


def test_the_ranks_of_the_first_part_hold_in_the_others(tmp_path):
    # Init COMPLETE lines (each process's world rank) only at the top of the log: in the first part
    whole, parts = tmp_path / "ray.log", tmp_path / "parts"
    _build(whole, init=True)
    lines = _split(whole, parts)
    inits = [ln for ln in lines if "Init COMPLETE" in ln]
    assert len(inits) == 128 and "Init COMPLETE" not in (parts / "xab").read_text()
    ranks = {m.group(1): int(m.group(2)) for m in
             (re.search(r" (\S+:\d+):\d+ \[\d+\] NCCL INFO comm \S+ rank (\d+) ", ln) for ln in inits)}
    whole_d, parts_d = _check(whole), _check(parts)
    assert parts_d == whole_d and whole_d["ranks"] == sorted(ranks.values()) == list(range(128))
    assert whole_d["ranks_how"] == ""  # the ranks are the log's own
    table = read_traces(parts).table
    assert table["rank"].notna().all()
    for proc, rank in list(ranks.items())[:5]:  # each process keeps its Init rank in every part
        host, pid = proc.rsplit(":", 1)
        assert set(table.loc[(table["host"] == host) & (table["pid"] == int(pid)), "rank"]) == {rank}
