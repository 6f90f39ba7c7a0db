"""``fit --out`` leaves out the sizes whose results failed nccl-tests' check (``#wrong`` above 0): their
times are failed runs', and a pair fitted on them carries that into every size it prices."""

from __future__ import annotations

import tomllib

from sweep_files import DATA, runner

from zerocalc.cli import app

GH200_4X4 = "all_reduce_perf-16xGH200-olivia-4nodes-int8-wrong-nccl2.29.2.txt"


def _failed_lines(name):
    """The row lines whose out-of-place ``#wrong`` cell (the 9th field) is above 0, by a plain split."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit() and f[8].isdigit() and int(f[8]) > 0:
            out.append(line)
    return out


def _fit(out, path):
    res = runner.invoke(app, ["fit", str(path), "--out", str(out)])
    return res, (tomllib.loads(out.read_text())["nccl_calibration"] if res.exit_code == 0 else None)


def test_failed_sizes_are_left_out_as_if_the_file_had_not_printed_them(tmp_path):
    """The 4 × 4 GH200 int8 sweep fails the check at 6 sizes (2-64 MiB). Its fit equals the fit of the same
    file with those row lines deleted, says how many it left out, and no pair's latency is above the
    longest time of a size that passed (fitted on the failed ones, Ring/LL128 at 2 MiB took 6.25 ms)."""
    failed = _failed_lines(GH200_4X4)
    assert len(failed) == 6
    text = (DATA / GH200_4X4).read_text()
    kept = tmp_path / "kept.txt"
    kept.write_text("".join(x for x in text.splitlines(keepends=True) if x.rstrip("\n") not in failed))
    res, cals = _fit(tmp_path / "a.toml", DATA / GH200_4X4)
    assert res.exit_code == 0, res.output
    said = [x for x in res.stdout.splitlines() if "failed nccl-tests' check" in x]
    assert len(said) == 1 and f"{len(failed)} of 28 sizes failed nccl-tests' check" in said[0]
    assert said[0].endswith(": left out of the fit, their times being the failed runs'")
    res_kept, cals_kept = _fit(tmp_path / "b.toml", kept)
    assert res_kept.exit_code == 0, res_kept.output
    assert "left out of the fit" not in res_kept.stdout
    assert cals == cals_kept
    passed = [float(f[5]) for line in text.splitlines() if line not in failed
              and len(f := line.split()) >= 13 and f[0].isdigit() and f[1].isdigit()]
    assert all(c.get("alpha_us", 0.0) <= max(passed) for c in cals)


def test_a_sweep_whose_every_size_failed_is_refused_in_one_line(tmp_path):
    """The same sweep cut to its 6 failed rows (its header and comment lines kept): nothing to fit, exit 2
    and one line naming how many sizes failed; no TOML is written."""
    failed = set(_failed_lines(GH200_4X4))
    lines = (DATA / GH200_4X4).read_text().splitlines(keepends=True)
    only = tmp_path / "failed.txt"
    only.write_text("".join(x for x in lines
                            if not (x.split() and x.split()[0].isdigit()) or x.rstrip("\n") in failed))
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(only), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "(6 failed it)" in res.output and len(res.output.strip().splitlines()) == 1
    assert not out.exists()


def test_plain_fit_leaves_out_the_failed_sizes_too(tmp_path):
    """``fit`` without ``--out`` fits the α-β line on the sizes that passed nccl-tests' check, as ``--out``
    does: on the 4 × 4 GH200 sweep it fits the 22 of 28 sizes a plain split finds passing (it fitted all
    28, the failed runs' 5-34 ms among them), equal to the fit of the file with the failed lines deleted,
    and says how many calls it left out and why."""
    import json

    failed = _failed_lines(GH200_4X4)
    text = (DATA / GH200_4X4).read_text()
    rows = [x for x in text.splitlines() if len(f := x.split()) >= 13 and f[0].isdigit() and f[1].isdigit()]
    kept = tmp_path / "kept.txt"
    kept.write_text("".join(x for x in text.splitlines(keepends=True) if x.rstrip("\n") not in failed))
    res = runner.invoke(app, ["fit", str(DATA / GH200_4X4), "--format", "json"])
    res_kept = runner.invoke(app, ["fit", str(kept), "--format", "json"])
    assert res.exit_code == 0 and res_kept.exit_code == 0, res.output + res_kept.output
    fit, fit_kept = json.loads(res.stdout), json.loads(res_kept.stdout)
    assert len(fit) == 1 and fit[0]["n_sizes"] == len(rows) - len(failed) == 22
    drop = ("file",)
    assert [{k: v for k, v in f.items() if k not in drop} for f in fit] == [
        {k: v for k, v in f.items() if k not in drop} for f in fit_kept]
    assert (f"{len(failed)} call(s) left out: failed nccl-tests' check (#wrong above 0)"
            in res.stderr), res.stderr
    assert "left out" not in res_kept.stderr
