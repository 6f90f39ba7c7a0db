"""Model presets (Ψ from published configurations), --gpu-memory / fits / --sort time, warnings for
absurd sizes and byte units past PB."""

import json

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import UnknownNameError
from zerocalc.models import MODELS, get_model
from zerocalc.units import format_bytes, format_seconds, parse_bytes

runner = CliRunner()


def _params(layers, hidden, ffn, heads, kv_heads, vocab, experts=1):
    """Hand count of a Llama-style decoder (Llama 3, Mixtral): per layer q and o (hidden²), k and v
    (hidden × kv_heads × head dim), a gated MLP (3 × hidden × ffn) per expert, a router
    (hidden × experts) when there are experts, two RMSNorm weights; untied embedding and head;
    the final norm."""
    head_dim = hidden // heads
    layer = (2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + experts * 3 * hidden * ffn
             + (hidden * experts if experts > 1 else 0) + 2 * hidden)
    return layers * layer + 2 * vocab * hidden + hidden


@pytest.mark.parametrize("name", [n for n, m in MODELS.items() if m.config])
def test_preset_counts_follow_from_the_published_configuration(name):
    m = MODELS[name]
    assert m.psi == _params(**m.config)


def test_published_totals():
    # the numbers the publishers print, rounded as they print them
    assert round(get_model("llama-3-8b").psi / 1e9, 2) == 8.03
    assert round(get_model("mixtral-8x7b").psi / 1e9, 1) == 46.7  # Mixtral: "46.7B total"
    assert get_model("deepseek-v3").psi == 671e9 and get_model("deepseek-v3").active_psi == 37e9
    g = get_model("GPT-3-175B")  # case-insensitive; Table 2.1: 96 layers, d_model 12288, 175.0B
    assert g.psi == 175e9 and abs(12 * 96 * 12288**2 + 50257 * 12288 - g.psi) / g.psi < 0.005
    with pytest.raises(UnknownNameError):
        get_model("llama-9")


def test_model_sets_psi_and_is_cited():
    out = runner.invoke(app, ["table", "--model", "llama-3-70b", "--schemes", "dp"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("Llama 3 70B: Psi = 7.055e+10 parameters")
    assert "arXiv 2407.21783" in out.output
    out = runner.invoke(app, ["table", "--model", "llama-3-70b", "--psi", "1e9"])
    assert out.exit_code == 2 and "--model" in out.output and "not both" in out.output
    out = runner.invoke(app, ["table", "--model", "llama-9"])
    assert out.exit_code == 2 and "llama-3-70b" in out.output


def test_fits_and_sort_time():
    args = ["table", "--model", "llama-3-70b", "--n", "1024", "--topology", "dgx-h100",
            "--gpu-memory", "80GB", "--format", "json", "--sort", "time"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    by = {r["scheme"]: r for r in rows}
    psi = 70_553_706_496
    # ZeRO §3: model states per GPU (2 + 2 + K)Ψ for DP, (2 + 2 + K)Ψ/N for ZeRO-3, K = 12
    assert by["dp"]["memory_bytes_per_rank"] == pytest.approx(16 * psi) and by["dp"]["fits"] is False
    assert by["zero3"]["memory_bytes_per_rank"] == pytest.approx(16 * psi / 1024)
    assert by["zero3"]["fits"] is True
    assert {r["gpu_memory_bytes"] for r in rows} == {80e9}
    fits = [r["fits"] for r in rows]
    assert fits == sorted(fits, reverse=True)  # those that fit first
    times = [r["time_s"] for r in rows if r["fits"]]
    assert times == sorted(times)  # fastest first among them
    text = runner.invoke(app, args[:-4] + ["--gpu-memory", "80GB"]).output
    assert " fits " in text.splitlines()[1] and "NO" in text and "necessary, not sufficient" in text


def test_gpu_memory_needs_a_unit():
    assert parse_bytes("80GB", "--gpu-memory") == 80 * 10**9
    assert parse_bytes("80GiB", "--gpu-memory") == 80 * 2**30
    out = runner.invoke(app, ["table", "--gpu-memory", "80"])
    assert out.exit_code == 2 and "--gpu-memory" in out.output and "80GB or 80GiB" in out.output


def test_absurd_sizes_warn_and_units_scale():
    out = runner.invoke(app, ["table", "--psi", "1e20", "--n", "1e9", "--schemes", "dp"])
    assert out.exit_code == 0, out.output
    assert "warning: Psi = 1e+20 parameters is far beyond" in out.output
    assert "warning: N = 1e+09 ranks is far beyond" in out.output
    # ring all-reduce of Ψ fp16 values: 2 (N-1)/N Ψ 2 B ≈ 4e20 B per rank
    assert "400.00 EB" in out.output
    assert format_bytes(6e20) == "600.00 EB" and format_bytes(1.6e21) == "1.60 ZB"
    # ring time of that all-reduce, 4e20 B over 8 nodes' links: far past a year, said in years
    assert " years " in out.output and "e+09 s" not in out.output
    assert format_seconds(2 * 86_400) == "2 days" and format_seconds(3.15576e9) == "100 years"
    assert format_seconds(93.1) == "93.1 s"  # below a day: seconds, as before
    quiet = runner.invoke(app, ["table", "--model", "llama-3.1-405b", "--n", "16384", "--schemes", "dp"])
    assert "warning" not in quiet.output
