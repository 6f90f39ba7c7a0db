"""`zerocalc table` and `zerocalc derive` through typer's CliRunner."""

import io
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.schemes import SCHEME_NAMES

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_default_table_lists_every_scheme():
    r = run("table")
    assert r.exit_code == 0, r.output
    for name in SCHEME_NAMES:
        assert f"\n{name} " in r.stdout
    assert "N = 64 (8 node(s) × 8), dgx-a100" in r.stdout


def test_json_contract():
    r = run("table", "--format", "json", "--psi", "7.5B", "--n", "64")
    assert r.exit_code == 0
    records = json.loads(r.stdout)
    assert [rec["scheme"] for rec in records] == list(SCHEME_NAMES)
    rec = {x["scheme"]: x for x in records}
    for x in records:
        assert {"scheme", "bytes_per_rank", "bytes_per_rank_over_psi", "memory_bytes_per_rank",
                "time_s", "equivalent_to_dp"} <= set(x)
        assert isinstance(x["equivalent_to_dp"], bool)
    # hand values: ring all-reduce of 7.5e9 fp16 elements over 64 ranks; ZeRO Table 1 memory
    assert rec["dp"]["bytes_per_rank"] == pytest.approx(2 * 63 / 64 * 7.5e9 * 2)
    assert rec["dp"]["bytes_per_rank_over_psi"] == pytest.approx(2 * 63 / 64)
    assert rec["colocated"]["bytes_per_rank_over_psi"] == pytest.approx(63 / 64)
    assert rec["zero3"]["memory_bytes_per_rank"] == pytest.approx(16 * 7.5e9 / 64)
    assert rec["colocated"]["equivalent_to_dp"] is False


def test_csv_reads_back():
    r = run("table", "--format", "csv", "--schemes", "dp,zero2,zero3", "--dtype", "fp32", "--n", "16")
    assert r.exit_code == 0
    df = pd.read_csv(io.StringIO(r.stdout))
    assert list(df["scheme"]) == ["dp", "zero2", "zero3"]
    assert df.loc[0, "bytes_per_rank"] == pytest.approx(2 * 15 / 16 * 7.5e9 * 4)


def test_markdown():
    r = run("table", "--format", "markdown", "--schemes", "dp,zeropp")
    lines = r.stdout.strip().splitlines()
    # a paragraph line (Ψ, N, topology) and a blank line, then the table, still parseable
    caption, blank, lines = lines[0], lines[1], lines[2:]
    assert caption.startswith("Psi = 7.5e+09 parameters, N = 64 (8 node(s) × 8), dgx-a100, fp16")
    assert blank == "" and "|" not in caption
    assert lines[0].startswith("| scheme |") and set(lines[1]) <= set("|-")
    assert len(lines) == 4 and all(line.count("|") == lines[0].count("|") for line in lines)


def test_latex_is_a_tabular():
    r = run("table", "--format", "latex")
    text = r.stdout.strip()
    # the Ψ/N/topology line is a LaTeX comment, so the tabular below compiles as before
    comment, text = text.split("\n", 1)
    assert comment.startswith("% Psi = 7.5e+09 parameters, N = 64 (8 node(s) × 8), dgx-a100")
    assert text.startswith(r"\begin{tabular}{l") and text.endswith(r"\end{tabular}")
    spec = text.splitlines()[0].removeprefix(r"\begin{tabular}{").removesuffix("}")
    assert set(spec) == {"l", "r"}
    ncols = len(spec)
    rows = [line for line in text.splitlines() if line.endswith(r"\\")]
    assert len(rows) == 1 + len(SCHEME_NAMES)
    for row in rows:
        assert row.count(" & ") == ncols - 1
        assert "_" not in row.replace(r"\_", "")  # every underscore escaped
    assert "µ" not in text


def test_topology_from_toml_and_flags(tmp_path):
    f = tmp_path / "lab.toml"
    f.write_text('name = "lab"\ngpus_per_node = 4\n[intra]\nalpha_us = 0\nbw_GBps = 100\n'
                 '[inter]\nalpha_us = 0\nbw_GBps = 10\n')
    r = run("table", "--topology", str(f), "--n", "8", "--schemes", "dp", "--format", "json")
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)[0]
    # α = 0; a ring over 2 nodes runs at min(100, 10) GB/s: 2·7/8·15e9 / 10e9
    assert rec["time_s"] == pytest.approx(2 * 7 / 8 * 15e9 / 10e9)
    assert rec["gpus_per_node"] == 4
    r = run("table", "--topology", str(f), "--n", "8", "--schemes", "dp", "--format", "json",
            "--inter-bw-GBps", "1000")
    assert json.loads(r.stdout)[0]["time_s"] == pytest.approx(2 * 7 / 8 * 15e9 / 100e9)


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--n", "0"], "--n"), (["--psi", "-3"], "--psi"), (["--psi", "banana"], "--psi"),
     (["--schemes", "zero9"], "unknown scheme 'zero9'"), (["--topology", "dgx-z9"], "unknown topology"),
     (["--n", "12"], "multiple"), (["--dtype", "fp12"], "unknown dtype"), (["--format", "xml"], "--format"),
     (["--topology", "missing.toml"], "--topology")],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    r = run("table", *args)
    assert r.exit_code == 2
    assert r.stdout == ""
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_bad_toml_names_the_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("gpus_per_node = [\n")
    r = run("table", "--topology", str(f))
    assert r.exit_code == 2 and "bad.toml" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_derive_prints_pretty_and_latex():
    r = run("derive", "zero3")
    assert r.exit_code == 0
    assert "all_gather" in r.stdout and "reduce_scatter" in r.stdout
    # ZeRO §7.2.2 per micro-batch: two all-gathers in the parameter dtype, one reduce-scatter in the
    # reduction dtype: n_mb·Ψ·(N-1)/N·(b_g + 2 b_p)
    assert r"\frac{\Psi n_{mb} \left(N - 1\right) \left(b_{g} + 2 b_{p}\right)}{N}" in r.stdout
    r = run("derive", "zero9")
    assert r.exit_code == 2 and "unknown scheme" in r.stderr
    assert run("derive", "dp", "--algorithm", "butterfly").exit_code == 2


def test_override_flag_error_names_the_flag(tmp_path):
    r = run("table", "--intra-bw-GBps", "-3")
    assert r.exit_code == 2 and r.stderr.strip() == "error: --intra-bw-GBps: must be positive, got -3"


def test_toml_unknown_tier_key_is_refused(tmp_path):
    f = tmp_path / "lab.toml"
    f.write_text('gpus_per_node = 4\n[intra]\nalpha_us = 0\nbw_GBPS = 100\n'
                 '[inter]\nalpha_us = 0\nbw_GBps = 10\n')
    r = run("table", "--topology", str(f))
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"error: --topology: {f}: [intra] unknown keys: 'bw_GBPS' "
                                "(known: alpha_us, bw_GBps)")
    r = run("table", "--topology", str(tmp_path / "none.toml"))
    assert r.exit_code == 2 and r.stderr.startswith(f"error: --topology: {tmp_path / 'none.toml'}: ")


@pytest.mark.parametrize("value", ["", " , "])
def test_empty_schemes_option_is_exit_2(value):
    r = run("table", "--schemes", value)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().startswith("error: --schemes: no scheme given")


def test_table_at_one_rank_marks_colocated_equivalent():
    r = run("table", "--n", "1", "--schemes", "colocated,zeropp", "--format", "json")
    assert r.exit_code == 0, r.output
    # N = 1: no cross-rank sum to skip (colocated exact); zeropp sends nothing, so quantises nothing
    assert {d["scheme"]: d["equivalent_to_dp"] for d in json.loads(r.stdout)} == {
        "colocated": True, "zeropp": True}


def test_text_table_notes_on_tree_and_zeropp():
    out = run("table", "--schemes", "dp,zeropp").stdout.splitlines()
    notes = [ln for ln in out if ln.startswith("note: ")]
    assert any("binomial tree" in ln and "Thakur, Rabenseifner & Gropp" in ln
               and "not NCCL's pipelined double binary tree" in ln for ln in notes)
    assert any("zeropp" in ln and "int8" in ln and "int4" in ln and "--dtype" in ln for ln in notes)
    # no zeropp row, no zeropp note
    assert not [ln for ln in run("table", "--schemes", "dp").stdout.splitlines() if "zeropp" in ln]


def test_version():
    from zerocalc import __version__

    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout == f"zerocalc {__version__}\n"
    # the version the package metadata carries (pyproject.toml)
    from importlib.metadata import version

    assert __version__ == version("zerocalc")


def test_psi_as_zerocalc_prints_it_and_ambiguous_forms():
    # "25,557,032" is how check prints Ψ (ResNet-50); 2·(8-1)/8 × 25,557,032 × 2 B on 8 ranks, fp16
    r = run("table", "--psi", "25,557,032", "--n", "8", "--schemes", "dp", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["bytes_per_rank"] == pytest.approx(2 * 7 / 8 * 25_557_032 * 2)
    for bad in ("7.5e9B", "1.5"):
        r = run("table", "--psi", bad)
        assert r.exit_code == 2 and r.stderr.startswith("error: --psi: ")


# --- micro-batches, dtypes per side, layouts (issue 10) -------------------------------------------

def test_table_micro_batches_per_optimizer_step():
    # Ψ = 1e9, N = 8, fp16, 4 micro-batches; R = 7/8 · 2e9 B = one ring pass over the model.
    # DeepSpeed ZeRO-1: AR at the boundary + AG = 3R; ZeRO-2: AR every micro-batch + AG = (2·4 + 1)R;
    # FSDP FULL_SHARD: 3R every micro-batch = 12R, with set_requires_gradient_sync(False) 2·4R + R.
    r_pass = 7 / 8 * 2e9
    want = {"deepspeed-zero1": 3, "deepspeed-zero2": 9, "fsdp-full-shard": 12, "dp": 8}
    r = run("table", "--psi", "1e9", "--n", "8", "--micro-batches", "4", "--format", "json",
            "--schemes", ",".join(want))
    assert r.exit_code == 0, r.output
    recs = {x["scheme"]: x for x in json.loads(r.stdout)}
    for name, units in want.items():
        assert recs[name]["bytes_per_rank"] == pytest.approx(units * r_pass), name
        assert recs[name]["micro_batches"] == 4
        assert recs[name]["bytes_per_rank_per_micro_batch"] == pytest.approx(units * r_pass / 4)
        assert all(c["group"] == "world" and c["group_size"] == 8 for c in recs[name]["collectives"])
    r = run("table", "--psi", "1e9", "--n", "8", "--micro-batches", "4", "--grad-sync", "boundary",
            "--format", "json", "--schemes", "fsdp-full-shard,dp")
    recs = {x["scheme"]: x for x in json.loads(r.stdout)}
    assert recs["fsdp-full-shard"]["bytes_per_rank"] == pytest.approx(9 * r_pass)
    assert recs["dp"]["bytes_per_rank"] == pytest.approx(2 * r_pass)
    text = run("table", "--micro-batches", "8", "--schemes",
               "deepspeed-zero1,deepspeed-zero2,zero3,fsdp-full-shard").stdout
    assert "8 micro-batches per optimizer step" in text and "per µbatch" in text
    assert "deepspeed-zero2: AR(grad) ×8, AG(param) ×1" in text


def test_table_dtypes_per_side_and_layout():
    # FSDP2 MixedPrecisionPolicy(bf16, fp32): two bf16 gathers and one fp32 reduce-scatter: 7/8·Ψ·(2+2+4)
    r = run("table", "--psi", "1e9", "--n", "8", "--param-dtype", "bf16", "--grad-dtype", "fp32",
            "--format", "json", "--schemes", "fsdp-full-shard")
    rec = json.loads(r.stdout)[0]
    assert rec["bytes_per_rank"] == pytest.approx(7 / 8 * 1e9 * 8)
    assert (rec["param_comm_bytes_per_element"], rec["grad_comm_bytes_per_element"]) == (2, 4)
    assert {(c["collective"], c["elem_bytes"]) for c in rec["collectives"]} == {("all_gather", 2),
                                                                                  ("reduce_scatter", 4)}
    # tp 8 × pp 2 on 256 GPUs: DP group of 16 carrying Ψ/16; dp all-reduce 2·15/16·(Ψ/16)·2 B
    r = run("table", "--psi", "16e9", "--n", "256", "--tp", "8", "--pp", "2", "--format", "json",
            "--schemes", "dp,zero3")
    recs = {x["scheme"]: x for x in json.loads(r.stdout)}
    assert recs["dp"]["dp_size"] == 16 and recs["dp"]["n"] == 256
    assert recs["dp"]["bytes_per_rank"] == pytest.approx(2 * 15 / 16 * 1e9 * 2)
    assert recs["zero3"]["memory_bytes_per_rank"] == pytest.approx(16 * 1e9 / 16)
    for bad, option in ((["--tp", "3"], "--n"), (["--micro-batches", "0"], "--micro-batches"),
                        (["--grad-sync", "sometimes"], "gradient-sync"),
                        (["--hsdp-shard-size", "3"], "--hsdp-shard-size")):
        r = run("table", *bad)
        assert r.exit_code == 2 and option in r.stderr, bad


def test_derive_cites_the_rule_and_prints_a_legend():
    r = run("derive", "deepspeed-zero2")
    assert r.exit_code == 0, r.output
    flat = " ".join(r.stdout.split())  # wrapped to the terminal's width
    assert "ZeRO stage >= 2 communicates during non gradient accumulation boundaries" in flat
    assert "every micro-batch" in flat and "once per optimizer step" in flat
    assert "symbols:" in flat and "micro-batches per optimizer step" in flat
    doc = json.loads(run("derive", "fsdp-full-shard", "--format", "json", "--grad-sync", "boundary").stdout)
    assert [p["runs_per_step"] for p in doc["phases"]] == ["n_mb", "n_mb", "1"]
    assert set(doc["symbols"]) >= {"Psi", "N", "b_p", "b_g", "n_mb"}
    latex = run("derive", "dp", "--format", "latex").stdout
    assert r"\Psi b_{g} n_{mb}" in latex and "LaTeX:" not in latex


def test_derive_nccl_legend_names_every_symbol_of_its_formulas():
    import sympy
    from sympy.abc import _clash  # N, gamma, ... read as symbols, not sympy's functions

    # before, NCCL's n, p, m, c, B, L_0, l_intra, l_inter, f and B_tree were used but named nowhere
    doc = json.loads(run("derive", "dp", "--nccl", "--format", "json").stdout)
    texts = [e["text"] for e in doc["expressions"].values()]
    used = set().union(*(sympy.sympify(t, locals=_clash).free_symbols for t in texts))
    assert {str(s) for s in used} <= set(doc["symbols"])
    assert {"L_0", "l_inter", "B_tree"} <= set(doc["symbols"])
    assert "L₀ (L_0): base latency" in run("derive", "dp", "--nccl").stdout


@pytest.mark.parametrize("n", ["64", "8"])
def test_later_nvls_note_only_where_a_phase_runs_nvls(n):
    # NCCL 2.26 on Hopper: NVLS calls are timed with 2.30's figures; the note says so only when the table's
    # own choice column shows an NVLS pair (64 ranks on 8 nodes: Ring throughout; 8 ranks of one node: NVLS)
    res = runner.invoke(app, ["table", "--topology", "dgx-h100", "--nccl-version", "2.26.2", "--n", n])
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.stdout.splitlines() if not ln.startswith("note:")]
    nvls_chosen = any("NVLS/" in ln or "NVLSTree/" in ln for ln in rows)
    assert nvls_chosen == (n == "8")
    assert ("figures for Hopper" in res.stdout) == nvls_chosen


def _row(*args):
    r = run("table", "--schemes", "dp", "--format", "json", *args)
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)
    return row


def test_gpus_per_node_fewer_than_the_presets_node_is_their_share_of_its_nics():
    # DGX H100: 8 ConnectX-7 of 400 Gb/s, one per GPU (datasheet); a run of 1 GPU a host uses its own NIC,
    # 50 GB/s, as check prices 10 ranks on 10 DGX H100 hosts. Ring all-reduce of Ψ = 7.5e9 fp16 on 16 ranks:
    # 2 (N-1)/N Ψ b / bw = 2 * 15/16 * 15e9 B / 50e9 B/s = 0.5625 s (α terms: 15 × 2 × 14 µs, left aside)
    row = _row("--topology", "dgx-h100", "--n", "16", "--gpus-per-node", "1")
    assert row["time_s_ring"] == pytest.approx(2 * 15 / 16 * 15e9 / 50e9, rel=1e-3)  # before: 8 NICs, 70.7 ms
    r = run("table", "--topology", "dgx-h100", "--n", "16", "--gpus-per-node", "1", "--schemes", "dp")
    assert "note: nodes: dgx-h100 as nodes of 1 GPU and 1 NIC" in r.stdout


def test_nvl72_ranks_past_one_rack_are_spread_as_check_spreads_them():
    # 128 GB200 ranks: two racks of 16 trays x 4 (OCI's "2 Racks - 32 nodes"), not refused for 128 % 72
    spread = _row("--topology", "gb200-nvl72", "--n", "128")
    assert (spread["nodes"], spread["gpus_per_node"]) == (2, 64)
    given = _row("--topology", "gb200-nvl72", "--n", "128", "--gpus-per-node", "64")
    assert (given["time_s_nccl"], given["time_s_ring"]) == (spread["time_s_nccl"], spread["time_s_ring"])
