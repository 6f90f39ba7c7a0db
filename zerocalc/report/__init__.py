"""The design-review report: the question of DeepSpeed #4582 answered in a multi-page PDF.

Everything in the PDF is computed from the public API (the symbolic model, the feasibility
simulation, the trace check) when the report is generated; nothing is typed in by hand except
prose and the published numbers it is compared against (ZeRO Table 1, cited).
:func:`write_report` is the whole of it: check the inputs, :func:`collect` the data, then :func:`render`
the pages.

The package, data flowing down:

* ``config``: :class:`ReportConfig` (what the report is about) and :class:`ReportData` (what it shows);
* ``sweeps``, ``simulation``, ``measured``: the model's table and sweeps, the feasibility simulation
  and its plan priced on the cluster, the real traces' checks and the α-β fit; ``compute``:
  :func:`collect`, which runs them;
* the layout engine, which knows nothing of the content: ``page`` (A4 geometry, fonts, text
  widths), ``layout`` (:class:`~zerocalc.report.layout.Writer`: text flow, page breaks, page
  numbers), ``blocks`` (display maths, tables that continue across pages, numbered figures);
* ``sections``: one module per section, in the order of ``sections.SECTIONS``;
* ``inputs``: :func:`check_output` and :func:`check_traces`, file-system checks run before any work;
* ``document``: :func:`render` and :func:`write_report`; fonts embedded as TrueType, no creation
  date in the metadata, so the same inputs give the same file.

Adding to the report
--------------------
* A new section: a module ``sections/<key>.py`` with ``draw(w, data)`` that starts with
  ``w.heading(title("<key>"))`` and lays out its content with ``w.paragraph``, ``w.bullets``,
  ``w.table``, ``w.math`` and ``w.figure``; and a ``Section("<key>", "Title")`` line in
  ``sections.SECTIONS`` where it belongs (``new_page=True`` to start a page). Numbers of sections
  and figures follow from the order: refer to a section with ``sections.number("<key>")`` and
  write captions without "Figure k." (the writer numbers them).
* Data only that section shows: ``collect(config, data, say)`` in the same module, storing frames in
  ``data.extra`` under keys named after the section; it runs after the shared data. Keep the
  computation in a function a test can call without the PDF (tests compare it with a source).
* A subsection, figure or table inside an existing section: add it to that section's ``draw``
  (e.g. ``sections/figures.py``, ``sections/validation.py``, ``sections/verdict.py``).
* Then regenerate the committed PDF (``zerocalc report``) and look at every page.
"""

__all__ = [
    "FIGURE_SCHEMES",
    "N_SWEEP",
    "PSI_SWEEP",
    "SECTION_TITLES",
    "TIME_SCHEMES",
    "ZERO_TABLE1_7P5B",
    "ReportConfig",
    "ReportData",
    "bundled_nccl_tests",
    "bundled_traces",
    "bytes_vs_n",
    "check_output",
    "check_traces",
    "cluster_verdict",
    "collect",
    "divergence_vs_steps",
    "feasibility_result",
    "memory_vs_n",
    "nccl_tests_fit",
    "plan_on_cluster",
    "render",
    "table1_overlay",
    "time_vs_psi",
    "trace_checks",
    "validation_frame",
    "volume_table",
    "write_report",
    "zero_table1_points",
]

# Imported on first access, so that checking a path (``report.inputs``) loads neither pandas nor
# matplotlib: a bad ``zerocalc report`` option fails at once.
_WHERE = {
    "collect": "compute",
    **dict.fromkeys(("ReportConfig", "ReportData"), "config"),
    **dict.fromkeys(("check_output", "check_traces"), "inputs"),
    **dict.fromkeys(("render", "write_report"), "document"),
    **dict.fromkeys(("bundled_nccl_tests", "bundled_traces", "nccl_tests_fit", "trace_checks",
                     "validation_frame"), "measured"),
    "SECTION_TITLES": "sections",
    **dict.fromkeys(("cluster_verdict", "divergence_vs_steps", "feasibility_result", "plan_on_cluster"),
                    "simulation"),
    **dict.fromkeys(("FIGURE_SCHEMES", "N_SWEEP", "PSI_SWEEP", "TIME_SCHEMES", "ZERO_TABLE1_7P5B",
                     "bytes_vs_n", "memory_vs_n", "table1_overlay", "time_vs_psi", "volume_table",
                     "zero_table1_points"),
                    "sweeps"),
}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
