"""The public API of the core model is reachable from ``zerocalc`` without importing sympy eagerly."""

import subprocess
import sys

import zerocalc


def test_import_zerocalc_does_not_import_sympy_or_pandas():
    code = "import sys, zerocalc; print(sorted(m for m in ('sympy', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_core_model_reexports():
    from zerocalc import evaluate, schemes

    # ``zerocalc.evaluate`` is the module (importing a submodule binds its name on the package)
    assert zerocalc.evaluate is evaluate and callable(zerocalc.evaluate.evaluate)
    assert zerocalc.get_scheme("zero2") is schemes.SCHEMES["zero2"]
    assert zerocalc.SCHEME_NAMES == schemes.SCHEME_NAMES
    assert zerocalc.model_bytes_per_rank("dp", psi=1e9, n=2) == 2 * 1 / 2 * 1e9 * 2
    for name in ("Algorithm", "Collective", "Group", "Phase", "Scheme", "Topology", "bytes_sent_per_rank",
                 "get_topology", "model_state_bytes"):
        assert name in zerocalc.__all__ and getattr(zerocalc, name) is not None


def test_every_public_name_resolves():
    for name in zerocalc.__all__:
        assert getattr(zerocalc, name) is not None, name
    from zerocalc import report, validate

    assert zerocalc.check is validate.check and zerocalc.write_report is report.write_report
