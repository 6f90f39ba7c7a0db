"""``check``'s ``ends`` of a sweep: its fastest call (the latency floor) and the bus bandwidth of its
largest size, measured and predicted, in the text and in the JSON summary. The measured side is counted
from the file by a plain split (its out-of-place time and busbw columns); the predicted busbw is the
predicted time through nccl-tests' factor of each test (``GetBw`` in nccl-tests ``src/*.cu``), written
out here per test."""

from __future__ import annotations

import json

import pytest
from sweep_files import DATA, file_rows, runner

from zerocalc.cli import app

#: nccl-tests' busbw / algbw per test on n ranks, from its sources (all_reduce.cu 2(n-1)/n; all_gather.cu,
#: reduce_scatter.cu, alltoall.cu, scatter.cu, gather.cu (n-1)/n; broadcast.cu, reduce.cu, sendrecv.cu 1).
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
          "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
          "scatter": lambda n: (n - 1) / n, "gather": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0,
          "reduce": lambda n: 1.0, "sendrecv": lambda n: 1.0}


def _busbw_column(name):
    """The out-of-place busbw cell (the 8th field) of the file's last row, by a plain split."""
    last = [x.split() for x in (DATA / name).read_text().splitlines()
            if len(f := x.split()) >= 13 and f[0].isdigit() and f[1].isdigit()][-1]
    return float(last[7])


@pytest.mark.parametrize(("name", "args"), [
    ("all_reduce_perf-32xH100-4nodes-ib-nccl2.26.2.txt", ()),
    ("all_gather_perf-8xH100-1node-nccl2.29.2.txt", ()),
    ("reduce_scatter_perf-8xH100-1node-nccl2.29.2.txt", ()),
    ("alltoall_perf-16xA100-SXM4-40GB-sophia-2nodes-nccl2.22.3.txt", ()),
    ("broadcast_perf-8xH800-g8-info-c0-nccl2.18.3.txt", ()),
    ("reduce_perf-2xRTX2080Ti-pcie3-shm.txt", ()),
    ("sendrecv_perf-8xA100-g8-block.txt", ("--topology", "dgx-a100", "--n", "8")),
])
def test_ends_are_the_files_fastest_call_and_its_largest_sizes_busbw(name, args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (sweep,), (e,) = doc["sweeps"], doc["summary"]["sweeps"]
    rows = [r for r in file_rows(name) if r[0] > 0]  # a 0-byte row times no data: not priced
    fastest = min(rows, key=lambda r: r[1])
    assert (e["fastest_bytes"], e["fastest_measured_s"]) == (fastest[0], pytest.approx(fastest[1] * 1e-6))
    assert e["largest_bytes"] == rows[-1][0]
    assert e["largest_measured_busbw_GBps"] == pytest.approx(_busbw_column(name), abs=0.01)
    by_size = {r["bytes"]: r for r in sweep["rows"]}
    assert e["fastest_predicted_s"] == by_size[fastest[0]]["predicted_s"]
    n = sweep["group_size"]
    assert e["largest_predicted_busbw_GBps"] == pytest.approx(
        rows[-1][0] / by_size[rows[-1][0]]["predicted_s"] * FACTOR[sweep["op"]](n) / 1e9)
    text = runner.invoke(app, ["check", str(DATA / name), *args]).stdout
    (line,) = [x for x in text.splitlines() if x.startswith("  ends: fastest ")]
    assert f"at {e['largest_measured_busbw_GBps']:.3g} GB/s of bus bandwidth" in line


def test_a_sweep_whose_every_size_failed_has_no_ends(tmp_path):
    """The 4 × 4 GH200 int8 sweep cut to its 6 rows that failed nccl-tests' check: no end stands for the
    cluster, so the summary's ends are null and the text has no ``ends:`` line."""
    name = "all_reduce_perf-16xGH200-olivia-4nodes-int8-wrong-nccl2.29.2.txt"
    lines = (DATA / name).read_text().splitlines(keepends=True)
    keep = [x for x in lines if not (x.split() and x.split()[0].isdigit())
            or (len(f := x.split()) >= 13 and f[8].isdigit() and int(f[8]) > 0)]
    path = tmp_path / name
    path.write_text("".join(keep))
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (e,) = json.loads(res.stdout)["summary"]["sweeps"]
    assert e["fastest_bytes"] is None and e["largest_measured_busbw_GBps"] is None
    assert "ends:" not in runner.invoke(app, ["check", str(path)]).stdout


def test_the_summary_table_gives_each_sweeps_largest_busbw_measured_and_predicted():
    """Two sweeps checked together: the summary's ``busbw GB/s`` column reads ``measured/predicted`` at
    each sweep's largest size, the measured side the file's last busbw cell (366 on the 32 × H100 run)."""
    names = ["all_reduce_perf-32xH100-4nodes-ib-nccl2.26.2.txt",
             "all_gather_perf-8xH100-1node-nccl2.29.2.txt"]
    text = runner.invoke(app, ["check", *(str(DATA / n) for n in names)]).stdout.splitlines()
    head = next(i for i, x in enumerate(text) if x.startswith("summary of 2 sweeps"))
    end = text[head + 1].index("busbw GB/s") + len("busbw GB/s")  # a right-aligned column ends under its head
    for name, line in zip(names, text[head + 2:head + 4], strict=True):
        measured, _, predicted = line[:end].split()[-1].partition("/")
        assert float(measured) == pytest.approx(_busbw_column(name), rel=5e-3)
        assert float(predicted) > 0
