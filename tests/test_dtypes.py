"""One dtype table for the model, the CLI and the traces (NCCL ncclDataType_t widths)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.dtypes import canonical_dtype, dtype_bytes
from zerocalc.errors import UnknownNameError
from zerocalc.evaluate import dtype_bytes as model_dtype_bytes
from zerocalc.traces.schema import DTYPE_BYTES as TRACE_DTYPE_BYTES

WIDTHS = [("fp32", 4), ("float32", 4), ("fp16", 2), ("half", 2), ("bf16", 2), ("bfloat16", 2), ("fp8", 1),
          ("fp8e5m2", 1), ("int64", 8), ("FP16", 2)]


@pytest.mark.parametrize(("name", "width"), WIDTHS)
def test_widths(name, width):
    assert dtype_bytes(name) == width and model_dtype_bytes(name) == width
    assert TRACE_DTYPE_BYTES[canonical_dtype(name)] == width


def test_unknown_dtype_is_typed():
    with pytest.raises(UnknownNameError, match="unknown dtype 'fp12'"):
        canonical_dtype("fp12")


def test_table_and_check_take_the_same_names():
    runner = CliRunner()
    res = runner.invoke(app, ["table", "--dtype", "bfloat16", "--schemes", "dp", "--n", "8",
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    assert '"comm_bytes_per_element": 2.0' in res.stdout
    trace = str(Path(__file__).parent / "data" / "traces" / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz")
    res = runner.invoke(app, ["check", trace, "--dtype", "half", "--format", "json"])
    assert res.exit_code == 0, res.output
    for command in (["table"], ["check", trace]):
        bad = runner.invoke(app, [*command, "--dtype", "fp12"])
        assert bad.exit_code == 2 and "unknown dtype 'fp12'" in bad.stderr
