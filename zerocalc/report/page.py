"""The page: A4 geometry, fonts, matplotlib settings, exact text widths and horizontal rules.

Everything the layout measures against lives here, so the writer (:mod:`.layout`) and the
blocks it draws (:mod:`.blocks`) agree on one page. Lengths are inches, font sizes points.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from matplotlib.font_manager import FontProperties, findfont
from matplotlib.ft2font import FT2Font
from matplotlib.lines import Line2D
from matplotlib.mathtext import MathTextParser
from matplotlib.textpath import TextToPath

PAGE_W, PAGE_H = 8.27, 11.69  # A4, inches
MARGIN_X, MARGIN_TOP, MARGIN_BOTTOM = 0.85, 0.8, 0.85
TEXT_W = PAGE_W - 2 * MARGIN_X
BODY_PT = 9.5
LEADING = 1.38  # line height / font size
CAPTION_PT = 8.5
CAPTION_COLOR = "#333333"

#: matplotlib settings of every page: TrueType fonts embedded (``pdf.fonttype`` 42, so text is
#: extractable and the fonts travel with the file), fixed DejaVu fonts, a fixed hash salt.
RC = {
    "pdf.fonttype": 42,  # embed TrueType: text stays extractable and fonts travel with the file
    "pdf.compression": 6,
    "font.family": "DejaVu Sans",
    "mathtext.fontset": "dejavusans",
    "font.size": 9.0,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 8.0,
    "savefig.dpi": 150,
    "path.simplify": True,
    "svg.hashsalt": "zerocalc",
}

SANS = FontProperties(family="DejaVu Sans")
SANS_BOLD = FontProperties(family="DejaVu Sans", weight="bold")
MONO = FontProperties(family="DejaVu Sans Mono")
MONO_BOLD = FontProperties(family="DejaVu Sans Mono", weight="bold")
MONO_EM = 0.6021  # advance width of every DejaVu Sans Mono glyph, in ems


def font(size: float, *, bold: bool = False, mono: bool = False, italic: bool = False) -> FontProperties:
    """A copy of one of the page's fonts at ``size`` points."""
    if mono:
        prop = (MONO_BOLD if bold else MONO).copy()
    else:
        prop = (SANS_BOLD if bold else SANS).copy()
    prop.set_size(size)
    if italic:
        prop.set_style("oblique")
    return prop


class Measure:
    """Exact widths of text and mathtext, in points, from the font outlines.

    Text is measured as matplotlib's own :class:`~matplotlib.textpath.TextToPath` does it: laid out
    at ``TextToPath.FONT_SCALE`` points and scaled by ``size / FONT_SCALE``, so one layout of a
    string serves every size (the same float as measuring at that size).
    """

    def __init__(self) -> None:
        self._t2p = TextToPath()
        self._math = MathTextParser("path")
        self._cache: dict[tuple[str, bool], float] = {}  # width at FONT_SCALE points
        self._advances: dict[tuple[str, bool], float] = {}  # one glyph's advance at FONT_SCALE points
        self._fonts: dict[bool, FT2Font] = {}

    def text(self, s: str, size: float, bold: bool = False) -> float:
        key = (s, bold)
        if key not in self._cache:
            prop = (SANS_BOLD if bold else SANS).copy()
            prop.set_size(TextToPath.FONT_SCALE)
            w, _h, _d = self._t2p.get_text_width_height_descent(s, prop, ismath=False)
            self._cache[key] = float(w)
        return self._cache[key] * (size / TextToPath.FONT_SCALE)

    def estimate(self, s: str, size: float, bold: bool = False) -> float:
        """The sum of the glyphs' advances of ``s``, in points: close to :meth:`text` (no kerning,
        no side bearings) at a fraction of its cost; a first guess, never a measurement."""
        total = 0.0
        for ch in s:
            key = (ch, bold)
            if key not in self._advances:
                if bold not in self._fonts:
                    self._fonts[bold] = FT2Font(findfont(SANS_BOLD if bold else SANS))
                    self._fonts[bold].set_size(TextToPath.FONT_SCALE, 72)
                glyph = self._fonts[bold].load_char(ord(ch))
                self._advances[key] = glyph.linearHoriAdvance / 65536.0  # 16.16 fixed point, pixels at 72 dpi
            total += self._advances[key]
        return total * (size / TextToPath.FONT_SCALE)

    def math(self, latex: str, size: float) -> tuple[float, float, float]:
        """(width, height, depth) in points of ``$latex$``; ValueError if mathtext cannot parse it."""
        prop = SANS.copy()
        prop.set_size(size)
        parsed = self._math.parse(f"${latex}$", dpi=72, prop=prop)
        return float(parsed.width), float(parsed.height), float(parsed.depth)


@contextmanager
def shared_mathtext_layouts() -> Iterator[None]:
    """Within the block, every mathtext parser shares one cache of laid-out formulas.

    matplotlib caches a parse per :class:`~matplotlib.mathtext.MathTextParser` instance (its
    ``_parse_cached``, an ``lru_cache`` of 50 entries whose key includes the instance), and each PDF
    page gets a renderer with a parser of its own; so a formula measured while the page is laid out
    was parsed again when the page was written, and the layout of a formula depends only on the
    parser's output type and the arguments of the parse. Restored on exit.
    """
    original = MathTextParser.__dict__.get("_parse_cached")
    if original is None:  # a matplotlib without that cache: each parser as it comes
        yield
        return
    parse = getattr(original, "__wrapped__", original)
    cache: dict[tuple, object] = {}

    def cached(self: MathTextParser, *args):  # the arguments are hashable: matplotlib caches on them
        key = (self._output_type, *args)
        if key not in cache:
            cache[key] = parse(self, *args)
        return cache[key]

    MathTextParser._parse_cached = cached
    try:
        yield
    finally:
        MathTextParser._parse_cached = original


def rule(y: float, *, width: float = TEXT_W, lw: float = 0.8) -> Line2D:
    """A horizontal rule ``y`` inches from the top, from the left margin, ``width`` inches long."""
    return Line2D([MARGIN_X / PAGE_W, (MARGIN_X + width) / PAGE_W], [1 - y / PAGE_H] * 2,
                  color="#555555", linewidth=lw)
