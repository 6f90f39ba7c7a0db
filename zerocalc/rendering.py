"""Text renderings of zerocalc's results for the command line: the volume table (text, markdown,
LaTeX, CSV, JSON), the feasibility verdict and plan, and the check (the nccl-tests sweep comparison is
:mod:`zerocalc.sweep_text`).

Pure: results in, strings out; no option parsing and no I/O (``zerocalc/cli/`` wires options to
the library and writes what these return). Heavy imports stay inside the functions, so that the
command line starts fast.
"""

from __future__ import annotations

from enum import StrEnum


class TableFormat(StrEnum):
    """Output formats of ``zerocalc table``."""

    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"
    latex = "latex"


def _display_rows(df) -> tuple[list[str], list[list[str]]]:
    from zerocalc.collectives import Algorithm
    from zerocalc.units import format_bytes, format_seconds

    nccl = "time_s_nccl" in df.columns
    lib = str(df["nccl_library"].iloc[0]) if "nccl_library" in df.columns and len(df) else "NCCL"  # RCCL: AMD
    fits = "fits" in df.columns
    per_mb = "micro_batches" in df.columns and int(df["micro_batches"].iloc[0]) > 1
    header = ["scheme", "sent/rank", *(["per µbatch"] if per_mb else []), "sent/(Psi*b)"] + [
        f"t {a.value}" for a in Algorithm] + (
        [f"t {lib}", f"{lib} choice"] if nccl else []) + ["memory/GPU"] + (["fits"] if fits else []) + [
        "= DP"]
    rows = [
        [r.scheme, format_bytes(r.bytes_per_rank),
         *([format_bytes(r.bytes_per_rank_per_micro_batch)] if per_mb else []),
         f"{r.bytes_per_rank_over_psi:.3f}"]
        + [format_seconds(getattr(r, f"time_s_{a.value}")) for a in Algorithm]
        + ([format_seconds(r.time_s_nccl), r.nccl_choice] if nccl else [])
        + [format_bytes(r.memory_bytes_per_rank)] + (["yes" if r.fits else "NO"] if fits else [])
        + ["yes" if r.equivalent_to_dp else "no"]
        for r in df.itertuples(index=False)
    ]
    return header, rows


def _latex_escape(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"),
                 ("µ", r"$\mu$"), ("Psi", r"$\Psi$")):
        text = text.replace(a, b)
    return text


#: Printed under the text table (and in the report's caption): what the columns do not say.
TABLE_NOTES = (
    "t tree is the textbook binomial tree without pipelining (Thakur, Rabenseifner & Gropp, IJHPCA "
    "2005), not NCCL's pipelined double binary tree",
    "zeropp's quantised phases (qwZ int8 weights, qgZ int4 gradients) keep their width whatever "
    "--dtype says, and its memory includes hpZ's secondary parameter copy (Psi/G)",
)


def table_caption(df, psi: int, topology_name: str, dtype: str, k: float) -> str:
    """The one line that says what the table is for: Ψ, N, nodes, topology, dtype, K, micro-batches,
    and the parallel layout when there is one."""
    from zerocalc.units import format_bytes

    g = int(df["gpus_per_node"].iloc[0])
    n = int(df["n"].iloc[0])
    first = df.iloc[0]
    tp, pp = int(first.get("tp", 1)), int(first.get("pp", 1))
    mb = int(first.get("micro_batches", 1))
    layout = ""
    if tp * pp > 1:
        layout = (f" = tp {tp} × pp {pp} × N {int(first['dp_size'])} data-parallel ranks, each group "
                  f"carrying Psi/(tp·pp) = {psi / (tp * pp):.4g}")
    steps = (f", {mb} micro-batches per optimizer step (volumes and times per optimizer step)"
             if mb > 1 else "")
    return (f"Psi = {psi:.4g} parameters, N = {n} ({int(df['nodes'].iloc[0])} node(s) × {g}){layout}, "
            f"{topology_name}, {dtype} on the wire, K = {k:g}{steps}; model states only "
            f"(GB = 1e9 B; {format_bytes(psi / (tp * pp) * df['comm_bytes_per_element'].iloc[0])} "
            "= Psi*b)")


def _step_notes(df) -> list[str]:
    """What runs per micro-batch and what per optimizer step, and on which group, per scheme shown
    (only when it is not the textbook step: several micro-batches, tp/pp, an HSDP shard group)."""
    from zerocalc.schemes import GradSync, get_scheme

    first = df.iloc[0]
    mb, sync = int(first.get("micro_batches", 1)), str(first.get("grad_sync", "every"))
    layout = int(first.get("tp", 1)) * int(first.get("pp", 1)) > 1
    hybrid = "fsdp-hybrid" in set(df["scheme"])
    if mb == 1 and not layout and not hybrid:
        return []
    short = {"all_reduce": "AR", "reduce_scatter": "RS", "all_gather": "AG", "broadcast": "BC", "reduce": "R",
             "all_to_all": "A2A"}
    out = []
    if mb > 1:
        parts = []
        for name in dict.fromkeys(df["scheme"]):
            s = get_scheme(name)
            runs = ", ".join(f"{short[ph.collective.value]}({ph.side.value}) ×"
                             f"{mb if ph.runs(sync) != 1 else 1}" for ph in s.phases)
            choice = " [--grad-sync]" if s.grad_sync_choice else ""
            parts.append(f"{name}: {runs}{choice}")
        mode = "" if sync == GradSync.EVERY.value else " under --grad-sync boundary"
        out.append(f"runs per optimizer step of {mb} micro-batches{mode} (zerocalc derive SCHEME cites each "
                   "rule): " + "; ".join(parts))
    dp = int(first["dp_size"])
    groups = [f"collectives run on the data-parallel group of N = {dp} ranks"
              + (f" (world {int(first['n'])} / (tp·pp))" if layout else "")]
    if hybrid:
        h = int(df.loc[df["scheme"] == "fsdp-hybrid", "hsdp_shard_size"].iloc[0])
        groups.append(f"except fsdp-hybrid's: gathers and reduce-scatter in shard groups of H = {h}, "
                      f"all-reduce across replicate groups of N/H = {dp // h}")
    if "zeropp" in set(df["scheme"]):
        groups.append("and zeropp's hpZ/qgZ: in the node, then across nodes")
    out.append("groups: " + "; ".join(groups))
    return out


def render_table(df, fmt: TableFormat, caption: str | None = None) -> str:
    """The evaluated DataFrame as text in one of the table formats.

    ``caption`` (Ψ, N, topology…) goes where the format can carry it and stay parseable: a
    paragraph line before a markdown table, a ``%`` comment line before a LaTeX tabular, the
    first line of the text table; CSV and JSON stay pure data.
    """
    if fmt is TableFormat.csv:
        return df.to_csv(index=False)
    if fmt is TableFormat.json:
        import json

        records = df.astype(object).where(df.notna(), None).to_dict(orient="records")  # n/a: null, not NaN
        return json.dumps(records, indent=2) + "\n"
    header, rows = _display_rows(df)
    if fmt is TableFormat.markdown:
        lines = [caption.replace("*", r"\*"), ""] if caption else []
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    if fmt is TableFormat.latex:
        lines = ["% " + caption] if caption else []
        lines += [r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\hline",
                 " & ".join(_latex_escape(h) for h in header) + r" \\", r"\hline"]
        lines += [" & ".join(_latex_escape(c) for c in r) + r" \\" for r in rows]
        lines += [r"\hline", r"\end{tabular}"]
        return "\n".join(lines) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt_row = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
    lines = [caption] if caption else []
    lines += [fmt_row(header), fmt_row(["-" * w for w in widths])] + [fmt_row(r) for r in rows]
    notes = [t for t in TABLE_NOTES if not t.startswith("zeropp") or "zeropp" in set(df["scheme"])]
    lines += [f"note: {t}" for t in notes]
    return "\n".join(lines) + "\n"


def _yes_no_na(flag: bool | None) -> str:
    """``yes``/``no``, or ``n/a`` where nothing was compared (``None``)."""
    return "n/a" if flag is None else ("yes" if flag else "no")


def _feasibility_table(result) -> str:
    """The text report of :func:`zerocalc.feasibility.run_feasibility`."""
    import textwrap

    from zerocalc.units import format_diff

    c = result.to_dict()["config"]
    head = (f"{'scheme':<24}{'sim B/rank/step':>16}{'model':>12}{'match':>7}{'grad B':>10}"
            f"{'max abs diff':>14}{'max rel diff':>14}  equivalent")
    lines = [f"N = {c['n']} ranks ({c['gpus_per_node']} per node), {c['steps']} Adam steps, "
             f"seed {c['seed']}, "
             f"2-layer MLP with Ψ = {c['psi']} parameters, "
             + (f"{c['micro_batch']} samples per rank per step, " if c["micro_batches"] == 1 else
                f"{c['micro_batches']} micro-batches of {c['micro_batch']} samples per rank per step "
                "(gradient accumulation), ") +
             f"{c['wire_elem_bytes']}-byte (float64) wire elements; "
             f"equivalent = max rel diff ≤ {c['tolerance_rel']:g}",
             "", head, "-" * len(head)]

    def num(x):
        return "-" if x is None else f"{x:g}"

    for r in result.records():
        match = "-" if r["bytes_match"] is None else ("yes" if r["bytes_match"] else "NO")
        lines.append(f"{r['scheme']:<24}{num(r['bytes_per_rank_simulated']):>16}"
                     f"{num(r['bytes_per_rank_model']):>12}{match:>7}"
                     f"{num(r['gradient_bytes_per_rank_simulated']):>10}"
                     f"{format_diff(r['max_abs_diff'], 2):>14}"
                     f"{format_diff(r['max_rel_diff'], 2):>14}  {_yes_no_na(r['equivalent'])}")
    lines += ["", f"lower bound for the gradient reduction of an exact scheme: (N-1)/N·Ψ·b = "
                  f"{float(result.lower_bound_bytes_per_rank):g} B per rank per step "
                  "(Patarasuk & Yuan, JPDC 2009; ZeRO §2.1)", "", "colocated scheme, conditions:"]
    for cond in result.conditions:
        exact = {None: "n/a (no step compared)", True: "exact", False: "not exact"}[cond["equivalent"]]
        lines.append(f"  {cond['condition']:<50} N = {cond['n']:<3} vs {cond['compared_with']:<26}"
                     f" max rel diff {format_diff(cond['max_rel_diff'], 2)}  {exact}")
    div = result.divergence
    if div:
        picks = sorted({1, 2, 5, 10, 20, 50, 100, len(div)} & set(range(1, len(div) + 1)))
        lines.append("colocated divergence vs steps: " +
                     ", ".join(f"step {k}: {format_diff(div[k - 1]['max_rel_diff'], 2)}" for k in picks))
    lines += ["", "verdict:",
              *textwrap.wrap(result.verdict, 110, initial_indent="  ", subsequent_indent="  ")]
    return "\n".join(lines + _plan_lines(result))


def _plan_lines(result) -> list[str]:
    """The feasibility report's plan: its basis, the items that help, those kept apart, and what a
    calibrated pair's mark means."""
    from zerocalc.nccl.steps import CALIBRATED_MARK
    from zerocalc.plan import helps, pairs_library, slower

    b = result.plan_basis
    where = f"on {b['topology']}, " if b.get("topology") else ""
    timed = f"time by {b.get('time_model_name') or 'the ring α-β model'}; " if where else ""
    unavailable = "" if b.get("in_network_available") is not False else ", not on this cluster"
    k = int(b.get("micro_batches") or 1)
    step = "step" if k == 1 else f"optimizer step of {k} micro-batches"
    tp, pp = int(b.get("tp") or 1), int(b.get("pp") or 1)
    group = (f" (the data-parallel group of a {b.get('world')}-GPU run at tp = {tp}, pp = {pp}: Ψ/(tp·pp) "
             "a rank, G of the group a node)" if tp * pp > 1 else "")
    lines = ["", f"plan (model bytes{' and time' if where else ''} saved per rank per {step}; {where}"
                 f"Ψ = {b['psi']:.3g}, N = {b['n']}, G = {b['gpus_per_node']}{group}, "
                 f"{_plan_wire(b)}; {timed}in-network reduction priced: {b['in_network']}{unavailable}):"]
    lib = pairs_library(b)
    for p in helps(result.plan):
        lines += _plan_item_lines(p, bool(where), lib)
    worse = slower(result.plan)
    if worse:
        lines += ["", "  slower on this cluster (kept apart):" if where else
                  "  sending more bytes (kept apart):"]
        for p in worse:
            lines += _plan_item_lines(p, bool(where), lib)
    if any(CALIBRATED_MARK in p.from_choice + p.to_choice for p in result.plan):
        lines += ["", f"  {CALIBRATED_MARK} timed by the calibration of topology {b['topology']} "
                      f"(fit --out), the other pairs by {lib}'s tables"]
    return lines


def _plan_wire(basis) -> str:
    """The plan's wire widths in words: ``2-byte wire elements`` or, under mixed precision, ``2-byte
    parameters and 4-byte gradients on the wire``."""
    b, p, g = (float(basis.get(k) or basis["comm_bytes"])
               for k in ("comm_bytes", "param_bytes", "grad_bytes"))
    return f"{b:g}-byte wire elements" if p == g == b else (
        f"{p:g}-byte parameters and {g:g}-byte gradients on the wire")


def _plan_item_lines(p, priced: bool, lib: str) -> list[str]:
    """One plan item in two lines: its step, then what it saves (bytes; time where ``priced`` on a
    cluster; the pairs ``lib``, NCCL or RCCL, picks) and its evidence."""
    from zerocalc.units import format_bytes, format_seconds

    if p.bytes_saved_per_rank is None:
        saved = "not priced"
    elif p.bytes_saved_per_rank >= 0:
        saved = f"saves {format_bytes(p.bytes_saved_per_rank)} ({p.bytes_saved_over_psi:.3g} B/parameter)"
    else:
        saved = (f"sends {format_bytes(-p.bytes_saved_per_rank)} more "
                 f"({-p.bytes_saved_over_psi:.3g} B/parameter)")
    if p.time_saved_s is not None:
        saved += (f", {format_seconds(p.time_saved_s)} per step" if p.time_saved_s >= 0
                  else f", {format_seconds(-p.time_saved_s)} slower per step")
    elif priced and p.bytes_saved_per_rank is not None:
        saved += f", time not priced by {lib}'s model"
    if p.from_choice:
        to = f" → {p.to_choice}" if p.to_choice and p.to_choice != p.from_choice else ""
        saved += f" [{lib}: {p.from_choice}{to}]"
    from zerocalc.plan import switch_words

    words = switch_words(p, "not available")
    switch = f" [in the switch: {words[1:-1]}]" if words else ""
    return [f"  {p.rank}. [{p.update}] {p.action}{switch}",
            f"     {p.from_scheme} → {p.to_scheme}: {saved}; {p.evidence}"]


def _skip_notes(skipped) -> list[str]:
    """The reader's summary of lines it could not use, as note lines ([] when none)."""
    if not skipped:
        return []
    return [f"skipped {skipped.counted()} (--strict stops at the first), e.g. "
            + skipped.example_text()]


def _check_text(res, skipped=()) -> str:
    """The ``check`` result as plain text (numbers come from :mod:`zerocalc.validate`)."""
    from zerocalc.units import format_bytes, format_seconds

    m = res.measurement
    told = ", told apart by process (the trace records no rank)" if m.ranks_how else ""
    lines = [m.psi_how, m.n_how, f"steps: {m.steps_how}",
             f"ranks: {len(m.ranks)}{told}; element type on the wire: {m.comm_dtype} "
             f"({m.comm_elem_bytes:g} B)"]
    lines += _check_layout_lines(m)
    lines += [f"note: {t}" for t in _check_notes(res)]
    lines += [f"note: {t}" for t in skipped]
    lines += ["", "measured, bytes sent per rank per step (ring accounting), by category:"]
    for r in m.categories.itertuples():
        if r.calls_per_rank_per_step == 0:
            continue
        per = "per rank, whole trace" if r.category == "one_off" else "per rank per step"
        word = "call " if r.calls_per_rank_per_step == 1 else "calls"
        lines.append(f"  {r.category:<12}{r.calls_per_rank_per_step:>7.3g} {word} "
                     f"{format_bytes(r.bytes_per_rank_per_step):>12} {per}: {r.description}")
    if m.n == 1:
        lines += ["", "N = 1: a single rank sends nothing to another rank; there is no cross-rank traffic to "
                  "compare with the schemes."]
        return "\n".join(lines)
    lines += ["", f"  {'scheme':<24}{'predicted':>12}{'measured':>12}{'ratio':>8}  pattern  explanation"]
    for c in res.comparisons:
        pat = "match" if c.pattern_match else "no"
        lines.append(f"  {c.scheme:<24}{format_bytes(c.predicted_bytes_per_rank_per_step):>12}"
                     f"{format_bytes(c.measured_bytes_per_rank_per_step):>12}{c.ratio:>8.3f}  {pat:<7}  "
                     f"{c.explanation}")
    lines.append("")
    lines.append(_verdict(res, "consistent"))
    for group in res.indistinguishable:
        lines.append(f"the trace cannot tell apart: {', '.join(group)} (same collectives, same volume)")
    t = res.timing
    if t is not None:
        if t.fit is not None and t.fit.physical:
            lines.append(
                f"timing: α-β {t.fit_source}: latency {format_seconds(t.fit.latency_s)}, busbw "
                f"{t.fit.busbw_Bps / 1e9:.3g} ± {t.fit.busbw_se_Bps / 1e9:.2g} GB/s; step communication "
                f"predicted {format_seconds(t.predicted_step_time_s)}, measured (sum of durations) "
                f"{format_seconds(t.measured_step_time_s)}, ratio {t.ratio:.3g}")
        elif t.fit is not None:
            terms = unphysical_terms(t.fit.alpha_s, t.fit.latency_s, t.fit.beta_s_per_byte)
            lines.append(f"timing: α-β {t.fit_source}: {terms}; no step prediction from it; measured (sum of "
                         f"durations) {format_seconds(t.measured_step_time_s)} per rank per step")
        else:
            lines.append(f"timing: measured (sum of durations) {format_seconds(t.measured_step_time_s)} "
                         f"per rank per step; no prediction ({t.note})")
        if t.note and t.fit is not None:
            lines.append(f"timing note: {t.note}")
    if res.nccl_timing is not None:
        from zerocalc.validate.nccl_timing import timing_lines

        lines += timing_lines(res.nccl_timing, format_seconds, format_bytes)
    return "\n".join(lines)


def unphysical_terms(alpha_s: float, latency_s: float, beta_s_per_byte: float) -> str:
    """An unphysical α-β fit's two terms in words, for ``check``'s timing line: the latency (marked where α
    < 0) and the bus bandwidth (1/β) where β > 0, none where it is not."""
    from zerocalc.units import format_seconds

    lat = f"latency {format_seconds(latency_s)}" + ("" if alpha_s >= 0 else " (negative)")
    bw = (f"busbw {1e-9 / beta_s_per_byte:.3g} GB/s" if beta_s_per_byte > 0
          else f"no bus bandwidth (β = {beta_s_per_byte:.3g} s/B ≤ 0: the times do not grow with the size)")
    return f"{lat}, {bw}"


def _check_layout_lines(m) -> list[str]:
    """Groups, element types per side and micro-batches, in words (empty parts left out)."""
    out = []
    world = f"world size {m.world_size}" if m.world_size is not None else "world size not recorded"
    if m.shard_size:
        out.append(f"groups: data-parallel N = {m.n} as HSDP's shard groups of {m.shard_size} × replicate "
                   f"groups of {m.n // m.shard_size}; {world}")
    elif m.expert_size:
        out.append(f"groups: data-parallel N = {m.n} for the dense parameters, expert-data-parallel groups "
                   f"of {m.expert_size} for the experts (expert parallelism {m.n // m.expert_size}: each "
                   f"scheme priced on both, its all-to-all reported apart); {world}")
    elif m.dp_group_sizes:
        out.append(f"groups: data-parallel N = {m.n} ({world})")
    if m.param_dtype and m.grad_dtype:
        out.append(f"element types: parameter-side collectives (all-gather, broadcast) {m.param_dtype}, "
                   f"gradient-side (all-reduce, reduce-scatter, reduce) {m.grad_dtype}; each call is priced "
                   "at its own type")
    if m.micro_batches_how:
        out.append(f"micro-batches: {m.micro_batches_how}; gradient sync: {m.grad_sync or 'not shown'} "
                   f"({m.grad_sync_how})")
    return out


def _verdict(res, lead: str = "Consistent") -> str:
    """``Consistent with the trace (best first): …`` (``lead`` its first word), with the schemes that send the
    pattern in a regime of their implementation the notes name (parameters kept, gathered on smaller groups,
    frozen …)."""
    from zerocalc.validate import reused_sentence

    recompute = ", and gathered again for activation checkpointing's recompute"
    smaller = tuple(res.secondary_partition)  # the schemes named so take the readings below in its phrase
    frozen = tuple(s for s in res.frozen if s not in smaller)
    by_pass = any(c.frozen_how == "pass" for c in res.comparisons if c.scheme in res.frozen)
    also = [(res.kept, "gathered parameters kept across the micro-batches"),
            (smaller, "parameters gathered on smaller groups"
             + (" and some of them never reduced" + (", or tied and gathered at each use" if by_pass else "")
                if set(smaller) & set(res.frozen) else "")
             + (recompute if set(smaller) & set(res.recomputed) else "")),
            (res.all_reduced_once, "the shards all-reduced once a step"),
            (res.partly_kept, "part of the parameters kept from the forward to the backward"),
            (tuple(s for s in res.recomputed if s not in res.frozen + smaller),
             "parameters gathered again for activation checkpointing's recompute"),
            (frozen, "frozen parameters gathered and never reduced" if not by_pass
             else "parameters gathered and never reduced, or tied and gathered at each use"
             + (recompute if set(frozen) & set(res.recomputed) else ""))]
    return (f"{lead} with the trace (best first): " + (_ranked(res) or "none")
            + (f"; also {reused_sentence(res.reused)}" if res.reused else "")
            + "".join(f"; also {', '.join(names)} with {how} (see the note above)"
                      for names, how in also if names))


def _ranked(res) -> str:
    """Consistent schemes, best first, those the trace cannot tell apart joined by ' = ' (no order)."""
    groups = {s: g for g in res.indistinguishable for s in g}
    label = {c.scheme: c.label for c in res.comparisons}
    out, seen = [], set()
    for s in res.matches:
        if s in seen:
            continue
        g = groups.get(s, (s,))
        seen.update(g)
        out.append(" = ".join(label.get(x, x) for x in g))
    return ", ".join(out)


def _check_rows(res) -> list[dict]:
    """One row per scheme: the check's table as records (csv, markdown)."""
    return [{"scheme": c.scheme, "predicted_bytes_per_rank_per_step": c.predicted_bytes_per_rank_per_step,
             "measured_bytes_per_rank_per_step": c.measured_bytes_per_rank_per_step, "ratio": c.ratio,
             "pattern_match": c.pattern_match, "consistent": c.scheme in res.matches,
             "explanation": c.explanation} for c in res.comparisons]


def _check_markdown(res, read=()) -> str:
    """The ``check`` result as markdown: the text's lines and notes (``read``: the reader's, as
    :func:`_check_text` takes them), its table of schemes, its verdict."""
    from zerocalc.units import format_bytes

    m = res.measurement
    lines = [f"- {m.psi_how}", f"- {m.n_how}", f"- steps: {m.steps_how}"]
    lines += [f"- {t}" for t in _check_layout_lines(m)]
    lines += [f"- note: {t}" for t in _check_notes(res)]
    lines += [f"- note: {t}" for t in read]
    lines += ["", "| scheme | predicted per rank per step | measured | ratio | pattern | explanation |",
              "|---|---:|---:|---:|---|---|"]
    for c in res.comparisons:
        lines.append(f"| {c.scheme} | {format_bytes(c.predicted_bytes_per_rank_per_step)} | "
                     f"{format_bytes(c.measured_bytes_per_rank_per_step)} | {c.ratio:.3f} | "
                     f"{'match' if c.pattern_match else 'no'} | {c.explanation.replace('|', '/')} |")
    lines += ["", _verdict(res)]
    return "\n".join(lines)


def _check_notes(res) -> list[str]:
    """The notes of a check, but the one the verdict line says (:func:`_verdict`)."""
    from zerocalc.validate import reused_sentence

    said = reused_sentence(res.reused) if res.reused else None
    return [t for t in list(res.measurement.notes) + list(res.notes) if t != said]


def _runs_text(runs: list[dict] | None) -> str:
    """``; 2 runs: all_reduce on 2 ranks (NCCL 2.29.7), all_gather on 2 ranks (NCCL 2.29.7)`` for a
    file of several nccl-tests runs; "" for one run or another format."""
    if not runs or len(runs) < 2:
        return ""
    return f"; {len(runs)} runs: " + ", ".join(
        f"{r['op'] or '? op'} on {r['group_size'] or '?'} ranks"
        + (f" (NCCL {r['nccl_version']})" if r.get("nccl_version") else "") for r in runs)


def _plural(n: int, noun: str) -> str:
    """``1 call``, ``2 calls``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
