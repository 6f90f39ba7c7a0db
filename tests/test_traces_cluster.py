"""`--scheduler`: reading traces on a real Dask cluster (a scheduler and two worker processes on
loopback) gives byte for byte the output of a local read."""

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError, TraceFormatError
from zerocalc.traces import nccl_log, read_traces, reader

# distributed warns of a slow machine (a scratch directory slow to create, an event loop held up)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "traces"
runner = CliRunner()

#: Every bundled trace set: each file of the single-file formats, each directory of one run.
TRACE_SETS = sorted(
    [p for p in DATA.glob("*/*") if p.is_file() and p.suffix in (".txt", ".gz") and p.parent.name in
     ("nccl-debug", "nccl-tests", "deepspeed-comms", "kineto")]
    + [DATA / "kineto" / "dlrm-v100-8ranks", DATA / "deepspeed-gloo-zero3-n4",
       DATA / "deepspeed-gloo-zero3-n4" / "no-step-markers"]
    + [p for p in (DATA / "real-runs").iterdir() if p.is_dir()])


@pytest.fixture(scope="module")
def scheduler():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def _cli(*args):
    res = runner.invoke(app, [str(a) for a in args])
    return res.exit_code, res.stdout


def _synthetic(path: Path, size: float) -> int:
    spec = importlib.util.spec_from_file_location("synth_nccl_log", ROOT / "benchmarks" / "synth_nccl_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build(path, size)[0]


def test_a_log_in_chunks_and_a_run_in_files_read_as_locally(scheduler, tmp_path, monkeypatch):
    # a log of 3 chunks (blocks of 256 kB here), and a run of 4 files and a summary
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 1 << 18)
    monkeypatch.setattr(nccl_log, "BLOCK_BYTES", 1 << 18)
    log = tmp_path / "ray.log"
    calls = _synthetic(log, 2.5 * nccl_log.BLOCK_BYTES)
    assert log.read_bytes().count(b"opCount") == calls
    for path in (log, DATA / "deepspeed-gloo-zero3-n4"):
        local, remote = read_traces(path, workers=1), read_traces(path, scheduler=scheduler)
        assert remote.table.equals(local.table) and remote.meta == local.meta
        assert remote.skipped.count == local.skipped.count
        assert remote.skipped.examples == local.skipped.examples
    assert len(read_traces(log, workers=1).table) == calls


@pytest.mark.slow
def test_check_of_a_log_in_chunks_gives_the_same_json(scheduler, tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 1 << 20)
    log = tmp_path / "ray.log"
    _synthetic(log, 2.5 * nccl_log.BLOCK_BYTES)
    out = [_cli("check", log, "--format", "json", *extra) for extra in ((), ("--scheduler", scheduler))]
    assert out[0][0] == 0 and out[0] == out[1]


def test_an_error_on_a_worker_is_raised_here(scheduler, tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_text("h:1:2 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 7 datatype 7 "
                   "op 0 root 0 comm 0x9 [nranks=2] stream 0x3\n"
                   "h:1:2 [0] NCCL INFO AllReduce: opCount 2 cnt 7\n")
    with pytest.raises(TraceFormatError) as err:
        read_traces(bad, strict=True, scheduler=scheduler)
    assert (err.value.file, err.value.line) == (str(bad), 2)


def test_no_scheduler_there_is_one_line_naming_the_option(monkeypatch):
    from zerocalc.traces import cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(ConfigError, match="--scheduler: cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        read_traces(DATA / "nccl-debug" / "send-recv-2ranks.txt", scheduler="tcp://127.0.0.1:9")
    code, _ = _cli("trace", "summary", DATA / "nccl-debug" / "send-recv-2ranks.txt", "--scheduler", "nowhere")
    assert code == 2


def test_without_dask_the_message_says_what_to_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.split(".")[0] in ("distributed", "dask"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(ConfigError, match=r"pip install 'zerocalc\[dask\]'"):
        read_traces(DATA / "nccl-debug" / "send-recv-2ranks.txt", scheduler="tcp://127.0.0.1:9")


@pytest.mark.slow
@pytest.mark.parametrize("traces", TRACE_SETS, ids=lambda p: str(p.relative_to(DATA)))
def test_every_bundled_trace_set_gives_the_same_json(scheduler, traces):
    for command in (("trace", "summary"), ("check",)):
        local = _cli(*command, traces, "--format", "json")
        remote = _cli(*command, traces, "--format", "json", "--scheduler", scheduler)
        assert remote == local, (command, traces)
