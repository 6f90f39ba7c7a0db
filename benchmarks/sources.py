"""What the benchmarks time against: another git revision's ``zerocalc/``, extracted to a folder
(``--against-rev``), and the synthetic NCCL log generator (benchmarks/synth_nccl_log.py).

Imported by the benchmark scripts, which run as ``python benchmarks/NAME.py`` (their folder first on
the path)."""

from __future__ import annotations

import importlib.util
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tree_at(rev: str, into: Path) -> Path:
    """``zerocalc/`` of git revision ``rev`` extracted under ``into`` (its ``tree/``)."""
    archive = into / "src.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), rev, "zerocalc"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    archive.unlink()
    return into / "tree"


def synth():
    """The module benchmarks/synth_nccl_log.py (``build(path, size)`` writes the synthetic log)."""
    spec = importlib.util.spec_from_file_location("synth_nccl_log", ROOT / "benchmarks" / "synth_nccl_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
