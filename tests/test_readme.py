"""Every example in README.md runs as written (from the repository root, as the README assumes)."""

from __future__ import annotations

import glob
import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.S)


def _commands(block: str) -> list[str]:
    """``zerocalc ...`` lines of a bash block, continuation lines joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.startswith("zerocalc ")]


COMMANDS = [c for lang, block in BLOCKS if lang == "bash" for c in _commands(block)]
QUICK = [c for c in COMMANDS if not c.startswith("zerocalc report")]
REPORTS = [c for c in COMMANDS if c.startswith("zerocalc report")]


def _argv(command: str) -> list[str]:
    argv = []
    for word in shlex.split(command)[1:]:
        argv += sorted(glob.glob(word)) if any(ch in word for ch in "*?[") else [word]
    return argv


def test_readme_has_examples():
    assert len(QUICK) >= 8 and len(REPORTS) == 4


@pytest.mark.parametrize("command", QUICK)
def test_readme_command_runs(command, monkeypatch):
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(app, _argv(command))
    assert res.exit_code == 0, f"{command}\n{res.output}"
    assert res.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("command", REPORTS)
def test_readme_report_runs(command, tmp_path, monkeypatch):
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the example's --trace path, from a scratch directory
    (tmp_path / "reports").mkdir()  # as in the project root: report writes there and never creates it
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, _argv(command))
    assert res.exit_code == 0, f"{command}\n{res.output}"
    written = [p for p in tmp_path.rglob("*.pdf")]
    assert len(written) == 1 and written[0].read_bytes().startswith(b"%PDF-")


def test_readme_toml_topology(tmp_path, monkeypatch):
    (toml,) = [block for lang, block in BLOCKS if lang == "toml"]
    command = toml.splitlines()[0].split(": ", 1)[1]  # "# my-cluster.toml: zerocalc table --topology ..."
    name = toml.splitlines()[0].lstrip("# ").split(":")[0]
    (tmp_path / name).write_text(toml)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, [*_argv(command), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert '"gpus_per_node": 4' in res.stdout


def test_readme_python_example(monkeypatch, capsys):
    (code,) = [block for lang, block in BLOCKS if lang == "python"]
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "No:" in out and "dp" in out


def test_readme_paths_exist():
    for path in re.findall(r"`((?:tests|zerocalc|reports|notebooks|benchmarks)/[^`*\s]+)`", README):
        assert (ROOT / path).exists(), path
    assert os.path.exists(ROOT / "reports" / "zero-colocation-review.pdf")


def test_notebook_extra_brings_a_front_end():
    # the sliders need JupyterLab and ipywidgets; the test extra runs the notebook without a front end
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=\[ ]", d)[0].lower() for d in extras["notebook"]}
    assert {"jupyterlab", "ipywidgets", "ipykernel"} <= names
    assert not any(d.lower().startswith("jupyterlab") for d in extras["test"])
    assert "pip install -e '.[notebook]'" in README and "jupyter lab notebooks/explore.ipynb" in README
