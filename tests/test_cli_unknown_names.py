"""A name zerocalc does not know (a dtype, scheme, topology, model) given to an option is refused in one line
that names the option, as every other bad option value is: with several dtype options, the one that was
wrong. A name given as an argument, or read from a file, is said as before."""

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
RUN = "tests/data/traces/real-runs/ds-zero2-ga4"


@pytest.mark.parametrize(("args", "line"), [
    (["table", "--dtype", "int3"], "error: --dtype: unknown dtype 'int3'; known: "),
    (["table", "--dtype", "bf16", "--grad-dtype", "fp33"], "error: --grad-dtype: unknown dtype 'fp33'; "),
    (["table", "--param-dtype=fp33", "--grad-dtype", "bf16"], "error: --param-dtype: unknown dtype 'fp33'; "),
    # the same wrong name in two options: both were wrong
    (["report", "--param-dtype", "int3", "--grad-dtype", "int3"],
     "error: --param-dtype/--grad-dtype: unknown dtype 'int3'; "),
    (["table", "--schemes", "zero2,nope"], "error: --schemes: unknown scheme 'nope'; known: dp, "),
    (["table", "--topology=nope"], "error: --topology: unknown topology 'nope'; known: dgx-a100, "),
    (["table", "--model", "nope"], "error: --model: unknown model 'nope'; known: "),
    (["feasibility", "--schemes", "nope"], "error: --schemes: unknown scheme 'nope'; "),
    (["feasibility", "--dtype", "int3"], "error: --dtype: unknown dtype 'int3'; "),
    (["check", RUN, "--dtype", "int3"], "error: --dtype: unknown dtype 'int3'; "),
    (["check", RUN, "--scheme", "zero9"], "error: --scheme: unknown scheme 'zero9'; "),
    # an argument names no option, a flag before it included
    (["derive", "nope"], "error: unknown scheme 'nope'; "),
    (["derive", "--nccl", "nope"], "error: unknown scheme 'nope'; "),
])
def test_an_unknown_name_is_refused_naming_its_option(args, line):
    r = runner.invoke(app, args)
    assert r.exit_code == 2
    assert r.stderr.startswith(line) and r.stderr.count("\n") == 1, r.stderr


SWEEP = "tests/data/traces/nccl-tests/all_reduce_perf-16xH100-2nodes.txt"


@pytest.mark.parametrize(("args", "env", "line"), [
    # --nccl-algo / --nccl-proto set NCCL_ALGO / NCCL_PROTO: a bad value names the option that set it
    (["check", SWEEP, "--nccl-algo", "Foo"], {},
     "error: --nccl-algo: NCCL_ALGO: unknown name 'foo' in 'Foo'"),
    (["table", "--nccl-proto=Bar"], {}, "error: --nccl-proto: NCCL_PROTO: unknown name 'bar' in 'Bar'"),
    # set in the environment alone, the variable is named, as before
    (["check", SWEEP], {"NCCL_ALGO": "Foo"}, "error: NCCL_ALGO: unknown name 'foo' in 'Foo'"),
    (["check", SWEEP, "--nccl-env", "NCCL_ALGO=Foo"], {},
     "error: --nccl-env: NCCL_ALGO=Foo: unknown name 'foo'"),
])
def test_a_bad_nccl_variable_names_the_option_that_set_it(args, env, line):
    r = runner.invoke(app, args, env=env)
    assert r.exit_code == 2
    assert r.stderr.startswith(line) and r.stderr.count("\n") == 1, r.stderr
