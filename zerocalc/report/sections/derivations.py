"""Section 3: each scheme's volume, memory and time typeset from the symbolic model; the identities."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerocalc.report.blocks import MATH_LABEL_W
from zerocalc.report.page import TEXT_W
from zerocalc.report.sections import number, title

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData
    from zerocalc.report.layout import Writer


def _latex(expr) -> str:
    """sympy LaTeX made palatable to matplotlib's mathtext."""
    import sympy

    s = sympy.latex(expr, mul_symbol=None)
    for a, b in ((r"\operatorname", r"\mathrm"), (r"\left\lceil", r"\lceil"), (r"\right\rceil", r"\rceil"),
                 (r"\left\lfloor", r"\lfloor"), (r"\right\rfloor", r"\rfloor"), (r"\text", r"\mathrm"),
                 (r"\frac", r"\dfrac")):
        s = s.replace(a, b)
    return s


def draw(w: Writer, data: ReportData) -> None:
    from zerocalc.schemes import SCHEMES

    w.heading(title("derivations"))
    w.paragraph(
        f"Per scheme, from the phases of section {number('model')} with ring algorithms: V = bytes one rank "
        "sends per step, "
        "T = step communication time (α-β, phases in sequence; N ≤ G: one node, N > G: several nodes), "
        "M = model-state bytes per GPU. Generated from the symbolic model with sympy; nothing on these "
        "pages is typed in.")
    for d in data.derivations:
        name = str(d["scheme"])
        same = SCHEMES[name].equivalent_at(data.config.dp_n)
        w.heading(f"{name}: {d['title']}" + ("" if same else "  (not the DP update)"), 2)
        w.math("bytes sent per rank", [r"V = " + _latex(d["volume"])], fallback=[f"V = {d['volume']}"])
        w.math("model states per GPU", [r"M = " + _latex(d["memory"])], fallback=[f"M = {d['memory']}"])
        for expr, cond in d["time_cases"]:  # type: ignore[union-attr]
            lines = _split_terms(w, "T = ", expr, size=9.5)
            w.math(f"time, {cond}", lines, fallback=[f"T = {expr}"], size=9.5)
    w.heading("Identities checked by sympy.simplify(a − b) = 0", 2)
    w.table(["identity", "holds"], [[text, "yes" if ok else "NO"] for text, ok in data.identities],
            align="ll", size=8.0)


def _split_terms(w: Writer, lhs: str, expr, *, size: float, min_size: float = 7.5) -> list[str]:
    """``lhs + expr`` as mathtext lines: one line when it fits at ``min_size``, else its terms
    packed greedily onto continuation lines that start with ``+``."""
    import sympy

    avail = (TEXT_W - MATH_LABEL_W) * 72.0
    whole = lhs + _latex(expr)
    try:
        if w.measure.math(whole, min_size)[0] <= avail or not isinstance(expr, sympy.Add):
            return [whole]
        lines: list[str] = []
        current = lhs
        terms = []
        for term in sympy.Add.make_args(expr):
            too_wide = w.measure.math(_latex(term), min_size)[0] > avail
            terms.extend(sympy.Add.make_args(sympy.expand(term)) if too_wide else (term,))
        for term in terms:
            piece = _latex(term)
            sep = "" if current in (lhs, "+ ") else " + "
            candidate = current + sep + piece
            if current not in (lhs, "+ ") and w.measure.math(candidate, size)[0] > avail:
                lines.append(current)
                current = "+ " + piece
            else:
                current = candidate
        lines.append(current)
        return [ln.replace("+ -", "- ") for ln in lines]
    except ValueError:
        return [whole]
