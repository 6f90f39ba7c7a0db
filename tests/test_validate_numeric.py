"""The check's model numbers without sympy (zerocalc.validate.numeric): the committed table is what the
symbolic model gives now, and every tree evaluates to the float sympy gives for its expression at the
same values, bit for bit (integers and rationals exact, floats rounded as sympy rounds them)."""

import math
from pathlib import Path

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from zerocalc import symbols as S
from zerocalc.collectives import Collective, bytes_sent_per_rank
from zerocalc.errors import UnknownNameError
from zerocalc.schemes import SCHEME_ALIASES, SCHEME_NAMES, SCHEMES, GradSync, get_scheme
from zerocalc.validate import numeric, numeric_table


def test_the_committed_table_is_the_models():
    assert Path(numeric_table.__file__).read_text() == numeric.table_source(), numeric.REGENERATE


def test_schemes_are_found_as_get_scheme_finds_them():
    assert numeric.scheme_names() == tuple(SCHEME_NAMES)
    for key in [*SCHEMES, "ZeRO2", " Deepspeed-Zero12 "]:
        s, t = numeric.scheme(key), get_scheme(key)
        assert (s.name, s.equivalent_to_dp, len(s.phases)) == (t.name, t.equivalent_to_dp, len(t.phases))
        assert [ph.collective for ph in s.phases] == [ph.collective.value for ph in t.phases]
        assert [ph.side for ph in s.phases] == [ph.side.value for ph in t.phases]
        for mode in GradSync:
            assert [ph.runs_per_micro_batch(mode.value) for ph in s.phases] == [
                ph.runs(mode) == S.n_mb for ph in t.phases]
    assert numeric.scheme("deepspeed-zero12").name == "deepspeed-zero12" in SCHEME_ALIASES
    with pytest.raises(UnknownNameError) as got:
        numeric.scheme("zero4")
    with pytest.raises(UnknownNameError) as want:
        get_scheme("zero4")
    assert str(got.value) == str(want.value)
    assert [ph.reuse_priced for ph in numeric.scheme("deepspeed-zero3").phases] == [False, True, False]


def _bits_equal(a: float, b: float) -> bool:
    return a == b and math.copysign(1, a) == math.copysign(1, b) or (math.isnan(a) and math.isnan(b))


def _values(psi, n, g, h, b_p, b_g, mb, d):
    return {"Psi": psi, "N": n, "G": g, "H": h, "n_mb": mb, "b_p": b_p, "b_g": b_g, "D_reuse": d,
            "b_comm": b_p, "b_param": b_p, "b_grad": b_g}


_PSI = st.one_of(st.integers(1, 10**12), st.floats(1.0, 1e12), st.sampled_from([48265376, 7.5e9, 1e9 / 3]))
_WIDTH = st.one_of(st.sampled_from([0.5, 1.0, 2.0, 4.0, 8.0, 2, 4, 1]), st.floats(0.1, 16.0))
_DIST = st.one_of(st.sampled_from([1e9, 0.0, 0]), st.floats(0.0, 1e13), st.integers(0, 10**13))


@settings(max_examples=50, deadline=None)
@given(_PSI, st.integers(1, 4096), st.integers(1, 64), st.integers(1, 64), _WIDTH, _WIDTH,
       st.integers(1, 64), _DIST, st.booleans())
def test_every_phase_evaluates_to_sympys_float(psi, n, g, h, b_p, b_g, mb, d, d_twice_psi):
    if d_twice_psi:  # the reuse distance a check tries that leaves Max(0, 0.0)
        d = 2.0 * psi
    vals = _values(psi, n, g, h, b_p, b_g, mb, d)
    sym = {getattr(S, k): v for k, v in vals.items()}
    for name in SCHEME_NAMES:
        for ph, nph in zip(get_scheme(name).phases, numeric.scheme(name).phases, strict=True):
            for expr, tree in ((ph.elements, nph.elements), (ph.calls, nph.calls),
                               (ph.elem_bytes, nph.elem_bytes)):
                want = float(sympy.sympify(expr).xreplace(sym))
                assert _bits_equal(float(numeric.evaluate(tree, vals)), want), (name, expr, vals)
            want = float(ph.group.size.subs(sym))
            assert _bits_equal(float(numeric.evaluate(nph.size, vals)), want), (name, ph.group, vals)


def test_the_ring_bytes_are_the_models_on_every_group_size():
    for c in Collective:
        for p in [*range(1, 130), 1000, 1023, 4096, 10**6 + 3]:
            assert _bits_equal(numeric.ring_bytes(c.value, p), float(bytes_sent_per_rank(c, 1, p))), (c, p)


def test_floats_and_exact_numbers_are_combined_as_sympy_combines_them():
    x, y, z = sympy.symbols("x y z")
    cases = [x / y, x * y / z, x + y + z, x - y / 2, sympy.Max(0, x - y / 2), sympy.Min(x, y) * z, 1 / x,
             x**2 / y, (x + y) * z / 3]
    values = [{"x": 0.1, "y": 3, "z": 7}, {"x": 1e16, "y": 1.0, "z": 3}, {"x": 2, "y": 6, "z": 0.3},
              {"x": 10**17 + 1, "y": 3.0, "z": 10**17}, {"x": 1 / 3, "y": 2 / 3, "z": 1e-300}]
    for expr in cases:
        tree = numeric.tree(expr)
        for v in values:
            want = float(expr.xreplace({sympy.Symbol(k): val for k, val in v.items()}))
            assert _bits_equal(float(numeric.evaluate(tree, v)), want), (expr, v)
    with pytest.raises(ValueError, match="no numeric tree"):
        numeric.tree(sympy.log(x, 2))
