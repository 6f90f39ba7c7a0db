"""A file of two rccl-tests runs, an all-reduce (RCCL's table) and an all-to-all (RCCL's grouped sends,
zerocalc.nccl.rccl_p2p): both priced; an op zerocalc leaves unpriced under RCCL (alltoallv) is refused in one
line when alone in a file.

The file: OCI's MI355X quick start (oracle-quickstart/oci-gpu-quickstarts, ``amd/MI355X/README-MI355X.md``),
its "All Reduce" and "All 2 All" result blocks on one node of 8 MI355X (``-g 8``), one after the other.
Expected values are read off the file by a plain split."""

import json

from sweep_files import DATA
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
NAME = "all_reduce-alltoall-8xMI355X-oci-g8.txt"


def _blocks():
    """(test name, [(size, out-of-place µs)]) per '# Collective test starting' block, by a plain split."""
    out = []
    for line in (DATA / NAME).read_text().splitlines():
        f = line.split()
        if line.startswith("# Collective test starting:"):
            out.append((f[-1], []))
        elif len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            out[-1][1].append((int(f[0]), float(f[5])))
    return out


def test_the_all_reduce_and_the_all_to_all_are_priced():
    res = runner.invoke(app, ["check", str(DATA / NAME), "--format", "json"])
    assert res.exit_code == 0, res.output
    sweeps = json.loads(res.stdout)["sweeps"]
    (ar_name, ar_rows), (a2a_name, a2a_rows) = _blocks()
    assert (ar_name, a2a_name) == ("all_reduce_perf", "alltoall_perf") and len(a2a_rows) == 2
    assert [(s["op"], s["group_size"]) for s in sweeps] == [("all_reduce", 8), ("all_to_all", 8)]
    ar, a2a = sweeps
    assert [(r["bytes"], round(r["measured_s"] * 1e6, 3)) for r in ar["rows"]] == ar_rows
    assert all(r["predicted_s"] > 0 for r in ar["rows"])
    assert [(r["bytes"], round(r["measured_s"] * 1e6, 3)) for r in a2a["rows"]] == a2a_rows
    # 8-16 GiB on one node: each GPU's 7/8 of the buffer over its 7 xGMI links, one per peer
    assert all(r["algorithm"] == "P2P" and 0.8 <= r["ratio"] <= 1.25 for r in a2a["rows"]), a2a["rows"]
    assert any("src/collectives.cc" in n for n in a2a["notes"])


def test_a_file_of_an_unpriced_op_alone_is_one_line_and_exit_2(tmp_path):
    """The all-to-all block renamed alltoallv_perf (uneven counts per peer, which the count column does not
    tell): an op zerocalc does not price under RCCL."""
    lines = (DATA / NAME).read_text().splitlines(True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("# Collective test starting: alltoall"))
    alone = tmp_path / "alltoallv_perf-8xMI355X.txt"
    alone.write_text("".join(lines[start:]).replace("alltoall_perf", "alltoallv_perf"))
    res = runner.invoke(app, ["check", str(alone), "--topology", "amd-mi355x"])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and "alltoallv under RCCL is not modelled" in res.output
