"""The data type and reduction NCCL's choice reads (zerocalc.nccl.datatype): NVLS and NVLS Tree only for the
types NVLink SHARP reduces (ncclNvlsSupported, src/include/device.h), an fp8 reduction's Ring relegated at
more than 8 ranks (src/enqueue.cc, v2.24.3 on); checked on a public 16-H200 `nccl-tests -d all` run."""

import json

import pytest
from sweep_files import DATA, runner

from zerocalc.cli import app
from zerocalc.nccl import Algorithm, Collective, release_for, tune
from zerocalc.nccl.datatype import for_type, nvls_reduces, ring_relegated
from zerocalc.nccl.predict import predict
from zerocalc.topology import get_topology

A, C = Algorithm, Collective
D_ALL = "all_reduce_perf-16xH200-2nodes-roce-dall-nccl2.30.4.txt"
GH200_INT8 = "all_reduce_perf-8xGH200-olivia-2nodes-int8-nccl2.30.4.txt"
#: nccl-tests' type names (src/common.cu test_typenames) → zerocalc's canonical names (zerocalc.dtypes)
CANONICAL = {"int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64",
             "uint64": "uint64", "half": "fp16", "float": "fp32", "double": "fp64", "bfloat16": "bf16",
             "f8e4m3": "fp8e4m3", "f8e5m2": "fp8e5m2"}


def file_series(name):
    """{(type, redop): [(size, out-of-place µs)]} by a plain split of the file's rows."""
    out = {}
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit() and f[1].isdigit():
            out.setdefault((f[2], f[3]), []).append((int(f[0]), float(f[5])))
    return out


def sweeps_json(name, *args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


# ncclNvlsSupported (v2.19.3-v2.30.7) and NCCL_NVLS_SUPPORTS (v2.17.1-v2.18.x): types by reduction
@pytest.mark.parametrize(("dtype", "redop", "ok"), [
    ("fp32", "sum", True), ("fp16", "sum", True), ("bf16", "sum", True), ("fp64", "sum", True),
    ("int32", "sum", True), ("uint64", "sum", True), ("int8", "sum", False), ("uint8", "sum", False),
    ("fp8e4m3", "sum", False), ("fp8e5m2", "sum", False), ("fp32", "max", False), ("fp64", "min", False),
    ("bf16", "max", True), ("int32", "min", True), ("fp32", "prod", False), ("fp32", "avg", False),
    ("int32", "avg", False), ("fp32", "mulsum", False), ("fp32", None, True), ("int8", None, False),
])
def test_nvls_reduces_the_types_ncclnvlssupported_names(dtype, redop, ok):
    for version in ("2.17.1", "2.19.3", "2.30.4"):
        rel, _ = release_for(version)
        assert nvls_reduces(rel, C.ALL_REDUCE, dtype, redop) is ok
        assert nvls_reduces(rel, C.REDUCE_SCATTER, dtype, redop) is ok
    assert nvls_reduces(release_for("2.30.4")[0], C.ALL_REDUCE, None, None)  # type unknown: unchanged


def test_all_gather_nvls_reads_the_type_only_in_v2_19_to_v2_21():
    # v2.19-v2.21 test the caller's type; v2.22.3 exempts all-gather (enqueue.cc) and runs it as int8
    assert not nvls_reduces(release_for("2.21.5")[0], C.ALL_GATHER, "int8", None)
    assert nvls_reduces(release_for("2.21.5")[0], C.ALL_GATHER, "fp32", None)
    assert nvls_reduces(release_for("2.22.3")[0], C.ALL_GATHER, "int8", None)
    assert nvls_reduces(release_for("2.30.4")[0], C.ALL_GATHER, "fp8e4m3", None)


def test_fp8_ring_relegated_above_8_ranks_from_v2_24():
    v24, v23 = release_for("2.24.3")[0], release_for("2.23.4")[0]
    assert ring_relegated(v24, C.ALL_REDUCE, "fp8e4m3", 9)
    assert ring_relegated(v24, C.REDUCE_SCATTER, "fp8e5m2", 16)
    assert not ring_relegated(v24, C.ALL_REDUCE, "fp8e4m3", 8)
    assert not ring_relegated(v23, C.ALL_REDUCE, "fp8e4m3", 16)
    assert not ring_relegated(v24, C.ALL_REDUCE, "bf16", 16)
    assert not ring_relegated(v24, C.ALL_GATHER, "fp8e4m3", 16)  # runs as int8 (taskAppend, v2.22.3 on)


def test_int8_leaves_nvls_out_on_one_hopper_node():
    t = tune(get_topology("dgx-h100"), 8, release_for("2.30.4")[0])
    assert t.choose(C.ALL_REDUCE, 1 << 30)[0] == A.NVLS
    t8, note = for_type(t, C.ALL_REDUCE, "int8", "sum")
    assert t8.choose(C.ALL_REDUCE, 1 << 30)[0] not in (A.NVLS, A.NVLS_TREE)
    assert "ncclNvlsSupported" in note
    assert for_type(t, C.ALL_REDUCE, "bf16", "sum") == (t, None)
    assert for_type(t, C.ALL_REDUCE, None, None) == (t, None)


def test_fp8_ring_runs_at_its_own_time_where_nothing_else_can():
    # NCCL_ALGO=Ring: the factor partitions the choice, it does not slow the call
    topo, rel = get_topology("dgx-h200"), release_for("2.30.4")[0]
    only_ring = {c: {A.RING} for c in C}
    t = tune(topo, 16, rel, algo_enable=only_ring)
    t8, _ = for_type(t, C.ALL_REDUCE, "fp8e4m3", "sum")
    p, p8 = predict(t, C.ALL_REDUCE, 1 << 30), predict(t8, C.ALL_REDUCE, 1 << 30)
    assert p8.algorithm == A.RING and p8.time_s == pytest.approx(p.time_s)
    free, _ = for_type(tune(topo, 16, rel), C.ALL_REDUCE, "fp8e4m3", "sum")
    assert free.choose(C.ALL_REDUCE, 1 << 30)[0] == A.TREE  # NVLS cannot, Ring relegated: Tree


def test_d_all_run_prices_each_type_on_the_algorithm_its_type_gets():
    """Every series of the 16-H200 `-d all` run (its sizes and times read off the file) in both bands:
    NVLS Tree for the types NVLink SHARP reduces, Ring for int8 / uint8, Tree for fp8 (Ring relegated)."""
    series = file_series(D_ALL)
    assert len(series) == 12
    sweeps = sweeps_json(D_ALL)
    assert [s["series"] for s in sweeps] == [f"{CANONICAL[t]} {r}" for t, r in series]
    for s, ((t, r), rows) in zip(sweeps, series.items(), strict=True):
        assert (s["dtype"], s["redop"]) == (CANONICAL[t], r)
        assert [x["bytes"] for x in s["rows"]] == [b for b, _ in rows]
        assert [x["measured_s"] for x in s["rows"]] == pytest.approx([us * 1e-6 for _, us in rows])
        want = ("Ring" if t in ("int8", "uint8") else "Tree" if t.startswith("f8") else "NVLSTree")
        assert {x["algorithm"] for x in s["rows"]} == {want}, t
        ratios = sorted((x["bytes"], x["ratio"]) for x in s["rows"])
        assert all(0.5 <= q <= 2 for _, q in ratios), (t, ratios)
        assert 0.8 <= ratios[(len(ratios) - 1) // 2][1] <= 1.25, (t, ratios)
        said = " ".join(s["notes"])
        assert ("ncclNvlsSupported" in said) is (want != "NVLSTree")
        assert ("Relegate fp8" in said) is (want == "Tree")


def test_int8_where_nvlink_sharp_is_absent_is_priced_as_before():
    # 4 GH200 a node, NVLink between them and no NVSwitch: no NVLS to leave out, no note
    (s,) = sweeps_json(GH200_INT8)
    assert (s["dtype"], s["redop"]) == ("int8", "sum")
    assert not any("ncclNvlsSupported" in n for n in s["notes"])


def test_a_tuner_rule_for_nvls_tree_is_skipped_for_int8_not_refused(tmp_path):
    """The example tuner's rule suits the communicator (NVLS Tree runs its float sums); for the int8 series
    NCCL's cost table holds NVLS Tree as NCCL_ALGO_PROTO_IGNORE, which the plugin (tuner API v3+) skips."""
    rules = tmp_path / "rules.csv"
    rules.write_text("allreduce,0,68719476736,nvls_tree,simple,-1,-1,-1\n")
    sweeps = sweeps_json(D_ALL, "--nccl-tuner", str(rules), "--topology", "dgx-h200")
    algos = {s["dtype"]: {x["algorithm"] for x in s["rows"]} for s in sweeps}
    assert algos["fp32"] == {"NVLSTree"} and algos["bf16"] == {"NVLSTree"}
    assert algos["int8"] == {"Ring"} and algos["fp8e4m3"] == {"Tree"}
