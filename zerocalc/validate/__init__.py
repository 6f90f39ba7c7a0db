"""Measured against predicted: per-step volume per rank, which scheme ran, α and β fitted.

One module per stage, all pure (tables in, dataclasses and tables out; no printing, no files):

* :mod:`.accounting`: the ring's bytes per rank of every call (Thakur, Rabenseifner & Gropp 2005),
  nccl-tests bus-bandwidth factors and latency hops.
* :mod:`.classify`: which rows are calls, and every call in one category (:data:`CATEGORIES`),
  nothing dropped.
* :mod:`.columns`: the calls as compact arrays (string columns as codes) and the grouping helpers
  every stage uses, so that no stage copies the table or loops over rows in Python.
* :mod:`.ranks`: which rank made each call (told apart by process when the trace records none), and
  each rank's calls in time order.
* :mod:`.infer`: N, element types, sizes and Ψ, from options or the trace, each with a sentence for
  the user.
* :mod:`.repeats`: the runs of equal blocks in a rank's call sequence that steps and micro-batches are
  read from.
* :mod:`.steps`: steps, from step markers or repeating call sequences.
* :mod:`.micro_batches`: micro-batches per optimizer step and when gradients are reduced.
* :mod:`.activations`: the reductions of activations (a forward pass's, and their gradients'), set
  apart from the gradients.
* :mod:`.measure`: those stages in order (:func:`measure`); :mod:`.measured_tables`: the per-step
  tables and the measured pattern.
* :mod:`.compare`: every scheme's predicted per-step collectives against the measured ones, by
  volume and by pattern, the consistent schemes best first.
* :mod:`.fit`: the ring α-β model fitted to timed calls (:func:`fit_alpha_beta`), and the step's time.
* :mod:`.explain`: each mismatch in words.
* :mod:`.gloo_dumps`: the all-reduces of a gloo Flight Recorder dump that stand for reduce-scatters,
  read as those where the calls as recorded match no scheme.
* :mod:`.pipeline`: :func:`check`, the stages above from trace table to :class:`CheckResult`.
* :mod:`.sweep`: an nccl-tests sweep size by size against NCCL's own cost model
  (:mod:`zerocalc.nccl`), and the α-β calibration ``zerocalc fit --out`` writes.

Sources: DeepSpeed issues #5758 and #6463 and PyTorch issue #69591 (what implementations send);
Thakur, Rabenseifner & Gropp 2005 and nccl-tests ``doc/PERFORMANCE.md`` (collective cost,
nccl-tests bus bandwidth), §5 (trace formats).
"""

from zerocalc.validate.accounting import (
    DP_OPS,
    OP_NAMES,
    RTOL,
    busbw_factor,
    full_vector_elements,
    latency_hops,
    ring_bytes_factor,
)
from zerocalc.validate.classify import BUFFER_MAX_SHARE_OF_PSI, CATEGORIES, SCALAR_MAX_ELEMENTS
from zerocalc.validate.compare import (
    SchemeComparison,
    compare,
    consistent,
    indistinguishable,
)
from zerocalc.validate.explain import NO_CROSS_RANK_TRAFFIC, reused_sentence
from zerocalc.validate.fit import (
    SKEW_MAX_RATIO,
    SKEW_MAX_REL_RESIDUAL,
    UNRELIABLE_SE_SHARE,
    AlphaBetaFit,
    FitResult,
    Timing,
    fit_alpha_beta,
    fit_table,
    fit_trace,
    fits_frame,
    timing,
)
from zerocalc.validate.measure import Measurement, measure
from zerocalc.validate.pipeline import CheckResult, check
from zerocalc.validate.pricing import predicted_pattern, sympy_float
from zerocalc.validate.ranks import PROCESS_COLUMNS
from zerocalc.validate.repeats import _repeating_suffix, _z_function

__all__ = [
    "BUFFER_MAX_SHARE_OF_PSI", "CATEGORIES", "DP_OPS", "NO_CROSS_RANK_TRAFFIC", "OP_NAMES",
    "PROCESS_COLUMNS", "RTOL", "SCALAR_MAX_ELEMENTS", "SKEW_MAX_RATIO", "SKEW_MAX_REL_RESIDUAL",
    "UNRELIABLE_SE_SHARE", "AlphaBetaFit", "CheckResult", "FitResult", "Measurement", "SchemeComparison",
    "Timing", "_repeating_suffix", "_z_function", "busbw_factor", "check", "compare", "consistent",
    "fit_alpha_beta", "fit_table", "fit_trace", "fits_frame", "full_vector_elements", "indistinguishable",
    "latency_hops", "measure", "predicted_pattern", "reused_sentence", "ring_bytes_factor", "sympy_float",
    "timing",
]
