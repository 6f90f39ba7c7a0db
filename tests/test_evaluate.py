"""evaluate(): the tidy DataFrame, numbers worked out by hand, and property tests."""

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from zerocalc import symbols as S
from zerocalc.collectives import Algorithm
from zerocalc.errors import ConfigError, UnknownNameError
from zerocalc.evaluate import evaluate
from zerocalc.schemes import SCHEME_NAMES, SCHEMES

COLUMNS = {"scheme", "psi", "n", "gpus_per_node", "bytes_per_rank", "bytes_per_rank_over_psi",
           "memory_bytes_per_rank", "time_s", "equivalent_to_dp"} | {f"time_s_{a}" for a in Algorithm}


def test_columns_and_rows():
    df = evaluate(psi=7.5e9, n=64)
    assert COLUMNS <= set(df.columns)
    assert list(df["scheme"]) == list(SCHEME_NAMES)
    dp = df.set_index("scheme").loc["dp"]
    assert dp["bytes_per_rank_over_psi"] == pytest.approx(2 * 63 / 64)


def test_dp_ring_time_on_dgx_a100_by_hand():
    # 64 ranks, 8 nodes: a ring spans nodes, α = 14 µs per hop, bandwidth = the slower of the
    # NVLink (300 GB/s) and the node's 8 × 25 GB/s: 2·63 hops + 2·63/64·15 GB / 200 GB/s.
    t = evaluate(["dp"], psi=7.5e9, n=64)["time_s"].iloc[0]
    assert t == pytest.approx(2 * 63 * 14e-6 + 2 * 63 / 64 * 15e9 / 200e9)
    # one node of 8: NVLink only, α = 3.4 µs
    t1 = evaluate(["dp"], psi=7.5e9, n=8)["time_s"].iloc[0]
    assert t1 == pytest.approx(2 * 7 * 3.4e-6 + 2 * 7 / 8 * 15e9 / 300e9)


def test_sweep_is_tidy():
    psi = np.array([1e9, 7.5e9, 175e9])
    n = np.array([[8], [64]])
    df = evaluate(["dp", "zero3"], psi=psi, n=n)
    assert len(df) == 2 * 3 * 2
    assert set(zip(df["psi"], df["n"], strict=True)) == {(p, m) for p in psi for m in (8, 64)}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [({"n": 0}, ConfigError, "--n"), ({"psi": -3}, ConfigError, "--psi"),
     ({"n": 12}, ConfigError, "multiple"), ({"comm_dtype": "fp12"}, UnknownNameError, "dtype"),
     ({"topology": "nope"}, UnknownNameError, "topology"), ({"k": -1}, ConfigError, "--k")],
)
def test_bad_input(kwargs, error, match):
    args = {"psi": 1e9, "n": 8} | kwargs
    with pytest.raises(error, match=match):
        evaluate(**args)


def test_partial_node_is_one_smaller_node():
    df = evaluate(["fsdp-hybrid", "zero3"], psi=1e9, n=4, gpus_per_node=8).set_index("scheme")
    assert df.loc["fsdp-hybrid", "gpus_per_node"] == 4
    assert df.loc["fsdp-hybrid", "bytes_per_rank"] == pytest.approx(df.loc["zero3", "bytes_per_rank"])


configs = st.tuples(
    st.floats(1e6, 1e13), st.floats(1.01, 4.0), st.sampled_from([1, 2, 4, 8]), st.integers(1, 64),
    st.sampled_from(["dgx-a100", "dgx-h100", "pcie-gen4", "ethernet-100g"]),
)


@settings(max_examples=40, deadline=None)
@given(configs)
def test_non_negative_and_non_decreasing_in_psi(cfg):
    psi, factor, g, nodes, topo = cfg
    df = evaluate(psi=np.array([psi, psi * factor]), n=g * nodes, gpus_per_node=g, topology=topo)
    cols = ["bytes_per_rank", "memory_bytes_per_rank"] + [f"time_s_{a}" for a in Algorithm]
    for _, grp in df.groupby("scheme"):
        small, big = grp.sort_values("psi")[cols].to_numpy()
        assert np.all(small >= 0)
        assert np.all(big >= small * (1 - 1e-12))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4096), st.floats(1e6, 1e13), st.floats(0, 32))
def test_memory_non_increasing_dp_to_zero3(n, psi, k):
    df = evaluate(["dp", "zero1", "zero2", "zero3"], psi=psi, n=n, gpus_per_node=1, k=k)
    mem = df["memory_bytes_per_rank"].to_numpy()
    assert np.all(np.diff(mem) <= mem[0] * 1e-12)


@pytest.mark.parametrize("name", SCHEME_NAMES)
def test_hierarchical_equals_flat_ring_on_one_node(name):
    one_node = {S.N: S.G}
    s = SCHEMES[name]
    assert sympy.simplify((s.time_s("hierarchical") - s.time_s("ring")).subs(one_node)) == 0
    assert sympy.simplify((s.bytes_per_rank("hierarchical") - s.bytes_per_rank("ring")).subs(one_node)) == 0


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([1, 2, 4, 8, 16]), st.floats(1e6, 1e12))
def test_hierarchical_equals_flat_numerically_on_one_node(g, psi):
    df = evaluate(psi=psi, n=g, gpus_per_node=g)
    assert np.allclose(df["time_s_hierarchical"], df["time_s_ring"], rtol=1e-12, atol=0)


@pytest.mark.parametrize("schemes", [[], ()])
def test_empty_scheme_list_is_a_config_error(schemes):
    # pd.concat([]) used to raise a bare ValueError; an empty list names no scheme at all
    with pytest.raises(ConfigError, match="--schemes"):
        evaluate(schemes, psi=7.5e9, n=8)


def test_equivalence_column_depends_on_n():
    # At N = 1 there is no cross-rank gradient sum: the rank's own gradient IS the average, so the
    # colocated update (each shard updated with its own rank's gradient) is the data-parallel update.
    # ZeRO++ quantises what it sends (int8 weights, int4 gradients): at N = 1 it sends nothing, so it
    # quantises nothing and is the data-parallel update; at N > 1 it is not bit-equal.
    df = evaluate(["dp", "colocated", "zeropp"], psi=1e6, n=np.array([1, 8]), gpus_per_node=8)
    got = {(r.scheme, int(r.n)): bool(r.equivalent_to_dp) for r in df.itertuples()}
    assert got == {("dp", 1): True, ("dp", 8): True, ("colocated", 1): True, ("colocated", 8): False,
                   ("zeropp", 1): True, ("zeropp", 8): False}


@pytest.mark.parametrize(("n_unit", "kw"), [
    (8, {}),  # N from 8 (one node: the N ≤ G cases) to 400
    (8, {"micro_batches": 4, "grad_sync": "boundary", "param_dtype": "bf16", "grad_dtype": "fp32",
         "schemes": ["deepspeed-zero1", "deepspeed-zero2", "fsdp-full-shard", "torch-zero1", "zeropp"]}),
    (16, {"tp": 2, "pp": 2, "hsdp_shard_size": 4, "reuse_distance": 0, "topology": "dgx-h100",
          "schemes": ["deepspeed-zero3", "fsdp-hybrid", "dp"]}),
])
def test_a_large_sweep_specialised_on_its_constants_gives_the_generic_numbers(monkeypatch, n_unit, kw):
    import zerocalc.evaluate as E

    psi = np.geomspace(1e6, 1e12, 50)
    n = n_unit * np.arange(1, 51)
    cfg, generic = E.evaluate_arrays(psi=psi, n=n, **kw)
    before = E.compiled_fixed.cache_info().misses + E.compiled_fixed.cache_info().hits
    monkeypatch.setattr(E, "SPECIALISE_FROM", 1)  # as a sweep of 100,000 configurations would be
    cfg2, special = E.evaluate_arrays(psi=psi, n=n, **kw)
    assert E.compiled_fixed.cache_info().misses + E.compiled_fixed.cache_info().hits == before + 1
    for name, cols in generic.items():
        for col, v in cols.items():
            np.testing.assert_allclose(special[name][col], v, rtol=1e-12, err_msg=f"{name} {col}")
    for k, v in cfg.items():
        np.testing.assert_array_equal(cfg2[k], v)


def _names(code) -> set[str]:
    """Every global name a generated function's code object (and the ones nested in it) refers to."""
    out = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            out |= _names(c)
    return out


@pytest.mark.parametrize("grad_sync", ["every", "boundary"])
def test_kernels_are_the_ones_sympy_builds_on_its_numpy_namespace(grad_sync):
    # the kernels are lambdified with the numpy module, not its name; sympy's own path (modules="numpy")
    # must give the same code, whose names find the same functions: the same numbers, bit for bit
    import inspect

    import zerocalc.evaluate as E

    quantities = [("bytes", Algorithm.RING), ("memory", Algorithm.RING)] + [("time", a) for a in Algorithm]
    keys = tuple((name, q, a.value, grad_sync, shard) for name in SCHEME_NAMES for q, a in quantities
                 for shard in (True, False))
    ours = E.compiled_many(keys)
    theirs = sympy.lambdify(S.ARGUMENTS, [E._expression(*k) for k in keys], modules="numpy", cse=True)
    assert inspect.getsource(ours) == inspect.getsource(theirs)
    for name in _names(ours.__code__):  # a name neither namespace holds is a builtin in both
        assert ours.__globals__.get(name) is theirs.__globals__.get(name), name


def test_the_first_kernel_of_a_process_does_not_import_numpys_build_and_test_tools():
    # sympy's lambdify(modules="numpy") runs "from numpy import *", which under numpy 2 imports numpy.f2py and
    # numpy.testing (about 0.1 s); zerocalc's kernels need neither
    import subprocess
    import sys

    code = ("import sys; from zerocalc.evaluate import evaluate; evaluate(psi=7.5e9, n=64); "
            "print(sorted(m for m in ('numpy.f2py', 'numpy.testing') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_node_as_hsdp_shard_group_is_what_sympy_subs_gives():
    # _expression puts G in for H with xreplace; sympy's subs (which also re-evaluates each piece's
    # condition) must give the same expression for every scheme, quantity, algorithm and sync mode
    import zerocalc.evaluate as E

    quantities = [("bytes", Algorithm.RING), ("memory", Algorithm.RING)] + [("time", a) for a in Algorithm]
    for name in SCHEME_NAMES:
        for q, a in quantities:
            for sync in ("every", "boundary"):
                node = E._expression(name, q, a.value, sync, True)
                assert node == E._expression(name, q, a.value, sync).subs(S.H, S.G), (name, q, a, sync)
