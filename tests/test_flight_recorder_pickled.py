"""Flight Recorder dumps as pickles, the form a watchdog timeout writes (``TORCH_FR_DUMP_TEMP_FILE`` + rank):
read as data, nothing they name called.

The kept dumps (tests/data/traces/flight-recorder/hsdp-2x2-pickled, a real run of make_runs.py's
``hsdp-2x2`` case with ``--pickled``: torch 2.13, gloo, FSDP2 on a replicate 2 × shard 2 mesh) are counted
here with the standard library's own ``pickle`` (they are this project's own files); what the run was
comes from its run.json."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceFormatError
from zerocalc.traces import detect_format, read_traces

runner = CliRunner()
RUN = Path(__file__).parent / "data" / "traces" / "flight-recorder" / "hsdp-2x2-pickled"


def _dump(rank: int) -> dict:
    return pickle.loads((RUN / f"nccl_trace_rank_{rank}").read_bytes())


def _check(path) -> dict:
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_pickled_dumps_are_read_call_by_call_with_their_groups():
    run = json.loads((RUN / "run.json").read_text())
    table = read_traces(str(RUN)).table
    for r in range(run["world_size"]):
        assert detect_format((RUN / f"nccl_trace_rank_{r}").read_bytes()) == "flight_recorder"
        entries = _dump(r)["entries"]
        mine = table[table["rank"] == r]
        assert len(mine) == len(entries)
        # the pickle holds each group as a (name, description) tuple; the mesh's two dimensions by name
        assert sorted(mine["group_desc"].unique()) == sorted({e["process_group"][1] for e in entries}) \
            == ["mesh_replicate", "mesh_shard"]
        assert mine["in_nelems"].tolist() == [sum(_elements(s) for s in e["input_sizes"]) for e in entries]


def _elements(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_pickled_dumps_check_as_the_run_their_run_json_describes():
    # HSDP (FSDP2 on replicate 2 × shard 2) of the model of Ψ = 71,104, the warm-up and 3 optimizer steps,
    # one micro-batch: as the JSON dumps of the same case read (test_flight_recorder's hsdp test)
    run = json.loads((RUN / "run.json").read_text())
    assert "HSDP" in run["scheme"] and run["groups"]["shard"] == [[0, 1], [2, 3]]
    out = _check(RUN)
    assert out["matches"] == ["fsdp-hybrid"]
    assert (out["psi"], out["n"], out["hsdp_shard_size"], out["steps"], out["micro_batches"]) == (
        run["model"]["psi"], run["world_size"], 2, run["optimizer_steps"], run["micro_batches"])


def test_a_compressed_pickle_and_one_with_its_stack_traces_read_the_same(tmp_path):
    # a watchdog's dump holds each entry's Python stack (``frames``), left out of the kept files; and a
    # dump may be kept gzip'd
    for r in range(4):
        dump = _dump(r)
        for e in dump["entries"]:
            e["frames"] = [{"name": "train_step", "filename": "train.py", "line": 42 + r}]
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(gzip.compress(pickle.dumps(dump, protocol=2)))
    assert _check(tmp_path)["measured_bytes_per_rank_per_step"] \
        == _check(RUN)["measured_bytes_per_rank_per_step"]


class _Touch:
    """An object whose unpickling would create ``path`` (``pathlib.Path.touch``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_a_pickle_that_names_a_callable_is_refused_and_nothing_is_called(tmp_path):
    marker = tmp_path / "called"
    dump = _dump(0)
    dump["entries"][0]["profiling_name"] = _Touch(marker)
    f = tmp_path / "nccl_trace_rank_0"
    f.write_bytes(pickle.dumps(dump, protocol=2))
    res = runner.invoke(app, ["check", str(f)])
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    assert str(f) in res.output and "a pickle that names __builtin__.getattr: not loaded" in res.output
    assert not marker.exists()
    with pytest.raises(TraceFormatError, match="not loaded, as that would call it"):
        read_traces(str(f))
    assert not marker.exists()


def test_a_truncated_pickle_and_one_that_is_no_dump_are_refused_naming_the_file(tmp_path):
    cut = tmp_path / "nccl_trace_rank_1"
    cut.write_bytes((RUN / "nccl_trace_rank_1").read_bytes()[:3000])
    res = runner.invoke(app, ["check", str(cut)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert str(cut) in res.output and "not a whole pickle" in res.output
    other = tmp_path / "model.pkl"
    other.write_bytes(pickle.dumps({"weights": [1.0, 2.0]}, protocol=4))
    with pytest.raises(TraceFormatError, match="a pickle that is not a Flight Recorder dump"):
        read_traces(str(other))


def test_a_pickle_nested_past_any_dump_is_refused(tmp_path):
    # {'pg_config': {}, 'entries': 200,000 lists each inside the next} (EMPTY_LIST opcodes, then APPENDs)
    f = tmp_path / "nccl_trace_rank_0"
    f.write_bytes(b"\x80\x02}X\x09\x00\x00\x00pg_config}sX\x07\x00\x00\x00entries" + b"]" * 200_000
                  + b"a" * 199_999 + b"s.")
    res = runner.invoke(app, ["check", str(f)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "a pickle nested deeper than a Flight Recorder dump is" in res.output
