"""The layout rules of the package, checked: lint clean, a pure core, a cheap CLI start."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "zerocalc"
#: The pure core: no printing, plotting, CLI or file output (the traces readers only read their inputs).
CORE = ["symbols", "collectives", "topology", "schemes", "memory", "evaluate", "feasibility", "plan",
        "in_network", "validate", "units", "errors"]
FORBIDDEN_IMPORTS = ("matplotlib", "typer", "click")


def test_ruff_is_clean():
    paths = ["zerocalc", "tests", "benchmarks", "notebooks"]
    res = subprocess.run([sys.executable, "-m", "ruff", "check", *paths],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _modules(names: list[str]) -> list[str]:
    """Each name as a module, or as every module of its package (``validate`` → ``validate/measure``, ...)."""
    return [m for name in names
            for m in ([f"{name}/{p.stem}" for p in sorted((PKG / name).glob("*.py"))]
                      if (PKG / name).is_dir() else [name])]


@pytest.mark.parametrize("module", _modules(CORE + ["traces", "sim", "nccl"]))
def test_core_does_no_io_printing_or_plotting(module):
    tree = _tree(PKG / f"{module}.py")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(n.split(".")[0] in FORBIDDEN_IMPORTS for n in names), (module, names)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "print", f"{module}:{node.lineno} prints"
            if node.func.id == "open" and not module.startswith("traces/"):
                raise AssertionError(f"{module}:{node.lineno} opens a file")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in ("write_text", "write_bytes", "savefig", "to_csv"), \
                f"{module}:{node.lineno} writes ({node.func.attr})"


def test_traces_open_files_for_reading_only():
    for path in (PKG / "traces").glob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                given = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "mode")]
                modes = [a.value for a in given if isinstance(a, ast.Constant)]
                assert all("r" in m and not set(m) & set("wax+") for m in modes), (path.name, node.lineno)


def test_cli_start_does_not_import_the_heavy_libraries():
    code = ("import sys; import zerocalc.cli; "
            "print(sorted(m for m in ('sympy', 'pandas', 'matplotlib', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("trace", ["nccl-debug/ddp-allreduce-128ranks-L4-ray.txt", "real-runs/ds-zero3-ga4",
                                   "kineto/dlrm-v100-8ranks"])
def test_check_imports_no_library_it_does_not_need(trace):
    # check evaluates the schemes from zerocalc.validate.numeric's table; a log below 16 MiB is read by re;
    # options that need no conversion do not build typer's pydantic validators
    path = Path(__file__).resolve().parent / "data" / "traces" / trace
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print(sorted(m for m in ('sympy', 'matplotlib', 'polars', 'scipy',"
            " 'pydantic') if m in sys.modules), file=sys.stderr))\n"
            "from zerocalc.cli.application import main\n"
            f"sys.argv = ['zerocalc', 'check', {str(path)!r}, '--format', 'json', '--schemes', 'dp,zero3',"
            " '--schemes', 'zeropp', '--micro-batches', '1e0']\n"
            "main()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert '"schemes"' in res.stdout
    assert res.stderr.strip().splitlines()[-1] == "[]"
