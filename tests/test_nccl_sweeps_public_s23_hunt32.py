"""check on public runs of PCIe cards and 2-rank runs whose file names no test
(tests/data/traces/README.md names each file's source):

- Two AWS ``g7e.8xlarge`` instances, one ``NVIDIA RTX PRO 6000 Blackwell Server Edition`` and one EFA each
  (aws-ofi-nccl 1.18.0, GPUDirect RDMA off, so its plugin forces ``NCCL_PROTO=simple``), NCCL 2.29.2,
  all-reduce of 8 B-1 GiB. No preset holds a PCIe card over EFA: check asks for ``--topology``; a user whose
  page says 100 Gb/s of EFA gives ``ethernet-100g`` (one 100 Gb/s NIC a node).
- Two hosts of ``NVIDIA H100 80GB HBM3``, one GPU each, over one RoCE port (NCCL 2.26.2), an all-reduce and a
  sendrecv of 1-25 GiB whose files carry no ``<test>_perf`` (the command was in a README apart) and whose
  names do not either. On 2 ranks busbw = algbw for both tests; what tells them apart is the in-place
  ``#wrong`` cell: sendrecv checks no in-place result and prints ``N/A`` there (nccl-tests
  ``src/sendrecv.cu`` since its first version, 9dae3d3, Jun 2021: ``args->reportErrors = in_place ? 0 :
  1``), all_reduce prints its count; check tells them by it.

What each test expects is counted from the file itself by a plain split (rows, '#  Rank' lines, ``NCCL
version`` lines, the in-place ``#wrong`` cells), not through zerocalc. The bands are issue 11's (0.5-2x at
every size, 0.8-1.25x at the median size), held as a regression guard where met.
"""

import json
import shutil

import pytest
from sweep_files import (
    DATA,
    assert_within_both_bands,
    check_json,
    device_lines,
    file_rows,
    lines,
    runner,
    stated_versions,
)

from zerocalc.cli import app

G7E = "all_reduce_perf-2xRTXPRO6000-aws-g7e-2nodes-efa-nccl2.29.2.txt"
RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
MOC = {"all_reduce": "allreduce-2xH100-moc-2nodes-roce-no-test-name-nccl2.26.2.log",
       "sendrecv": "sendrecv-2xH100-moc-2nodes-roce-no-test-name-nccl2.26.2.log"}
#: bundled 2-rank runs whose files hold no ``<test>_perf``: only their names say the test
NAMED_BY_FILE_NAME = {"all_reduce": "all_reduce_perf-2xA100-SXM4-80GB-g2-docker-nccl2.20.5.txt",
                      "sendrecv": "sendrecv_perf-2xA100-SXM4-80GB-g2-docker-nccl2.20.5.txt"}


def inplace_wrong(name):
    """The in-place ``#wrong`` cell (the last field) of each row, by a plain split."""
    return [line.split()[-1] for line in lines(name)
            if len(line.split()) >= 13 and line.split()[0].isdigit() and line.split()[1].isdigit()]


# --- two g7e.8xlarge over EFA ------------------------------------------------------------------------------


def test_g7e_run_asks_for_a_topology_in_one_line():
    """No preset holds an RTX PRO 6000 with EFA: exit 2, one line naming the file, the network and
    --topology, no traceback."""
    res = runner.invoke(app, ["check", str(DATA / G7E)])
    assert res.exit_code == 2
    (line,) = res.output.strip().splitlines()
    assert G7E in line and "AWS EFA" in line and "--topology" in line and RTX_PRO in line


def test_g7e_run_is_read_as_its_lines_say():
    """2 ranks, one RTX PRO 6000 on each of gpu-st-ml-1 and gpu-st-ml-2; NCCL 2.29.2 by both lines; the
    plugin forces the Simple protocol on both (``Adding NCCL_PROTO=simple``) and connects them without
    GDRDMA (``GDR 0``); 28 rows of 8 B-1 GiB, every one priced on Simple."""
    assert device_lines(G7E) == [("gpu-st-ml-1", RTX_PRO), ("gpu-st-ml-2", RTX_PRO)]
    assert stated_versions(G7E) == ["2.29.2", "2.29.2"]
    assert sum("Adding NCCL_PROTO=simple" in e for e in lines(G7E)) == 2
    assert sum(e.endswith("use ring PXN 0 GDR 0") for e in lines(G7E)) == 2
    assert [s for s, _, _ in file_rows(G7E)] == [8 << k for k in range(28)]
    sweep = check_json(G7E, "--topology", "ethernet-100g")
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == ("all_reduce", 2, "ethernet-100g")
    assert sweep["nccl_version"] == "2.29.2"
    assert {r["protocol"] for r in sweep["rows"]} == {"Simple"}


def test_g7e_run_on_a_100g_ethernet_node_is_within_both_bands():
    """A regression guard: 0.73-1.57x at every size, 1.04x at the median size. From 16 MiB the run moves
    12.0-12.4 GB/s, all of the 100 Gb/s EFA though through host memory, where the model gives the host
    path 2/3 of it (1.5-1.57x from 8 MiB)."""
    sweep = check_json(G7E, "--topology", "ethernet-100g")
    assert_within_both_bands(sweep)
    big = [r for r in file_rows(G7E) if r[0] >= 16 << 20]
    assert all(12.0 <= s / t / 1e3 <= 12.5 for s, t, _ in big)


# --- two H100 hosts over RoCE, the test named by neither file nor name -------------------------------------


@pytest.mark.parametrize("op", sorted(MOC))
def test_moc_runs_are_told_by_their_inplace_check(op):
    """2 ranks, one H100 on each of two hosts, NCCL 2.26.2 on its line, no ``_perf`` anywhere in the
    file or its name; the in-place ``#wrong`` cells are 0 (all_reduce) or N/A (sendrecv) on all 13 rows
    of 1-25 GiB, and check reads the test from them with no option."""
    name = MOC[op]
    assert "_perf" not in name and not any("_perf" in e for e in lines(name))
    assert [h for h, _ in device_lines(name)] == ["MOC-R4PCC04U37", "MOC-R4PCC04U35"]
    assert {g for _, g in device_lines(name)} == {"NVIDIA H100 80GB HBM3"}
    assert stated_versions(name) == ["2.26.2"]
    assert inplace_wrong(name) == ["0" if op == "all_reduce" else "N/A"] * 13
    sweep = check_json(name)
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == (op, 2, "dgx-h100")
    assert sweep["nccl_version"] == "2.26.2"


def test_moc_all_reduce_is_within_both_bands():
    """A regression guard: 0.94-0.95x at every size."""
    assert_within_both_bands(check_json(MOC["all_reduce"]))


def test_moc_sendrecv_is_within_both_bands():
    """A regression guard: 0.87x at every size. The sendrecv moves 13.9-14.0 GB/s each way (the same hosts'
    all-reduce 15.0 GB/s of bus bandwidth), priced, as the all-reduce, through host memory at 2/3 of the
    Ring graph's 24 GB/s (tests/test_nccl_p2p_host_memory.py derives it by hand)."""
    sweep = check_json(MOC["sendrecv"])
    assert_within_both_bands(sweep)
    assert all(0.85 <= r["ratio"] <= 0.9 for r in sweep["rows"])


@pytest.mark.parametrize("op", sorted(NAMED_BY_FILE_NAME))
def test_two_rank_run_is_told_without_its_file_name(tmp_path, op):
    """A bundled 2-rank run whose test only its file name gave, copied under a name that says none: read
    as the same test, told by its in-place ``#wrong`` cells."""
    src = NAMED_BY_FILE_NAME[op]
    assert not any("_perf" in e for e in lines(src))
    assert set(inplace_wrong(src)) == ({"0"} if op == "all_reduce" else {"N/A"})
    path = tmp_path / "run-2gpus.txt"
    shutil.copy(DATA / src, path)
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert (sweep["op"], sweep["group_size"]) == (op, 2)


def test_two_rank_run_without_any_check_stays_refused(tmp_path):
    """The same all-reduce with its ``#wrong`` cells printed N/A on both sides (nccl-tests ``-c 0``): nothing
    tells all_reduce from sendrecv; exit 2, one line naming the file."""
    src = NAMED_BY_FILE_NAME["all_reduce"]
    out = []
    for line in lines(src):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            line = "  ".join(f[:8] + ["N/A"] + f[9:12] + ["N/A"])
        out.append(line)
    path = tmp_path / "run-2gpus.txt"
    path.write_text("\n".join(out) + "\n")
    assert set(inplace_wrong_of(path)) == {("N/A", "N/A")}
    res = runner.invoke(app, ["check", str(path)])
    assert res.exit_code == 2
    (line,) = res.output.strip().splitlines()
    assert "run-2gpus.txt" in line and "all_reduce or sendrecv" in line


def inplace_wrong_of(path):
    """(out-of-place, in-place) ``#wrong`` cells of each row of ``path``, by a plain split."""
    return [(f[8], f[-1]) for f in map(str.split, path.read_text().splitlines())
            if len(f) >= 13 and f[0].isdigit() and f[1].isdigit()]
