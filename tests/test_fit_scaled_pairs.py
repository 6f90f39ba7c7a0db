"""``fit --out``'s pair NCCL chose at too few sizes for a fit of its own: priced by the model × the fitted
pairs' time over the model's at the sweep's sizes next to it (``model_scale``), not by the sweep-wide fit."""

from __future__ import annotations

import math
import tomllib

import pytest
from sweep_files import DATA, check_json, file_rows, runner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.topology import Calibration, topology_from_mapping, topology_to_mapping

H100_2X8 = "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"


def _fit(tmp_path, name, *extra):
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / name), "--out", str(out), *extra])
    assert res.exit_code == 0, res.output
    return out, tomllib.loads(out.read_text())["nccl_calibration"], res.stdout


def test_a_pair_chosen_at_two_sizes_is_the_model_scaled_by_its_neighbours(tmp_path):
    """The 2 × 8 H100 sweep: NCCL 2.26.2 picks Tree/LL128 at 256 and 512 KiB alone (Tree/LL below, NVLS
    Tree above). Its scale is the geometric mean of fitted / model at 128 KiB (Tree/LL's fit) and 1 MiB (NVLS
    Tree's), by hand from the TOML's α-β and the uncalibrated model's time there; its rows are the model's
    time × that scale; the ratio at the median size (the file's 16th of 32 rows, 256 KiB) is within 0.8-1.25
    where the sweep-wide fit gave 0.68."""
    sizes = [s for s, _, _ in file_rows(H100_2X8)]
    assert len(sizes) == 32 and sorted(sizes)[(32 - 1) // 2] == 262144
    out, cals, said = _fit(tmp_path, H100_2X8, "--nccl-version", "2.26.2")
    by_pair = {(c["algorithm"], c["protocol"]): c for c in cals}
    scaled = by_pair[("Tree", "LL128")]
    assert "alpha_us" not in scaled and "bw_GBps" not in scaled and scaled["model_scale"] > 0
    assert "Tree/LL128: the model's time ×" in said
    plain = check_json(H100_2X8, "--topology", "dgx-h100", "--nccl-version", "2.26.2")
    rows = {r["bytes"]: r for r in plain["rows"]}
    assert [rows[n]["protocol"] for n in (131072, 262144, 524288, 1048576)] == [
        "LL", "LL128", "LL128", "Simple"]

    def fitted(pair, n):
        c = by_pair[pair]
        return c["alpha_us"] * 1e-6 + n / (c["bw_GBps"] * 1e9)

    want = math.sqrt(fitted(("Tree", "LL"), 131072) / rows[131072]["nccl_s"]
                     * fitted(("NVLSTree", "Simple"), 1048576) / rows[1048576]["nccl_s"])
    assert scaled["model_scale"] == pytest.approx(want)
    calibrated = check_json(H100_2X8, "--topology", str(out))
    again = {r["bytes"]: r for r in calibrated["rows"]}
    for n in (262144, 524288):
        assert again[n]["calibrated"] and again[n]["predicted_s"] == pytest.approx(rows[n]["nccl_s"] * want)
    measured = dict((s, t * 1e-6) for s, t, _ in file_rows(H100_2X8))
    assert 0.8 <= again[262144]["predicted_s"] / measured[262144] <= 1.25
    assert any("Tree/LL128 calls (chosen at too few sizes" in n for n in calibrated["notes"])


def test_without_a_pair_of_three_sizes_the_sweep_wide_fit_prices_every_pair():
    """Two timed sizes, one pair each or one pair at both: nothing to scale by, the sweep-wide fit alone."""
    from zerocalc.validate.sweep import SweepComparison, fit_calibration

    rows = ({"bytes": 1024, "measured_s": 20e-6, "algorithm": "Ring", "protocol": "LL", "nccl_s": 10e-6},
            {"bytes": 2048, "measured_s": 30e-6, "algorithm": "Ring", "protocol": "LL128", "nccl_s": 15e-6})
    fits = fit_calibration(SweepComparison("all_reduce", 8, "2.26.2", "2.26", (), rows))
    assert [(c.algorithm, c.model_scale) for c in fits] == [("any", 0.0)]
    # the line through both: α = 10 µs, 1 / β = 1024 B / 10 µs
    assert fits[0].alpha_us == pytest.approx(10.0) and fits[0].bw_GBps == pytest.approx(1024 / 10e-6 / 1e9)


def test_scale_from_one_side_where_the_pair_ends_the_sweep():
    """A pair at the sweep's largest size has fitted sizes below it alone: its scale is the nearest one's."""
    from zerocalc.validate.sweep import SweepComparison, fit_calibration

    rows = tuple({"bytes": n, "measured_s": 2 * t, "algorithm": "Ring", "protocol": "LL", "nccl_s": t}
                 for n, t in ((1024, 10e-6), (2048, 12e-6), (4096, 16e-6)))
    rows += ({"bytes": 8192, "measured_s": 50e-6, "algorithm": "Ring", "protocol": "Simple",
              "nccl_s": 20e-6},)
    fits = {(c.algorithm, c.protocol): c for c in fit_calibration(SweepComparison("all_reduce", 8, "2.26.2",
                                                                                   "2.26", (), rows))}
    ll = fits[("Ring", "LL")]  # through (1024, 20 µs), (2048, 24 µs), (4096, 32 µs): α = 16 µs, β = 4 µs/KiB
    assert ll.alpha_us == pytest.approx(16.0) and ll.bw_GBps == pytest.approx(1024 / 4e-6 / 1e9)
    assert fits[("Ring", "Simple")].model_scale == pytest.approx(32e-6 / 16e-6)
    assert fits[("Ring", "Simple")].time_s(8192, 20e-6) == pytest.approx(40e-6)


def test_a_scaled_pair_round_trips_and_bad_ones_are_refused():
    base = {"gpus_per_node": 8, "intra": {"alpha_us": 3, "bw_GBps": 300},
            "inter": {"alpha_us": 14, "bw_GBps": 50}}
    pair = {"op": "all_reduce", "ranks": 16, "algorithm": "Tree", "protocol": "LL128"}
    topo = topology_from_mapping({**base, "nccl_calibration": [{**pair, "model_scale": 1.5}]})
    (c,) = topo.nccl_calibration
    assert (c.model_scale, c.alpha_us, c.bw_GBps) == (1.5, 0.0, 0.0)
    assert c.time_s(1e6, 2e-5) == pytest.approx(3e-5)
    assert "alpha_us" not in topology_to_mapping(topo)["nccl_calibration"][0]
    for bad, word in (({**pair}, "alpha_us"), ({**pair, "model_scale": 1.5, "alpha_us": 3.0}, "alpha_us"),
                      ({**pair, "model_scale": -1.0}, "model_scale")):
        with pytest.raises(ConfigError, match=word):
            topology_from_mapping({**base, "nccl_calibration": [bad]})
    with pytest.raises(ConfigError, match="bw_GBps"):
        Calibration("all_reduce", 16, "Ring", "LL", 1.0, 0.0)


@pytest.mark.parametrize(("edit", "said"), [
    (lambda t: t.replace("protocol = \"LL128\"\n", "protocol = \"LL128\"\nalpha_us = 3.0\n", 1),
     "give model_scale or alpha_us and bw_GBps, not both: a pair is priced by the model scaled or by a line "
     "(got model_scale = 1.5, alpha_us = 3.0)"),
    (lambda t: t.replace("ranks_per_node = 8\n", "", 1),
     "nodes and ranks_per_node must both be 0 (a key left out is 0) or hold the 16 ranks (ranks filling "
     "nodes of ranks_per_node), got nodes = 2, ranks_per_node = 0"),
])
def test_a_calibration_edited_by_hand_is_refused_naming_what_to_change(tmp_path, edit, said):
    """A user's edit of a written calibration: a scaled pair given a line too, or ``ranks_per_node`` deleted
    beside ``nodes``, is one line naming both keys and their values (it said "alpha_us must be 0", and
    "got 2 and 0" for a key the file no longer has)."""
    text = ('gpus_per_node = 8\n[intra]\nalpha_us = 3\nbw_GBps = 300\n[inter]\nalpha_us = 14\nbw_GBps = 50\n'
            '[[nccl_calibration]]\nop = "all_reduce"\nranks = 16\nalgorithm = "Tree"\nprotocol = "LL128"\n'
            'model_scale = 1.5\nnodes = 2\nranks_per_node = 8\n')
    f = tmp_path / "c.toml"
    f.write_text(edit(text))
    res = runner.invoke(app, ["table", "--topology", str(f), "--n", "16"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert res.stderr == f"error: --topology: {f}: [[nccl_calibration]] #1: {said}\n"
