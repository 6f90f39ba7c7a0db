"""nccl-tests outputs under a wrapper that tags every line: Docker Compose's ``name  | `` (``docker compose
up`` / ``docker compose logs``, v2 ``svc-1``, v1 ``svc_1``), in its terminal colour codes or not, and a
Kubernetes node's CRI container log (``TIME stdout F``), a syslog / journald line's head and Python
``logging``'s (``INFO:root:``, ``TIME - INFO - ``), a job platform's bracketed time (``[2026-04-28
14:14:42]``), and a terminal's colour codes around whole lines or
inside them (``grep --color=always``). The rows and device lines expected are counted
from the bundled file without the wrapper (tests/sweep_files.py, a plain split)."""

import json

import pytest
from typer.testing import CliRunner

from tests.sweep_files import DATA, device_lines, file_rows
from zerocalc.cli import app
from zerocalc.traces.prefix import strip_prefix

runner = CliRunner()
NAME = "all_gather_perf-8xH100-1node-nccl2.29.2.txt"


def _wrapped(tmp_path, tag):
    text = (DATA / NAME).read_text()
    path = tmp_path / NAME
    path.write_text("".join(tag + line for line in text.splitlines(keepends=True)))
    return path


@pytest.mark.parametrize("tag", ["nccl-tests-1  | ", "nccl_worker_1  | ", "svc-1 | ",
                                 "\x1b[36mnccl-tests-1  |\x1b[0m ", "\x1b[0m",
                                 "2024-07-19T05:12:33.123456789Z stdout F ",
                                 "2024-07-19T05:12:33.123456789+00:00 stdout F ",
                                 "Jul 19 05:12:33 node-1 nccl-tests[4242]: ",
                                 "Jul  9 05:12:33 node-1 mpirun: ",
                                 "Jul 19 05:12:33.123456 gpu01 all_reduce_perf[77]: ",
                                 "2024-07-19T05:12:33+0000 node-1 job.sh[4242]: ",
                                 "INFO:root:", "INFO:__main__:", "2024-07-19 05:12:33,123 - INFO - ",
                                 "2024-07-19 05:12:33,123 - bench.nccl - INFO - ",
                                 "[2026-04-28 14:14:42] ", "[2026-04-28T14:14:42.123+08:00] "])
def test_compose_service_prefix_is_looked_past(tmp_path, tag):
    _read_as_the_plain_file(_wrapped(tmp_path, tag))


def _read_as_the_plain_file(path):
    """``check`` on ``path`` gives the bundled file's sweep: rows and ranks as a plain split counts them."""
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    rows = file_rows(NAME)
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t, _ in rows])
    assert sweep["group_size"] == len(device_lines(NAME))
    return sweep


def test_compose_prefix_forms_and_what_is_not_one():
    assert strip_prefix("svc-1  | #  Rank  0 Group  0").startswith("#  Rank")
    assert strip_prefix("svc-1  |").strip() == ""  # an empty line of the service
    assert strip_prefix("| 8 | 2 | float |").startswith("| 8")  # a Markdown table row: no name
    assert strip_prefix("8 | 2 | float").startswith("8 |")  # a number is a column, not a service
    assert strip_prefix("nccl-server  | #  Rank").startswith("#  Rank")  # a set container_name, padded
    # DeepSpeed's comms summary names an op and its caller: one space, no replica number
    assert strip_prefix("broadcast | [Caller Func: _broadcast_model]").startswith("broadcast |")
    # a job platform's time in brackets is one; a shell prompt's bracket, with a space inside, is not
    assert strip_prefix("[2026-04-28 14:14:42] #  Rank  0").startswith("#  Rank")
    assert strip_prefix("[user@host nccl-tests]$ mpirun").startswith("[user@host")
    assert strip_prefix("[2026-04-28 14:14] 8 2 float").startswith("[2026-04-28")  # not a whole time


@pytest.mark.parametrize("tag", ["Jul 19 05:12:33 node-1 ", "INFO ", "2024-07-19 05:12:33,123 - "])
def test_a_head_that_could_be_cells_stays_refused(tmp_path, tag):
    # no program tag, no level name: the words left could be taken for a row's columns (a time alone, as
    # moreutils' ts stamps each line, is looked past: tests/test_nccl_sweeps_public_s21_hunt22.py)
    res = runner.invoke(app, ["check", str(_wrapped(tmp_path, tag))])
    assert res.exit_code == 2, res.output


def test_log_heads_and_what_is_not_one():
    assert strip_prefix("Jul 19 05:12:33 node-1 kernel: #  Rank  0").lstrip().startswith("#  Rank")
    assert strip_prefix("WARNING:nccl.bench:    33554432").strip() == "33554432"
    assert strip_prefix("Jul 19 05:12:33 node-1 8 2 float").startswith("node-1")  # no tag: the host left
    assert strip_prefix("Jul 19 05:12:33 node-1 8: 2 float").startswith("node-1")  # a number is no tag
    assert strip_prefix("NOTICE:root:8 2 float").startswith("NOTICE")  # not one of logging's levels


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_text_with_its_mark_is_read(tmp_path, encoding):
    # Windows PowerShell 5.1's '>' writes UTF-16LE with its byte-order mark (about_Character_Encoding)
    text = (DATA / NAME).read_text().replace("\n", "\r\n")
    bom = {"utf-16": b"", "utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}[encoding]
    path = tmp_path / NAME
    path.write_bytes(bom + text.encode(encoding))
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in file_rows(NAME)]


def test_utf16_without_its_mark_stays_refused(tmp_path):
    path = tmp_path / NAME
    path.write_bytes((DATA / NAME).read_text().encode("utf-16-le"))
    res = runner.invoke(app, ["check", str(path)])
    assert res.exit_code == 2 and "binary data" in res.output


def _grep_colour(line):
    words = line.rsplit(None, 1)
    return line if len(words) < 2 else words[0] + " \x1b[01;31m\x1b[K" + words[1] + "\x1b[m\x1b[K"


def _coloured(tmp_path, colour):
    path = tmp_path / NAME
    text = (DATA / NAME).read_text()
    path.write_text("".join(colour(line) + "\n" for line in text.splitlines()))
    return path


@pytest.mark.parametrize("colour", [
    lambda line: "\x1b[32m" + line + "\x1b[0m",  # a wrapper's colour around every line
    lambda line: "\x1b[1;36m[1,0]<stdout>:\x1b[0m" + line + "\x1b[m",  # a coloured tag, then a reset
    # grep --color=always with a pattern that matches each line's last word: ESC[01;31mESC[K … ESC[mESC[K
    lambda line: _grep_colour(line),
], ids=["whole-line", "coloured-tag", "grep-color"])
def test_terminal_codes_are_not_read_as_cells(tmp_path, colour):
    assert _read_as_the_plain_file(_coloured(tmp_path, colour))["nccl_version"] == "2.29.2"


@pytest.mark.parametrize("noise", [
    "srun: Step created for StepId=4242.0",  # srun -v
    "[gpu-node-2:12345] mca_base_component_repository_open: unable to open mca_op_avx: "
    "libgomp.so.1: cannot open shared object file: No such file or directory",  # Open MPI at start-up
])
def test_a_launchers_line_between_rank_lines_is_no_part_of_a_gpus_name(tmp_path, noise):
    """A line a launcher or MPI printed between two ``# Rank`` lines (its ranks' output interleaved) is a
    line of its own, however short once its ``srun: `` or ``[host:pid]`` head is looked past: the GPU of
    the rank line before it keeps its name (``NVIDIA H100 80GB HBM3``, not ``… Step created for
    StepId=4242.0``, which named a second GPU model and asked for ``--topology``)."""
    lines = (DATA / NAME).read_text().splitlines(keepends=True)
    path = tmp_path / NAME
    path.write_text("".join(x + (noise + "\n" if x.startswith("#  Rank") else "") for x in lines))
    sweep = _read_as_the_plain_file(path)
    assert sweep["topology_how"].startswith("from the file's device lines: NVIDIA H100 80GB HBM3, 8 per host")


def test_a_paste_with_tabs_for_blanks_names_its_gpus_as_the_file_does(tmp_path):
    """Every run of blanks turned into a tab (as a paste through a terminal or a spreadsheet gives): the
    sweep reads as the file, and its GPUs are named with single spaces (``NVIDIA H100 80GB HBM3``, not
    with the tabs between its words), as the plain split of the file names them."""
    import re

    path = tmp_path / NAME
    path.write_text(re.sub(r"[ ]+", "\t", (DATA / NAME).read_text()))
    sweep = _read_as_the_plain_file(path)
    (gpu,) = {g for _, g in device_lines(NAME)}
    assert sweep["topology_how"].startswith(f"from the file's device lines: {gpu}, 8 per host")
