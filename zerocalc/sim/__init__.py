"""Simulated ranks that execute each scheme on real numbers, counting what they send.

One module per stage: :mod:`~zerocalc.sim.quantize` (ZeRO++'s blockwise codes),
:mod:`~zerocalc.sim.world` (the ranks and their collectives), :mod:`~zerocalc.sim.training` (the
model, the optimizer, the micro-batches, the single-process reference), :mod:`~zerocalc.sim.runners`
(one runner per scheme), :mod:`~zerocalc.sim.compare` (a scheme run against the reference) and
:mod:`~zerocalc.sim.accounting` (the symbolic model's bytes, exact, beside the counted ones).
The verdict built on them is :mod:`zerocalc.feasibility`.
"""

from zerocalc.sim.accounting import model_bytes_by_phase, model_bytes_exact, simulated_bytes_by_collective
from zerocalc.sim.compare import REL_TOL, SchemeRun, simulate_scheme
from zerocalc.sim.quantize import QUANT_BLOCK, Packet, dequantize, quantize
from zerocalc.sim.runners import SIMULATED_SCHEMES
from zerocalc.sim.training import (
    MAX_RANKS,
    MAX_STEPS,
    MLP,
    Adam,
    FeasibilityConfig,
    micro_batch,
    simulate_reference,
    simulate_shardwise_local,
)
from zerocalc.sim.world import (
    WIRE_ELEM_BYTES,
    World,
    all_gather,
    all_reduce,
    all_to_all,
    broadcast,
    chunk_bounds,
    reduce,
    reduce_scatter,
)

__all__ = [
    "MAX_RANKS",
    "MAX_STEPS",
    "MLP",
    "QUANT_BLOCK",
    "REL_TOL",
    "SIMULATED_SCHEMES",
    "WIRE_ELEM_BYTES",
    "Adam",
    "FeasibilityConfig",
    "Packet",
    "SchemeRun",
    "World",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "broadcast",
    "chunk_bounds",
    "dequantize",
    "micro_batch",
    "model_bytes_by_phase",
    "model_bytes_exact",
    "quantize",
    "reduce",
    "reduce_scatter",
    "simulate_reference",
    "simulate_scheme",
    "simulate_shardwise_local",
    "simulated_bytes_by_collective",
]
