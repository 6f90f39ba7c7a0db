"""rccl-tests 2.17.9 names the RCCL that ran: ``# rccl-tests version X rccl-headers=H rccl-library=L``.

Expected values come from the bundled files (a plain split of their lines; tests/data/traces/README.md names
their source): L and H are RCCL's ``NCCL_VERSION_CODE`` (major × 10000 + minor × 100 + patch, NCCL
``src/nccl.h.in``), so 22707 is RCCL 2.27.7 and 22803 is 2.28.3; the library is what ran, not the headers
rccl-tests was built against.
"""

import pytest
from sweep_files import DATA, check_json, file_rows, median_size_ratio

from zerocalc.nccl.predict import version_from_text
from zerocalc.traces import nccl_tests

AR_G8 = "all_reduce_perf-8xMI355X-g8-docker-rccl2.27.7.txt"
A2A_G8 = "alltoall_perf-8xMI355X-g8-docker-rccl2.27.7.txt"
AINIC = "all_reduce_perf-16xMI355X-2nodes-ainic-rccl2.27.7.txt"


def _header(name):
    """(tests version, headers code, library code) of the file's '# rccl-tests version' line, by a split."""
    line = next(x for x in (DATA / name).read_text().splitlines() if x.startswith("# rccl-tests version"))
    f = line.split()
    codes = dict(w.split("=") for w in f[4:])
    return f[3], int(codes["rccl-headers"]), int(codes["rccl-library"])


def _code(v):
    major, minor, patch = (int(x) for x in v.split("."))
    return major * 10000 + minor * 100 + patch


@pytest.mark.parametrize("name", [AR_G8, A2A_G8, AINIC])
def test_the_library_code_is_the_rccl_version(name):
    tests_version, headers, library = _header(name)
    with open(DATA / name) as f:
        (run,) = nccl_tests.parse(f, name).meta["runs"]
    assert _code(run["nccl_version"]) == library
    assert run["nccl_tests_version"] == tests_version
    assert _code(version_from_text((DATA / name).read_text().splitlines())) == library
    if name != AINIC:  # built against RCCL 2.28.3's headers, run on the 2.27.7 library
        assert headers != library


def test_one_node_mi355x_g8_priced_with_its_rccl():
    """The one-node -g 8 MI355X all-reduce states its RCCL only in that header: it is priced as RCCL 2.27.7
    (2.26.6's tables, the latest modelled), within both bands (its GPUs are named 'AMD Radeon Graphics')."""
    s = check_json(AR_G8, "--topology", "amd-mi355x")
    _, _, library = _header(AR_G8)
    assert _code(s["nccl_version"]) == library and s["nccl_tables"] == "RCCL 2.26.6"
    rows = s["rows"]
    assert len(rows) == len(file_rows(AR_G8)) == 29
    assert all(0.5 <= r["ratio"] <= 2 for r in rows), [(r["bytes"], round(r["ratio"], 2)) for r in rows]
    assert 0.8 <= median_size_ratio(s) <= 1.25
    assert not any("states no RCCL version" in n for n in s["notes"])


def test_one_node_mi355x_g8_all_to_all_within_the_wide_band():
    rows_in = [r for r in file_rows(A2A_G8) if r[0] > 0]
    s = check_json(A2A_G8, "--topology", "amd-mi355x", counted=lambda n: rows_in)
    _, _, library = _header(A2A_G8)
    assert _code(s["nccl_version"]) == library and len(s["rows"]) == len(rows_in) == 21
    assert all(0.5 <= r["ratio"] <= 2 for r in s["rows"])

