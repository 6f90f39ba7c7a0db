"""``zerocalc check --format csv|markdown`` and ``--schemes`` (``--scheme`` kept) on a real run.

ddp-bf16 (tests/data/traces/real-runs/README.md): one bf16 all-reduce of Ψ = 71,104 on 4 ranks per step,
so a rank sends 2·3/4·71,104·2 B = 213,312 B and only dp matches.
"""

import io
import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from zerocalc.cli import app

RUN = str(Path(__file__).parent / "data" / "traces" / "real-runs" / "ddp-bf16")
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, list(args))


def test_csv_has_one_row_per_scheme_named():
    r = _run("check", RUN, "--schemes", "dp,zero2", "--format", "csv")
    assert r.exit_code == 0, r.output
    df = pd.read_csv(io.StringIO(r.stdout))
    assert list(df["scheme"]) == ["dp", "zero2"]
    assert set(df["measured_bytes_per_rank_per_step"]) == {2 * 3 / 4 * 71_104 * 2}
    assert df.set_index("scheme")["consistent"].to_dict() == {"dp": True, "zero2": False}


def test_markdown_table_and_the_scheme_alias():
    r = _run("check", RUN, "--scheme", "dp", "--format", "markdown")
    assert r.exit_code == 0, r.output
    assert "| scheme |" in r.stdout and "\n| dp |" in r.stdout
    assert "Consistent with the trace (best first): dp" in r.stdout


def test_json_reports_world_size_micro_batches_and_pattern_groups():
    d = json.loads(_run("check", RUN, "--format", "json").stdout)
    assert (d["world_size"], d["micro_batches"], d["grad_sync"]) == (4, 1, None)
    dp = next(s for s in d["schemes"] if s["scheme"] == "dp")
    assert [(e["op"], e["group"], e["dtype"]) for e in dp["measured_pattern"]] == [("all_reduce", 4, "bf16")]


def test_bad_format_and_micro_batches_are_one_line_errors():
    for args, opt in ((("--format", "xml"), "--format"), (("--micro-batches", "0"), "--micro-batches")):
        r = _run("check", RUN, *args)
        assert r.exit_code == 2 and r.stderr.startswith(f"error: {opt}") and r.stderr.count("\n") == 1


def test_markdown_says_the_readings_in_a_regime_and_their_notes_as_the_text_does():
    # fsdp1-root-holds-last (its README: FSDP1's root unit kept from the forward to the backward): no scheme
    # as priced, zero3 / fsdp-full-shard / fsdp-hybrid with part of the parameters kept, in a note
    case = str(Path(RUN).parent / "fsdp1-root-holds-last")
    text = _run("check", case).stdout
    md = _run("check", case, "--format", "markdown").stdout
    verdict = next(line for line in text.splitlines() if line.startswith("consistent with the trace"))
    assert "; also zero3, fsdp-full-shard, fsdp-hybrid with part of the parameters kept" in verdict
    assert "C" + verdict[1:] in md.splitlines()
    notes = [line for line in text.splitlines() if line.startswith("note: ")]
    assert notes and all(f"- {n}" in md.splitlines() for n in notes)


def test_what_the_reader_left_out_of_a_directory_is_said_in_every_format(tmp_path):
    # check read a directory's traces and said nothing of the files it left out (trace summary said them):
    # a run of four ranks with a notes file and a subdirectory beside them
    d = tmp_path / "run"
    d.mkdir()
    for f in Path(RUN).glob("rank*.json.gz"):
        (d / f.name).write_bytes(f.read_bytes())
    (d / "notes.txt").write_text("batch 128\n")
    (d / "rerun").mkdir()
    said = [f"note: {d / 'notes.txt'}: skipped, unrecognised trace format",
            f"note: {d / 'rerun'}: a subdirectory (another run?), not read; pass it on its own"]
    text = _run("check", str(d))
    assert text.exit_code == 0, text.output
    assert all(any(ln.startswith(s) for ln in text.stdout.splitlines()) for s in said)
    md = _run("check", str(d), "--format", "markdown")
    assert all(any(ln.startswith(f"- {s}") for ln in md.stdout.splitlines()) for s in said)
    for fmt in ("json", "csv"):
        res = _run("check", str(d), "--format", fmt)
        assert res.exit_code == 0 and all(s in res.stderr for s in said), res.stderr
    doc = json.loads(_run("check", str(d), "--format", "json").stdout)
    assert doc["skipped_files"] == {
        str(d / "notes.txt"): "unrecognised trace format (not an NCCL log, Kineto JSON, nccl-tests output, "
                              "DeepSpeed comms log, Flight Recorder dump or NCCL Inspector log)",
        str(d / "rerun"): "a subdirectory (another run?), not read; pass it on its own"}
    # the run's verdict is the same as read alone: only dp matches
    assert doc["matches"] == json.loads(_run("check", RUN, "--format", "json").stdout)["matches"] == ["dp"]
