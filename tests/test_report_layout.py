"""The report's layout engine: line breaking and measuring, held against matplotlib's own measurements."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.mathtext import MathTextParser  # noqa: E402
from matplotlib.textpath import TextToPath  # noqa: E402

from zerocalc.report.layout import Writer  # noqa: E402
from zerocalc.report.page import Measure, shared_mathtext_layouts  # noqa: E402

PROSE = (
    "Per scheme, from the phases of section 2 with ring algorithms: V = bytes one rank sends per step, "
    "T = step communication time (α-β, phases in sequence; N ≤ G: one node, N > G: several nodes), "
    "M = model-state bytes per GPU. Generated from the symbolic model with sympy; nothing on these "
    "pages is typed in. A-very-long-hyphenated-token-that-cannot-be-broken-anywhere-on-a-narrow-column "
    "ends it.\nA second line, after a newline,  with  runs of   spaces kept as they come.\n\n"
    "ZeRO-2's reduce-scatter of Ψ·b bytes: (N−1)/N of them leave each rank."
)


def _width(s: str, size: float, bold: bool) -> float:
    """Width in points of ``s`` as matplotlib measures it at ``size``."""
    prop = FontProperties(family="DejaVu Sans", weight="bold" if bold else "normal", size=size)
    return TextToPath().get_text_width_height_descent(s, prop, ismath=False)[0]


def _greedy(text: str, width_in: float, size: float, bold: bool) -> list[str]:
    """Word by word: a line takes the next word while the line with it measures within the width."""
    lines = []
    for para in text.split("\n"):
        line = ""
        for word in para.split(" "):
            candidate = word if not line else f"{line} {word}"
            if line and _width(candidate, size, bold) > width_in * 72:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return lines


@pytest.mark.parametrize(("width_in", "size", "bold"), [(6.57, 9.5, False), (2.0, 9.5, False),
                                                         (3.1, 8.5, True), (0.6, 10.5, False)])
def test_wrap_breaks_where_measuring_after_every_word_does(width_in, size, bold):
    w = Writer("test")
    lines = w.wrap(PROSE, width_in, size, bold)
    assert lines == _greedy(PROSE, width_in, size, bold)
    assert len(lines) > PROSE.count("\n") + 1  # the text is wrapped, not only split at newlines


def test_text_width_is_matplotlibs_at_every_size():
    m = Measure()
    for s in ("ring", "Generated from the symbolic model with sympy;", "(N−1)/N Ψ·b"):
        for size in (5.5, 8.0, 9.5, 10.5, 17.0):
            for bold in (False, True):
                assert m.text(s, size, bold) == _width(s, size, bold)


def test_estimate_is_near_the_measured_width():
    m = Measure()
    for s in ("ring", PROSE.split("\n")[0][:120]):
        assert m.estimate(s, 9.5) == pytest.approx(m.text(s, 9.5), rel=0.05)


def test_mathtext_parsers_share_their_layouts_inside_the_block_only():
    prop = FontProperties(family="DejaVu Sans", size=9.5)
    formula = r"$T = 2 \alpha \left(N - 1\right) + \dfrac{2 \Psi b \left(N - 1\right)}{N \beta}$"
    alone = MathTextParser("path").parse(formula, 72, prop)
    original = MathTextParser.__dict__["_parse_cached"]
    with shared_mathtext_layouts():
        a = MathTextParser("path").parse(formula, 72, prop)
        b = MathTextParser("path").parse(formula, 72, prop.copy())
        smaller = MathTextParser("path").parse(formula, 72, FontProperties(family="DejaVu Sans", size=7.5))
    assert a is b  # two parsers, one layout
    assert (a.width, a.height, a.depth) == (alone.width, alone.height, alone.depth)
    assert smaller.width < a.width  # the size is part of the key
    assert MathTextParser.__dict__["_parse_cached"] is original
    assert MathTextParser("path").parse(formula, 72, prop) is not a


@pytest.mark.parametrize("scale", [0.0, 0.5, 2.0, 100.0])
def test_wrap_lines_do_not_depend_on_the_first_guess(monkeypatch, scale):
    """The advances only guess where a line ends: guesses far too short or too long give the same lines."""
    estimate = Measure.estimate
    monkeypatch.setattr(Measure, "estimate",
                        lambda self, s, size, bold=False: scale * estimate(self, s, size, bold))
    w = Writer("test")
    assert w.wrap(PROSE, 3.1, 9.5) == _greedy(PROSE, 3.1, 9.5, False)


def test_wrap_takes_a_word_more_than_the_advances_allow_where_kerning_makes_room():
    """"AVAV" kerns: its measured width is below the sum of its advances. A line exactly as wide as
    five such words measures within the width, where the advances alone would stop at four."""
    words = ["AVAVAVAV"] * 12
    width_in = _width(" ".join(words[:5]), 9.5, False) / 72
    m = Measure()
    assert m.estimate(" ".join(words[:5]), 9.5) > width_in * 72  # the advances alone stop at four
    lines = Writer("test").wrap(" ".join(words), width_in, 9.5)
    assert lines == _greedy(" ".join(words), width_in, 9.5, False)
    assert lines[0] == " ".join(words[:5])


def _laid_out_page(path, engine_as_artist: bool) -> int:
    """A page with a sub-figure of two log-log panels and an outside legend, laid out by constrained
    layout in a rectangle, written to ``path``; returns how many times its panels were drawn."""
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    from zerocalc.report.blocks import LayoutFirst

    page = Figure(figsize=(8.27, 11.69))
    page.text(0.1, 0.95, "flowing text above the figure", parse_math=False)
    engine = ConstrainedLayoutEngine(rect=(0.1, 0.4, 0.8, 0.45), h_pad=0.03, w_pad=0.03)
    if engine_as_artist:
        page.add_artist(LayoutFirst(engine))
    else:
        page.set_layout_engine(engine)
    sub = page.subfigures(1, 1)
    axes = sub.subplots(1, 2, sharex=True)
    for k, ax in enumerate(axes):
        ax.loglog([1e6, 1e9, 1e12], [1e-3, 1.0 * (k + 1), 1e3], label=f"line {k}")
        ax.set_title(f"panel {k}")
        ax.set_xlabel("parameters Ψ")
    sub.legend(loc="outside lower center", ncols=2)
    sub.supylabel("time per step")
    draws = []
    original = Axes.draw

    def counted(self, renderer):
        draws.append(self)
        return original(self, renderer)

    Axes.draw = counted
    try:
        with PdfPages(path, metadata={"CreationDate": None}) as pdf:
            pdf.savefig(page)
    finally:
        Axes.draw = original
    return len(draws)


def _pdf_tokens(path) -> list[bytes]:
    """The tokens of a PDF's content streams, inflated, in order."""
    import re
    import zlib

    out = []
    for m in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", path.read_bytes(), re.S):
        try:
            data = zlib.decompress(m.group(1))
        except zlib.error:
            data = m.group(1)
        out += data.split()
    return out


def _number(token: bytes) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def test_layout_run_from_the_page_writes_what_matplotlibs_layout_engine_writes(tmp_path):
    """Laid out at the start of the one drawing that is written: the PDF matplotlib's own flow writes (a
    drawing without output to run the engine, then the drawing that is written), token for token, its
    numbers within the millionth of a point the laid-out positions are rounded to; panels drawn once."""
    own = _laid_out_page(tmp_path / "engine.pdf", engine_as_artist=False)
    ours = _laid_out_page(tmp_path / "artist.pdf", engine_as_artist=True)
    theirs, mine = _pdf_tokens(tmp_path / "engine.pdf"), _pdf_tokens(tmp_path / "artist.pdf")
    assert len(theirs) == len(mine)
    for a, b in zip(theirs, mine, strict=True):
        x, y = _number(a), _number(b)
        assert a == b or (x is not None and y is not None and abs(x - y) < 1e-5), (a, b)
    assert (own, ours) == (4, 2)  # two panels: drawn twice each by matplotlib's flow, once here


def test_a_last_digit_difference_in_the_layout_leaves_the_bytes_the_same(tmp_path, monkeypatch):
    """Constrained layout's solver places an axes to within a few units in the thirteenth digit of the
    page, not the same from run to run (the report's page 13: a clip rectangle at 615.9475891323 pt in one
    run, 615.9475891324 in the next); shifted by as much, the page is written to the same bytes."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.transforms import Bbox

    _laid_out_page(tmp_path / "plain.pdf", engine_as_artist=True)
    execute = ConstrainedLayoutEngine.execute

    def jittered(self, fig):
        out = execute(self, fig)
        for k, ax in enumerate(fig.get_axes()):
            x0, y0, x1, y1 = ax.get_position(original=True).extents
            d = (k + 1) * 4e-13  # a few tenths of a nanopoint on an 11.69 in page
            ax._set_position(Bbox([[x0 + d, y0 - d], [x1 - d, y1 + d]]))
        return out

    monkeypatch.setattr(ConstrainedLayoutEngine, "execute", jittered)
    _laid_out_page(tmp_path / "jittered.pdf", engine_as_artist=True)
    assert (tmp_path / "jittered.pdf").read_bytes() == (tmp_path / "plain.pdf").read_bytes()
