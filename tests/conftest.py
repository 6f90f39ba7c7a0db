"""Fixtures shared by the test modules."""

from pathlib import Path

import pytest


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
