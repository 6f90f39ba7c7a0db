"""Blockwise quantisation of simulated messages, as ZeRO++ quantises its collectives.

ZeRO++ (arXiv 2306.10209 §4) quantises weights to int8 for the forward all-gather (qwZ) and gradients
to int4 for the reduction (qgZ), blockwise with one scale per block. A quantised payload counts
``bits × elements / 8`` on the wire; its float32 scales are metadata, counted apart, because the
symbolic model (and the paper's 0.5M / 0.25M figures) count payload only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["QUANT_BLOCK", "Packet", "dequantize", "quantize"]

#: Elements per quantisation block, one float32 scale each (ZeRO++ quantises blockwise, arXiv 2306.10209 §4).
QUANT_BLOCK = 32


@dataclass(frozen=True)
class Packet:
    """A quantised message: integer codes plus one float32 scale per block.

    ``codes`` is int8 for 8-bit codes, or uint8 with two 4-bit codes per byte for 4-bit codes.
    ``payload_bits`` (``bits × n``) is what the wire volume counts; ``meta_bits`` the scales.
    """

    codes: np.ndarray
    scales: np.ndarray
    n: int
    bits: int

    @property
    def payload_bits(self) -> int:
        return self.n * self.bits

    @property
    def meta_bits(self) -> int:
        return int(self.scales.nbytes) * 8

    def copy(self) -> Packet:
        return Packet(self.codes.copy(), self.scales.copy(), self.n, self.bits)


def quantize(x: np.ndarray, bits: int, block: int = QUANT_BLOCK) -> Packet:
    """Blockwise symmetric quantisation of ``x`` to ``bits`` ∈ {4, 8} (ZeRO++ qwZ int8, qgZ int4).

    Per block of ``block`` elements: ``scale = max|x| / (2^(bits-1) - 1)`` (1 for an all-zero block),
    ``q = round(x / scale)``; so ``|x - q·scale| ≤ scale / 2`` element-wise.
    """
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits}")
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    qmax = 2 ** (bits - 1) - 1
    n_blocks = -(-n // block)
    padded = np.zeros(n_blocks * block)
    padded[:n] = x
    blocks = padded.reshape(n_blocks, block) if n_blocks else padded.reshape(0, block)
    amax = np.abs(blocks).max(axis=1) if n_blocks else np.zeros(0)
    scales = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
    q = np.rint(blocks / scales.astype(np.float64)[:, None]).clip(-qmax, qmax).astype(np.int8).ravel()[:n]
    if bits == 8:
        return Packet(q, scales, n, bits)
    nib = (q.astype(np.int16) & 0xF).astype(np.uint8)
    if n % 2:
        nib = np.append(nib, np.uint8(0))
    packed = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)
    return Packet(packed, scales, n, bits)


def dequantize(p: Packet, block: int = QUANT_BLOCK) -> np.ndarray:
    """Inverse of :func:`quantize`: ``q · scale`` as float64."""
    if p.bits == 8:
        q = p.codes.astype(np.float64)
    else:
        lo = (p.codes & 0xF).astype(np.int16)
        hi = (p.codes >> 4).astype(np.int16)
        nib = np.empty(2 * p.codes.size, dtype=np.int16)
        nib[0::2], nib[1::2] = lo, hi
        nib = np.where(nib > 7, nib - 16, nib)[: p.n]
        q = nib.astype(np.float64)
    scale = np.repeat(p.scales.astype(np.float64), block)[: p.n]
    return q * scale
