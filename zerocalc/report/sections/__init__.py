"""The report's sections, in order: each one a module of this package with a ``draw`` function.

A section module defines

* ``draw(w: Writer, data: ReportData) -> None``: lays the section out with the writer's methods
  (``w.heading(title("key"))`` first, then ``w.paragraph``, ``w.bullets``, ``w.table``, ``w.math``,
  ``w.figure``); it reads what it shows from ``data`` and computes nothing heavy itself;
* optionally ``collect(config: ReportConfig, data: ReportData, say: Progress) -> None``: computes
  what only this section shows and stores it in ``data.extra`` under keys of its own; it runs
  after the shared data (:func:`zerocalc.report.collect`) is computed, in section order.

:data:`SECTIONS` lists them; section numbers follow from the order, so prose refers to another
section with :func:`number` (``f"section {number('verdict')}"``), never a typed digit.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zerocalc.report.config import Progress, ReportConfig, ReportData
    from zerocalc.report.layout import Writer


@dataclass(frozen=True)
class Section:
    """One section: ``key`` names its module in this package; ``title`` is printed after its number."""

    key: str
    title: str
    new_page: bool = False  # start on a fresh page
    progress: str | None = None  # a progress line printed before it is laid out

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(f"{__name__}.{self.key}")


SECTIONS: tuple[Section, ...] = (
    Section("question", "The question", progress="laying out the text pages"),
    Section("model", "The model and its assumptions"),
    Section("derivations", "Derivations"),  # continues on the page the model's tables end on
    Section("volume_table", "Volume, time and memory per scheme", new_page=True),
    Section("figures", "Figures", progress="drawing the figures"),
    Section("micro_batches", "Gradient accumulation: bytes per optimizer step", new_page=True),
    Section("validation", "Validation against real traces", new_page=True),
    Section("nccl_sweeps", "NCCL's own cost model against nccl-tests sweeps", new_page=True),
    Section("verdict", "Verdict and implementation plan", new_page=True),
    Section("sources", "Sources", new_page=True),
)


def number(key: str) -> int:
    """The printed number of the section ``key`` (1-based, from its place in :data:`SECTIONS`)."""
    for k, s in enumerate(SECTIONS, start=1):
        if s.key == key:
            return k
    raise KeyError(key)


def title(key: str) -> str:
    """The section's heading: ``"7. Verdict and implementation plan"``."""
    return f"{number(key)}. {SECTIONS[number(key) - 1].title}"


#: Every section's heading, in order.
SECTION_TITLES: tuple[str, ...] = tuple(title(s.key) for s in SECTIONS)


def collect_all(config: ReportConfig, data: ReportData, say: Progress) -> None:
    """Each section's own ``collect``, in order (sections without one are skipped)."""
    for s in SECTIONS:
        hook = getattr(s.module, "collect", None)
        if hook is not None:
            hook(config, data, say)


def draw_all(w: Writer, data: ReportData, say: Progress) -> None:
    """Every section, in order, with its page break and progress line."""
    for s in SECTIONS:
        if s.progress:
            say(s.progress)
        if s.new_page:
            w.new_page()
        s.module.draw(w, data)
