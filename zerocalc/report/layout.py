"""The layout engine: a writer that flows text and blocks onto A4 pages and numbers them.

:class:`Writer` keeps a cursor (``y``, inches from the top of the current page) and moves to a
new page when what comes next does not fit. It knows nothing of the report's content: sections
(:mod:`.sections`) call its methods in order. Text (title, headings, paragraphs, bullets) is
laid out here; display maths, tables and figures in :mod:`.blocks`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure, SubFigure

from zerocalc.report import blocks
from zerocalc.report.page import (
    BODY_PT,
    LEADING,
    MARGIN_BOTTOM,
    MARGIN_TOP,
    MARGIN_X,
    PAGE_H,
    PAGE_W,
    TEXT_W,
    Measure,
    font,
    rule,
)

Progress = Callable[[str], None]


class Writer:
    """Flows headings, paragraphs, display maths, tables and figures onto A4 pages.

    Positions are in inches from the top of the page (``self.y``); every page is a
    matplotlib Figure kept until :meth:`save`, which adds "page k of M" footers.
    """

    def __init__(self, footer: str) -> None:
        self.pages: list[Figure] = []
        self.footer = footer
        self.measure = Measure()
        self.page: Figure
        self.y = 0.0
        self.figures = 0  # figures drawn so far: the next caption is "Figure {figures + 1}. ..."
        self.new_page()

    # -- pages ---------------------------------------------------------------
    def new_page(self) -> None:
        self.page = Figure(figsize=(PAGE_W, PAGE_H))
        self.pages.append(self.page)
        self.y = MARGIN_TOP

    @property
    def room(self) -> float:
        """Inches left between the cursor and the bottom margin."""
        return PAGE_H - MARGIN_BOTTOM - self.y

    def ensure(self, height: float) -> None:
        """A new page unless ``height`` inches fit below the cursor (or the page is still empty)."""
        if height > self.room and self.y > MARGIN_TOP + 1e-9:
            self.new_page()

    def skip(self, inches: float) -> None:
        self.y += inches

    def text(self, x: float, y_top: float, s: str, size: float, *, bold: bool = False, mono: bool = False,
             ha: str = "left", color: str = "black", italic: bool = False) -> None:
        """One line of plain text (no mathtext) whose top is ``y_top`` inches from the page's top."""
        self.page.text(x / PAGE_W, 1 - y_top / PAGE_H, s, fontproperties=font(size, bold=bold, mono=mono,
                                                                              italic=italic),
                       ha=ha, va="top", color=color, parse_math=False)

    # -- text ----------------------------------------------------------------
    def wrap(self, text: str, width_in: float, size: float, bold: bool = False) -> list[str]:
        """``text`` broken at spaces into lines at most ``width_in`` inches wide (newlines kept).

        Greedy: a line takes words while the measured width of the line with the next word stays
        within the width (a first word always). A line's width grows with every word it takes (the
        words are drawn left to right), so where a line ends is found from the sum of the glyphs'
        advances and confirmed by measuring the line ending there and the one with a word more,
        rather than by measuring the line after every word; the lines are the same.
        """
        limit = width_in * 72.0
        lines: list[str] = []
        for para_line in text.split("\n"):
            words = para_line.split(" ")
            if "" in words:  # runs of spaces: word by word, as they come
                lines.extend(self._wrap_words(words, limit, size, bold))
                continue
            start = 0
            while start < len(words):
                end = self._line_end(words, start, limit, size, bold)
                lines.append(" ".join(words[start:end]))
                start = end
        return lines

    def _fits(self, words: Sequence[str], start: int, end: int, limit: float, size: float,
              bold: bool) -> bool:
        return self.measure.text(" ".join(words[start:end]), size, bold) <= limit

    def _line_end(self, words: Sequence[str], start: int, limit: float, size: float, bold: bool) -> int:
        """One past the last word of the line that starts at ``words[start]``."""
        space = self.measure.estimate(" ", size, bold)
        guess, width = start + 1, self.measure.estimate(words[start], size, bold)
        while guess < len(words):
            width += space + self.measure.estimate(words[guess], size, bold)
            if width > limit:
                break
            guess += 1
        end = guess  # words[start:end] should fit and words[start:end + 1] not
        while end < len(words) and self._fits(words, start, end + 1, limit, size, bold):
            end += 1
        while end > start + 1 and not self._fits(words, start, end, limit, size, bold):
            end -= 1
        return end

    def _wrap_words(self, words: Sequence[str], limit: float, size: float, bold: bool) -> list[str]:
        """Greedy wrapping one word at a time, measuring the line after each."""
        lines: list[str] = []
        line = ""
        for word in words:
            candidate = word if not line else f"{line} {word}"
            if line and self.measure.text(candidate, size, bold) > limit:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
        return lines

    def title(self, text: str, subtitle: str) -> None:
        self.text(MARGIN_X, self.y, text, 17, bold=True)
        self.y += 17 * 1.5 / 72
        for line in self.wrap(subtitle, TEXT_W, 10.5):
            self.text(MARGIN_X, self.y, line, 10.5, color="#333333")
            self.y += 10.5 * LEADING / 72
        self.y += 0.12
        self.page.add_artist(rule(self.y))
        self.y += 0.15

    def heading(self, text: str, level: int = 1) -> None:
        size = {1: 13.0, 2: 10.5}[level]
        self.ensure(size * 1.6 / 72 + 4 * BODY_PT * LEADING / 72)  # keep a heading with what follows
        self.y += 0.14 if level == 1 else 0.06
        self.text(MARGIN_X, self.y, text, size, bold=True, color="#1a1a1a" if level == 1 else "#333333")
        self.y += size * 1.55 / 72

    def paragraph(self, text: str, *, size: float = BODY_PT, indent: float = 0.0, color: str = "black",
                  italic: bool = False, after: float = 0.07) -> None:
        step = size * LEADING / 72
        for line in self.wrap(text, TEXT_W - indent, size):
            self.ensure(step)
            self.text(MARGIN_X + indent, self.y, line, size, color=color, italic=italic)
            self.y += step
        self.y += after

    def bullets(self, items: Sequence[str], *, size: float = BODY_PT, marker: str = "•") -> None:
        step = size * LEADING / 72
        indent = 0.2
        for item in items:
            lines = self.wrap(item, TEXT_W - indent, size)
            self.ensure(step * min(len(lines), 2))
            for i, line in enumerate(lines):
                self.ensure(step)
                if i == 0:
                    self.text(MARGIN_X + 0.05, self.y, marker, size)
                self.text(MARGIN_X + indent, self.y, line, size)
                self.y += step
            self.y += 0.03
        self.y += 0.05

    # -- blocks (drawn by zerocalc.report.blocks) -------------------------------
    def math(self, label: str, latex_lines: Sequence[str], *, size: float = 10.5,
             fallback: Sequence[str] = ()) -> None:
        """A labelled display equation: :func:`.blocks.display_math`."""
        blocks.display_math(self, label, latex_lines, size=size, fallback=fallback)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]], *, align: str | None = None,
              caption: str | None = None, size: float = 8.0, min_size: float = 5.5,
              wrap: dict[int, int] | None = None) -> None:
        """A monospace table that fits the width and continues across pages: :func:`.blocks.table`."""
        blocks.table(self, header, rows, align=align, caption=caption, size=size, min_size=min_size,
                     wrap=wrap)

    def figure(self, height: float, draw: Callable[[SubFigure], object], *,
               caption: str | None = None) -> None:
        """A matplotlib figure ``height`` inches tall, numbered, with its caption: :func:`.blocks.figure`."""
        blocks.figure(self, height, draw, caption=caption)

    def box(self, title: str, lead: str, bullets: Sequence[str]) -> None:
        """A framed box with a title, a bold lead sentence and bullets: :func:`.blocks.box`."""
        blocks.box(self, title, lead, bullets)

    # -- output ----------------------------------------------------------------
    def save(self, path: Path, metadata: dict[str, str | None], progress: Progress | None = None) -> None:
        """Number the pages ("page k of M" footers) and write them to one PDF."""
        total = len(self.pages)
        with PdfPages(path, metadata=metadata) as pdf:
            for k, page in enumerate(self.pages, start=1):
                page.text(0.5, MARGIN_BOTTOM / 2 / PAGE_H, f"{self.footer} · page {k} of {total}",
                          ha="center", va="center", fontproperties=font(7.5), color="#666666",
                          parse_math=False)
                pdf.savefig(page)
                if progress is not None:
                    progress(f"page {k}/{total} written")
