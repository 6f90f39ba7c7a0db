"""Fixtures shared by the test modules."""

import os
from pathlib import Path

import pytest


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): a worker per CPU this process may run on, within the cgroup's CPU
    quota where one is set; xdist's own count (psutil's physical cores) is the host's, which a container's
    limit can make many more than it may use. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` is left to xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return cpus


@pytest.fixture
def rotate(tmp_path):
    """``rotate(log, stem, parts=3)``: the log cut by line count into ``parts`` files
    ``stem.0.txt``…, in order, as a rotating logger leaves it."""

    def cut(log: Path, stem: str, parts: int = 3) -> list[Path]:
        text = log.read_text().splitlines(keepends=True)
        out = []
        for k in range(parts):
            part = tmp_path / f"{stem}.{k}.txt"
            part.write_text("".join(text[k * len(text) // parts : (k + 1) * len(text) // parts]))
            out.append(part)
        return out

    return cut


@pytest.fixture
def no_work(monkeypatch):
    """``zerocalc.report.write_report`` replaced: reaching it means every check of ``report``'s options
    passed (and nothing heavy ran); the list of the configs it was called with."""
    from zerocalc import report

    calls = []
    monkeypatch.setattr(report, "write_report", lambda out, config, progress=None: calls.append(config))
    return calls
