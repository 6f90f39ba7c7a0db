"""Blocks a :class:`~.layout.Writer` places on its pages: display maths, tables, figures.

Each function draws at the writer's cursor, moves to a new page first when the block does
not fit, and leaves the cursor below what it drew.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from matplotlib.artist import Artist
from matplotlib.figure import SubFigure
from matplotlib.layout_engine import ConstrainedLayoutEngine, LayoutEngine
from matplotlib.patches import Rectangle
from matplotlib.transforms import Bbox

from zerocalc.report.page import (
    BODY_PT,
    CAPTION_COLOR,
    CAPTION_PT,
    LEADING,
    MARGIN_X,
    MONO_EM,
    PAGE_H,
    PAGE_W,
    TEXT_W,
    font,
    rule,
)

if TYPE_CHECKING:
    from zerocalc.report.layout import Writer

#: Width of the label column left of a display equation, inches.
MATH_LABEL_W = 1.45


def display_math(w: Writer, label: str, latex_lines: Sequence[str], *, size: float = 10.5,
                 fallback: Sequence[str] = ()) -> None:
    """A labelled display equation; lines too wide for the page are drawn smaller (down to 6 pt).

    ``latex_lines`` are mathtext bodies (no ``$``); when mathtext cannot parse one,
    the matching ``fallback`` line (plain text) is drawn in monospace instead.
    """
    avail = (TEXT_W - MATH_LABEL_W) * 72.0
    rendered: list[tuple[str, float, float, float, bool]] = []  # text, size, height, depth, is_math
    for i, body in enumerate(latex_lines):
        try:
            width, h, d = w.measure.math(body, size)
            s = size if width <= avail else max(6.0, size * avail / width)
            if s != size:
                width, h, d = w.measure.math(body, s)
            rendered.append((f"${body}$", s, h - d, d, True))
        except ValueError:
            text = fallback[i] if i < len(fallback) else body
            s = min(size - 1.5, max(5.5, avail / (len(text) * MONO_EM)))
            rendered.append((text, s, s * 0.8 / 72 * 72, s * 0.2, False))
    total = sum((h + d) / 72 + 0.09 for _t, _s, h, d, _m in rendered) + 0.05
    w.ensure(total)
    first_baseline = w.y + (rendered[0][2] / 72 if rendered[0][4] else rendered[0][1] * 0.8 / 72)
    w.page.text(MARGIN_X / PAGE_W, 1 - first_baseline / PAGE_H, label, fontproperties=font(8.0),
                ha="left", va="baseline", color="#444444", parse_math=False)
    for text, s, h, d, is_math in rendered:
        top = w.y
        if is_math:
            w.page.text((MARGIN_X + MATH_LABEL_W) / PAGE_W, 1 - (top + h / 72) / PAGE_H, text,
                        fontproperties=font(s), ha="left", va="baseline")
        else:
            w.text(MARGIN_X + MATH_LABEL_W, top, text, s, mono=True)
        w.y += (h + d) / 72 + 0.09
    w.y += 0.05


def table(w: Writer, header: Sequence[str], rows: Sequence[Sequence[str]], *, align: str | None = None,
          caption: str | None = None, size: float = 8.0, min_size: float = 5.5,
          wrap: dict[int, int] | None = None) -> None:
    """A monospace table; shrinks to fit the width and continues on the next page with its header.

    ``align`` has one letter per column, ``l`` or ``r`` (default: first left, the rest right).
    ``wrap`` maps a column index to its width in characters: longer cells in that column
    are wrapped onto several lines (at spaces) instead of widening the table. A table too wide
    even at ``min_size`` has its widest left-aligned columns wrapped until it fits at ``size``.
    """
    ncol = len(header)
    align = align or ("l" + "r" * (ncol - 1))
    wrap = dict(wrap or {})
    gap = 2

    def layout() -> tuple[list[list[list[str]]], list[int], float]:
        cells = [[textwrap.wrap(str(c), wrap[j], break_on_hyphens=False) or [""] if j in wrap else [str(c)]
                  for j, c in enumerate(r)] for r in rows]
        widths = [max(len(str(header[j])), *(len(line) for r in cells for line in r[j])) for j in range(ncol)]
        return cells, widths, sum(widths) + gap * (ncol - 1) + 0.5

    cells, widths, chars = layout()
    # Too wide even at min_size: wrap the widest left-aligned column (the prose one) so that the
    # table fits at the size asked for, rather than running off the page.
    while chars * min_size * MONO_EM / 72 > TEXT_W:
        j = max((k for k in range(ncol) if align[k] == "l" and widths[k] > 16), key=lambda k: widths[k],
                default=None)
        if j is None:
            break
        fit = int(TEXT_W * 72 / (size * MONO_EM) - (chars - widths[j]))
        wrap[j] = max(16, min(fit, widths[j] - 1))
        cells, widths, chars = layout()
    size = min(size, max(min_size, TEXT_W * 72 / (chars * MONO_EM)))
    char_w = size * MONO_EM / 72
    step = size * 1.45 / 72
    if caption:
        w.ensure(3 * step + (BODY_PT * LEADING / 72) * 2)
        w.paragraph(caption, size=CAPTION_PT, color=CAPTION_COLOR, after=0.03)

    def line(row: Sequence[str], bold: bool) -> None:
        x = MARGIN_X
        for j, cell in enumerate(row):
            if align[j] == "r":
                w.text(x + widths[j] * char_w, w.y, cell, size, mono=True, bold=bold, ha="right")
            else:
                w.text(x, w.y, cell, size, mono=True, bold=bold)
            x += (widths[j] + gap) * char_w
        w.y += step

    def head() -> None:
        w.page.add_artist(rule(w.y - 0.02, width=chars * char_w))
        w.y += 0.03
        line([str(h) for h in header], True)
        w.page.add_artist(rule(w.y - 0.01, width=chars * char_w, lw=0.5))
        w.y += 0.02

    w.ensure(3 * step)
    head()
    for i, row in enumerate(cells):
        height = max(len(c) for c in row)
        if w.room < height * step + 0.05:
            w.page.add_artist(rule(w.y, width=chars * char_w))
            w.new_page()
            head()
        if i % 2 == 1:
            w.page.add_artist(Rectangle(
                (MARGIN_X / PAGE_W, 1 - (w.y + height * step - 0.015) / PAGE_H),
                chars * char_w / PAGE_W, height * step / PAGE_H, transform=w.page.transFigure,
                facecolor="#f0f0f0", edgecolor="none", zorder=-1))
        for k in range(height):
            line([c[k] if k < len(c) else "" for c in row], False)
    w.page.add_artist(rule(w.y + 0.01, width=chars * char_w))
    w.y += 0.15


class LayoutFirst(Artist):
    """Runs a layout engine on its figure when the figure is drawn, before anything else on it.

    Saving a figure that has a layout engine draws the whole figure once without output to run the
    engine, then again to write it (matplotlib's ``FigureCanvasBase.print_figure``). The engine
    needs no such draw: it measures what it lays out itself (``get_tightbbox``). Run from this
    artist, the lowest in the figure's drawing order, it lays the page out during the one drawing
    that is written, with a renderer of the same kind, so the page comes out the same, drawn once.

    The engine's solver places an axes to within a few units in the thirteenth digit of the page, not
    the same from one run to the next (a clip rectangle at 615.9475891323 pt or …324), so the positions
    it sets are rounded to :data:`POSITION_DIGITS` decimals of the page (a millionth of a point): the
    same report gives the same bytes.
    """

    #: decimals of the figure fraction an axes' laid-out position keeps
    POSITION_DIGITS = 9

    def __init__(self, engine: LayoutEngine) -> None:
        super().__init__()
        self.engine = engine
        self.set_zorder(float("-inf"))

    def draw(self, renderer) -> None:
        self.engine.execute(self.figure)
        for ax in self.figure.get_axes():
            x0, y0, x1, y1 = (round(v, self.POSITION_DIGITS) for v in ax.get_position(original=True).extents)
            ax._set_position(Bbox([[x0, y0], [x1, y1]]))


def laid_out(page) -> bool:
    """Whether ``page`` holds a figure laid out by a :class:`LayoutFirst`."""
    return any(isinstance(a, LayoutFirst) for a in page.artists)


def _caption_height(lines: int) -> float:
    """Inches a figure's caption of ``lines`` lines takes below it, with the gap above it."""
    return lines * CAPTION_PT * LEADING / 72 + 0.1


def caption_height(w: Writer, caption: str) -> float:
    """Inches the caption of the next figure (:func:`figure`, numbered) takes below it: a figure as tall as
    a page less this stays above the page's foot."""
    return _caption_height(len(w.wrap(f"Figure {w.figures + 1}. {caption}", TEXT_W, CAPTION_PT)))


def figure(w: Writer, height: float, draw: Callable[[SubFigure], object], *,
           caption: str | None = None) -> None:
    """A figure ``height`` inches tall drawn by ``draw`` into a sub-figure of its own page.

    Figures are numbered in the order they are drawn: the caption is printed after "Figure k. ".
    A figure starts a fresh page when it does not fit; the page gets a constrained
    layout restricted to the figure's rectangle, so tick labels and legends are never clipped
    and the flowing text above and below stays where it is.
    """
    w.figures += 1
    caption = f"Figure {w.figures}. {caption}" if caption else None
    cap_lines = w.wrap(caption, TEXT_W, CAPTION_PT) if caption else []
    cap_h = _caption_height(len(cap_lines))
    if laid_out(w.page):  # one laid-out figure per page
        w.new_page()
    w.ensure(height + cap_h)
    top, bottom = w.y, w.y + height
    host = w.page
    host.add_artist(LayoutFirst(ConstrainedLayoutEngine(
        rect=(MARGIN_X / PAGE_W, 1 - bottom / PAGE_H, TEXT_W / PAGE_W, (bottom - top) / PAGE_H),
        h_pad=0.03, w_pad=0.03)))
    sub = host.subfigures(1, 1)
    draw(sub)
    w.y = bottom + 0.08
    for line in cap_lines:
        w.text(MARGIN_X, w.y, line, CAPTION_PT, color=CAPTION_COLOR)
        w.y += CAPTION_PT * LEADING / 72
    w.y += 0.12


def box(w: Writer, title: str, lead: str, bullets: Sequence[str], *, size: float = BODY_PT) -> None:
    """A framed, shaded box the width of the text: a bold ``title``, a bold ``lead`` sentence and
    ``bullets``, kept on one page (what a reader sees first)."""
    pad, indent, title_pt = 0.12, 0.2, 10.5
    inner = TEXT_W - 2 * pad
    step = size * LEADING / 72
    lead_lines = w.wrap(lead, inner, size, bold=True)
    items = [w.wrap(b, inner - indent, size) for b in bullets]
    height = (pad + title_pt * 1.55 / 72 + len(lead_lines) * step + (0.06 if items else 0)
              + sum(len(lines) * step + 0.03 for lines in items) + pad - 0.03 * bool(items))
    w.ensure(height + 0.2)
    top = w.y + 0.06
    w.page.add_artist(Rectangle((MARGIN_X / PAGE_W, 1 - (top + height) / PAGE_H), TEXT_W / PAGE_W,
                                height / PAGE_H, transform=w.page.transFigure, facecolor="#f2f4f7",
                                edgecolor="#8a94a3", linewidth=0.8, zorder=-1))
    x = MARGIN_X + pad
    w.y = top + pad
    w.text(x, w.y, title, title_pt, bold=True, color="#1a1a1a")
    w.y += title_pt * 1.55 / 72
    for line in lead_lines:
        w.text(x, w.y, line, size, bold=True)
        w.y += step
    w.y += 0.06 if items else 0
    for lines in items:
        w.text(x + 0.05, w.y, "•", size)
        for line in lines:
            w.text(x + indent, w.y, line, size)
            w.y += step
        w.y += 0.03
    w.y = top + height + 0.16
