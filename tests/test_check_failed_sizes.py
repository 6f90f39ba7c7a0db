"""``check``'s ratios leave out the sizes whose results failed nccl-tests' check (``#wrong`` above 0), as
``fit`` does: the summary, the ``ratio:`` line and the bands are those of the sizes that passed, the failed
ones counted apart. Each expectation is the same file with the failed row lines deleted, by a plain split."""

from __future__ import annotations

import json

from sweep_files import DATA, runner

from zerocalc.cli import app

GH200_4X4 = "all_reduce_perf-16xGH200-olivia-4nodes-int8-wrong-nccl2.29.2.txt"
RATIOS = ("median_size_ratio", "min_ratio", "median_ratio", "max_ratio", "rows_in_band",
          "every_size_in_band", "median_size_in_band")


def _is_row(f):
    return len(f) >= 13 and f[0].isdigit() and f[1].isdigit()


def _split(tmp_path):
    """(the file's row lines that failed the check, a copy of the file without them, one with only them)."""
    lines = (DATA / GH200_4X4).read_text().splitlines(keepends=True)
    failed = [x for x in lines if _is_row(f := x.split()) and f[8].isdigit() and int(f[8]) > 0]
    kept, only = tmp_path / "kept.txt", tmp_path / "failed.txt"
    kept.write_text("".join(x for x in lines if x not in failed))
    only.write_text("".join(x for x in lines if not _is_row(x.split()) or x in failed))
    return failed, kept, only


def _check(path, *args):
    res = runner.invoke(app, ["check", str(path), *map(str, args)])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_the_summary_is_that_of_the_file_without_its_failed_rows(tmp_path):
    """The 4 × 4 GH200 int8 sweep fails at 6 of its 28 sizes. Its summary's ratios, band counts and
    verdicts equal those of the file with the 6 lines deleted; it keeps its 28 rows and counts 6 failed."""
    failed, kept, _ = _split(tmp_path)
    rows = [x for x in (DATA / GH200_4X4).read_text().splitlines() if _is_row(x.split())]
    assert (len(failed), len(rows)) == (6, 28)
    whole = json.loads(_check(DATA / GH200_4X4, "--format", "json"))["summary"]
    cut = json.loads(_check(kept, "--format", "json"))["summary"]
    (e,), (e_cut,) = whole["sweeps"], cut["sweeps"]
    assert {k: e[k] for k in RATIOS} == {k: e_cut[k] for k in RATIOS}
    assert (e["rows"], e["failed_rows"], e_cut["rows"], e_cut["failed_rows"]) == (28, 6, 22, 0)
    assert whole["totals"]["failed_rows"] == 6 and cut["totals"]["failed_rows"] == 0


def test_the_ratio_line_and_summary_table_say_the_failed_sizes_are_left_out(tmp_path):
    """The text's ``ratio:`` line reads as the cut file's, naming the 22 sizes it is over; the summary table
    of two sweeps says so in its head and gives 6 under ``failed``."""
    _, kept, _ = _split(tmp_path)
    (line,) = [x for x in _check(DATA / GH200_4X4).splitlines() if x.startswith("  ratio:")]
    (line_cut,) = [x for x in _check(kept).splitlines() if x.startswith("  ratio:")]
    assert line == line_cut.split(";  ")[0] + " (the 22 sizes that passed nccl-tests' check; x rows left out)"
    text = _check(DATA / GH200_4X4, kept).splitlines()
    head = next(i for i, x in enumerate(text) if x.startswith("summary of 2 sweeps"))
    assert "over the sizes that passed nccl-tests' check" in text[head]
    end = text[head + 1].index(" failed ") + len(" failed")  # a right-aligned column ends under its head
    assert (text[head + 2][:end].split()[-1], text[head + 3][:end].split()[-1]) == ("6", "0")


def test_a_sweep_whose_every_size_failed_has_no_ratios(tmp_path):
    """The same sweep cut to its 6 failed rows: priced row by row as before, but no ratio stands for it:
    the summary's ratios are null, it is within no band, and the ``ratio:`` line says why."""
    _, _, only = _split(tmp_path)
    doc = json.loads(_check(only, "--format", "json"))
    assert len(doc["sweeps"][0]["rows"]) == 6
    (e,) = doc["summary"]["sweeps"]
    assert [e[k] for k in ("median_size_ratio", "min_ratio", "median_ratio", "max_ratio")] == [None] * 4
    assert (e["failed_rows"], e["every_size_in_band"], e["median_size_in_band"]) == (6, False, False)
    assert "  ratio: none (each of the 6 sizes failed nccl-tests' check)" in _check(only).splitlines()
