"""DeepSpeed comms logs, and the gloo ZeRO-3 traces checked against the run's own comms summary."""

import math
from pathlib import Path

from zerocalc.traces import read_traces

DATA = Path(__file__).parent / "data" / "traces"


def _convert_size(n_bytes: int) -> str:
    """DeepSpeed utils/comms_logging.py convert_size: 1024-based units, rounded to 2 decimals."""
    if n_bytes == 0:
        return "0 B"
    units = ("B", "KB", "MB", "GB", "TB")
    i = 0
    while n_bytes >= 1024 ** (i + 1) and i < len(units) - 1:
        i += 1
    return f"{round(n_bytes / 1024**i, 2)} {units[i]}"


def test_tutorial_verbose_and_summary():
    ts = read_traces(DATA / "deepspeed-comms" / "tutorial-examples.txt")
    t = ts.table
    assert ts.skipped.count == 0
    verbose = t[t["summary"].isna()]
    assert list(verbose["op"]) == ["reduce_scatter", "all_gather", "all_gather"]
    assert list(verbose["duration_s"].round(6)) == [0.00946, 0.00011, 0.00008]
    assert set(verbose["rank"]) == {0}
    assert verbose["msg_size_bytes"].iloc[0] == 678.86 * 1024**2
    summ = t[t["summary"].notna()]
    # two tables: broadcast 146 + 1, reduce_scatter_tensor 40; then 146 + 1, 80
    assert (summ["op"] == "broadcast").sum() == 2 * (146 + 1)
    assert (summ["op"] == "reduce_scatter").sum() == 40 + 80
    assert summ["duration_s"].isna().all() and summ["in_nelems"].isna().all() and summ["dtype"].isna().all()
    assert set(summ.loc[summ["caller"].notna(), "caller"]) == {"_broadcast_model", "reduce_scatter_fn"}


def test_gloo_traces_agree_with_comms_summary():
    d = DATA / "deepspeed-gloo-zero3-n4"
    summary = read_traces(d / "comms-summary.txt").table
    ops = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
           "all_reduce": "all_reduce", "broadcast": "broadcast"}
    printed = {(ops.get(n, n), s): c for (n, s), c in summary.groupby(["op_name", "msg_size"]).size().items()}
    trace = read_traces([d / f"rank{r}.json.gz" for r in range(4)]).table
    r0 = trace[trace["rank"] == 0]
    # DeepSpeed sizes the input tensor: all-gather's shard, reduce-scatter's full input
    seen = {}
    for r in r0.itertuples():
        key = (r.op, _convert_size(int(r.in_nelems) * int(r.elem_bytes)))
        seen[key] = seen.get(key, 0) + 1
    assert seen == {
        ("all_gather", "369.0 KB"): 3,  # 94464 fp32 = 377856 B = 369.0 KiB
        ("reduce_scatter", "1.44 MB"): 3,  # 377856 fp32 = 1511424 B = 1.44 MiB
        ("all_reduce", "8.0 B"): 3,  # one fp64 scalar
        ("broadcast", "8.0 B"): 3,  # one int64
        ("broadcast", "96.0 B"): 3,  # 12 int64
    }
    for key, n in seen.items():
        # the summary covers the warm-up step and initialisation too: at least as many calls
        assert printed[key] >= n, key
    assert printed[("reduce_scatter", "1.44 MB")] == 3 + 1  # 3 profiled + 1 warm-up step


def test_the_world_size_is_read_from_deepspeeds_printed_bandwidths():
    # DeepSpeed's calc_bw_log prints busbw = algbw × (n-1)/n for reduce_scatter and all_gather: the
    # tutorial's three verbose lines, by hand, 1129.23 / 1204.52 = 0.93749, 894.76 / 954.41 = 0.93750,
    # 1212.63 / 1293.47 = 0.93750: n = 1 / (1 - 0.9375) = 16 (the tutorial does not state its world)
    for algbw, busbw in ((1204.52, 1129.23), (954.41, 894.76), (1293.47, 1212.63)):
        assert round(1 / (1 - busbw / algbw)) == 16
    ts = read_traces(DATA / "deepspeed-comms" / "tutorial-examples.txt")
    (meta,) = ts.meta.values()
    assert meta["world_size"] == 16 and "DeepSpeed's printed bandwidths" in meta["notes"][0]
    # bandwidths too small to pin a whole n leave it unread: the check asks for --n, as before
    from zerocalc.traces.deepspeed_comms import world_from_bandwidth

    rows = [{"op_name": "all_reduce", "algbw_Gbps_printed": 0.02, "busbw_Gbps_printed": 0.01,
             "source_line": 1}]
    assert world_from_bandwidth(rows) is None


LOG = DATA / "deepspeed-comms-gloo" / "zero2-ga4-verbose.log"


def _log_lines(op, size):
    """The kept log's verbose lines of ``op`` with message size ``size``, by a plain split."""
    return [ln for ln in LOG.read_text().splitlines()
            if f"comm op: {op} |" in ln and f"| msg size: {size} |" in ln]


def test_a_real_verbose_log_checks_as_deepspeed_zero2_given_its_element_type():
    # deepspeed-comms-gloo/zero2-ga4-verbose.log (make_comms_log.py): ZeRO-2, 4 ranks, 4 micro-batches,
    # 3 optimizer steps: by the file, 12 all-reduces of 277.75 KB (71,104 fp32 elements: 284,416 B =
    # 277.75 × 1024), 4 a step, and 3 all-gathers of the 69.44 KB shard (17,776 elements: Ψ / 4)
    import pytest

    from zerocalc.errors import TraceMismatchError
    from zerocalc.validate import check

    assert len(_log_lines("all_reduce", "277.75 KB")) == 12 and 277.75 * 1024 == 71_104 * 4
    assert len(_log_lines("all_gather_into_tensor", "69.44 KB")) == 3
    ts = read_traces(LOG)
    res = check(ts.table, meta=ts.meta, dtype="fp32")
    m = res.measurement
    assert (m.psi, m.n, m.steps, m.micro_batches, m.grad_sync) == (71_104, 4, 3, 4, "every")
    assert (m.param_dtype, m.grad_dtype) == ("fp32", "fp32")
    assert res.matches[0] == "deepspeed-zero2"
    # the log has no header naming its world: N's sentence says where the 4 came from
    assert "world size 4 from its printed bandwidths" in m.n_how and "trace header" not in m.n_how
    # without its element type the bytes give no elements: refused, naming --dtype
    with pytest.raises(TraceMismatchError, match="--dtype"):
        check(ts.table, meta=ts.meta)


def test_a_zero3_log_whose_first_step_differs_keeps_its_micro_batches():
    # deepspeed-comms-gloo/zero3-ga4-one-evaluation-verbose.log (make_comms_log.py --stage 3 --steps 7
    # --evaluate-after 3): by the file, 28 reduce-scatters of 277.75 KB (71,104 fp32 elements), 4 a step,
    # and 7 gradient norms (8-byte all-reduces), one a step; the first step gathers layer by layer (6
    # gathers of 15-30 KB), the others the 69.44 KB partitions, one before each reduce-scatter. The steps
    # on both sides of the first step's gathers, read as an interruption, would count that step with two
    # of its gathers lent to it, in a phase that hides the micro-batches (K = 1, Ψ 4×): it stays one-off
    from zerocalc.validate import check

    log = DATA / "deepspeed-comms-gloo" / "zero3-ga4-one-evaluation-verbose.log"
    lines = log.read_text().splitlines()
    assert sum("comm op: reduce_scatter_tensor |" in ln and "| msg size: 277.75 KB |" in ln
               for ln in lines) == 28 and 277.75 * 1024 == 71_104 * 4
    assert sum("comm op: all_reduce |" in ln and "| msg size: 8.0 B |" in ln for ln in lines) == 7
    ts = read_traces(log)
    m = check(ts.table, meta=ts.meta, dtype="fp32").measurement
    assert (m.psi, m.steps, m.micro_batches, m.grad_sync) == (71_104, 6, 4, "every")


def test_a_zero3_log_whose_first_step_gathers_layer_by_layer_keeps_its_gathers_in_the_steps():
    # deepspeed-comms-gloo/zero3-ga1-verbose.log (make_comms_log.py --stage 3 --micro-batches 1 --steps 5):
    # by the file, the first step gathers the 3 layers one by one, twice (15-30 KB each), then 5 steps of
    # a 277.75 KB reduce-scatter and an 8-byte norm, the last 4 each after one 69.44 KB gather of the
    # partitions. The log records bytes alone, so every gather is one call to the step search: read with
    # the first step's last layer gather as a step of the block, the steps' gathers fell out (0.5× every
    # scheme, none consistent). The 4 steps alike are read, the first one-off
    from zerocalc.validate import check

    log = DATA / "deepspeed-comms-gloo" / "zero3-ga1-verbose.log"
    lines = [ln.split("comm op: ")[1].split(" | time")[0] + ln.split("| msg size: ")[1].split(" |")[0]
             for ln in log.read_text().splitlines()]
    assert lines.count("reduce_scatter_tensor277.75 KB") == 5 and lines.count("all_reduce8.0 B") == 5
    # 69.44 KB: a rank's partition, 17,776 fp32 elements (Ψ / 4) = 71,104 B, printed to 2 decimals
    assert lines.count("all_gather_into_tensor69.44 KB") == 4 and abs(69.44 * 1024 - 17_776 * 4) < 6
    ts = read_traces(log)
    res = check(ts.table, meta=ts.meta, dtype="fp32")
    m = res.measurement
    assert (m.psi, m.steps, m.micro_batches) == (71_104, 4, 1)
    assert "deepspeed-zero3" in res.matches


def test_a_zero2_log_of_small_buckets_reads_every_bucket_as_gradients():
    # deepspeed-comms-gloo/zero2-ga4-small-buckets-verbose.log (make_comms_log.py --bucket-size 20000): by
    # the file, 3 steps of 4 micro-batches, each all-reducing 5 buckets (61.0, 111.56, 8.44 KB, 768 B and
    # 96.0 KB: 15,616, 28,560, 2,160, 192 and 24,576 fp32 elements, Ψ = 71,104 in all), then a 4-byte
    # all-reduce and a 69.44 KB gather of the partitions. The two small buckets, under 1/64 of the step, are
    # gradients: read as norms, Ψ was 68,751 and no scheme consistent
    from zerocalc.validate import check

    log = DATA / "deepspeed-comms-gloo" / "zero2-ga4-small-buckets-verbose.log"
    sizes = [ln.split("comm op: ")[1].split(" | time")[0] + " " + ln.split("| msg size: ")[1].split(" |")[0]
             for ln in log.read_text().splitlines()]
    buckets = ["61.0 KB", "111.56 KB", "8.44 KB", "768.0 B", "96.0 KB"]
    step = [f"all_reduce {b}" for b in buckets] * 4 + ["all_reduce 4.0 B", "all_gather_into_tensor 69.44 KB"]
    assert sizes == step * 3
    elements = (15_616, 28_560, 2_160, 192, 24_576)
    assert [61.0, 111.5625, 8.4375, 0.75, 96.0] == [e * 4 / 1024 for e in elements]
    ts = read_traces(log)
    res = check(ts.table, meta=ts.meta, dtype="fp32", n=4)
    m = res.measurement
    assert (m.steps, m.micro_batches, m.grad_sync) == (3, 4, "every")
    assert abs(m.psi - 71_104) <= 6  # 111.56 KB printed to 2 decimals: 28,559.36 elements
    assert res.matches[0] == "deepspeed-zero2"


def test_the_cli_refuses_a_log_of_bytes_alone_in_one_line_naming_dtype():
    from typer.testing import CliRunner

    from zerocalc.cli import app

    res = CliRunner().invoke(app, ["check", str(LOG)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    (line,) = res.stderr.strip().splitlines()
    assert "only bytes" in line and "--dtype" in line and "--psi" in line
    ok = CliRunner().invoke(app, ["check", str(LOG), "--dtype", "bf16", "--format", "json"])
    assert ok.exit_code == 0, ok.output


def test_reductions_that_record_no_size_at_all_are_not_said_to_record_bytes(tmp_path):
    # a profiler trace whose all-reduces record no size (their tensor list's shapes empty, as a trace of
    # TensorList arguments records them): the real ds-zero2-ga4 run with those shapes taken out. Before, the
    # refusal said they "record no element count, only bytes (a DeepSpeed comms log's sizes)" and asked for
    # --dtype, which reads nothing from them
    import gzip
    import json

    from typer.testing import CliRunner

    from zerocalc.cli import app

    run = Path(__file__).parent / "data" / "traces" / "real-runs" / "ds-zero2-ga4"
    out = tmp_path / "run"
    out.mkdir()
    emptied = 0
    for f in sorted(run.glob("rank*.json.gz")):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        for e in doc["traceEvents"]:
            a = e.get("args") or {}
            if e.get("name") == "c10d::allreduce_":
                a["Input Dims"] = [[] for _ in a["Input Dims"]]
                emptied += 1
            if e.get("name") == "gloo:all_reduce":
                for k in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                    a.pop(k, None)
        (out / f.name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    # README: 4 all-reduces of Ψ and a 1-element one a step, 2 steps profiled, 4 ranks
    assert emptied == 4 * 5 * 2
    res = CliRunner().invoke(app, ["check", str(out)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr == ("error: the trace's 40 reduction(s) in its steps record no size, neither elements "
                          "nor bytes: give --psi\n")


def test_an_excerpt_whose_reduction_falls_outside_its_steps_says_so_and_what_reads_it():
    # DeepSpeed's tutorial excerpt: a reduce_scatter_tensor of 678.86 MB, then two all_gather_into_tensor of
    # 6.0 MB; the repeating gathers are its steps and the reduce-scatter one-off. Before, "no gradient
    # collective (all-reduce, reduce-scatter or reduce)", though it has one
    import json

    from typer.testing import CliRunner

    from zerocalc.cli import app

    log = DATA / "deepspeed-comms" / "tutorial-examples.txt"
    for extra, bytes_alone in (([], True), (["--dtype", "fp16"], False)):
        res = CliRunner().invoke(app, ["check", str(log), *extra])
        assert res.exit_code == 2 and "Traceback" not in res.output
        (line,) = res.stderr.strip().splitlines()
        assert "its 1 reduce-scatter falls outside the steps found" in line and "--steps 1" in line
        assert "--psi" in line and ("--dtype" in line) == bytes_alone
    ok = CliRunner().invoke(app, ["check", str(log), "--dtype", "fp16", "--steps", "1", "--format", "json"])
    assert ok.exit_code == 0, ok.output
    # the whole excerpt one step: Ψ the reduce-scatter's 678.86 MiB of fp16 (DeepSpeed's rounded size)
    assert json.loads(ok.stdout)["psi"] == round(678.86 * 1024**2 / 2)


def test_a_type_known_by_its_width_alone_is_the_given_one_else_a_float():
    from zerocalc.validate.infer import type_of_width

    assert type_of_width(2, "bf16") == "bf16" and type_of_width(4, "bf16") == "fp32"
    assert type_of_width(4) == "fp32" and type_of_width(8) == "fp64" and type_of_width(3) == "?"


#: Three lines of a real run's log with the comms logger's debug on (deepspeed-comms-gloo/make_comms_log.py
#: --debug), verbatim: each op followed by the function that called it
DEBUG_LINES = (
    "[2026-12-06 01:24:41,538] [INFO] [logging.py:123:log_dist] [Rank 0] comm op: all_reduce | [Caller Func: "
    "allreduce_bucket] | time (ms): 120.77 | msg size: 277.75 KB | algbw (Gbps): 0.04 | busbw (Gbps): 0.03\n"
    "[2026-12-06 01:24:41,580] [INFO] [logging.py:123:log_dist] [Rank 0] comm op: all_reduce | [Caller Func: "
    "get_grad_norm_direct] | time (ms): 0.81 | msg size: 4.0 B | algbw (Gbps): 0.00 | busbw (Gbps): 0.00\n"
    "[2026-12-06 01:24:41,590] [INFO] [logging.py:123:log_dist] [Rank 0] comm op: all_gather_into_tensor | "
    "[Caller Func: all_gather_into_tensor_dp_groups] | time (ms): 3.95 | msg size: 69.44 KB | algbw (Gbps): "
    "0.58 | busbw (Gbps): 0.43\n"
)


def test_debug_lines_name_their_caller_and_are_read(tmp_path):
    log = tmp_path / "debug.log"
    log.write_text(DEBUG_LINES)
    ts = read_traces(log)
    (meta,) = ts.meta.values()
    assert meta["format"] == "deepspeed_comms" and ts.skipped.count == 0
    t = ts.table
    assert list(t["op"]) == ["all_reduce", "all_reduce", "all_gather"]
    callers = ["allreduce_bucket", "get_grad_norm_direct", "all_gather_into_tensor_dp_groups"]
    assert list(t["caller"]) == callers
    assert list(t["msg_size_bytes"]) == [277.75 * 1024, 4.0, 69.44 * 1024]
    assert list(t["duration_s"].round(5)) == [0.12077, 0.00081, 0.00395]


SUMMARY_STRAGGLER = DATA / "deepspeed-comms-gloo" / "zero2-ga4-summary-straggler.log"


def test_a_summary_with_its_straggler_breakdown_reads_each_call_once_at_the_summarys_mean():
    ts = read_traces(SUMMARY_STRAGGLER)
    assert ts.skipped.count == 0
    t = ts.table
    counts = {k: int(v) for k, v in t.groupby(["op_name", "msg_size"]).size().items()}
    # the Count column of the log_summary table (lines 1-14); the breakdown after it (lines 19-33)
    # counts 9 all_reduces of 4.0 B, its own all-reduces of the broadcasts' latencies among them
    assert counts == {
        ("broadcast", "384.0 B"): 1, ("broadcast", "640.0 B"): 1, ("broadcast", "768.0 B"): 1,
        ("broadcast", "60.0 KB"): 1, ("broadcast", "96.0 KB"): 1, ("broadcast", "120.0 KB"): 1,
        ("all_reduce", "4.0 B"): 3, ("all_reduce", "277.75 KB"): 12,
        ("all_gather_into_tensor", "69.44 KB"): 3, ("log_summary_barrier", "0 B"): 1,
    }
    assert t["summary"].all()
    means = t.groupby(["op_name", "msg_size"])["mean_duration_s"].first()
    # the summary's Avg Latency(ms), not the breakdown's straggler (3.52) nor its comm latency (2.50)
    assert round(means[("log_summary_barrier", "0 B")] * 1e3, 2) == 6.01
    assert round(means[("broadcast", "384.0 B")] * 1e3, 2) == 15.61
    assert round(means[("all_reduce", "4.0 B")] * 1e3, 2) == 120.09
    (meta,) = ts.meta.values()
    assert any("straggler effect" in n and "10 rows" in n and "lines 21-33" in n for n in meta["notes"])


def test_a_straggler_breakdown_row_out_of_its_layout_is_refused_with_its_line(tmp_path):
    lines = SUMMARY_STRAGGLER.read_text().splitlines()
    assert lines[20].split() == ["384.0", "B", "1", "10.61", "5.00", "10.61", "5.00"]
    lines[20] = "                    384.0 B             1                   10.61               5.00"
    bad_log = tmp_path / "cut.log"
    bad_log.write_text("\n".join(lines) + "\n")
    ts = read_traces(bad_log)
    assert ts.skipped.count == 1
    assert ts.skipped.examples == [(str(bad_log), 21, "straggler breakdown row does not have 6 columns")]
    assert len(ts.table) == 25  # the summary's calls, as read whole


def test_check_refuses_a_summary_alone_in_one_line_naming_the_loggers_verbose_lines():
    from typer.testing import CliRunner

    from zerocalc.cli import app

    for path in (SUMMARY_STRAGGLER, DATA / "deepspeed-gloo-zero3-n4" / "comms-summary.txt"):
        res = CliRunner().invoke(app, ["check", str(path), "--dtype", "fp32"])
        assert res.exit_code == 2 and "Traceback" not in res.output
        (line,) = res.stderr.strip().splitlines()
        assert "log_summary table" in line and '"verbose": true' in line and "zerocalc fit" in line


def test_a_summarys_calls_keep_their_fastest_ranks_mean_where_the_breakdown_counts_them_alike():
    t = read_traces(SUMMARY_STRAGGLER).table
    fastest = t.groupby(["op_name", "msg_size"])["comm_mean_duration_s"].first()
    # the breakdown's Avg comm lat(ms) column (lines 21-33), where its Count is the summary's
    assert round(fastest[("broadcast", "384.0 B")] * 1e3, 2) == 10.61
    assert round(fastest[("broadcast", "96.0 KB")] * 1e3, 2) == 0.85
    assert round(fastest[("all_reduce", "277.75 KB")] * 1e3, 2) == 98.13
    assert round(fastest[("all_gather_into_tensor", "69.44 KB")] * 1e3, 2) == 15.51
    # 9 all-reduces of 4.0 B in the breakdown (its own among them) where the summary counts 3: none kept
    assert math.isnan(fastest[("all_reduce", "4.0 B")])


def test_fit_takes_a_summarys_calls_at_their_fastest_ranks_mean(tmp_path):
    from zerocalc.validate.fit import fit_trace

    lines = SUMMARY_STRAGGLER.read_text().splitlines()
    # the breakdown's broadcast rows (lines 21-26): size, unit, count, then its Avg comm lat(ms) 6th
    fastest = {tuple(f[:2]): f[5] for f in (line.split() for line in lines[20:26])}
    # the summary alone (lines 1-14), each broadcast's Avg Latency(ms) (5th field) made the breakdown's:
    # what fit should read from the whole file
    by_hand = []
    for line in lines[:14]:
        f = line.split()
        if tuple(f[:2]) in fastest and len(f) == 7:
            f[4] = fastest[tuple(f[:2])]
            line = " " * 20 + f"{f[0]} {f[1]}".ljust(20) + "".join(x.ljust(20) for x in f[2:])
        by_hand.append(line)
    assert sum(line != old for line, old in zip(by_hand, lines, strict=False)) == 6
    edited = tmp_path / "summary-by-hand.log"
    edited.write_text("\n".join(by_hand) + "\n")
    whole, hand = read_traces(SUMMARY_STRAGGLER), read_traces(edited)
    # every call on 4 ranks, as fit's --ranks 4 takes them (the log records no group size)
    got, want = (fit_trace(ts.table.assign(group_size=4), meta=ts.meta) for ts in (whole, hand))
    (b_got,) = [f for f in got.fits if f.op == "broadcast"]
    (b_want,) = [f for f in want.fits if f.op == "broadcast"]
    assert b_got.latency_s == b_want.latency_s and b_got.beta_s_per_byte == b_want.beta_s_per_byte
    assert any("fastest rank" in n for n in got.notes) and not any("fastest rank" in n for n in want.notes)


def test_each_summary_keeps_the_fastest_rank_means_of_the_breakdown_after_it(tmp_path):
    # log_summary called twice (as with reset_log() each epoch): the second breakdown's 384 B broadcast
    # made 1.23 ms; the first table's calls keep the first breakdown's 10.61 ms
    lines = SUMMARY_STRAGGLER.read_text().splitlines()
    second = list(lines)
    assert second[20].split()[5] == "10.61"
    second[20] = " " * 20 + "".join(x.ljust(20) for x in ("384.0 B", "1", "10.61", "5.00", "1.23", "5.00"))
    twice = tmp_path / "two-summaries.log"
    twice.write_text("\n".join(lines + second) + "\n")
    ts = read_traces(twice)
    assert ts.skipped.count == 0
    first_384 = ts.table[(ts.table["msg_size"] == "384.0 B") & (ts.table["source_line"] == 3)]
    second_384 = ts.table[(ts.table["msg_size"] == "384.0 B") & (ts.table["source_line"] == 3 + len(lines))]
    assert len(first_384) == len(second_384) == 1
    assert round(first_384["comm_mean_duration_s"].iloc[0] * 1e3, 2) == 10.61
    assert round(second_384["comm_mean_duration_s"].iloc[0] * 1e3, 2) == 1.23


def test_a_fit_through_every_sizes_time_gives_no_uncertainty():
    # the summary (lines 1-14) times each size's all_reduces at one mean, two sizes (4.0 B and 277.75 KB): the
    # line through them has no spread to give an uncertainty by (it printed ± 1e-13-odd µs); a sweep of 31
    # sizes, each its own time off the line, keeps its ±
    from typer.testing import CliRunner

    from zerocalc.cli import app

    sizes = [line.split()[:2] for line in SUMMARY_STRAGGLER.read_text().splitlines()[:14]
             if line.startswith(" ") and line.split()]
    assert ["4.0", "B"] in sizes and ["277.75", "KB"] in sizes
    out = CliRunner().invoke(app, ["fit", str(SUMMARY_STRAGGLER), "--ranks", "4"]).stdout
    block = out[out.index("all_reduce on 4 ranks, 2 sizes"):].split("\n", 4)[:4]
    assert block[1].startswith("  latency (zero-size call) ") and "±" not in block[1]
    assert "bus bandwidth" in block[2] and "±" not in block[2]  # here none: the 4 B calls took longer
    assert block[3] == ("  the line passes through every size's time (one time a size): no spread to give an "
                        "uncertainty by")
    sweep = CliRunner().invoke(app, ["fit", str(DATA / "nccl-tests" / "all_reduce_perf-16xH100-2nodes.txt")])
    assert "±" in sweep.stdout and "passes through every" not in sweep.stdout
