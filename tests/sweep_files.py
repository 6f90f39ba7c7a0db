"""Bundled nccl-tests sweeps as the tests read them: rows counted from the file itself (a plain split, not
zerocalc's reader), and ``check --format json`` on a file with its rows held against that count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
runner = CliRunner()


def file_rows(name):
    """(size, out-of-place µs, in-place µs) counted from the file itself, not through zerocalc."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5]), float(f[9])))
    return rows


def blocks(name):
    """The file's lines cut at each ``# nThread`` line (one nccl-tests run each), by a plain split."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        if line.lstrip().startswith("# nThread"):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def block_rows(lines):
    """(size, out-of-place µs, in-place µs) of one block's rows, as :func:`file_rows` reads them."""
    rows = []
    for line in lines:
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5]), float(f[9])))
    return rows


def old_layout_rows(name):
    """(size, out-of-place µs, in-place µs) of the file's 12-column rows (nccl-tests before Aug 2022: no
    root column), read with a plain split, not through zerocalc."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) == 12 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[4]), float(f[8])))
    return rows


def check_json(name, *args, counted=file_rows):
    """The one sweep ``check --format json`` gives for ``name``: its JSON contract held and its sizes and
    measured times those ``counted`` (:func:`file_rows` unless a layout needs its own count) reads."""
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (sweep,) = doc["sweeps"]
    assert set(sweep) >= {"op", "group_size", "nccl_version", "rows"}
    for r in sweep["rows"]:
        assert set(r) >= {"bytes", "measured_s", "predicted_s", "ratio", "algorithm", "protocol"}
        assert r["ratio"] == pytest.approx(r["predicted_s"] / r["measured_s"])
    rows = counted(name)
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t, _ in rows])
    return sweep


def median_size_ratio(sweep):
    """The ratio at the median size (the lower middle of an even count)."""
    rows = sorted(sweep["rows"], key=lambda r: r["bytes"])
    return rows[(len(rows) - 1) // 2]["ratio"]


def device_lines(name):
    """(host, GPU name) of each '#  Rank' line, by a plain split of the file."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if "Rank" in f and "device" in f and "on" in f:
            out.append((f[f.index("on") + 1], " ".join(f[f.index("device") + 3:])))
    return out


def with_lines_before_table(tmp_path, source, lines, name="all_reduce_perf.txt"):
    """A copy of the sweep file ``source`` (a path, or a name under :data:`DATA`) with ``lines`` (launch or
    NCCL INFO lines) put before each of its table headers, written under ``tmp_path``."""
    source = source if isinstance(source, Path) else DATA / source
    out = []
    for line in source.read_text().splitlines(True):
        if line.lstrip("0123456789: ").startswith("#       size"):
            out += [f"{e}\n" for e in lines]
        out.append(line)
    path = tmp_path / name
    path.write_text("".join(out))
    return path


def gpus_per_process(name):
    """The ``nGpus`` of the file's ``# nThread`` line, by a plain split."""
    line = next(e for e in (DATA / name).read_text().splitlines() if e.lstrip().startswith("# nThread"))
    f = line.split()
    return int(f[f.index("nGpus") + 1])


def unsteady_sizes(name, gap=1.25, rows=file_rows):
    """Sizes whose out-of-place and in-place times differ by more than ``gap`` either way, of the rows
    ``rows(name)`` counts: (size, out-of-place µs, in-place µs)."""
    return [s for s, oop, ip in rows(name) if max(oop, ip) / min(oop, ip) > gap]


def srun_task0_rows(name):
    """(size, out-of-place µs, in-place µs) of Slurm task 0's table (``srun -l``: lines led by ``0:``), by a
    plain split of the file."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 14 and f[0] == "0:" and f[1].isdigit() and f[2].isdigit():
            rows.append((int(f[1]), float(f[6]), float(f[10])))
    return rows


def assert_within_both_bands(sweep):
    """Every size of ``sweep`` (check's JSON) within 0.5-2x and its median size within 0.8-1.25x."""
    ratios = [(r["bytes"], round(r["ratio"], 3)) for r in sweep["rows"]]
    assert all(0.5 <= x <= 2 for _, x in ratios), ratios
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def assert_read_as_counted(sweep, lines, op, preset, hosts):
    """``sweep`` (check's JSON) read as the file's ``# Rank`` lines count it: ``lines`` are (rank, host, GPU)
    of each, by the caller's plain split; ranks 0..n-1 on ``hosts`` hosts, ``op`` on n ranks, ``preset``
    picked, and the hosts told in its ``topology_how``."""
    assert [r for r, _, _ in lines] == list(range(len(lines)))
    assert len({h for _, h, _ in lines}) == hosts
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == (op, len(lines), preset)
    assert f"{len(lines) // hosts} per host, {hosts} host" in sweep["topology_how"]


def lines(name):
    """The file's lines."""
    return (DATA / name).read_text().splitlines()


def stated_versions(name):
    """The X of each ``NCCL version X+cudaY`` the file prints (bare, or after ``NCCL INFO``), by a plain
    split."""
    out = []
    for line in lines(name):
        f = line.split()
        if "version" in f and f[f.index("version") - 1] == "NCCL" and "+cuda" in line:
            out.append(f[f.index("version") + 1].split("+")[0])
    return out


def nthread_field(name, key):
    """The value after ``key`` on the file's ``# nThread`` line, by a plain split."""
    f = next(e for e in lines(name) if e.lstrip().startswith("# nThread")).split()
    return f[f.index(key) + 1]


def moved_rows(name):
    """The rows of :func:`file_rows` with bytes to move (a zero-size row is no call)."""
    return [r for r in file_rows(name) if r[0] > 0]
