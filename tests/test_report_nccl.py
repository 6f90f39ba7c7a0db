"""`zerocalc report` priced with NCCL's cost model under `--nccl-version`, `--nccl-algo`, `--nccl-proto` and
`--nccl-env`, as `table` prices it; and `report --trace -` (a trace piped on standard input).

The report's NCCL time of a scheme is derived by hand from NCCL's ``ncclTopoTuneModel`` (v2.30.7
``src/graph/tuning.cc``: time = latency + bytes / algorithm bandwidth), with the figures the other hand
derivations of this suite cite (test_nccl_single_node.py, test_nccl_few_gpus_one_node.py); the table's
figures under the same options are a consistency check beside it, never the expected value.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.report.config import ReportConfig
from zerocalc.report.sweeps import nccl_priced

runner = CliRunner()
KINETO = Path(__file__).parent / "data" / "traces" / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"

#: One DGX A100 node (8 ranks), Ψ = 1e9 fp16 parameters: dp's one all-reduce and zero2's reduce-scatter and
#: all-gather each move Ψ × 2 bytes = 2e9 bytes, on the whole node.
ONE_NODE = {"psi": 1e9, "n": 8, "gpus_per_node": 8, "topology": "dgx-a100"}
RING_SIMPLE = {"nccl_algo": "Ring", "nccl_proto": "Simple", "nccl_version": "2.30.7"}
BYTES = 2e9
#: tuning.cc v2.30.7 on one node: Ring/Simple latency baseLat 8.4 µs + nsteps × hwLat[NVLINK][Ring][Simple]
#: 3.4 µs (nsteps: 2(n-1) for an all-reduce, n-1 for a reduce-scatter or all-gather); bus bandwidth of an
#: HGX A100 node's ring, 12 channels × 20 GB/s (SM80 NVLink), over nsteps/n for the algorithm bandwidth
RANKS, BASE_US, HOP_US, BUS_GBPS = 8, 8.4, 3.4, 12 * 20.0


def _ring_simple_s(steps: int) -> float:
    return (BASE_US + steps * HOP_US) * 1e-6 + BYTES / (BUS_GBPS * 1e9 * RANKS / steps)


def test_ring_simple_rows_are_nccls_formula_by_hand():
    frame, notes = nccl_priced(ReportConfig(**ONE_NODE, **RING_SIMPLE))
    rows = frame.set_index("scheme")
    assert rows.loc["dp", "nccl_choice"] == "AR Ring/Simple"
    assert rows.loc["dp", "time_s_nccl"] == pytest.approx(_ring_simple_s(2 * (RANKS - 1)), rel=1e-9)
    assert rows.loc["zero2", "nccl_choice"] == "RS Ring/Simple; AG Ring/Simple"
    assert rows.loc["zero2", "time_s_nccl"] == pytest.approx(2 * _ring_simple_s(RANKS - 1), rel=1e-9)
    assert any("NCCL_ALGO=Ring, NCCL_PROTO=Simple" in n for n in notes)


def test_nccl_env_prices_what_nccl_reads_and_names_the_rest():
    """NCCL_NVLS_ENABLE=0 keeps NCCL off NVLink SHARP (NCCL's environment documentation), which it picks on
    one HGX H100 node by itself; a variable NCCL's cost model does not read is said in a note."""
    h100 = {"psi": 1e9, "n": 8, "gpus_per_node": 8, "topology": "dgx-h100"}
    own, _ = nccl_priced(ReportConfig(**h100, nccl_version="2.30.7"))
    env = (("NCCL_NVLS_ENABLE", "0"), ("NCCL_SOCKET_IFNAME", "eth0"))
    off, notes = nccl_priced(ReportConfig(**h100, nccl_version="2.30.7", nccl_env=env))
    assert "NVLS" in own.set_index("scheme").loc["dp", "nccl_choice"]
    assert not any("NVLS" in c for c in off["nccl_choice"])
    assert any("priced: NCCL_NVLS_ENABLE=0" in n for n in notes)
    assert any("NCCL_SOCKET_IFNAME=eth0, which NCCL's cost model does not price" in n for n in notes)


def test_report_prices_as_table_does_with_the_same_options():
    options = ["--nccl-algo", "Ring,Tree", "--nccl-version", "2.21.5", "--nccl-env", "NCCL_MAX_NCHANNELS=4"]
    res = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "16", "--psi", "1e9", "--format",
                              "json", *options])
    assert res.exit_code == 0, res.output
    table = {r["scheme"]: r for r in json.loads(res.stdout)}
    frame, _ = nccl_priced(ReportConfig(psi=1e9, n=16, gpus_per_node=8, topology="dgx-h100",
                                        nccl_algo="Ring,Tree", nccl_version="2.21.5",
                                        nccl_env=(("NCCL_MAX_NCHANNELS", "4"),)))
    assert list(frame["scheme"]) == list(table)
    for r in frame.itertuples(index=False):
        assert r.nccl_choice == table[r.scheme]["nccl_choice"]
        assert r.time_s_nccl == pytest.approx(table[r.scheme]["time_s_nccl"], rel=1e-12)
    assert not any("NVLS" in c for c in frame["nccl_choice"])


@pytest.mark.parametrize(("args", "needle"), [
    (["--nccl-version", "9.9"], "--nccl-version: NCCL 9.9.0 is not modelled"),
    (["--nccl-algo", "NVLS"], "no algorithm/protocol that NCCL_ALGO / NCCL_PROTO allow can run"),
    (["--nccl-proto", "Fast"], "NCCL_PROTO"),
    (["--nccl-env", "NCCL_MAX_NCHANNELS"], "--nccl-env: 'NCCL_MAX_NCHANNELS': give NCCL_NAME=VALUE"),
    (["--nccl-env", "NCCL_MAX_NCHANNELS=four"], "--nccl-env: NCCL_MAX_NCHANNELS=four: NCCL reads a whole"),
    (["--nccl-algo", "Ring", "--nccl-env", "NCCL_ALGO=Tree"], "NCCL_ALGO given twice"),
])
def test_bad_nccl_input_is_one_line_exit_2_and_no_pdf(tmp_path, no_work, args, needle):
    out = tmp_path / "r.pdf"
    out.write_bytes(b"%PDF-1.4 an earlier report\n")
    res = runner.invoke(app, ["report", "-o", str(out), "--topology", "dgx-a100", *args])
    assert res.exit_code == 2, res.output
    err = res.stderr
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in res.output, err
    assert needle in err, err
    assert no_work == [] and out.read_bytes() == b"%PDF-1.4 an earlier report\n"


def test_options_and_the_shells_nccl_algo_reach_the_report(tmp_path, no_work):
    res = runner.invoke(app, ["report", "-o", str(tmp_path / "r.pdf"), "--nccl-version", "2.21.5",
                              "--nccl-proto", "Simple", "--nccl-env", "NCCL_MAX_NCHANNELS=0x4",
                              "--nccl-env", "NCCL_ALGO="], env={"NCCL_ALGO": None})
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", "-o", str(tmp_path / "s.pdf")], env={"NCCL_ALGO": "Ring"})
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", "-o", str(tmp_path / "t.pdf")], env={"NCCL_ALGO": None,
                                                                            "NCCL_PROTO": None})
    assert res.exit_code == 0, res.output
    given, shell, stock = no_work
    assert (given.nccl_version, given.nccl_algo, given.nccl_proto) == ("2.21.5", None, "Simple")
    assert given.nccl_env == (("NCCL_MAX_NCHANNELS", "4"), ("NCCL_ALGO", "")) and given.nccl_priced
    assert shell.nccl_algo == "Ring" and shell.nccl_priced  # as table's --nccl-algo reads the shell's
    assert not stock.nccl_priced and stock.nccl_env == ()


def test_report_reads_a_trace_on_standard_input_and_says_what_it_priced_under(tmp_path):
    """One render: the trace piped in is checked as the file is (named <stdin>), page 1 states the NCCL
    release and restrictions beside the topology, and the NCCL table's dp row is the hand figure."""
    pypdf = pytest.importorskip("pypdf")
    from zerocalc.units import format_seconds

    out = tmp_path / "r.pdf"
    res = runner.invoke(app, ["report", "-o", str(out), "--trace", "-", "--psi", "1e9", "--n", "8",
                              "--topology", "dgx-a100", "--nccl-algo", "Ring", "--nccl-proto", "Simple",
                              "--nccl-version", "2.30.7"], input=KINETO.read_bytes())
    assert res.exit_code == 0, res.output
    pages = [" ".join(p.extract_text().split()) for p in pypdf.PdfReader(str(out)).pages]
    assert ("topology dgx-a100, fp16 communication, K = 12 bytes of optimizer state per parameter; NCCL's "
            "cost model: NCCL 2.30.7 under NCCL_ALGO=Ring, NCCL_PROTO=Simple") in pages[0]
    (table_page,) = [p for p in pages if "NCCL's choice T NCCL T ring" in p]
    assert f"dp AR Ring/Simple {format_seconds(_ring_simple_s(2 * (RANKS - 1)))}" in table_page
    assert any("Trace <stdin>" in p for p in pages)
    (plan,) = [p for p in pages if "Implementation plan, priced on the chosen cluster" in p]
    assert "time by NCCL 2.30's own cost model" in plan
    assert "the plan under the same version and NCCL_ALGO / NCCL_PROTO" in plan
    # restricted to Ring/Simple: every pair the plan names is one
    pairs = re.findall(r"\b(?:AR|AG|RS|BC|R|A2A) (\w+/\w+)", plan)
    assert pairs and set(pairs) <= {"Ring/Simple", "P2P/Simple"}
    assert not list(tmp_path.glob(".*partial")) and not any("zerocalc-input-" in p for p in pages)


@pytest.mark.slow
def test_report_reads_a_fifo_as_a_shell_process_substitution_gives_it(tmp_path):
    """A FIFO (``--trace <(ssh host cat rank0.json.gz)``) is read once, as check reads one; the validation
    names it as given."""
    fifo = tmp_path / "trace"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as w, open(KINETO, "rb") as r:
            shutil.copyfileobj(r, w)

    writer = threading.Thread(target=feed)
    writer.start()
    out = tmp_path / "r.pdf"
    res = subprocess.run([sys.executable, "-m", "zerocalc", "report", "-o", str(out), "--trace", str(fifo)],
                         capture_output=True, timeout=600)
    writer.join(timeout=10)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes().startswith(b"%PDF-")


def test_a_calibrated_topology_is_priced_at_its_release_unless_one_is_given(tmp_path, no_work):
    """A topology ``fit --out`` calibrated: the report prices the schemes with NCCL's model at the release the
    calibration names (read from the TOML here), as check and table do when nothing states one; a given
    --nccl-version comes first."""
    import tomllib

    from zerocalc.report.config import nccl_words

    sweep = KINETO.parents[1] / "nccl-tests" / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"
    toml = tmp_path / "cal.toml"
    res = runner.invoke(app, ["fit", str(sweep), "--out", str(toml), "--topology", "dgx-h100"])
    assert res.exit_code == 0, res.output
    (fitted,) = {c["nccl_version"] for c in tomllib.loads(toml.read_text())["nccl_calibration"]}
    for args in ([], ["--nccl-version", "2.30.7"]):
        res = runner.invoke(app, ["report", "-o", str(tmp_path / "r.pdf"), "--topology", str(toml),
                                  "--n", "16", "--psi", "1e9", *args])
        assert res.exit_code == 0, res.output
    calibrated, given = no_work
    assert calibrated.nccl_priced
    assert nccl_words(calibrated) == f"NCCL's cost model: NCCL {fitted} (its calibration's)"
    assert nccl_words(given) == "NCCL's cost model: NCCL 2.30.7"
    res = runner.invoke(app, ["table", "--topology", str(toml), "--n", "16", "--psi", "1e9", "--format",
                              "json"])
    table = {r["scheme"]: r for r in json.loads(res.stdout)}
    frame, notes = nccl_priced(calibrated)
    release = ".".join(fitted.split(".")[:2])
    assert any(n.startswith(f"NCCL {release}'s own cost model") for n in notes)
    for r in frame.itertuples(index=False):
        assert (r.nccl_choice, r.time_s_nccl) == (table[r.scheme]["nccl_choice"],
                                                  table[r.scheme]["time_s_nccl"])


def test_table_takes_nccl_env_and_refuses_a_bad_one_in_one_line():
    args = ["table", "--topology", "dgx-h100", "--n", "8", "--psi", "1e9", "--format", "json"]
    res = runner.invoke(app, [*args, "--nccl-env", "NCCL_NVLS_ENABLE=0"])
    assert res.exit_code == 0, res.output
    assert not any("NVLS" in r["nccl_choice"] for r in json.loads(res.stdout))
    assert "note: NCCL environment --nccl-env sets, priced: NCCL_NVLS_ENABLE=0" in res.stderr
    res = runner.invoke(app, [*args, "--nccl-env", "NVLS_ENABLE=0"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert res.stderr.startswith("error: --nccl-env: 'NVLS_ENABLE=0': 'NVLS_ENABLE' is not an NCCL variable")


def test_table_on_an_amd_topology_reads_nccl_algo_of_nccl_env_and_names_the_rest():
    """RCCL's model reads NCCL_ALGO / NCCL_PROTO (as NCCL does); --nccl-env's other variables are said."""
    res = runner.invoke(app, ["table", "--topology", "amd-mi300x", "--n", "16", "--psi", "1e9", "--schemes",
                              "dp", "--nccl-env", "NCCL_PROTO=Simple", "--nccl-env", "NCCL_MAX_NCHANNELS=4"])
    assert res.exit_code == 0, res.output
    assert "AR Ring/Simple" in res.stdout or "AR Tree/Simple" in res.stdout, res.stdout
    assert "NCCL_MAX_NCHANNELS=4, which zerocalc's model of RCCL does not price" in res.stdout


def test_report_prices_a_run_share_of_each_node_as_table_does(tmp_path, no_work):
    """``--gpus-per-node 4`` on dgx-h100 (8 GPUs and 8 × 400 Gb/s NICs a node, NVIDIA's DGX H100
    datasheet) is 4 GPUs with 4 of the NICs in the report too, as in ``table``: dp's textbook ring
    all-reduce of Ψ = 7.5e9 fp16 (15 GB) on 16 ranks crosses each node's 4 × 50 GB/s,
    2(N−1)/N × 15 GB / 200 GB/s = 140.625 ms, plus 2(N−1) = 30 steps of the preset's 14 µs network α:
    141.045 ms (the report priced the whole node's 8 NICs, 70.7 ms, twice table's)."""
    from zerocalc.evaluate import evaluate

    res = runner.invoke(app, ["report", "-o", str(tmp_path / "r.pdf"), "--topology", "dgx-h100", "--n", "16",
                              "--gpus-per-node", "4"])
    assert res.exit_code == 0, res.output
    (config,) = no_work
    assert (config.topology.gpus_per_node, config.topology.nics_per_node) == (4, 4)
    want = 2 * 15 / 16 * 15e9 / (4 * 50e9) + 30 * 14e-6
    dp = evaluate(["dp"], psi=7.5e9, n=16, gpus_per_node=4, topology=config.topology)
    assert dp["time_s_ring"].iat[0] == pytest.approx(want, rel=1e-9)
    table = runner.invoke(app, ["table", "--topology", "dgx-h100", "--n", "16", "--gpus-per-node", "4",
                                "--schemes", "dp", "--format", "json"])
    assert json.loads(table.stdout)[0]["time_s_ring"] == pytest.approx(want, rel=1e-9)


def test_figure_captions_stay_above_the_page_foot(tmp_path):
    """A report on a topology of its own (4 GPUs of a dgx-h100 node) draws figure 2 with one panel more and
    a caption naming it: the caption's lines stay above the bottom margin (0.85 in of an A4 page), where the
    footer is; they ran into the footer before."""
    pypdf = pytest.importorskip("pypdf")
    out = tmp_path / "r.pdf"
    res = runner.invoke(app, ["report", "-o", str(out), "--topology", "dgx-h100", "--n", "16",
                              "--gpus-per-node", "4"])
    assert res.exit_code == 0, res.output
    low = []
    for page in pypdf.PdfReader(str(out)).pages:
        def visit(text, cm, tm, font, size, low=low):
            y = tm[5] * cm[3] + cm[5]  # points above the page's bottom edge
            if text.strip() and "page" not in text and y < 0.85 * 72 - 1:
                low.append((round(y), text.strip()[:40]))
        page.extract_text(visitor_text=visit)
    assert low == [], low
