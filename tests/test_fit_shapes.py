"""``fit --out`` keys its pairs by the shape a sweep states (nodes × ranks per node): ``check`` and ``table``
price another shape of the same rank count with the library's own model and say so; a calibration written
before shapes were kept (the fixture, written by ``fit --out`` at an earlier commit) still prices every
shape of its rank count, as it did."""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

import pytest
from sweep_files import DATA, check_json, device_lines, file_rows, runner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.topology import Calibration, shape_calibration, topology_from_mapping

H100_2X8 = "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"
GH200_4X4 = "all_reduce_perf-16xGH200-alps-4nodes-srun-nccl2.23.4.out"
OLD = Path(__file__).parent / "data" / "calibrations" / "all_reduce-16xH100-2nodes-fit-1d5c39d.toml"


def listed_hosts(name):
    """{host: ranks} from the file's ``# Rank r ... on HOST device`` lines, by a plain split."""
    return dict(Counter(host for host, _ in device_lines(name)))


def labelled_rows(name):
    """:func:`file_rows` of a file whose lines srun labels (``0: `` before each), by a plain split."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if f and f[0].endswith(":"):
            f = f[1:]
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5]), float(f[9])))
    return rows


def _fit(tmp_path, name, *extra):
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / name), "--out", str(out), *extra])
    assert res.exit_code == 0, res.output
    return out, tomllib.loads(out.read_text())["nccl_calibration"]


def test_fit_keys_each_pair_by_the_hosts_the_file_lists(tmp_path):
    hosts = listed_hosts(H100_2X8)
    assert len(hosts) == 2 and set(hosts.values()) == {8}
    _, cals = _fit(tmp_path, H100_2X8, "--nccl-version", "2.26.2")
    assert {(c["ranks"], c["nodes"], c["ranks_per_node"]) for c in cals} == {(16, 2, 8)}


def test_an_unstated_shape_is_left_unkeyed(tmp_path):
    """A sweep whose lines name no host (its rows alone) states no shape: its pairs price any shape of its
    ranks, as every calibration did before shapes were kept."""
    name = "all_gather_perf-16xB200-vultr-2nodes-table-only.txt"
    assert listed_hosts(name) == {}
    _, cals = _fit(tmp_path, name)
    assert cals and not any("nodes" in c or "ranks_per_node" in c for c in cals)


def test_another_shape_is_priced_uncalibrated_with_a_note(tmp_path):
    assert set(listed_hosts(GH200_4X4).values()) == {4} and len(listed_hosts(GH200_4X4)) == 4
    new, _ = _fit(tmp_path, H100_2X8, "--nccl-version", "2.26.2")
    sweep = check_json(GH200_4X4, "--topology", str(new), counted=labelled_rows)
    assert not any(r["calibrated"] for r in sweep["rows"])
    (note,) = [n for n in sweep["notes"] if "fitted on" in n]
    assert "fitted on 2 nodes × 8 ranks, not 4 nodes × 4 ranks" in note and "uncalibrated" in note
    # the same rows as on the topology without its calibration
    doc = tomllib.loads(new.read_text())
    bare = tmp_path / "bare.toml"
    bare.write_text(new.read_text().split("[[nccl_calibration]]")[0])
    assert "nccl_calibration" not in tomllib.loads(bare.read_text()) and doc["nccl_calibration"]
    plain = check_json(GH200_4X4, "--topology", str(bare), "--nccl-version", "2.26.2", counted=labelled_rows)
    assert [r["predicted_s"] for r in sweep["rows"]] == [r["predicted_s"] for r in plain["rows"]]


def test_the_calibrated_shape_is_priced_by_its_pairs(tmp_path):
    """The round trip on the file's own shape: a Tree/LL row is the fitted α + bytes / bw, by hand from
    the TOML's numbers."""
    new, cals = _fit(tmp_path, H100_2X8, "--nccl-version", "2.26.2")
    sweep = check_json(H100_2X8, "--topology", str(new))
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in file_rows(H100_2X8)]
    (ll,) = [c for c in cals if (c["algorithm"], c["protocol"]) == ("Tree", "LL")]
    row = next(r for r in sweep["rows"] if r["bytes"] == 1024)
    assert row["calibrated"] and (row["algorithm"], row["protocol"]) == ("Tree", "LL")
    assert row["predicted_s"] == pytest.approx(ll["alpha_us"] * 1e-6 + 1024 / (ll["bw_GBps"] * 1e9))


def test_a_calibration_written_before_shapes_prices_every_shape_as_it_did():
    """The fixture (``fit --out`` at commit 1d5c39d) keys by op and ranks: it loads, and its pairs, the
    sweep-wide one (``any``) for the pairs it did not fit, price the 2 × 8 sweep it was fitted on and a
    4 × 4 one of the same ranks: α + bytes / bw from its own numbers."""
    doc = tomllib.loads(OLD.read_text())
    assert OLD.read_text().startswith("# provenance: written by `zerocalc fit ")
    assert not any("nodes" in c for c in doc["nccl_calibration"])
    fits = {(c["algorithm"], c["protocol"]): c for c in doc["nccl_calibration"]}
    for name in (H100_2X8, GH200_4X4):
        sweep = check_json(name, "--topology", str(OLD), counted=labelled_rows)
        assert sweep["rows"] and all(r["calibrated"] for r in sweep["rows"])
        assert not any("fitted on" in n for n in sweep["notes"])
        for r in sweep["rows"]:
            c = fits.get((r["algorithm"], r["protocol"]), fits[("any", "any")])
            want = c["alpha_us"] * 1e-6 + r["bytes"] / (c["bw_GBps"] * 1e9) + (r["launch_stagger_s"] or 0.0)
            assert r["predicted_s"] == pytest.approx(want)


def test_table_says_where_the_shape_differs(tmp_path):
    new, _ = _fit(tmp_path, H100_2X8, "--nccl-version", "2.26.2")
    same = runner.invoke(app, ["table", "--topology", str(new), "--n", "16", "--schemes", "dp"])
    assert same.exit_code == 0 and "fitted on" not in same.stdout
    other = runner.invoke(app, ["table", "--topology", str(new), "--n", "16", "--gpus-per-node", "4",
                                "--schemes", "dp"])
    assert other.exit_code == 0, other.output
    assert "fitted on 2 nodes × 8 ranks, not 4 nodes × 4 ranks" in " ".join(other.stdout.split())
    old = runner.invoke(app, ["table", "--topology", str(OLD), "--n", "16", "--gpus-per-node", "4",
                              "--schemes", "dp"])
    assert old.exit_code == 0 and "fitted on" not in old.stdout


def _cal(nodes=0, per_node=0, bw=1.0):
    return Calibration("all_reduce", 16, "any", "any", 10.0, bw, "2.26.2", nodes=nodes,
                       ranks_per_node=per_node)


def test_shape_calibration_prefers_the_shape_then_the_unkeyed():
    other_op = Calibration("all_gather", 16, "any", "any", 1.0, 9.0, nodes=2, ranks_per_node=8)
    fits = (_cal(2, 8, 1.0), _cal(0, 0, 2.0), _cal(4, 4, 3.0), other_op)
    got, note = shape_calibration(fits, "all_reduce", 16, (4, 4))
    assert note == "" and [c.bw_GBps for c in got] == [9.0, 3.0]
    got, note = shape_calibration(fits, "all_reduce", 16, (16, 1))
    assert note == "" and [c.bw_GBps for c in got] == [9.0, 2.0]
    got, note = shape_calibration((_cal(2, 8), _cal(4, 4)), "all_reduce", 16, (16, 1))
    assert got == () and "fitted on 2 nodes × 8 ranks, 4 nodes × 4 ranks, not 16 nodes × 1 rank" in note
    assert shape_calibration((_cal(2, 8),), "all_reduce", 8, (1, 8)) == ((_cal(2, 8),), "")


@pytest.mark.parametrize(("nodes", "per_node"), [(2, 0), (0, 8), (3, 8), (2, 7), (-1, 8)])
def test_a_shape_that_cannot_hold_the_ranks_is_refused(nodes, per_node):
    with pytest.raises(ConfigError, match="nodes"):
        _cal(nodes, per_node)


def test_a_bad_shape_in_a_toml_is_one_line_exit_2(tmp_path):
    text = OLD.read_text().replace('nccl_version = "2.26.2"', 'nccl_version = "2.26.2"\nnodes = 3\n'
                                   'ranks_per_node = 8', 1)
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    res = runner.invoke(app, ["check", str(DATA / H100_2X8), "--topology", str(bad)])
    assert res.exit_code == 2 and "nccl_calibration" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    with pytest.raises(ConfigError):
        topology_from_mapping(tomllib.loads(text))


def test_a_second_sweep_of_the_same_key_is_said_not_written(tmp_path):
    """Two sweeps of all_reduce on 16 ranks whose hosts both state 2 nodes × 8 ranks (the NCCL 2.26.2 one
    and one stating no release) have one key: the TOML holds one calibration of it, the first sweep's, as
    fitting that sweep alone writes; the second is said not written, naming the first (its pairs were
    printed as fitted and dropped in silence)."""
    other = "all_reduce_perf-16xH100-2nodes.txt"
    assert sorted(listed_hosts(H100_2X8).values()) == sorted(listed_hosts(other).values()) == [8, 8]
    both, alone = tmp_path / "both.toml", tmp_path / "alone.toml"
    res = runner.invoke(app, ["fit", str(DATA / H100_2X8), str(DATA / other), "--out", str(both)])
    assert res.exit_code == 0, res.output
    res_alone = runner.invoke(app, ["fit", str(DATA / H100_2X8), "--out", str(alone)])
    assert res_alone.exit_code == 0, res_alone.output
    cals = tomllib.loads(both.read_text())["nccl_calibration"]
    assert cals == tomllib.loads(alone.read_text())["nccl_calibration"]
    said = [x for x in res.stdout.splitlines() if x.startswith(f"{DATA / other}: all_reduce on 16 ranks")]
    assert said == [f"{DATA / other}: all_reduce on 16 ranks (2 nodes × 8 ranks): not written, as "
                    f"{DATA / H100_2X8} calibrates the same collective, ranks, shape and series (one "
                    "calibration each; fit the sweeps to separate files to keep both)"], res.stdout


def test_fit_names_the_topology_it_chose_where_no_topology_was_given(tmp_path):
    """Without ``--topology`` every sweep is fitted on the preset the first one's device lines describe; a
    later sweep of another GPU (the 4 × 4 GH200 after the 2 × 8 H100 SXM) is said not to fit it, naming how
    it was chosen, not a ``--topology`` the user never gave."""
    assert {g for _, g in device_lines(H100_2X8)} != {g for _, g in device_lines(GH200_4X4)}
    args = ["fit", str(DATA / H100_2X8), str(DATA / GH200_4X4), "--out"]
    res = runner.invoke(app, [*args, str(tmp_path / "a.toml")])
    assert res.exit_code == 0, res.output
    said = [x for x in res.stdout.splitlines() if "does not fit the file" in x]
    assert len(said) == 1 and said[0].startswith(
        f"{DATA / GH200_4X4}: dgx-h100, the topology every sweep is fitted on, the first sweep's "
        f"({DATA / H100_2X8}), does not fit the file: "), res.stdout
    assert "--topology dgx-h100" not in res.stdout and said[0].endswith("(--topology to choose)")
    given = runner.invoke(app, [*args, str(tmp_path / "b.toml"), "--topology", "dgx-h100"])
    assert given.exit_code == 0, given.output
    assert f"{DATA / GH200_4X4}: --topology dgx-h100 does not fit the file: " in given.stdout
