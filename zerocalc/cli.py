"""The ``zerocalc`` command line: parse options, call the library, write the result.

No math lives here. Every :class:`~zerocalc.errors.ZerocalcError` and every usage
error becomes one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import typer
import typer.core

from zerocalc.errors import ZerocalcError


def _echo_err(text: str) -> None:
    typer.echo(text, err=True)


class _OneLineErrors(typer.core.TyperGroup):
    """A command group whose errors are one line on stderr and exit code 2.

    Usage errors are recognised by duck typing (``format_message`` and ``exit_code``),
    whichever click (vendored by typer or not) raised them.
    """

    def main(self, *args, **kwargs):  # type: ignore[override]
        standalone = kwargs.pop("standalone_mode", True)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
            # Non-standalone click returns the code of a ``typer.Exit`` raised by a command;
            # commands themselves return None.
            code = rv if isinstance(rv, int) else 0
        except ZerocalcError as exc:
            _echo_err(f"error: {exc}")
            code = 2
        except typer.Exit as exc:
            code = exc.exit_code
        except typer.Abort:
            _echo_err("aborted")
            code = 1
        except Exception as exc:
            if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
                raise
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
                _echo_err(ctx.get_help())
            else:
                hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
                _echo_err(f"error: {exc.format_message()}{hint}")
            code = exc.exit_code
        if standalone:
            sys.exit(code)
        return code


app = typer.Typer(
    cls=_OneLineErrors,
    name="zerocalc",
    help="What a sharding scheme costs on the wire, in time and in memory; and what your traces say.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
trace_app = typer.Typer(
    cls=_OneLineErrors,
    help="Read NCCL logs, PyTorch profiler traces, nccl-tests and DeepSpeed comms logs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(trace_app, name="trace")


def main() -> None:
    """Console-script entry point."""
    app()


# ---------------------------------------------------------------------------
# Commands are added below, one section per concern (table/derive, feasibility,
# trace, check/fit, report). Each section only wires options to library calls.
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# feasibility: simulate every scheme on N ranks and state the verdict on DeepSpeed #4582
# ---------------------------------------------------------------------------


def _feasibility_table(result) -> str:
    """The text report of :func:`zerocalc.feasibility.run_feasibility`."""
    import textwrap

    c = result.to_dict()["config"]
    head = (f"{'scheme':<24}{'sim B/rank/step':>16}{'model':>12}{'match':>7}{'grad B':>10}"
            f"{'max abs diff':>14}{'max rel diff':>14}  equivalent")
    lines = [f"N = {c['n']} ranks ({c['gpus_per_node']} per node), {c['steps']} Adam steps, "
             f"seed {c['seed']}, "
             f"2-layer MLP with Ψ = {c['psi']} parameters, {c['micro_batch']} samples per rank per step, "
             f"{c['wire_elem_bytes']}-byte (float64) wire elements; "
             f"equivalent = max rel diff ≤ {c['tolerance_rel']:g}",
             "", head, "-" * len(head)]

    def num(x):
        return "-" if x is None else f"{x:g}"

    for r in result.records():
        match = "-" if r["bytes_match"] is None else ("yes" if r["bytes_match"] else "NO")
        lines.append(f"{r['scheme']:<24}{num(r['bytes_per_rank_simulated']):>16}"
                     f"{num(r['bytes_per_rank_model']):>12}{match:>7}"
                     f"{num(r['gradient_bytes_per_rank_simulated']):>10}{r['max_abs_diff']:>14.2e}"
                     f"{r['max_rel_diff']:>14.2e}  {'yes' if r['equivalent'] else 'no'}")
    lines += ["", f"lower bound for the gradient reduction of an exact scheme: (N-1)/N·Ψ·b = "
                  f"{float(result.lower_bound_bytes_per_rank):g} B per rank per step "
                  "(Patarasuk & Yuan, JPDC 2009; ZeRO §2.1)", "", "colocated scheme, conditions:"]
    for cond in result.conditions:
        exact = "exact" if cond["equivalent"] else "not exact"
        lines.append(f"  {cond['condition']:<50} N = {cond['n']:<3} vs {cond['compared_with']:<26}"
                     f" max rel diff {cond['max_rel_diff']:.2e}  {exact}")
    div = result.divergence
    if div:
        picks = sorted({1, 2, 5, 10, 20, 50, 100, len(div)} & set(range(1, len(div) + 1)))
        lines.append("colocated divergence vs steps: " +
                     ", ".join(f"step {k}: {div[k - 1]['max_rel_diff']:.2e}" for k in picks))
    lines += ["", "verdict:",
              *textwrap.wrap(result.verdict, 110, initial_indent="  ", subsequent_indent="  ")]
    b = result.plan_basis
    lines += ["", f"plan (model bytes saved per rank per step; Ψ = {b['psi']:.3g}, N = {b['n']}, "
                  f"G = {b['gpus_per_node']}, {b['comm_bytes']}-byte wire elements, ring):"]
    for p in result.plan:
        lines.append(f"  {p.rank}. [{p.update}] {p.action}")
        lines.append(f"     {p.from_scheme} → {p.to_scheme}: saves {p.bytes_saved_per_rank:.4g} B "
                     f"({p.bytes_saved_over_psi:.3g} B/parameter); {p.evidence}")
    return "\n".join(lines)


@app.command("feasibility")
def feasibility_cmd(
    n: int = typer.Option(4, "--n", help="Simulated ranks (data-parallel degree N)."),
    steps: int = typer.Option(20, "--steps", help="Adam steps to simulate (0: compare nothing)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the weights and of every micro-batch."),
    schemes: list[str] | None = typer.Option(  # noqa: B008 - typer's option declaration
        None, "--schemes", help="Schemes to simulate (repeat or comma-separate); default: all."),
    gpus_per_node: int | None = typer.Option(
        None, "--gpus-per-node", help="Ranks per node for fsdp-hybrid and zeropp (default: 2 if N is even)."),
    fmt: str = typer.Option("table", "--format", help="table or json."),
) -> None:
    """Simulate each scheme on N ranks training a small MLP, compare with data parallelism and the model,
    and state the verdict on DeepSpeed issue #4582 with the implementation plan it leads to."""
    from zerocalc.errors import ConfigError
    from zerocalc.feasibility import FeasibilityConfig, run_feasibility

    if fmt not in ("table", "json"):
        raise ConfigError(f"must be table or json, got {fmt!r}", option="--format")
    names = None
    if schemes:
        names = [s.strip() for item in schemes for s in item.split(",") if s.strip()]
    cfg = FeasibilityConfig(n=n, steps=steps, seed=seed, gpus_per_node=gpus_per_node)
    result = run_feasibility(cfg, names)
    if fmt == "json":
        import json

        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        typer.echo(_feasibility_table(result))
