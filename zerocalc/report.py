"""The design-review report: the question of DeepSpeed #4582 answered in a multi-page PDF.

Everything in the PDF is computed here from the public API (the symbolic model, the
feasibility simulation, the trace check) when the report is generated; nothing is typed
in by hand except prose and the published numbers it is compared against (ZeRO Table 1,
cited). Two halves:

* :func:`collect` computes the DataFrames and texts the report shows (:class:`ReportData`);
  tests check these against independent derivations.
* :func:`render` lays them out on A4 pages with matplotlib (:class:`_Writer`) and writes
  the PDF: fonts embedded as TrueType (``pdf.fonttype`` 42, so text is extractable), fixed
  DejaVu fonts, no creation date in the metadata, so the same inputs give the same file.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure, SubFigure
from matplotlib.font_manager import FontProperties
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.mathtext import MathTextParser
from matplotlib.patches import Rectangle
from matplotlib.textpath import TextToPath

from zerocalc.errors import ConfigError
from zerocalc.topology import Topology
from zerocalc.units import format_bytes, format_diff, format_seconds

__all__ = ["ReportConfig", "ReportData", "check_output", "collect", "render", "write_report"]

Progress = Callable[[str], None]

# ---------------------------------------------------------------------------
# Page layout
# ---------------------------------------------------------------------------

_PAGE_W, _PAGE_H = 8.27, 11.69  # A4, inches
_MARGIN_X, _MARGIN_TOP, _MARGIN_BOTTOM = 0.85, 0.8, 0.85
_TEXT_W = _PAGE_W - 2 * _MARGIN_X
_BODY_PT = 9.5
_LEADING = 1.38  # line height / font size

_RC = {
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

_SANS = FontProperties(family="DejaVu Sans")
_SANS_BOLD = FontProperties(family="DejaVu Sans", weight="bold")
_MONO = FontProperties(family="DejaVu Sans Mono")
_MONO_BOLD = FontProperties(family="DejaVu Sans Mono", weight="bold")
_MONO_EM = 0.6021  # advance width of every DejaVu Sans Mono glyph, in ems


class _Measure:
    """Exact widths of text and mathtext, in points, from the font outlines."""

    def __init__(self) -> None:
        self._t2p = TextToPath()
        self._math = MathTextParser("path")
        self._cache: dict[tuple[str, float, bool], float] = {}

    def text(self, s: str, size: float, bold: bool = False) -> float:
        key = (s, size, bold)
        if key not in self._cache:
            prop = (_SANS_BOLD if bold else _SANS).copy()
            prop.set_size(size)
            w, _h, _d = self._t2p.get_text_width_height_descent(s, prop, ismath=False)
            self._cache[key] = float(w)
        return self._cache[key]

    def math(self, latex: str, size: float) -> tuple[float, float, float]:
        """(width, height, depth) in points of ``$latex$``; ValueError if mathtext cannot parse it."""
        prop = _SANS.copy()
        prop.set_size(size)
        parsed = self._math.parse(f"${latex}$", dpi=72, prop=prop)
        return float(parsed.width), float(parsed.height), float(parsed.depth)


class _Writer:
    """Flows headings, paragraphs, display maths, tables and figures onto A4 pages.

    Positions are in inches from the top of the page (``self.y``); every page is a
    matplotlib Figure kept until :meth:`save`, which adds "page k of M" footers.
    """

    def __init__(self, footer: str) -> None:
        self.pages: list[Figure] = []
        self.footer = footer
        self.measure = _Measure()
        self.page: Figure
        self.y = 0.0
        self.new_page()

    # -- pages ---------------------------------------------------------------
    def new_page(self) -> None:
        self.page = Figure(figsize=(_PAGE_W, _PAGE_H))
        self.pages.append(self.page)
        self.y = _MARGIN_TOP

    @property
    def room(self) -> float:
        return _PAGE_H - _MARGIN_BOTTOM - self.y

    def ensure(self, height: float) -> None:
        if height > self.room and self.y > _MARGIN_TOP + 1e-9:
            self.new_page()

    def skip(self, inches: float) -> None:
        self.y += inches

    def _text(self, x: float, y_top: float, s: str, size: float, *, bold: bool = False, mono: bool = False,
              ha: str = "left", color: str = "black", italic: bool = False) -> None:
        if mono:
            prop = (_MONO_BOLD if bold else _MONO).copy()
        else:
            prop = (_SANS_BOLD if bold else _SANS).copy()
        prop.set_size(size)
        if italic:
            prop.set_style("oblique")
        self.page.text(x / _PAGE_W, 1 - y_top / _PAGE_H, s, fontproperties=prop, ha=ha, va="top",
                       color=color, parse_math=False)

    # -- text ----------------------------------------------------------------
    def wrap(self, text: str, width_in: float, size: float, bold: bool = False) -> list[str]:
        limit = width_in * 72.0
        lines: list[str] = []
        for para_line in text.split("\n"):
            words = para_line.split(" ")
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
        self._text(_MARGIN_X, self.y, text, 17, bold=True)
        self.y += 17 * 1.5 / 72
        for line in self.wrap(subtitle, _TEXT_W, 10.5):
            self._text(_MARGIN_X, self.y, line, 10.5, color="#333333")
            self.y += 10.5 * _LEADING / 72
        self.y += 0.12
        self.page.add_artist(_rule(self.y))
        self.y += 0.15

    def heading(self, text: str, level: int = 1) -> None:
        size = {1: 13.0, 2: 10.5}[level]
        self.ensure(size * 1.6 / 72 + 4 * _BODY_PT * _LEADING / 72)  # keep a heading with what follows
        self.y += 0.14 if level == 1 else 0.06
        self._text(_MARGIN_X, self.y, text, size, bold=True, color="#1a1a1a" if level == 1 else "#333333")
        self.y += size * 1.55 / 72

    def paragraph(self, text: str, *, size: float = _BODY_PT, indent: float = 0.0, color: str = "black",
                  italic: bool = False, after: float = 0.07) -> None:
        step = size * _LEADING / 72
        for line in self.wrap(text, _TEXT_W - indent, size):
            self.ensure(step)
            self._text(_MARGIN_X + indent, self.y, line, size, color=color, italic=italic)
            self.y += step
        self.y += after

    def bullets(self, items: Sequence[str], *, size: float = _BODY_PT, marker: str = "•") -> None:
        step = size * _LEADING / 72
        indent = 0.2
        for item in items:
            lines = self.wrap(item, _TEXT_W - indent, size)
            self.ensure(step * min(len(lines), 2))
            for i, line in enumerate(lines):
                self.ensure(step)
                if i == 0:
                    self._text(_MARGIN_X + 0.05, self.y, marker, size)
                self._text(_MARGIN_X + indent, self.y, line, size)
                self.y += step
            self.y += 0.03
        self.y += 0.05

    # -- display maths ---------------------------------------------------------
    def math(self, label: str, latex_lines: Sequence[str], *, size: float = 10.5,
             fallback: Sequence[str] = ()) -> None:
        """A labelled display equation; lines too wide for the page are drawn smaller (down to 6 pt).

        ``latex_lines`` are mathtext bodies (no ``$``); when mathtext cannot parse one,
        the matching ``fallback`` line (plain text) is drawn in monospace instead.
        """
        label_w = 1.45
        avail = (_TEXT_W - label_w) * 72.0
        rendered: list[tuple[str, float, float, float, bool]] = []  # text, size, height, depth, is_math
        for i, body in enumerate(latex_lines):
            try:
                w, h, d = self.measure.math(body, size)
                s = size if w <= avail else max(6.0, size * avail / w)
                if s != size:
                    w, h, d = self.measure.math(body, s)
                rendered.append((f"${body}$", s, h - d, d, True))
            except ValueError:
                text = fallback[i] if i < len(fallback) else body
                s = min(size - 1.5, max(5.5, avail / (len(text) * _MONO_EM)))
                rendered.append((text, s, s * 0.8 / 72 * 72, s * 0.2, False))
        total = sum((h + d) / 72 + 0.09 for _t, _s, h, d, _m in rendered) + 0.05
        self.ensure(total)
        first_baseline = self.y + (rendered[0][2] / 72 if rendered[0][4] else rendered[0][1] * 0.8 / 72)
        label_prop = _SANS.copy()
        label_prop.set_size(8.0)
        self.page.text(_MARGIN_X / _PAGE_W, 1 - first_baseline / _PAGE_H, label, fontproperties=label_prop,
                       ha="left", va="baseline", color="#444444", parse_math=False)
        for text, s, h, d, is_math in rendered:
            top = self.y
            prop = _SANS.copy()
            prop.set_size(s)
            if is_math:
                self.page.text((_MARGIN_X + label_w) / _PAGE_W, 1 - (top + h / 72) / _PAGE_H, text,
                               fontproperties=prop, ha="left", va="baseline")
            else:
                self._text(_MARGIN_X + label_w, top, text, s, mono=True)
            self.y += (h + d) / 72 + 0.09
        self.y += 0.05

    # -- tables ----------------------------------------------------------------
    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]], *, align: str | None = None,
              caption: str | None = None, size: float = 8.0, min_size: float = 5.5,
              wrap: dict[int, int] | None = None) -> None:
        """A monospace table; shrinks to fit the width and continues on the next page with its header.

        ``wrap`` maps a column index to its width in characters: longer cells in that column
        are wrapped onto several lines (at spaces) instead of widening the table.
        """
        ncol = len(header)
        align = align or ("l" + "r" * (ncol - 1))
        wrap = wrap or {}
        cells = [[textwrap.wrap(str(c), wrap[j], break_on_hyphens=False) or [""] if j in wrap else [str(c)]
                  for j, c in enumerate(r)] for r in rows]
        widths = [max(len(str(header[j])), *(len(line) for r in cells for line in r[j])) for j in range(ncol)]
        gap = 2
        chars = sum(widths) + gap * (ncol - 1) + 0.5
        size = min(size, max(min_size, _TEXT_W * 72 / (chars * _MONO_EM)))
        char_w = size * _MONO_EM / 72
        step = size * 1.45 / 72
        if caption:
            self.ensure(3 * step + (_BODY_PT * _LEADING / 72) * 2)
            self.paragraph(caption, size=8.5, color="#333333", after=0.03)

        def line(row: Sequence[str], bold: bool) -> None:
            x = _MARGIN_X
            for j, cell in enumerate(row):
                if align[j] == "r":
                    self._text(x + widths[j] * char_w, self.y, cell, size, mono=True, bold=bold, ha="right")
                else:
                    self._text(x, self.y, cell, size, mono=True, bold=bold)
                x += (widths[j] + gap) * char_w
            self.y += step

        def head() -> None:
            self.page.add_artist(_rule(self.y - 0.02, width=chars * char_w))
            self.y += 0.03
            line([str(h) for h in header], True)
            self.page.add_artist(_rule(self.y - 0.01, width=chars * char_w, lw=0.5))
            self.y += 0.02

        self.ensure(3 * step)
        head()
        for i, row in enumerate(cells):
            height = max(len(c) for c in row)
            if self.room < height * step + 0.05:
                self.page.add_artist(_rule(self.y, width=chars * char_w))
                self.new_page()
                head()
            if i % 2 == 1:
                self.page.add_artist(Rectangle(
                    (_MARGIN_X / _PAGE_W, 1 - (self.y + height * step - 0.015) / _PAGE_H),
                    chars * char_w / _PAGE_W, height * step / _PAGE_H, transform=self.page.transFigure,
                    facecolor="#f0f0f0", edgecolor="none", zorder=-1))
            for k in range(height):
                line([c[k] if k < len(c) else "" for c in row], False)
        self.page.add_artist(_rule(self.y + 0.01, width=chars * char_w))
        self.y += 0.15

    # -- figures ---------------------------------------------------------------
    def figure(self, height: float, draw: Callable[[SubFigure], object], *,
               caption: str | None = None) -> None:
        """A figure ``height`` inches tall drawn by ``draw`` into a sub-figure of its own page.

        A figure starts a fresh page when it does not fit; the page gets a constrained
        layout restricted to the figure's rectangle, so tick labels and legends are never clipped
        and the flowing text above and below stays where it is.
        """
        cap_lines = self.wrap(caption, _TEXT_W, 8.5) if caption else []
        cap_h = len(cap_lines) * 8.5 * _LEADING / 72 + 0.1
        if self.page.get_layout_engine() is not None:  # one laid-out figure per page
            self.new_page()
        self.ensure(height + cap_h)
        top, bottom = self.y, self.y + height
        host = self.page
        host.set_layout_engine(ConstrainedLayoutEngine(
            rect=(_MARGIN_X / _PAGE_W, 1 - bottom / _PAGE_H, _TEXT_W / _PAGE_W, (bottom - top) / _PAGE_H),
            h_pad=0.03, w_pad=0.03))
        sub = host.subfigures(1, 1)
        draw(sub)
        self.y = bottom + 0.08
        for line in cap_lines:
            self._text(_MARGIN_X, self.y, line, 8.5, color="#333333")
            self.y += 8.5 * _LEADING / 72
        self.y += 0.12

    # -- output ----------------------------------------------------------------
    def save(self, path: Path, metadata: dict[str, str | None], progress: Progress | None = None) -> None:
        total = len(self.pages)
        with PdfPages(path, metadata=metadata) as pdf:
            for k, page in enumerate(self.pages, start=1):
                prop = _SANS.copy()
                prop.set_size(7.5)
                page.text(0.5, _MARGIN_BOTTOM / 2 / _PAGE_H, f"{self.footer} · page {k} of {total}",
                          ha="center", va="center", fontproperties=prop, color="#666666", parse_math=False)
                pdf.savefig(page)
                if progress is not None:
                    progress(f"page {k}/{total} written")


def _rule(y: float, *, width: float = _TEXT_W, lw: float = 0.8):
    from matplotlib.lines import Line2D

    return Line2D([_MARGIN_X / _PAGE_W, (_MARGIN_X + width) / _PAGE_W], [1 - y / _PAGE_H] * 2,
                  color="#555555", linewidth=lw)


def _dedent(text: str) -> str:
    """Prose written as an indented triple-quoted block → paragraphs joined into single lines."""
    paragraphs = textwrap.dedent(text).strip().split("\n\n")
    return "\n".join(" ".join(p.split()) for p in paragraphs)


# ---------------------------------------------------------------------------
# What the report shows
# ---------------------------------------------------------------------------

#: Schemes drawn in the sweep figures (the table and the derivations show every scheme).
FIGURE_SCHEMES: tuple[str, ...] = ("dp", "zero2", "zero3", "colocated", "deepspeed-zero12", "fsdp-hybrid",
                                   "zeropp")
#: Schemes of the time-vs-Ψ figure (one line style each) and the algorithms drawn for them.
TIME_SCHEMES: tuple[str, ...] = ("zero2", "deepspeed-zero12", "colocated")
N_SWEEP: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
PSI_SWEEP: tuple[float, ...] = tuple(float(x) for x in np.logspace(6, 12, 25))

#: ZeRO (Rajbhandari et al., SC20, arXiv 1910.02054) Table 1, 7.5B-parameter column: model-state
#: memory per device in GB (1e9 bytes) as printed (rounded), K = 12, for P_os, P_os+g, P_os+g+p.
ZERO_TABLE1_7P5B: pd.DataFrame = pd.DataFrame(
    [(1, 120, 120, 120), (4, 52.5, 41.3, 30), (16, 35.6, 21.6, 7.5), (64, 31.4, 16.6, 1.88),
     (256, 30.4, 15.4, 0.47), (1024, 30.1, 15.1, 0.12)],
    columns=["n", "zero1", "zero2", "zero3"],
)
_TABLE1_LABELS = {"zero1": "ZeRO Table 1, P_os", "zero2": "ZeRO Table 1, P_os+g",
                  "zero3": "ZeRO Table 1, P_os+g+p"}


@dataclass(frozen=True)
class ReportConfig:
    """The cluster and model the report is about (the CLI's options), and where its traces come from."""

    psi: float = 7.5e9
    n: int = 64
    gpus_per_node: int = 8
    topology: str | Topology = "dgx-a100"  # a preset name or a Topology (e.g. read from a TOML file)
    comm_dtype: str = "fp16"
    k: float = 12.0
    traces: tuple[Path, ...] = ()  # empty: the real traces bundled with zerocalc
    feasibility_n: int = 4
    feasibility_steps: int = 20
    seed: int = 0


@dataclass
class ReportData:
    """Everything the PDF shows, computed from the public API; each figure's DataFrame is kept."""

    config: ReportConfig
    table: pd.DataFrame
    bytes_vs_n: pd.DataFrame
    time_vs_psi: pd.DataFrame
    memory_vs_n: pd.DataFrame
    memory_points: pd.DataFrame
    derivations: list[dict[str, object]]
    identities: list[tuple[str, bool]]
    extra: dict[str, object] = field(default_factory=dict)


def _evaluate(config: ReportConfig, *, psi, n, schemes=None, topology: str | None = None) -> pd.DataFrame:
    from zerocalc.evaluate import evaluate

    return evaluate(schemes, psi=psi, n=n, gpus_per_node=config.gpus_per_node,
                    topology=topology or config.topology, comm_dtype=config.comm_dtype, k=config.k)


def volume_table(config: ReportConfig) -> pd.DataFrame:
    """Every scheme at the report's configuration: the model's tidy DataFrame (one row per scheme)."""
    return _evaluate(config, psi=config.psi, n=config.n).reset_index(drop=True)


def bytes_vs_n(config: ReportConfig, n_values: Sequence[int] = N_SWEEP,
               schemes: Sequence[str] = FIGURE_SCHEMES) -> pd.DataFrame:
    """Bytes sent per rank per step against N at the report's Ψ (figure 1's data)."""
    df = _evaluate(config, psi=config.psi, n=np.asarray(n_values, dtype=float), schemes=list(schemes))
    return df[["scheme", "psi", "n", "bytes_per_rank", "bytes_per_rank_over_psi"]].reset_index(drop=True)


def time_vs_psi(config: ReportConfig, psi_values: Sequence[float] = PSI_SWEEP,
                topologies: Sequence[str | Topology] | None = None,
                schemes: Sequence[str] = TIME_SCHEMES) -> pd.DataFrame:
    """Step communication time against Ψ per topology and algorithm at the report's N (figure 2's data).

    Long form: one row per (topology, algorithm, scheme, Ψ) with ``time_s``. By default the report's
    own topology when it is not a preset (one read from a TOML file), then every preset.
    """
    from zerocalc.collectives import Algorithm

    if topologies is None:
        topologies = _figure_topologies(config)
    frames = []
    for topo in topologies:
        df = _evaluate(config, psi=np.asarray(psi_values, dtype=float), n=config.n, schemes=list(schemes),
                       topology=topo)
        for alg in Algorithm:
            col = f"time_s_{alg.value}"
            if col not in df.columns:
                continue
            part = df[["scheme", "psi", "n"]].copy()
            part["topology"] = _topology_label(topo)
            part["algorithm"] = alg.value
            part["time_s"] = df[col].to_numpy()
            frames.append(part)
    return pd.concat(frames, ignore_index=True)[["topology", "algorithm", "scheme", "psi", "n", "time_s"]]


def memory_vs_n(config: ReportConfig, n_values: Sequence[int] = N_SWEEP,
                schemes: Sequence[str] = ("dp", "zero1", "zero2", "zero3")) -> pd.DataFrame:
    """Model-state memory per GPU against N at the report's Ψ and K (figure 3's data)."""
    df = _evaluate(config, psi=config.psi, n=np.asarray(n_values, dtype=float), schemes=list(schemes))
    return df[["scheme", "psi", "n", "memory_bytes_per_rank"]].reset_index(drop=True)


def zero_table1_points() -> pd.DataFrame:
    """ZeRO Table 1 (7.5B column) in long form, in bytes.

    Columns ``scheme``, ``n``, ``memory_bytes_per_rank``, ``label``.
    """
    long = ZERO_TABLE1_7P5B.melt(id_vars="n", var_name="scheme", value_name="memory_GB")
    long["memory_bytes_per_rank"] = long["memory_GB"] * 1e9
    long["label"] = long["scheme"].map(_TABLE1_LABELS)
    return long[["scheme", "n", "memory_bytes_per_rank", "label"]]


def _custom_topology(config: ReportConfig) -> Topology | None:
    """The report's topology when it is not a preset (read from a TOML file)."""
    from zerocalc.topology import PRESETS

    t = config.topology
    return t if isinstance(t, Topology) and PRESETS.get(t.name) != t else None


def _figure_topologies(config: ReportConfig) -> list[str | Topology]:
    from zerocalc.topology import PRESETS

    custom = _custom_topology(config)
    return [*([custom] if custom is not None else []), *PRESETS]


def _topology_label(topo: str | Topology) -> str:
    """A topology's name; a custom one that shares a preset's name is told apart from it."""
    from zerocalc.topology import PRESETS

    if not isinstance(topo, Topology):
        return str(topo)
    return topo.name if PRESETS.get(topo.name, topo) == topo else f"{topo.name} (custom)"


def _derivations() -> list[dict[str, object]]:
    """Per scheme: the symbolic per-rank volume (ring), step time (ring) and model-state memory.

    The time is split into its cases (one node; several nodes) and collected by latency,
    reduction and bandwidth terms, so each line reads as α-terms + γ-terms + bytes/bandwidth.
    """
    import sympy

    from zerocalc import symbols as S
    from zerocalc.memory import model_state_bytes
    from zerocalc.schemes import SCHEMES

    collect_by = [S.alpha_intra, S.alpha_inter, S.gamma]
    out = []
    for name, scheme in SCHEMES.items():
        time = sympy.piecewise_fold(scheme.time_s())
        pieces = time.args if isinstance(time, sympy.Piecewise) else ((time, sympy.true),)
        cases = []
        for expr, cond in pieces:
            expr = sympy.collect(sympy.expand(expr), collect_by, func=sympy.factor)
            cases.append((expr, _condition_text(cond, len(pieces))))
        out.append({"scheme": name, "title": scheme.title, "equivalent_to_dp": scheme.equivalent_to_dp,
                    "volume": sympy.factor(scheme.bytes_per_rank()), "time_cases": cases,
                    "memory": sympy.factor(model_state_bytes(name))})
    return out


def _condition_text(cond, n_pieces: int) -> str:
    import sympy

    from zerocalc import symbols as S

    if cond is sympy.true:
        return "N > G" if n_pieces > 1 else "any N"
    if cond == (S.G >= S.N) or cond == (S.N <= S.G):
        return "N ≤ G"
    return str(cond)


def _identities() -> list[tuple[str, bool]]:
    """The identities the verdict rests on, each checked here by ``sympy.simplify(a - b) == 0``."""
    import sympy

    from zerocalc import symbols as S
    from zerocalc.schemes import SCHEMES

    v = {name: s.bytes_per_rank() for name, s in SCHEMES.items()}
    bound = (S.N - 1) / S.N * S.Psi * S.b_comm
    checks = [
        ("V(zero2) = V(dp)", v["zero2"] - v["dp"]),
        ("V(colocated) = V(dp) / 2", v["colocated"] - v["dp"] / 2),
        ("V(zero3) = 3/2 · V(dp)", v["zero3"] - v["dp"] * 3 / 2),
        ("V(deepspeed-zero12) = 3/2 · V(dp)", v["deepspeed-zero12"] - v["dp"] * 3 / 2),
        ("V(colocated) = (N−1)/N · Ψ · b_comm: all of it is the parameter all-gather, "
         "nothing is left for the gradient reduction", v["colocated"] - bound),
    ]
    return [(text, sympy.simplify(expr) == 0) for text, expr in checks]


def bundled_traces() -> dict[str, tuple[Path, ...]]:
    """The real traces shipped with zerocalc (``zerocalc/data/traces``), by name.

    ``resnet50-ddp``: a PyTorch DDP ResNet-50 step on A100 (rank 0 of 2); ``deepspeed-zero3``:
    a DeepSpeed ZeRO-3 run on 4 ranks over gloo. Their origin is in ``data/traces/README.md``.
    """
    from importlib.resources import files

    root = Path(str(files("zerocalc") / "data" / "traces"))
    return {
        "resnet50-ddp": (root / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz",),
        "deepspeed-zero3": tuple(sorted((root / "deepspeed-gloo-zero3-n4").glob("rank*.json.gz"))),
    }


def bundled_nccl_tests() -> Path:
    """The bundled all_reduce_perf sweep on 16 H100 GPUs (2 nodes), for the α-β fit."""
    from importlib.resources import files

    root = files("zerocalc") / "data" / "traces" / "nccl-tests"
    return Path(str(root / "all_reduce_perf-16xH100-2nodes.txt"))


def feasibility_result(config: ReportConfig):
    """The feasibility simulation behind section 7 (:func:`zerocalc.feasibility.run_feasibility`).

    Its plan is priced at the report's Ψ and wire element size.
    """
    from zerocalc.evaluate import dtype_bytes
    from zerocalc.feasibility import FeasibilityConfig, run_feasibility

    cfg = FeasibilityConfig(n=config.feasibility_n, steps=config.feasibility_steps, seed=config.seed)
    return run_feasibility(cfg, plan_psi=int(config.psi), plan_comm_bytes=int(dtype_bytes(config.comm_dtype)))


def divergence_vs_steps(config: ReportConfig, result=None) -> pd.DataFrame:
    """Relative distance from data-parallel training after each step (figure 4's data).

    Columns ``case``, ``step``, ``max_rel_diff``: the colocated proposal on distinct micro-batches,
    the same on N = 1 and with every rank on one micro-batch (the conditions under which it is
    exact), and the largest difference of the schemes the model says are exact.
    """
    from dataclasses import replace

    from zerocalc.feasibility import simulate_reference, simulate_scheme

    result = result if result is not None else feasibility_result(config)
    cfg = result.config
    rows: list[tuple[str, int, float]] = []
    runs = {r.scheme: r for r in result.runs}
    col = runs["colocated"]
    rows += [(f"colocated, N = {cfg.n}, distinct micro-batches", k + 1, d)
             for k, d in enumerate(col.diff_by_step)]
    conditions = ((f"colocated, N = {cfg.n}, one shared micro-batch", replace(cfg, shared_micro_batch=True)),
                  ("colocated, N = 1", replace(cfg, n=1, gpus_per_node=None)))
    for label, c in conditions:
        run = simulate_scheme("colocated", c, simulate_reference(c))
        rows += [(label, k + 1, d) for k, d in enumerate(run.diff_by_step)]
    exact = [r for r in result.runs if r.scheme != "colocated" and r.equivalent]
    if exact:
        worst = np.max(np.array([r.diff_by_step for r in exact]), axis=0)
        rows += [(f"largest of the {len(exact)} exact schemes", k + 1, float(d)) for k, d in enumerate(worst)]
    return pd.DataFrame(rows, columns=["case", "step", "max_rel_diff"])


def plan_on_cluster(config: ReportConfig, result) -> pd.DataFrame:
    """The feasibility plan priced on the report's cluster by the model.

    For a change of scheme, bytes and time saved are the model's difference between the two
    schemes at the report's Ψ, N, topology and element size; for an item that keeps the scheme
    (overlap, periodic averaging) the fraction of the source scheme's volume the plan item saves
    at its own basis is applied to the cluster's volume and time.
    """
    from zerocalc.evaluate import model_bytes_per_rank

    table = volume_table(config).set_index("scheme")
    basis = result.plan_basis
    rows = []
    for item in result.plan:
        src, dst = table.loc[item.from_scheme], table.loc[item.to_scheme]
        if item.from_scheme != item.to_scheme:
            saved_b = float(src["bytes_per_rank"] - dst["bytes_per_rank"])
            saved_t = float(src["time_s"] - dst["time_s"])
        else:
            at_basis = model_bytes_per_rank(item.from_scheme, psi=basis["psi"], n=basis["n"],
                                            gpus_per_node=basis["gpus_per_node"],
                                            comm_bytes=float(basis["comm_bytes"]))
            frac = item.bytes_saved_per_rank / at_basis if at_basis else 0.0
            saved_b = frac * float(src["bytes_per_rank"])
            saved_t = frac * float(src["time_s"])
        rows.append({"rank": item.rank, "action": item.action, "update": item.update,
                     "from_scheme": item.from_scheme, "to_scheme": item.to_scheme,
                     "bytes_saved_per_rank": saved_b, "time_saved_s": saved_t,
                     "from_time_s": float(src["time_s"]), "evidence": item.evidence, "note": item.note})
    return pd.DataFrame(rows)


def _topology_name(config: ReportConfig) -> str:
    t = config.topology
    return t.name if isinstance(t, Topology) else str(t)


def cluster_verdict(config: ReportConfig, result, plan: pd.DataFrame) -> str:
    """The feasibility verdict with its saving priced on the report's cluster.

    The simulation's findings (its N, its Ψ, its divergence) stay as the simulation found them; the
    last sentence takes the plan's first exact item that saves bytes on the cluster (the plan's own
    ranking) and states its saving from :func:`plan_on_cluster`: the model at the report's Ψ, N,
    topology and wire dtype.
    """
    from zerocalc.feasibility import saving_sentence

    exact = plan[(plan["update"] == "exact") & (plan["bytes_saved_per_rank"] > 0)]
    basis = (f"on the chosen cluster: {_topology_name(config)}, N = {config.n}, Ψ = {config.psi:.3g}, "
             f"{config.comm_dtype} on the wire, so {format_bytes(exact['bytes_saved_per_rank'].iloc[0])} per "
             "rank per step" if len(exact) else
             f"the chosen cluster ({_topology_name(config)}, N = {config.n}, {config.comm_dtype})")
    if not len(exact):
        return f"{result.findings} {saving_sentence(None, None, None, None, basis)}"
    top = exact.iloc[0]
    return (f"{result.findings} " + saving_sentence(top["action"], top["from_scheme"], top["to_scheme"],
                                                    top["bytes_saved_per_rank"] / config.psi, basis))


def trace_checks(paths_by_name: dict[str, Sequence[Path]]) -> dict[str, object]:
    """:func:`zerocalc.validate.check` on each named trace set (Ψ and N inferred from the trace)."""
    from zerocalc.traces import read_traces
    from zerocalc.validate import check

    out = {}
    for name, paths in paths_by_name.items():
        ts = read_traces([str(p) for p in paths] if len(paths) > 1 else str(paths[0]))
        out[name] = check(ts.table, meta=ts.meta)
    return out


def validation_frame(checks: dict[str, object]) -> pd.DataFrame:
    """Predicted against measured bytes per rank per step, per collective, for the best-matching scheme.

    The scheme is the trace's first match (or, when none matches, the one whose volume is closest).
    Columns: ``trace``, ``scheme``, ``op``, ``label``, ``predicted_calls``, ``measured_calls``,
    ``predicted_bytes``, ``measured_bytes``, ``residual_bytes`` (measured − predicted), ``ratio``.
    """
    rows = []
    for name, res in checks.items():
        comps = {c.scheme: c for c in res.comparisons if c.ratio is not None and np.isfinite(c.ratio)
                 and c.ratio > 0}
        if not comps:  # e.g. N = 1: no cross-rank traffic, nothing to compare
            continue
        best = (res.matches[0] if res.matches and res.matches[0] in comps
                else min(comps, key=lambda s: abs(np.log(comps[s].ratio))))
        c = comps[best]
        pred = {op: (calls, nbytes) for op, calls, _el, nbytes in c.predicted_pattern}
        meas = {op: (calls, nbytes) for op, calls, _el, nbytes in c.measured_pattern}
        for op in list(dict.fromkeys([*meas, *pred])):
            pc, pb = pred.get(op, (0.0, 0.0))
            mc, mb = meas.get(op, (0.0, 0.0))
            rows.append({"trace": name, "scheme": best, "op": op, "label": f"{name} · {op} ({best})",
                         "predicted_calls": pc, "measured_calls": mc, "predicted_bytes": pb,
                         "measured_bytes": mb, "residual_bytes": mb - pb,
                         "ratio": mb / pb if pb else float("nan")})
    return pd.DataFrame(rows)


def nccl_tests_fit(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The α-β fit of an nccl-tests sweep: (fit summary, per-size measured vs fitted time).

    Fitted time per size = the fitted model's own prediction,
    :meth:`zerocalc.validate.AlphaBetaFit.predict_s` (latency hops × α + bus-bandwidth factor
    × size × β; Thakur et al. 2005 ring costs, nccl-tests doc/PERFORMANCE.md).
    """
    from zerocalc.traces import read_traces
    from zerocalc.validate import fit_table, fits_frame

    table = read_traces(str(path)).table
    fits = fit_table(table)
    summary = fits_frame(fits)
    rows = []
    for fit in fits:
        sub = table[(table["op"] == fit.op) & (table["group_size"] == fit.group_size)]
        for r in sub.itertuples():
            size = float(r.size_bytes)
            pred = fit.predict_s(fit.op, size, fit.group_size)
            rows.append({"op": fit.op, "group_size": fit.group_size, "size_bytes": size,
                         "measured_s": float(r.duration_s), "predicted_s": pred,
                         "residual": float(r.duration_s) / pred - 1.0})
    return summary, pd.DataFrame(rows)


def collect(config: ReportConfig = ReportConfig(), progress: Progress | None = None) -> ReportData:
    """Compute everything the report shows from the public API."""
    say = progress or (lambda _msg: None)
    say("evaluating the model at the chosen configuration")
    table = volume_table(config)
    say("deriving the symbolic volume, time and memory of every scheme")
    derivations = _derivations()
    identities = _identities()
    say("sweeping N and Ψ for the figures")
    data = ReportData(
        config=config,
        table=table,
        bytes_vs_n=bytes_vs_n(config),
        time_vs_psi=time_vs_psi(config),
        memory_vs_n=memory_vs_n(config),
        memory_points=zero_table1_points(),
        derivations=derivations,
        identities=identities,
    )
    say("simulating every scheme on ranks that train (feasibility)")
    result = feasibility_result(config)
    data.extra["feasibility"] = result
    data.extra["divergence"] = divergence_vs_steps(config, result)
    data.extra["plan"] = plan_on_cluster(config, result)
    data.extra["verdict_short"] = cluster_verdict(config, result, data.extra["plan"])
    say("checking the model against " + ("the given traces" if config.traces else "the bundled real traces"))
    paths = {p.name: (p,) for p in config.traces} if config.traces else bundled_traces()
    checks = trace_checks(paths)
    data.extra["checks"] = checks
    data.extra["validation"] = validation_frame(checks)
    if not config.traces:
        say("fitting α and β to the bundled nccl-tests sweep")
        data.extra["fit_summary"], data.extra["fit_points"] = nccl_tests_fit(bundled_nccl_tests())
    return data


# ---------------------------------------------------------------------------
# The pages
# ---------------------------------------------------------------------------

_QUESTION = """
    DeepSpeed issue #4582 ("Direct Correspondence between Gradient and Optimizer States to Reduce
    Communication", opened 2023-10-30, open, no maintainer answer) argues: in ZeRO stage 2 (P_os+g) a
    training step costs a ReduceScatter of the gradients (Ψ elements) plus an AllGather of the updated
    parameters (Ψ), 2Ψ in all. If each gradient were placed in the same partition as its optimizer-state
    shard, the ReduceScatter could be skipped and only the AllGather (Ψ) would remain: half the traffic.

    Two facts from the ZeRO paper (Rajbhandari et al., SC20) bear on it. §2.1: every rank runs forward and
    backward on a different micro-batch, and the update uses the gradient averaged over all ranks. §5.2:
    ZeRO-2 already reduces each gradient only onto the rank that owns the matching optimizer-state shard
    ("effectively a Reduce-Scatter"). So after the ReduceScatter the gradients are colocated with their
    optimizer state; the question is whether the ReduceScatter relocates data (and could be avoided) or
    computes the cross-rank sum (and cannot). This report answers it three ways: a symbolic derivation of
    the volume, time and memory of every scheme (sections 2 to 5); a simulation of ranks that really train
    with each scheme and are compared with data-parallel training (section 7); and real traces checked
    against the model (section 6).
"""

_ASSUMPTIONS = [
    "Notation: Ψ parameters (elements); N ranks in the data-parallel group, G per node, N/G nodes; "
    "b_comm bytes per element on the wire (2 for fp16/bf16); b_param and b_grad bytes per stored "
    "parameter and gradient; K bytes of optimizer state per parameter (12 for mixed-precision Adam, "
    "ZeRO §3.1).",
    "Volume = bytes ONE rank sends in one training step, averaged over the ranks of the group. A "
    "collective's "
    "size is the bytes of its full vector (Ψ·b for a whole-model all-reduce); ring all-reduce sends "
    "2(p−1)/p of it per rank, reduce-scatter and all-gather (p−1)/p each (Patarasuk & Yuan 2009; Thakur, "
    "Rabenseifner & Gropp 2005). The ZeRO paper's 2Ψ and 3Ψ are these volumes with (N−1)/N dropped.",
    "Time = Hockney α-β(-γ): each message step costs a latency α plus bytes / bandwidth on the link it "
    "crosses, plus γ per byte reduced. Intra-node and inter-node links have their own α and bandwidth "
    "(the topology presets below); a phase on the world group runs at the pace of the slower tier it "
    "crosses. Ring, recursive halving/doubling, binomial tree and a two-level hierarchical algorithm are "
    "modelled. Phases run one after another and nothing overlaps with compute, so the time is the "
    "exposed-communication upper bound of a step.",
    "Memory = model states only (ZeRO §3.1, §5): parameters, gradients and optimizer states, divided by N "
    "where a scheme shards them. Activations, temporary buffers and fragmentation are left out.",
    "A scheme is the ordered list of collectives one step issues (collective, message size, bytes per "
    "element, group: world, intra-node or inter-node) plus one fact: whether its update equals "
    "data-parallel SGD/Adam on the global batch. The simulation (section 7) checks that fact by training.",
]

_SOURCES = [
    "DeepSpeed issue #4582, \"Direct Correspondence between Gradient and Optimizer States to Reduce "
    "Communication\", github.com/deepspeedai/DeepSpeed/issues/4582 (2023-10-30).",
    "S. Rajbhandari, J. Rasley, O. Ruwase, Y. He. ZeRO: Memory Optimizations Toward Training Trillion "
    "Parameter Models. SC20, arXiv:1910.02054. §2.1, §3.1, §5 (memory, Table 1), §7 (communication).",
    "P. Patarasuk, X. Yuan. Bandwidth optimal all-reduce algorithms for clusters of workstations. "
    "J. Parallel Distrib. Comput. 69(2), 2009: the 2(N−1)/N lower bound for all-reduce.",
    "R. Thakur, R. Rabenseifner, W. Gropp. Optimization of Collective Communication Operations in MPICH. "
    "IJHPCA 19(1), 2005: α-β-γ costs of ring, recursive halving/doubling and binomial-tree collectives.",
    "R. W. Hockney. The communication challenge for MPP: Intel Paragon and Meiko CS-2. Parallel "
    "Computing 20(3), 1994: the α-β model.",
    "DeepSpeed source, deepspeed/runtime/zero/stage_1_and_2.py (use_multi_rank_bucket_allreduce) and "
    "stage3.py; DeepSpeed issues #5758 and #6463, PR #7440: ZeRO-1/2 reduce gradients with all-reduce; "
    "deepspeed/runtime/zero/config.py: stage3_max_reuse_distance keeps gathered parameters for reuse.",
    "PyTorch ZeroRedundancyOptimizer (torch.distributed.optim) and pytorch issue #69591: DDP all-reduce "
    "plus one broadcast per parameter shard.",
    "Y. Zhao et al. PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel. VLDB 2023, "
    "arXiv:2304.11277: FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD.",
    "G. Wang et al. ZeRO++: Extremely Efficient Collective Communication for Giant Model Training. "
    "arXiv:2306.10209: qwZ, hpZ, qgZ.",
    "NVIDIA nccl-tests, doc/PERFORMANCE.md: algorithm and bus bandwidth; NCCL src/graph/tuning.cc.",
    "DeepSpeed estimate_zero2_model_states_mem_needs / estimate_zero3_model_states_mem_needs "
    "(deepspeed/runtime/zero/stage_1_and_2.py, stage3.py).",
    "Real traces: HolisticTraceAnalysis tests/data (PyTorch DDP ResNet-50 on A100, NCCL 2.17.1); a "
    "DeepSpeed 0.19.8 ZeRO-3 run on 4 ranks over gloo; an all_reduce_perf sweep on 16 H100 GPUs (2 nodes).",
]


SECTION_TITLES: tuple[str, ...] = (
    "1. The question",
    "2. The model and its assumptions",
    "3. Derivations",
    "4. Volume, time and memory per scheme",
    "5. Figures",
    "6. Validation against real traces",
    "7. Verdict and implementation plan",
    "8. Sources",
)


def _latex(expr) -> str:
    """sympy LaTeX made palatable to matplotlib's mathtext."""
    import sympy

    s = sympy.latex(expr, mul_symbol=None)
    for a, b in ((r"\operatorname", r"\mathrm"), (r"\left\lceil", r"\lceil"), (r"\right\rceil", r"\rceil"),
                 (r"\left\lfloor", r"\lfloor"), (r"\right\rfloor", r"\rfloor"), (r"\text", r"\mathrm"),
                 (r"\frac", r"\dfrac")):
        s = s.replace(a, b)
    return s


def _config_line(config: ReportConfig) -> str:
    return (f"Ψ = {config.psi:,.0f} parameters, N = {config.n} GPUs ({config.gpus_per_node} per node), "
            f"topology {_topology_name(config)}, {config.comm_dtype} communication, K = {config.k:g} "
            "bytes of optimizer state per parameter")


def _page_question(w: _Writer, data: ReportData) -> None:
    w.title("Can ZeRO-2 skip its reduce-scatter?",
            "Design review of DeepSpeed issue #4582 (colocating gradients with optimizer-state shards), "
            "derived, simulated and measured with zerocalc. Configuration: "
            + _config_line(data.config) + ".")
    verdict = data.extra.get("verdict_short")
    if verdict:
        w.heading("In short", 2)
        w.paragraph(str(verdict))
    w.heading(SECTION_TITLES[0])
    for para in _dedent(_QUESTION).split("\n"):
        w.paragraph(para)


def _page_model(w: _Writer, data: ReportData) -> None:
    from zerocalc.schemes import SCHEMES
    from zerocalc.symbols import SYMBOLS

    w.heading(SECTION_TITLES[1])
    w.bullets(_ASSUMPTIONS)
    w.heading("Symbols", 2)
    symbols = [[name, info.meaning, info.unit] for name, info in SYMBOLS.items()]
    w.table(["symbol", "meaning", "unit"], symbols,
            align="lll", size=7.5)
    w.heading("Schemes", 2)
    rows = []
    for name, s in SCHEMES.items():
        phases = " + ".join(f"{p.collective.value} ({p.group.value})" for p in s.phases)
        rows.append([name, s.title, "yes" if s.equivalent_at(data.config.n) else "NO", phases])
    w.table(["scheme", "what it is", "DP update", "collectives per step (group)"], rows, align="llll",
            size=7.5,
            wrap={1: 34, 3: 46})
    from zerocalc.topology import PRESETS

    custom = _custom_topology(data.config)
    topologies = [*([custom] if custom is not None else []), *PRESETS.values()]
    w.ensure(2.8)  # the presets table (about 17 lines at 7 pt) stays on one page with its heading
    w.heading("Topologies" if custom is not None else "Topology presets", 2)
    w.table(["topology" if custom is not None else "preset", "G", "intra α", "intra GB/s (per GPU)",
             "inter α", "inter GB/s (per node)", "source"],
            [[_topology_label(t), str(t.gpus_per_node), format_seconds(t.intra.alpha_s),
              f"{t.intra.bw_Bps / 1e9:g}", format_seconds(t.inter.alpha_s), f"{t.inter.bw_Bps / 1e9:g}",
              t.source or ("this report's --topology file" if t is custom else "")]
             for t in topologies], align="lrrrrrl", size=7.0, wrap={6: 48})


def _page_derivations(w: _Writer, data: ReportData) -> None:
    from zerocalc.schemes import SCHEMES

    w.heading(SECTION_TITLES[2])
    w.paragraph(
        "Per scheme, from the phases of section 2 with ring algorithms: V = bytes one rank sends per step, "
        "T = step communication time (α-β, phases in sequence; N ≤ G: one node, N > G: several nodes), "
        "M = model-state bytes per GPU. Generated from the symbolic model with sympy; nothing on these "
        "pages is typed in.")
    for d in data.derivations:
        name = str(d["scheme"])
        same = SCHEMES[name].equivalent_at(data.config.n)
        w.heading(f"{name}: {d['title']}" + ("" if same else "  (not the DP update)"), 2)
        w.math("bytes sent per rank", [r"V = " + _latex(d["volume"])], fallback=[f"V = {d['volume']}"])
        w.math("model states per GPU", [r"M = " + _latex(d["memory"])], fallback=[f"M = {d['memory']}"])
        for expr, cond in d["time_cases"]:  # type: ignore[union-attr]
            lines = _split_terms(w, "T = ", expr, size=9.5)
            w.math(f"time, {cond}", lines, fallback=[f"T = {expr}"], size=9.5)
    w.heading("Identities checked by sympy.simplify(a − b) = 0", 2)
    w.table(["identity", "holds"], [[text, "yes" if ok else "NO"] for text, ok in data.identities],
            align="ll", size=8.0)


def _split_terms(w: _Writer, lhs: str, expr, *, size: float, min_size: float = 7.5) -> list[str]:
    """``lhs + expr`` as mathtext lines: one line when it fits at ``min_size``, else its terms
    packed greedily onto continuation lines that start with ``+``."""
    import sympy

    avail = (_TEXT_W - 1.45) * 72.0
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


def _page_table(w: _Writer, data: ReportData) -> None:
    from zerocalc.collectives import Algorithm

    w.heading(SECTION_TITLES[3])
    t = data.table
    algs = [a.value for a in Algorithm if f"time_s_{a.value}" in t.columns]
    header = ["scheme", "bytes/rank/step", "×Ψb", *[f"T {a}" for a in algs], "memory/GPU", "DP"]
    rows = []
    for _i, r in t.iterrows():
        rows.append([str(r["scheme"]), format_bytes(r["bytes_per_rank"]),
                     f"{r['bytes_per_rank_over_psi']:.3f}", *[format_seconds(r[f"time_s_{a}"]) for a in algs],
                     format_bytes(r["memory_bytes_per_rank"]), "yes" if r["equivalent_to_dp"] else "NO"])
    w.table(header, rows, caption=(
        "Table. " + _config_line(data.config) + ". bytes/rank/step: bytes one rank sends per step (ring "
        "algorithms); ×Ψb: the same in units of Ψ × bytes per element; T: step communication time per "
        "algorithm on the topology; memory: model states per GPU (GB = 1e9 B); DP: whether the update "
        "equals data-parallel training. T tree is the textbook binomial tree without pipelining "
        "(Thakur, Rabenseifner & Gropp 2005), not NCCL's pipelined double binary tree; zeropp's quantised "
        f"phases keep their int8/int4 width whatever the wire dtype ({data.config.comm_dtype}) is."),
        size=7.5)


def _page_figures(w: _Writer, data: ReportData) -> None:
    from zerocalc import plots

    c = data.config
    w.heading(SECTION_TITLES[4])
    w.figure(4.1, lambda sf: plots.plot_bytes_vs_n(data.bytes_vs_n, fig=sf), caption=(
        f"Figure 1. Bytes one rank sends per step against N at Ψ = {c.psi:,.0f}, {c.comm_dtype}, ring "
        "algorithms. Left in units of Ψ·b, right in bytes. The colocated proposal sits at half of "
        "data parallel; the curves flatten at the paper's 2Ψ, 3Ψ and Ψ as (N−1)/N → 1."))
    panels = data.time_vs_psi["topology"].nunique()
    custom = _custom_topology(c)
    where = (f"this report's topology ({_topology_label(custom)}) and each preset" if custom is not None
             else "each topology preset")
    w.figure(3.1 * -(-panels // 2), lambda sf: plots.plot_time_vs_psi(data.time_vs_psi, fig=sf), caption=(
        f"Figure 2. Step communication time against Ψ at N = {c.n} ({c.gpus_per_node} GPUs per node) on "
        f"{where}; colour = algorithm, line style = scheme. Latency dominates on the left, "
        "bandwidth on the right."))
    w.figure(4.6, lambda sf: plots.plot_memory_vs_n(data.memory_vs_n, data.memory_points, fig=sf), caption=(
        f"Figure 3. Model-state memory per GPU against N at Ψ = {c.psi:,.0f}, K = {c.k:g} (lines: the "
        "model), with the printed cells of ZeRO Table 1 (7.5B column, GB = 1e9 B) overlaid as "
        "unfilled markers. The colocated proposal does not change memory: it keeps ZeRO-2's sharding."
        if c.psi == 7.5e9 and c.k == 12 else
        f"Figure 3. Model-state memory per GPU against N at Ψ = {c.psi:,.0f}, K = {c.k:g}. ZeRO Table 1 "
        "is printed for Ψ = 7.5B and K = 12 only, so its points are not overlaid here."))
    _page_divergence(w, data)


def _page_divergence(w: _Writer, data: ReportData) -> None:
    from zerocalc import plots
    from zerocalc.feasibility import REL_TOL

    result = data.extra["feasibility"]
    cfg = result.config
    divergence = data.extra["divergence"]
    w.figure(4.4, lambda sf: plots.plot_divergence_vs_steps(divergence, fig=sf, tolerance=REL_TOL),
             caption=(
        f"Figure 4. Feasibility: {cfg.n} simulated ranks train a two-layer MLP (Ψ = {cfg.model.psi} "
        f"parameters) with Adam for {cfg.steps} steps, {cfg.micro_batch} samples per rank per step, seed "
        f"{cfg.seed}; each "
        "line is the largest parameter difference from single-process training on the global batch, "
        "relative to the largest parameter. The colocated proposal drifts away from step 1 unless no "
        "data parallelism is left (N = 1, or one micro-batch shared by all ranks); the exact schemes stay "
        "at rounding level."))


def _page_validation(w: _Writer, data: ReportData) -> None:
    from zerocalc import plots

    w.heading(SECTION_TITLES[5])
    checks = data.extra["checks"]
    w.paragraph(
        "Each trace is read into zerocalc's canonical table; bytes each rank sent per step are counted with "
        "the model's ring accounting, Ψ and N are inferred from the trace, and every scheme's predicted "
        "collectives "
        "are compared with the measured ones (volume and pattern). "
        + ("The traces are those given on the command line." if data.config.traces else
           "The traces are real runs bundled with zerocalc: a PyTorch DDP ResNet-50 step on A100 (HTA test "
           "data) "
           "and a DeepSpeed 0.19.8 ZeRO-3 run on 4 ranks over gloo."))
    for name, res in checks.items():
        m = res.measurement
        w.heading(f"Trace {name}", 2)
        w.bullets([m.psi_how, m.n_how, f"steps: {m.steps_how}",
                   "consistent schemes (best first): " + (", ".join(res.matches) or "none")
                   + "".join(f"; the trace cannot tell apart {', '.join(g)}" for g in res.indistinguishable),
                   *[f"note: {t}" for t in (*m.notes, *res.notes)]], size=8.5)
        cats = m.categories
        cats = cats[cats["calls_per_rank_per_step"] > 0]
        w.table(["category", "calls/rank/step", "bytes/rank/step", "what it is"],
                [[r.category, f"{r.calls_per_rank_per_step:.3g}", format_bytes(r.bytes_per_rank_per_step),
                  r.description] for r in cats.itertuples()], align="lrrl", size=7.5, wrap={3: 60})
        shown = ("dp", "zero2", "zero3", "colocated", "deepspeed-zero12", *res.matches)
        key = [c for c in res.comparisons if c.scheme in shown]
        w.table(["scheme", "predicted", "measured", "ratio", "pattern", "explanation"],
                [[c.scheme, format_bytes(c.predicted_bytes_per_rank_per_step),
                  format_bytes(c.measured_bytes_per_rank_per_step),
                  "n/a" if c.ratio is None or not np.isfinite(c.ratio) else f"{c.ratio:.3f}",
                  "match" if c.pattern_match else "no", c.explanation] for c in key],
                align="lrrrll", size=7.0, wrap={5: 62})
    val = data.extra["validation"]
    shown = val[val["predicted_bytes"] > 0] if not val.empty else val
    if not shown.empty:
        w.figure(0.9 + 0.42 * max(len(shown), 3), lambda sf: plots.plot_validation(shown, fig=sf), caption=(
            "Figure 5. Predicted against measured bytes per rank per step for each collective of each trace, "
            "under the scheme that matches it (in brackets); right: measured / predicted (1.000 = exact). "
            "Residuals (measured − predicted): " + "; ".join(
                f"{r.label}: {r.residual_bytes:+,.0f} B" for r in val.itertuples()) + "."))
    summary = data.extra.get("fit_summary")
    points = data.extra.get("fit_points")
    if isinstance(summary, pd.DataFrame) and isinstance(points, pd.DataFrame) and not points.empty:
        f = summary.iloc[0]
        w.figure(4.0, lambda sf: plots.plot_fit(points, fig=sf), caption=(
            "Figure 6. Time: the α-β model fitted to the bundled all_reduce_perf sweep on "
            f"{int(f['group_size'])} H100 GPUs (2 nodes): latency {format_seconds(f['latency_s'])} ± "
            f"{format_seconds(f['latency_se_s'])}, "
            f"bus bandwidth {f['busbw_GBps']:.4g} ± {f['busbw_se_GBps']:.2g} GB/s (method {f['method']}). "
            "Bottom: measured / fitted − 1 per size; the sizes between the latency and bandwidth regimes "
            "(protocol and algorithm switches in NCCL) are where the two-parameter model is furthest off."))


def _page_verdict(w: _Writer, data: ReportData) -> None:
    from zerocalc.feasibility import REL_TOL, WIRE_ELEM_BYTES

    result = data.extra["feasibility"]
    plan: pd.DataFrame = data.extra["plan"]
    c = data.config
    cfg = result.config
    w.heading(SECTION_TITLES[6])
    w.heading("Verdict", 2)
    w.paragraph(str(data.extra.get("verdict_short") or result.verdict))
    w.heading("The simulation behind it", 2)
    w.paragraph(
        f"{cfg.n} ranks, {cfg.steps} Adam steps, seed {cfg.seed}; bytes per rank per step with "
        f"{WIRE_ELEM_BYTES}-byte (float64) wire elements, simulated (ring collectives moving real array "
        f"slices) and from the model; "
        f"equivalent = relative parameter difference from data-parallel training ≤ {REL_TOL:g}. The lower "
        f"bound for the gradient reduction of any exact scheme is (N−1)/N·Ψ·b = "
        f"{float(result.lower_bound_bytes_per_rank):,.0f} bytes (Patarasuk & Yuan 2009).", size=8.5)
    w.table(["scheme", "simulated B", "model B", "same", "gradient B", "max rel diff", "DP-equivalent"],
            [[r["scheme"], _num(r["bytes_per_rank_simulated"]), _num(r["bytes_per_rank_model"]),
              "-" if r["bytes_match"] is None else ("yes" if r["bytes_match"] else "NO"),
              _num(r["gradient_bytes_per_rank_simulated"]), format_diff(r["max_rel_diff"]),
              "yes" if r["equivalent"] else "NO"] for r in result.records()], size=7.5)
    w.table(["condition (colocated scheme)", "N", "compared with", "max rel diff", "exact"],
            [[d["condition"], str(d["n"]), d["compared_with"], format_diff(d["max_rel_diff"]),
              "yes" if d["equivalent"] else "no"] for d in result.conditions], align="lrlrl", size=7.5)
    w.heading("Implementation plan, priced on the chosen cluster", 2)
    w.paragraph(f"{_topology_name(c)}, N = {c.n} GPUs, Ψ = {c.psi:,.0f} parameters.", size=8.5)
    w.paragraph(
        "Ranked as the simulation ranks it (exact updates first, then approximate, then changed update "
        "rules; within a tier by bytes saved). Bytes and time saved per rank per step are the model's "
        f"difference between the two schemes on this cluster ({c.comm_dtype} on the wire, default "
        "algorithm); an item that keeps the scheme saves the share of the source scheme's traffic it "
        "removes. A negative time "
        "means the change is slower on this cluster.", size=8.5)
    w.table(["#", "step", "update", "from → to", "bytes saved", "time saved"],
            [[str(r.rank), r.action, r.update, f"{r.from_scheme} → {r.to_scheme}",
              format_bytes(r.bytes_saved_per_rank),
              (format_seconds(r.time_saved_s) if r.bytes_saved_per_rank or r.from_scheme != r.to_scheme
               else f"hides ≤ {format_seconds(r.from_time_s)}")]
             for r in plan.itertuples()], align="llllrr", size=7.0, wrap={1: 48, 3: 22})
    w.paragraph("Evidence and caveats per step: " + " ".join(
        f"({r.rank}) {r.evidence}; {r.note}." for r in plan.itertuples()), size=7.5, color="#333333")


def _num(x) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _page_sources(w: _Writer, data: ReportData) -> None:
    w.heading(SECTION_TITLES[7])
    w.bullets([f"[{i}] {s}" for i, s in enumerate(_SOURCES, start=1)], marker="")


#: PDF metadata: fixed strings and no creation date, so the same inputs give the same file.
_METADATA: dict[str, str | None] = {
    "Title": "Can ZeRO-2 skip its reduce-scatter? A design review of DeepSpeed #4582",
    "Author": "zerocalc",
    "Subject": "ZeRO communication volume, time and memory; the colocated-gradient proposal",
    "Creator": "zerocalc",
    "Producer": "zerocalc (matplotlib)",
    "CreationDate": None,
}


def render(data: ReportData, path: str | Path, progress: Progress | None = None) -> int:
    """Lay the report out and write the PDF to ``path``; returns the number of pages."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _msg: None)
    with matplotlib.rc_context(_RC):
        w = _Writer("zerocalc design review · DeepSpeed #4582")
        say("laying out the text pages")
        _page_question(w, data)
        _page_model(w, data)
        _page_derivations(w, data)  # continues on the page the model's tables end on
        w.new_page()
        _page_table(w, data)
        say("drawing the figures")
        _page_figures(w, data)
        w.new_page()
        _page_validation(w, data)
        w.new_page()
        _page_verdict(w, data)
        w.new_page()
        _page_sources(w, data)
        w.save(path, metadata=_METADATA, progress=say)
        return len(w.pages)


def check_output(path: str | Path, config: ReportConfig = ReportConfig()) -> Path:
    """The PDF path to write, refused (:class:`ConfigError`) where writing would lose data.

    An input trace, a directory, or an existing file that is not a PDF is never overwritten.
    """
    out = Path(path)
    if out.is_dir():
        raise ConfigError(f"{out} is a directory; give a file name such as {out / 'review.pdf'}",
                          option="--output")
    target = out.resolve()
    for trace in config.traces:
        t = Path(trace).resolve()
        if target == t or (t.is_dir() and t in target.parents):
            raise ConfigError(f"{out} is (inside) the input trace {trace}; write the PDF elsewhere",
                              option="--output")
    if out.exists():
        with out.open("rb") as fh:
            head = fh.read(5)
        if head != b"%PDF-":
            raise ConfigError(f"refusing to overwrite {out}: it exists and is not a PDF", option="--output")
    return out


def write_report(path: str | Path, config: ReportConfig = ReportConfig(),
                 progress: Progress | None = None) -> ReportData:
    """Collect and render: the whole report, written to ``path``.

    The PDF is written next to ``path`` under a temporary name and moved into place at the end, so
    an interrupted run leaves any earlier report intact; see :func:`check_output` for what is refused.
    """
    out = check_output(path, config)
    data = collect(config, progress)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    try:
        render(data, tmp, progress)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return data
