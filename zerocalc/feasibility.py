"""Simulated ranks that execute each scheme on real numbers and compare its update with data parallelism.

This is the evidence for the question of DeepSpeed issue #4582: *can ZeRO-2's
reduce-scatter be skipped by placing each gradient in the partition of its optimizer state?*

What is simulated
-----------------
* ``N`` ranks in one process. A :class:`World` moves real array slices between them with ring
  collectives (all-reduce, reduce-scatter, all-gather), pipelined chains (broadcast, reduce) and a
  pairwise all-to-all, and counts the bits every rank sends and receives. Vectors that do not divide
  by the group size are split as ``numpy.array_split`` does (the first ``n mod p`` chunks one element
  longer), so chunks are uneven and counts are exact integers.
* A two-layer MLP (tanh hidden layer, softmax cross-entropy) trained with Adam (Kingma & Ba 2015,
  Algorithm 1, bias-corrected). Every rank draws its own micro-batch each step (ZeRO §2.1). The
  reference is one process training on the concatenation of the N micro-batches.
* Each scheme shards the optimizer state (and gradients, parameters) the way it does in its source
  (ZeRO, arXiv 1910.02054 §5 and §7; the implementations' sources named in
``zerocalc.schemes``) and runs the collectives it runs, in float64. Quantised collectives (ZeRO++) really
  quantise: blockwise symmetric int8 / int4 codes with one float32 scale per block, int4 packed two per
  byte.

Byte accounting
---------------
Wire bytes are ``nbytes`` of what is sent: float64 arrays are 8 bytes per element
(:data:`WIRE_ELEM_BYTES`); a quantised payload counts ``bits × elements / 8`` (the packed size without
the half-byte padding of an odd chunk), and its float32 scales are counted apart as *metadata*, because
the symbolic model (and the ZeRO++ paper's 0.5M / 0.25M figures) count payload only.

The symbolic model reports bytes sent per rank *averaged over the ranks of a group*
(the convention of Thakur, Rabenseifner & Gropp 2005).
With uneven chunks single ranks send a little more or less, but every
ring collective, chain and all-to-all here sends exactly ``(p-1)·n`` bytes in total, so the mean over
ranks is an exact rational number. :func:`run_feasibility` keeps it as a :class:`fractions.Fraction`
and compares it with the model's expression evaluated exactly (sympy rationals), for any Ψ and N,
including N not a power of two.

Equivalence
-----------
``max_rel_diff = max|θ − θ_ref| / max|θ_ref|`` after the last step; a scheme is *equivalent* when it is
at most :data:`REL_TOL`. Exact schemes differ from the reference only by the order of float64
additions in the reduction (≈1e-16 relative per step); Adam's normalised update keeps that small.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from zerocalc.errors import ConfigError, UnknownNameError

__all__ = [
    "DEFAULT_PLAN_COMM_BYTES",
    "REL_TOL",
    "SIMULATED_SCHEMES",
    "WIRE_ELEM_BYTES",
    "Adam",
    "FeasibilityConfig",
    "FeasibilityResult",
    "MLP",
    "Packet",
    "SchemeRun",
    "World",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "broadcast",
    "chunk_bounds",
    "dequantize",
    "quantize",
    "reduce",
    "reduce_scatter",
    "run_feasibility",
    "simulate_reference",
    "simulate_scheme",
]

#: Bytes per element of an unquantised message: the simulation moves float64 arrays.
WIRE_ELEM_BYTES = 8
#: Relative tolerance of "equivalent to data parallelism": ``max|Δθ| / max|θ_ref| ≤ REL_TOL``.
REL_TOL = 1e-9
#: Elements per quantisation block, one float32 scale each (ZeRO++ quantises blockwise, arXiv 2306.10209 §4).
QUANT_BLOCK = 32
#: Bytes per element on the wire for which the implementation plan is computed: fp16/bf16, as real runs
#: communicate (b = 2 in ZeRO's notation).
DEFAULT_PLAN_COMM_BYTES = 2


# ---------------------------------------------------------------------------------------------------
# Simulated ranks and wire accounting
# ---------------------------------------------------------------------------------------------------


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


Item = np.ndarray | Packet


class World:
    """N simulated ranks, grouped into nodes of ``gpus_per_node``, that count what they send.

    Groups (names as in :mod:`zerocalc.schemes`): ``world`` (all N ranks), ``intra`` (the G ranks of one
    node: ranks ``m·G … m·G+G-1``), ``inter`` (one rank per node with the same local index).
    Every :meth:`send` copies the data (no aliasing between ranks) and adds its bits to the sender's
    and receiver's counters, and to the sender's entry under the outermost open collective.
    """

    def __init__(self, n: int, gpus_per_node: int = 1) -> None:
        self.n, self.g = n, gpus_per_node
        self.sent_bits = [0] * n
        self.recv_bits = [0] * n
        self.meta_bits = [0] * n
        #: (op, group, purpose) -> bits sent per rank
        self.by_phase: dict[tuple[str, str, str], list[int]] = {}
        self._ctx: tuple[str, str, str] | None = None

    def groups(self, kind: str) -> list[list[int]]:
        n, g = self.n, self.g
        if kind == "world":
            return [list(range(n))]
        if kind == "intra":
            return [list(range(m * g, m * g + g)) for m in range(n // g)]
        if kind == "inter":
            return [list(range(j, n, g)) for j in range(g)]
        raise ValueError(kind)

    @contextmanager
    def collective(self, op: str, group: str, purpose: str):
        """Attribute the sends inside to one collective call; nested calls keep the outer label."""
        outer = self._ctx
        if outer is None:
            self._ctx = (op, group, purpose)
            self.by_phase.setdefault(self._ctx, [0] * self.n)
        try:
            yield
        finally:
            self._ctx = outer

    def send(self, src: int, dst: int, item: Item) -> Item:
        if src == dst or self._ctx is None:
            raise RuntimeError("send outside a collective or to self")
        if isinstance(item, Packet):
            bits, meta, out = item.payload_bits, item.meta_bits, item.copy()
        else:
            bits, meta, out = int(item.nbytes) * 8, 0, item.copy()
        self.sent_bits[src] += bits
        self.recv_bits[dst] += bits
        self.meta_bits[src] += meta
        self.by_phase[self._ctx][src] += bits
        return out


def chunk_bounds(n: int, p: int) -> list[tuple[int, int]]:
    """``numpy.array_split`` boundaries: p chunks, the first ``n mod p`` one element longer."""
    q, r = divmod(n, p)
    bounds, a = [], 0
    for i in range(p):
        b = a + q + (1 if i < r else 0)
        bounds.append((a, b))
        a = b
    return bounds


def reduce_scatter(world: World, group: Sequence[int], inputs: Sequence[np.ndarray],
                   bounds: Sequence[tuple[int, int]] | None = None, *, group_kind: str = "world",
                   purpose: str = "gradient reduction") -> list[np.ndarray]:
    """Ring reduce-scatter (Patarasuk & Yuan 2009): p-1 steps, in step s rank i sends its running sum of
    chunk ``i-s-1`` to rank i+1, which adds its own. Rank i ends with the full sum of chunk i.
    Each chunk travels p-1 hops: ``(p-1)·n`` elements in total, ``(p-1)/p·n`` per rank on average."""
    p = len(group)
    bounds = list(bounds) if bounds is not None else chunk_bounds(len(inputs[0]), p)
    acc = [[np.array(inp[a:b], dtype=np.float64) for a, b in bounds] for inp in inputs]
    with world.collective("reduce_scatter", group_kind, purpose):
        for s in range(p - 1):
            msgs = []
            for i in range(p):
                c = (i - s - 1) % p
                msgs.append((c, (i + 1) % p, world.send(group[i], group[(i + 1) % p], acc[i][c])))
            for c, j, data in msgs:
                acc[j][c] = acc[j][c] + data
    return [acc[i][i] for i in range(p)]


def all_gather(world: World, group: Sequence[int], pieces: Sequence[Item], *, group_kind: str = "world",
               purpose: str = "parameter all-gather") -> list[list[Item]]:
    """Ring all-gather: in step s rank i forwards piece ``i-s`` to rank i+1. Returns, per rank, the p
    pieces in group order (quantised pieces stay quantised: a ring forwards what it received)."""
    p = len(group)
    have: list[list[Item | None]] = [[None] * p for _ in range(p)]
    for i in range(p):
        have[i][i] = pieces[i]
    with world.collective("all_gather", group_kind, purpose):
        for s in range(p - 1):
            msgs = []
            for i in range(p):
                c = (i - s) % p
                msgs.append((c, (i + 1) % p, world.send(group[i], group[(i + 1) % p], have[i][c])))
            for c, j, data in msgs:
                have[j][c] = data
    return have  # type: ignore[return-value]


def all_reduce(world: World, group: Sequence[int], inputs: Sequence[np.ndarray], *,
               group_kind: str = "world", purpose: str = "gradient reduction") -> list[np.ndarray]:
    """Ring all-reduce = ring reduce-scatter + ring all-gather: ``2(p-1)/p·n`` per rank."""
    with world.collective("all_reduce", group_kind, purpose):
        shards = reduce_scatter(world, group, inputs, group_kind=group_kind, purpose=purpose)
        have = all_gather(world, group, shards, group_kind=group_kind, purpose=purpose)
    return [np.concatenate(h) for h in have]


def broadcast(world: World, group: Sequence[int], root: int, item: np.ndarray, *, group_kind: str = "world",
              purpose: str = "parameter broadcast") -> list[np.ndarray]:
    """Chain broadcast from group position ``root`` along the ring (pipelined in segments in practice,
    which changes latency, not bytes): ranks root … root+p-2 each send n; ``(p-1)/p·n`` on average."""
    p = len(group)
    out: list[np.ndarray | None] = [None] * p
    out[root] = item
    with world.collective("broadcast", group_kind, purpose):
        for k in range(p - 1):
            i, j = (root + k) % p, (root + k + 1) % p
            out[j] = world.send(group[i], group[j], out[i])  # type: ignore[arg-type]
    return out  # type: ignore[return-value]


def reduce(world: World, group: Sequence[int], root: int, inputs: Sequence[np.ndarray], *,
           group_kind: str = "world", purpose: str = "gradient reduction") -> np.ndarray:
    """Chain reduce to group position ``root``: the partial sum starts at root+1 and travels around the
    ring, each rank adding its input, ending at root. p-1 sends of n; ``(p-1)/p·n`` on average."""
    p = len(group)
    if p == 1:
        return np.array(inputs[0], dtype=np.float64)
    with world.collective("reduce", group_kind, purpose):
        partial = np.array(inputs[(root + 1) % p], dtype=np.float64)
        for k in range(1, p):
            i, j = (root + k) % p, (root + k + 1) % p
            partial = world.send(group[i], group[j], partial) + inputs[j]  # type: ignore[operator]
    return partial


def all_to_all(world: World, group: Sequence[int], send: Sequence[Sequence[Item]], *,
               group_kind: str = "world", purpose: str = "gradient reduction") -> list[list[Item]]:
    """Pairwise all-to-all: rank i sends ``send[i][j]`` to rank j for every j ≠ i; ``recv[j][i]``.
    A rank sends its whole buffer except its own piece: ``(p-1)/p·n`` on average over ranks."""
    p = len(group)
    recv: list[list[Item | None]] = [[None] * p for _ in range(p)]
    with world.collective("all_to_all", group_kind, purpose):
        for s in range(p):
            for i in range(p):
                j = (i + s) % p
                recv[j][i] = send[i][j] if i == j else world.send(group[i], group[j], send[i][j])
    return recv  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------------
# The model, its data and its optimizer
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MLP:
    """Two-layer perceptron ``softmax(tanh(x W1 + b1) W2 + b2)`` with mean cross-entropy loss.

    Parameters live in one flat float64 vector θ of ``psi`` elements, in the order W1, b1, W2, b2.
    """

    d_in: int = 8
    d_hidden: int = 16
    d_out: int = 4

    @property
    def shapes(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return (("W1", (self.d_in, self.d_hidden)), ("b1", (self.d_hidden,)),
                ("W2", (self.d_hidden, self.d_out)), ("b2", (self.d_out,)))

    @property
    def tensor_ranges(self) -> list[tuple[int, int]]:
        out, a = [], 0
        for _, shape in self.shapes:
            b = a + math.prod(shape)
            out.append((a, b))
            a = b
        return out

    @property
    def psi(self) -> int:
        return self.tensor_ranges[-1][1]

    @property
    def layer_ranges(self) -> list[tuple[int, int]]:
        """One range per layer (W1+b1, W2+b2): the FSDP wrapping units."""
        r = self.tensor_ranges
        return [(r[0][0], r[1][1]), (r[2][0], r[3][1])]

    def _unpack(self, theta: np.ndarray) -> list[np.ndarray]:
        return [theta[a:b].reshape(shape) for (a, b), (_, shape) in zip(self.tensor_ranges, self.shapes,
                                                                         strict=True)]

    def init(self, rng: np.random.Generator) -> np.ndarray:
        parts = []
        for name, shape in self.shapes:
            if name.startswith("W"):
                parts.append(rng.normal(0.0, 1.0 / math.sqrt(shape[0]), size=shape).ravel())
            else:
                parts.append(np.zeros(math.prod(shape)))
        return np.concatenate(parts)

    def forward(self, theta: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w1, b1, w2, b2 = self._unpack(theta)
        h = np.tanh(x @ w1 + b1)
        z = h @ w2 + b2
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return x, h, e / e.sum(axis=1, keepdims=True)

    def backward(self, theta: np.ndarray, cache: tuple[np.ndarray, np.ndarray, np.ndarray],
                 y: np.ndarray) -> np.ndarray:
        """Gradient of the mean cross-entropy w.r.t. θ, using the parameters ``theta`` given here
        (with ZeRO-3 / FSDP these are re-gathered for the backward pass)."""
        _, _, w2, _ = self._unpack(theta)
        x, h, prob = cache
        m = x.shape[0]
        dz = prob.copy()
        dz[np.arange(m), y] -= 1.0
        dz /= m
        gw2, gb2 = h.T @ dz, dz.sum(axis=0)
        da = (dz @ w2.T) * (1.0 - h * h)
        gw1, gb1 = x.T @ da, da.sum(axis=0)
        return np.concatenate([gw1.ravel(), gb1, gw2.ravel(), gb2])

    def loss(self, theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        _, _, prob = self.forward(theta, x)
        return float(-np.log(prob[np.arange(x.shape[0]), y]).mean())

    def gradient(self, theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.backward(theta, self.forward(theta, x), y)


@dataclass(frozen=True)
class Adam:
    """Adam with bias correction (Kingma & Ba, ICLR 2015, Algorithm 1). Element-wise, so updating a
    shard with the shard of the gradient is the same arithmetic as updating the whole vector."""

    lr: float = 1e-2
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def update(self, param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, t: int) -> np.ndarray:
        """One step at step number ``t`` ≥ 1; updates ``m`` and ``v`` in place, returns the new param."""
        m *= self.beta1
        m += (1.0 - self.beta1) * grad
        v *= self.beta2
        v += (1.0 - self.beta2) * grad * grad
        m_hat = m / (1.0 - self.beta1**t)
        v_hat = v / (1.0 - self.beta2**t)
        return param - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


#: Largest simulation accepted: 64 ranks × 20 steps of every scheme take a few seconds on 2 cores.
MAX_RANKS, MAX_STEPS = 64, 1000


@dataclass(frozen=True)
class FeasibilityConfig:
    """One simulation: N ranks (``gpus_per_node`` per node), ``steps`` Adam steps, ``micro_batch``
    samples per rank per step, all randomness from ``seed``. ``shared_micro_batch`` gives every rank
    the same micro-batch (no data parallelism left)."""

    n: int = 4
    steps: int = 20
    seed: int = 0
    gpus_per_node: int | None = None
    micro_batch: int = 8
    model: MLP = field(default_factory=MLP)
    optimizer: Adam = field(default_factory=Adam)
    shared_micro_batch: bool = False

    def __post_init__(self) -> None:
        for name, low in (("n", 1), ("steps", 0), ("micro_batch", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ConfigError(f"must be an integer ≥ {low}, got {value!r}",
                                  option="--" + name.replace("_", "-"))
        if self.seed < 0:
            raise ConfigError(f"must be ≥ 0, got {self.seed}", option="--seed")
        for name, high in (("n", MAX_RANKS), ("steps", MAX_STEPS)):
            if getattr(self, name) > high:
                raise ConfigError(f"at most {high} (the simulation's cost grows with N² × steps; the "
                                  f"verdict does not change with size), got {getattr(self, name)}",
                                  option="--" + name)
        g = self.gpus_per_node
        if g is not None and (isinstance(g, bool) or not isinstance(g, int | np.integer) or g < 1
                              or self.n % min(g, self.n)):
            raise ConfigError(f"must be ≥ 1 and divide n = {self.n} (whole nodes), got {g!r}",
                              option="--gpus-per-node")

    @property
    def g(self) -> int:
        """GPUs per node: as given (at most N: fewer ranks than a node are one partial node, as in
        :func:`zerocalc.evaluate.check_layout`), else 2 when N is even, else 1."""
        if self.gpus_per_node is not None:
            return min(int(self.gpus_per_node), self.n)
        return 2 if self.n % 2 == 0 else 1


def _teacher(cfg: FeasibilityConfig) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([cfg.seed, 1_000_003])
    m = cfg.model
    return rng.normal(size=(m.d_in, m.d_hidden)), rng.normal(size=(m.d_hidden, m.d_out))


def micro_batch(cfg: FeasibilityConfig, step: int, rank: int,
                teacher: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The micro-batch of ``rank`` at ``step`` (1-based): Gaussian inputs labelled by a fixed random
    teacher network with label noise. With ``shared_micro_batch`` every rank gets rank 0's."""
    r = 0 if cfg.shared_micro_batch else rank
    rng = np.random.default_rng([cfg.seed, step, r])
    x = rng.normal(size=(cfg.micro_batch, cfg.model.d_in))
    a, b = teacher
    logits = np.tanh(x @ a) @ b + rng.normal(scale=0.5, size=(cfg.micro_batch, cfg.model.d_out))
    return x, logits.argmax(axis=1)


def _theta0(cfg: FeasibilityConfig) -> np.ndarray:
    return cfg.model.init(np.random.default_rng([cfg.seed, 7]))


def simulate_reference(cfg: FeasibilityConfig) -> list[np.ndarray]:
    """Single-process training on the concatenated global batch; θ after steps 0 … ``steps``."""
    teacher = _teacher(cfg)
    theta = _theta0(cfg)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    out = [theta.copy()]
    for t in range(1, cfg.steps + 1):
        batches = [micro_batch(cfg, t, r, teacher) for r in range(cfg.n)]
        x = np.concatenate([b[0] for b in batches])
        y = np.concatenate([b[1] for b in batches])
        theta = cfg.optimizer.update(theta, cfg.model.gradient(theta, x, y), m, v, t)
        out.append(theta.copy())
    return out


# ---------------------------------------------------------------------------------------------------
# The schemes, executed
# ---------------------------------------------------------------------------------------------------


class _Sim:
    """Shared state of one scheme's run: the world, the data, and per-rank optimizer shards."""

    def __init__(self, cfg: FeasibilityConfig) -> None:
        self.cfg, self.n, self.model, self.opt = cfg, cfg.n, cfg.model, cfg.optimizer
        self.world = World(cfg.n, cfg.g)
        self.teacher = _teacher(cfg)
        self.theta0 = _theta0(cfg)
        self.psi = self.model.psi
        self.part = chunk_bounds(self.psi, cfg.n)  # ZeRO's flat partition: rank r owns part[r]
        self.m: dict[int, np.ndarray] = {}
        self.v: dict[int, np.ndarray] = {}
        self.opt_elements = [0] * cfg.n

    def batch(self, t: int, r: int) -> tuple[np.ndarray, np.ndarray]:
        return micro_batch(self.cfg, t, r, self.teacher)

    def own(self, r: int, idx: np.ndarray) -> None:
        """Give rank r optimizer state (m, v) for the elements ``idx`` only."""
        self.m[r], self.v[r] = np.zeros(idx.size), np.zeros(idx.size)
        self.opt_elements[r] = int(idx.size)

    def adam(self, r: int, param: np.ndarray, grad: np.ndarray, t: int) -> np.ndarray:
        return self.opt.update(param, grad, self.m[r], self.v[r], t)


def _replicated(sync: Callable[[_Sim, list[np.ndarray], list[np.ndarray], int], None],
                owned: Callable[[_Sim, int], np.ndarray]) -> Callable[[_Sim], Callable[[int], np.ndarray]]:
    """A scheme whose ranks all hold the full parameters between steps (DP, ZeRO-1/2 and relatives):
    each rank computes its local gradient, then ``sync`` communicates and updates ``params`` in place."""

    def run(sim: _Sim):
        n = sim.n
        params = [sim.theta0.copy() for _ in range(n)]
        for r in range(n):
            sim.own(r, owned(sim, r))

        def step(t: int) -> np.ndarray:
            grads = [sim.model.gradient(params[r], *sim.batch(t, r)) for r in range(n)]
            sync(sim, params, grads, t)
            spread = max(float(np.abs(p - params[0]).max(initial=0.0)) for p in params)
            if spread != 0.0:
                raise AssertionError(f"replicas diverged by {spread}")
            return params[0].copy()

        return step

    return run


def _range_idx(bounds: Sequence[tuple[int, int]]) -> np.ndarray:
    return np.concatenate([np.arange(a, b) for a, b in bounds]) if bounds else np.zeros(0, dtype=int)


def _own_part(sim: _Sim, r: int) -> np.ndarray:
    return _range_idx([sim.part[r]])


def _own_all(sim: _Sim, r: int) -> np.ndarray:
    return np.arange(sim.psi)


def _update_own_and_gather(sim: _Sim, params: list[np.ndarray], grad_shards: list[np.ndarray],
                           t: int) -> None:
    """Each rank updates its partition with its (reduced or local) gradient shard, then the updated
    partitions are all-gathered (ZeRO §5.2 / DeepSpeed ``all_gather_into_tensor``)."""
    world, n = sim.world, sim.n
    new = []
    for r in range(n):
        a, b = sim.part[r]
        new.append(sim.adam(r, params[r][a:b], grad_shards[r], t))
    have = all_gather(world, list(range(n)), new, purpose="parameter all-gather (after step)")
    for r in range(n):
        params[r][:] = np.concatenate(have[r])


def _sync_dp(sim, params, grads, t):
    avg = all_reduce(sim.world, list(range(sim.n)), grads)
    for r in range(sim.n):
        params[r][:] = sim.adam(r, params[r], avg[r] / sim.n, t)


def _sync_zero1(sim, params, grads, t):
    shards = reduce_scatter(sim.world, list(range(sim.n)), grads, sim.part)
    _update_own_and_gather(sim, params, [s / sim.n for s in shards], t)


def _buckets(sim: _Sim) -> list[tuple[int, int]]:
    """Gradient buckets in the order backward produces them: one per tensor, last layer first."""
    return list(reversed(sim.model.tensor_ranges))


def _sync_zero2(sim, params, grads, t):
    """ZeRO-2: each bucket is reduce-scattered as backward produces it, split at the partition
    boundaries, so a rank keeps only the gradient elements it owns (empty and uneven chunks included)."""
    n = sim.n
    pieces: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(n)]
    for a, b in _buckets(sim):
        bounds = [(min(max(pa, a), b) - a, min(max(pb, a), b) - a) for pa, pb in sim.part]
        out = reduce_scatter(sim.world, list(range(n)), [g[a:b] for g in grads], bounds)
        for r in range(n):
            pieces[r].append((a + bounds[r][0], out[r]))
    shards = [np.concatenate([p for _, p in sorted(pieces[r], key=lambda e: e[0])]) for r in range(n)]
    _update_own_and_gather(sim, params, [s / n for s in shards], t)


def _sync_colocated(sim, params, grads, t):
    """The proposal of issue #4582: rank r updates its partition with its LOCAL gradient; no reduction."""
    _update_own_and_gather(sim, params, [grads[r][slice(*sim.part[r])] for r in range(sim.n)], t)


def _sync_ds_zero12(sim, params, grads, t):
    """DeepSpeed ZeRO-1/2 as released: bucketed all-reduce of gradients
    (``deepspeed/runtime/zero/stage_1_and_2.py``; DeepSpeed issues #5758, #6463), each rank
    keeps its partition of the average, updates it, all-gathers parameters."""
    n = sim.n
    avg = [np.empty(sim.psi) for _ in range(n)]
    for a, b in _buckets(sim):
        out = all_reduce(sim.world, list(range(n)), [g[a:b] for g in grads])
        for r in range(n):
            avg[r][a:b] = out[r]
    _update_own_and_gather(sim, params, [avg[r][slice(*sim.part[r])] / n for r in range(n)], t)


def _sync_ds_zero2_reduce(sim, params, grads, t):
    """DeepSpeed ZeRO-2 with multi-rank bucket all-reduce off: one ``reduce`` per destination rank."""
    n = sim.n
    shards = [reduce(sim.world, list(range(n)), k, [g[slice(*sim.part[k])] for g in grads]) for k in range(n)]
    _update_own_and_gather(sim, params, [s / n for s in shards], t)


def _torch_owner(sim: _Sim) -> list[int]:
    """ZeroRedundancyOptimizer's partition: whole tensors, largest first, to the least-loaded rank."""
    ranges = sim.model.tensor_ranges
    load, owner = [0] * sim.n, [0] * len(ranges)
    for i in sorted(range(len(ranges)), key=lambda i: -(ranges[i][1] - ranges[i][0])):
        r = min(range(sim.n), key=lambda r: (load[r], r))
        owner[i] = r
        load[r] += ranges[i][1] - ranges[i][0]
    return owner


def _own_torch(sim: _Sim, r: int) -> np.ndarray:
    ranges = sim.model.tensor_ranges
    return _range_idx([ranges[i] for i, o in enumerate(_torch_owner(sim)) if o == r])


def _sync_torch_zero1(sim, params, grads, t):
    """PyTorch ZeroRedundancyOptimizer under DDP: all-reduce every gradient, each rank steps the
    tensors it owns, then one broadcast per tensor from its owner (pytorch issue #69591)."""
    n = sim.n
    avg = all_reduce(sim.world, list(range(n)), grads)
    ranges, owner = sim.model.tensor_ranges, _torch_owner(sim)
    for r in range(n):
        idx = _own_torch(sim, r)
        if idx.size:
            params[r][idx] = sim.adam(r, params[r][idx], avg[r][idx] / n, t)
    for i, (a, b) in enumerate(ranges):
        out = broadcast(sim.world, list(range(n)), owner[i], params[owner[i]][a:b].copy())
        for r in range(n):
            params[r][a:b] = out[r]


def _sharded(units: Callable[[_Sim], list[tuple[int, int]]], *, shard_group: str, reshard: bool,
             replicate: bool) -> Callable[[_Sim], Callable[[int], np.ndarray]]:
    """A scheme whose ranks hold only a shard of each unit's parameters between steps (ZeRO-3, FSDP).

    Forward: all-gather each unit in ``shard_group``; backward: all-gather again if ``reshard``
    (FULL_SHARD) or keep the gathered copy (SHARD_GRAD_OP); reduce-scatter each unit's gradient in
    ``shard_group``; with ``replicate`` (HYBRID_SHARD) all-reduce the shard across nodes; update the shard.
    """

    def run(sim: _Sim):
        world, n = sim.world, sim.n
        unit_list = units(sim)
        size = world.g if shard_group == "intra" else n
        local = (lambda r: r % world.g) if shard_group == "intra" else (lambda r: r)
        shard_b = [chunk_bounds(b - a, size) for a, b in unit_list]
        shards = [[sim.theta0[a:b][slice(*shard_b[u][local(r)])].copy() for u, (a, b) in enumerate(unit_list)]
                  for r in range(n)]
        for r in range(n):
            sim.own(r, np.zeros(sum(s.size for s in shards[r])))

        def gather(purpose: str, order: list[int]) -> list[np.ndarray]:
            full = [np.empty(sim.psi) for _ in range(n)]
            for u in order:
                a, b = unit_list[u]
                for gr in world.groups(shard_group):
                    have = all_gather(world, gr, [shards[r][u] for r in gr], group_kind=shard_group,
                                      purpose=purpose)
                    for i, r in enumerate(gr):
                        full[r][a:b] = np.concatenate(have[i])
            return full

        def step(t: int) -> np.ndarray:
            units_fwd = list(range(len(unit_list)))
            full = gather("parameter all-gather (forward)", units_fwd)
            batches = [sim.batch(t, r) for r in range(n)]
            caches = [sim.model.forward(full[r], batches[r][0]) for r in range(n)]
            if reshard:
                full = gather("parameter all-gather (backward)", units_fwd[::-1])
            grads = [sim.model.backward(full[r], caches[r], batches[r][1]) for r in range(n)]
            gshard: list[list[np.ndarray]] = [[np.zeros(0)] * len(unit_list) for _ in range(n)]
            for u in units_fwd[::-1]:
                a, b = unit_list[u]
                for gr in world.groups(shard_group):
                    out = reduce_scatter(world, gr, [grads[r][a:b] for r in gr], shard_b[u],
                                         group_kind=shard_group)
                    for i, r in enumerate(gr):
                        gshard[r][u] = out[i]
                if replicate:
                    for gr in world.groups("inter"):
                        out = all_reduce(world, gr, [gshard[r][u] for r in gr], group_kind="inter")
                        for i, r in enumerate(gr):
                            gshard[r][u] = out[i]
            for r in range(n):
                flat_p = np.concatenate(shards[r])
                new = sim.adam(r, flat_p, np.concatenate(gshard[r]) / n, t)
                cut = np.cumsum([s.size for s in shards[r]])[:-1]
                shards[r] = list(np.split(new, cut))
            return _assemble(sim, unit_list, shard_b, shards, local, size)

        return step

    return run


def _assemble(sim, unit_list, shard_b, shards, local, size) -> np.ndarray:
    """The parameters as the ranks of group 0 hold them (inspection, not communication); checks that
    replicated shards (HYBRID_SHARD's nodes) agree bit for bit."""
    theta = np.empty(sim.psi)
    for u, (a, _) in enumerate(unit_list):
        for r in range(sim.n):
            lo, hi = shard_b[u][local(r)]
            if r < size:
                theta[a + lo:a + hi] = shards[r][u]
            elif not np.array_equal(theta[a + lo:a + hi], shards[r][u]):
                raise AssertionError("replicated shards diverged")
    return theta


def _zeropp(sim: _Sim):
    """ZeRO++ (arXiv 2306.10209) on ZeRO-3: qwZ = forward all-gather of int8-quantised weights over all
    ranks; hpZ = each rank keeps its node's shard of the gathered weights, so the backward all-gather
    stays inside the node; qgZ = gradients quantised to int4 and reduced by a two-hop all-to-all
    (inside the node, then across nodes), dequantising and summing after each hop. Not DP-exact."""
    world, n, g = sim.world, sim.n, sim.world.g
    part = sim.part
    master = [sim.theta0[slice(*part[r])].copy() for r in range(n)]
    for r in range(n):
        sim.own(r, np.zeros(master[r].size))
    sec_b = chunk_bounds(sim.psi, g)
    # Elements a rank with local index j reduces in hop 1: the partitions of every rank m·G + j.
    hop1_idx = [_range_idx([part[m * g + j] for m in range(n // g)]) for j in range(g)]

    def step(t: int) -> np.ndarray:
        have = all_gather(world, list(range(n)), [quantize(master[r], 8) for r in range(n)],
                          purpose="parameter all-gather (forward)")
        full = [np.concatenate([dequantize(p) for p in have[r]]) for r in range(n)]
        secondary = [full[r][slice(*sec_b[r % g])].copy() for r in range(n)]
        batches = [sim.batch(t, r) for r in range(n)]
        caches = [sim.model.forward(full[r], batches[r][0]) for r in range(n)]
        del full
        back = [np.empty(sim.psi) for _ in range(n)]
        for gr in world.groups("intra"):
            h = all_gather(world, gr, [secondary[r] for r in gr], group_kind="intra",
                           purpose="parameter all-gather (backward)")
            for i, r in enumerate(gr):
                back[r][:] = np.concatenate(h[i])
        grads = [sim.model.backward(back[r], caches[r], batches[r][1]) for r in range(n)]
        partial: dict[int, np.ndarray] = {}
        for gr in world.groups("intra"):
            recv = all_to_all(world, gr, [[quantize(grads[r][hop1_idx[j]], 4) for j in range(g)] for r in gr],
                              group_kind="intra")
            for j, r in enumerate(gr):
                partial[r] = np.sum([dequantize(p) for p in recv[j]], axis=0)
        gshard: dict[int, np.ndarray] = {}
        for gr in world.groups("inter"):
            j = gr[0] % g
            cuts = np.cumsum([part[m * g + j][1] - part[m * g + j][0] for m in range(n // g)])[:-1]
            recv = all_to_all(world, gr, [[quantize(c, 4) for c in np.split(partial[r], cuts)] for r in gr],
                              group_kind="inter")
            for i, r in enumerate(gr):
                gshard[r] = np.sum([dequantize(p) for p in recv[i]], axis=0)
        for r in range(n):
            master[r] = sim.adam(r, master[r], gshard[r] / n, t)
        return np.concatenate(master)

    return step


_RUNNERS: dict[str, Callable[[_Sim], Callable[[int], np.ndarray]]] = {
    "dp": _replicated(_sync_dp, _own_all),
    "zero1": _replicated(_sync_zero1, _own_part),
    "zero2": _replicated(_sync_zero2, _own_part),
    "zero3": _sharded(lambda s: [(0, s.psi)], shard_group="world", reshard=True, replicate=False),
    "colocated": _replicated(_sync_colocated, _own_part),
    "deepspeed-zero12": _replicated(_sync_ds_zero12, _own_part),
    "deepspeed-zero2-reduce": _replicated(_sync_ds_zero2_reduce, _own_part),
    "torch-zero1": _replicated(_sync_torch_zero1, _own_torch),
    "fsdp-full-shard": _sharded(lambda s: s.model.layer_ranges, shard_group="world", reshard=True,
                                replicate=False),
    "fsdp-shard-grad-op": _sharded(lambda s: s.model.layer_ranges, shard_group="world", reshard=False,
                                   replicate=False),
    "fsdp-hybrid": _sharded(lambda s: s.model.layer_ranges, shard_group="intra", reshard=True,
                            replicate=True),
    "zeropp": _zeropp,
}
#: The schemes the simulation executes (the fixed scheme names of zerocalc).
SIMULATED_SCHEMES: tuple[str, ...] = tuple(_RUNNERS)


# ---------------------------------------------------------------------------------------------------
# Running schemes and comparing them with the reference and the model
# ---------------------------------------------------------------------------------------------------


def _diff(theta: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max|θ − θ_ref|, max|θ − θ_ref| / max|θ_ref|)."""
    d = float(np.abs(theta - ref).max(initial=0.0))
    scale = float(np.abs(ref).max(initial=0.0))
    return d, (d / scale if scale > 0 else d)


@dataclass(frozen=True)
class SchemeRun:
    """What one scheme did in one simulation.

    Bytes are per rank per step, averaged over ranks (exact rationals; floats for display), payload
    only; ``metadata_bytes_per_rank`` are the quantisation scales. ``by_phase`` maps
    ``"<collective>/<group>: <purpose>"`` to simulated bytes per rank per step.
    """

    scheme: str
    n: int
    gpus_per_node: int
    psi: int
    steps: int
    bytes_per_rank_exact: Fraction | None
    bytes_sent_per_rank_min: Fraction | None
    bytes_sent_per_rank_max: Fraction | None
    bytes_received_per_rank_exact: Fraction | None
    gradient_bytes_per_rank_exact: Fraction | None
    metadata_bytes_per_rank: Fraction | None
    by_phase: dict[str, Fraction]
    optimizer_state_elements_per_rank_max: int
    final_params: np.ndarray = field(repr=False)
    max_abs_diff: float = 0.0
    max_rel_diff: float = 0.0
    diff_by_step: tuple[float, ...] = ()

    @property
    def equivalent(self) -> bool | None:
        """Within :data:`REL_TOL` of the reference; ``None`` after 0 steps, when nothing was compared."""
        return None if self.steps == 0 else self.max_rel_diff <= REL_TOL


def _check_scheme(name: str) -> str:
    if name not in _RUNNERS:
        raise UnknownNameError("scheme", str(name), SIMULATED_SCHEMES)
    return name


def simulate_scheme(name: str, cfg: FeasibilityConfig,
                    reference: list[np.ndarray] | None = None) -> SchemeRun:
    """Run ``cfg.steps`` steps of scheme ``name`` on ``cfg.n`` simulated ranks and compare every step's
    parameters with ``reference`` (computed with :func:`simulate_reference` when not given)."""
    _check_scheme(name)
    ref = reference if reference is not None else simulate_reference(cfg)
    sim = _Sim(cfg)
    step = _RUNNERS[name](sim)
    theta = sim.theta0.copy()
    diffs = []
    for t in range(1, cfg.steps + 1):
        theta = step(t)
        diffs.append(_diff(theta, ref[t])[1])
    abs_d, rel_d = _diff(theta, ref[cfg.steps])
    w, n, k = sim.world, cfg.n, cfg.steps

    def mean(bits: Sequence[int]) -> Fraction | None:
        return Fraction(sum(bits), 8 * n * k) if k else None

    grad_bits = [sum(v[r] for key, v in w.by_phase.items() if key[2].startswith("gradient"))
                 for r in range(n)]
    return SchemeRun(
        scheme=name, n=n, gpus_per_node=cfg.g, psi=sim.psi, steps=k,
        bytes_per_rank_exact=mean(w.sent_bits),
        bytes_sent_per_rank_min=Fraction(min(w.sent_bits), 8 * k) if k else None,
        bytes_sent_per_rank_max=Fraction(max(w.sent_bits), 8 * k) if k else None,
        bytes_received_per_rank_exact=mean(w.recv_bits),
        gradient_bytes_per_rank_exact=mean(grad_bits),
        metadata_bytes_per_rank=mean(w.meta_bits),
        by_phase={f"{op}/{grp}: {purpose}": Fraction(sum(v), 8 * n * k) for (op, grp, purpose), v in
                  w.by_phase.items()} if k else {},
        optimizer_state_elements_per_rank_max=max(sim.opt_elements),
        final_params=theta, max_abs_diff=abs_d, max_rel_diff=rel_d, diff_by_step=tuple(diffs),
    )


def simulate_shardwise_local(cfg: FeasibilityConfig) -> np.ndarray:
    """What the colocated update *is*, written as one process: at every step shard r of θ takes an Adam
    step with the gradient of rank r's micro-batch alone (1/N of the global batch) — each shard trained
    on its own slice of the data, like local SGD with a different data shard per parameter shard."""
    teacher, theta = _teacher(cfg), _theta0(cfg)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    part = chunk_bounds(theta.size, cfg.n)
    for t in range(1, cfg.steps + 1):
        g = np.concatenate([cfg.model.gradient(theta, *micro_batch(cfg, t, r, teacher))[a:b]
                            for r, (a, b) in enumerate(part)])
        theta = cfg.optimizer.update(theta, g, m, v, t)
    return theta


def _exact_bytes(expr, *, psi: int, n: int, gpus_per_node: int, comm_bytes: int, what: str) -> Fraction:
    """A ring bytes-per-rank expression of :mod:`zerocalc.schemes` at integer Ψ, N, G (at most N) and
    b, as an exact rational: with integers substituted it is a sympy Rational already."""
    from zerocalc import symbols as S

    value = expr.subs({S.Psi: psi, S.N: n, S.G: min(gpus_per_node, n), S.b_comm: comm_bytes})
    if not value.is_Rational:
        raise ValueError(f"model bytes of {what} did not evaluate to a rational: {value}")
    return Fraction(int(value.p), int(value.q))


def model_bytes_exact(name: str, *, psi: int, n: int, gpus_per_node: int,
                      comm_bytes: int = WIRE_ELEM_BYTES) -> Fraction:
    """The symbolic model's bytes per rank per step (:meth:`zerocalc.schemes.Scheme.bytes_per_rank`,
    ring) evaluated with exact rational arithmetic."""
    from zerocalc.schemes import get_scheme

    return _exact_bytes(get_scheme(name).bytes_per_rank(), psi=psi, n=n, gpus_per_node=gpus_per_node,
                        comm_bytes=comm_bytes, what=name)


def model_bytes_by_phase(name: str, *, psi: int, n: int, gpus_per_node: int,
                         comm_bytes: int = WIRE_ELEM_BYTES) -> dict[str, Fraction]:
    """Model bytes per rank per step summed by ``"<collective>/<group>"``, exact."""
    from zerocalc.schemes import get_scheme

    out: dict[str, Fraction] = {}
    for ph in get_scheme(name).phases:
        key = f"{ph.collective.value}/{ph.group.value}"
        v = _exact_bytes(ph.bytes_per_rank(), psi=psi, n=n, gpus_per_node=gpus_per_node,
                         comm_bytes=comm_bytes, what=f"{name} {key}")
        out[key] = out.get(key, Fraction(0)) + v
    return out


def simulated_bytes_by_collective(run: SchemeRun) -> dict[str, Fraction]:
    """Simulated bytes per rank per step summed by ``"<collective>/<group>"`` (comparable with
    :func:`model_bytes_by_phase`)."""
    out: dict[str, Fraction] = {}
    for key, v in run.by_phase.items():
        k = key.split(":")[0]
        out[k] = out.get(k, Fraction(0)) + v
    return out


def lower_bound_bytes(psi: int, n: int, elem_bytes: int = WIRE_ELEM_BYTES) -> Fraction:
    """Bytes per rank that the gradient reduction of any exact data-parallel scheme must send, on
    average over ranks: ``(N-1)/N · Ψ · b``.

    Why: the update of each parameter needs the sum of N gradient values that start on N different
    ranks (ZeRO §2.1). Each message carries one value (or a partial sum) from one rank to another and
    merges at most two partial sums, so bringing N of them together anywhere takes at least N-1
    element transfers: at least ``(N-1)·Ψ`` elements in total, ``(N-1)/N·Ψ`` per rank on average —
    the reduce-scatter bound of Patarasuk & Yuan (JPDC 2009), which a ring meets (ZeRO §2.1, §5.2). Where
    the owner of an element sits does not enter: colocating gradients with their optimizer shard
    changes where the sum is needed, not how many contributions it has. Only fewer bits per value
    (quantisation) or fewer reductions (periodic averaging) go below it, and both change the update.
    """
    return Fraction((n - 1) * psi * elem_bytes, n)


# ---------------------------------------------------------------------------------------------------
# The verdict and the implementation plan
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanItem:
    """One step of the implementation plan: going from ``from_scheme`` to ``to_scheme`` saves
    ``bytes_saved_per_rank`` per rank per step by the symbolic model. ``update`` is ``"exact"`` (the
    data-parallel update), ``"approximate"`` (same rule, quantised values) or ``"changed"`` (a
    different update rule)."""

    rank: int
    action: str
    from_scheme: str
    to_scheme: str
    bytes_saved_per_rank: float
    bytes_saved_over_psi: float
    update: str
    evidence: str
    note: str

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# (action, from, to, changes the update rule, note). Savings come from the model, never from here.
_PLAN_CANDIDATES: tuple[tuple[str, str, str, bool, str], ...] = (
    ("native reduce-scatter for DeepSpeed ZeRO-1/2 (gradients reduced onto their shard owner, "
     "ZeRO §5.2, instead of a bucket all-reduce)", "deepspeed-zero12", "zero2", False,
     "deepspeed/runtime/zero/stage_1_and_2.py all-reduces regardless of the reduce_scatter flag "
     "(DeepSpeed issues #5758, #6463); PR #7440 was closed"),
    ("DeepSpeed ZeRO-2 with use_multi_rank_bucket_allreduce=False (one reduce per owner)",
     "deepspeed-zero12", "deepspeed-zero2-reduce", False,
     "an existing switch; N reduces instead of one all-reduce, more and smaller calls"),
    ("reduce-scatter + all-gather in PyTorch ZeroRedundancyOptimizer instead of DDP all-reduce + "
     "per-parameter broadcasts", "torch-zero1", "zero1", False, "pytorch issue #69591"),
    ("FSDP SHARD_GRAD_OP instead of FULL_SHARD (keep the gathered parameters through backward)",
     "fsdp-full-shard", "fsdp-shard-grad-op", False, "costs the memory of the unsharded parameters"),
    ("hierarchical partitioning: FSDP HYBRID_SHARD (shard inside a node, all-reduce Ψ/G across nodes)",
     "fsdp-full-shard", "fsdp-hybrid", False,
     "moves bytes onto intra-node links; optimizer state per rank grows from Ψ/N to Ψ/G"),
    ("quantised collectives: ZeRO++ (int8 weights, in-node secondary copy, int4 gradients)",
     "zero3", "zeropp", False, "quantisation error in weights and gradients; needs G > 1 for hpZ"),
    ("overlap the collectives with backward and forward compute", "zero2", "zero2", False,
     "hides time, moves the same bytes"),
    ("periodic averaging (local SGD / DiLoCo) every {H} steps", "dp", "dp", True,
     "averages parameters every H steps; the update is no longer the data-parallel one"),
    ("colocated gradients (the proposal of DeepSpeed issue #4582)", "zero2", "colocated", True,
     "each shard trained on its own rank's micro-batch only"),
)


def _plan(cfg: FeasibilityConfig, runs: dict[str, SchemeRun], *, psi: int, comm_bytes: int,
          period: int) -> tuple[PlanItem, ...]:
    from zerocalc.schemes import get_scheme

    def model(name: str) -> Fraction:
        return model_bytes_exact(name, psi=psi, n=cfg.n, gpus_per_node=cfg.g, comm_bytes=comm_bytes)

    rows = []
    for action, src, dst, changes, note in _PLAN_CANDIDATES:
        if "{H}" in action:
            saved = model(src) * Fraction(period - 1, period)
            action = action.format(H=period)
        else:
            saved = model(src) - model(dst)
        run = runs.get(dst)
        exact = run.equivalent if run is not None and run.steps else get_scheme(dst).equivalent_at(cfg.n)
        update = "changed" if changes else ("exact" if exact else "approximate")
        if src == dst:
            evidence = "same collectives, " + ("a different update rule by construction" if changes
                                               else "the same update")
        elif run is not None and run.steps:
            evidence = (f"simulated {dst}: max rel diff {run.max_rel_diff:.2e} after {run.steps} steps "
                        f"({'within' if run.equivalent else 'outside'} {REL_TOL:g})")
        else:
            evidence = f"model: {dst} equivalent_to_dp={get_scheme(dst).equivalent_at(cfg.n)} at N = {cfg.n}"
        rows.append((changes, -saved, action, src, dst, saved, update, evidence, note))
    tier = {"exact": 0, "approximate": 1, "changed": 2}
    rows.sort(key=lambda r: (tier[r[6]], r[1]))
    return tuple(
        PlanItem(i + 1, action, src, dst, float(saved), float(saved / psi), update, evidence, note)
        for i, (_, _, action, src, dst, saved, update, evidence, note) in enumerate(rows)
    )


@dataclass(frozen=True)
class FeasibilityResult:
    """Everything :func:`run_feasibility` found; :meth:`to_dict` is the JSON contract of
    ``zerocalc feasibility --format json``."""

    config: FeasibilityConfig
    runs: tuple[SchemeRun, ...]
    model_bytes: dict[str, Fraction]
    lower_bound_bytes_per_rank: Fraction
    conditions: tuple[dict, ...]
    divergence: tuple[dict, ...]
    plan: tuple[PlanItem, ...]
    plan_basis: dict
    verdict: str
    #: the verdict without its last sentence (the plan's saving at ``plan_basis``): what the simulation found
    findings: str = ""

    def records(self) -> list[dict]:
        """One JSON-ready record per simulated scheme."""
        from zerocalc.schemes import get_scheme

        out = []
        for r in self.runs:
            mb = self.model_bytes[r.scheme]
            sim = r.bytes_per_rank_exact
            out.append({
                "scheme": r.scheme,
                "n": r.n,
                "gpus_per_node": r.gpus_per_node,
                "psi": r.psi,
                "steps": r.steps,
                "wire_elem_bytes": WIRE_ELEM_BYTES,
                "bytes_per_rank_simulated": None if sim is None else float(sim),
                "bytes_per_rank_model": float(mb),
                "bytes_per_rank_simulated_exact": None if sim is None else str(sim),
                "bytes_per_rank_model_exact": str(mb),
                "bytes_match": None if sim is None else sim == mb,
                "bytes_sent_per_rank_min": _f(r.bytes_sent_per_rank_min),
                "bytes_sent_per_rank_max": _f(r.bytes_sent_per_rank_max),
                "bytes_received_per_rank_simulated": _f(r.bytes_received_per_rank_exact),
                "gradient_bytes_per_rank_simulated": _f(r.gradient_bytes_per_rank_exact),
                "gradient_lower_bound_bytes_per_rank": float(self.lower_bound_bytes_per_rank),
                "metadata_bytes_per_rank_simulated": _f(r.metadata_bytes_per_rank),
                "optimizer_state_elements_per_rank": r.optimizer_state_elements_per_rank_max,
                "max_abs_diff": r.max_abs_diff,
                "max_rel_diff": r.max_rel_diff,
                "tolerance_rel": REL_TOL,
                "equivalent": r.equivalent,
                "equivalent_to_dp_model": get_scheme(r.scheme).equivalent_at(r.n),
            })
        return out

    def to_dict(self) -> dict:
        c = self.config
        return {
            "verdict": self.verdict,
            "plan": [p.to_dict() for p in self.plan],
            "plan_basis": self.plan_basis,
            "schemes": self.records(),
            "lower_bound": {
                "bytes_per_rank": float(self.lower_bound_bytes_per_rank),
                "formula": "(N-1)/N * Psi * b",
                "source": "Patarasuk & Yuan, JPDC 2009 (reduce-scatter bound); ZeRO §2.1",
            },
            "conditions": list(self.conditions),
            "divergence": list(self.divergence),
            "config": {"n": c.n, "steps": c.steps, "seed": c.seed, "gpus_per_node": c.g,
                       "micro_batch": c.micro_batch, "psi": c.model.psi, "lr": c.optimizer.lr,
                       "wire_elem_bytes": WIRE_ELEM_BYTES, "tolerance_rel": REL_TOL},
        }


def _f(x: Fraction | None) -> float | None:
    return None if x is None else float(x)


def _verdict(cfg: FeasibilityConfig, runs: dict[str, SchemeRun], col: SchemeRun,
             conditions: tuple[dict, ...], lower: Fraction, plan: tuple[PlanItem, ...],
             comm_bytes: int) -> tuple[str, str]:
    """(what the simulation found, what the plan saves): sentences built from the numbers of this run."""
    exact = [r for r in runs.values() if r.scheme != "colocated" and r.equivalent]
    claimed = [r for r in runs.values() if r.scheme != "colocated" and r.scheme != "zeropp"]
    by_cond = {c["condition"]: c for c in conditions}
    n1, shared = by_cond["N = 1"], by_cond["every rank on the same micro-batch"]
    col_grad = col.gradient_bytes_per_rank_exact or Fraction(0)
    if col.steps == 0:
        first = ("No step was simulated (steps = 0), so nothing distinguishes the colocated scheme from data "
                 "parallelism yet; run with steps ≥ 1 to compare updates.")
    elif col.equivalent:
        why = "N = 1" if cfg.n == 1 else "every rank sees the same micro-batch"
        first = (f"Here the colocated scheme matches data-parallel training (max rel diff "
                 f"{col.max_rel_diff:.1e}), but only because {why}: there is no cross-rank gradient sum "
                 f"to skip, and the (N-1)/N·Ψ·b lower bound for the gradient reduction is {float(lower):g} "
                 "bytes.")
    else:
        first = (f"No: the reduce-scatter is the sum of gradients over ranks, not a relocation — skipping "
                 f"it, the colocated scheme sends {float(col_grad):g} gradient bytes per rank where any "
                 f"exact scheme needs at least (N-1)/N·Ψ·b = {float(lower):g} (here Ψ = {cfg.model.psi} "
                 f"parameters of the simulated MLP, b = {WIRE_ELEM_BYTES} bytes; Patarasuk & Yuan 2009), and "
                 f"after {col.steps} steps on N = {cfg.n} ranks its parameters differ from data-parallel "
                 f"training by {col.max_rel_diff:.1e} (relative), {col.max_rel_diff / REL_TOL:.0e}× the "
                 f"{REL_TOL:g} tolerance" + (f" that {len(exact)} of the {len(claimed)} exact schemes "
                                              "simulated meet." if claimed else "."))
    div = col.diff_by_step
    grow = (f"; its divergence grows from {div[0]:.1e} after one step to {div[-1]:.1e} after {len(div)}"
            if len(div) > 1 and not col.equivalent else "")
    second = (f"It is exact only when no data parallelism is left — N = 1 (max rel diff "
              f"{n1['max_rel_diff']:.1e}) or all ranks on one micro-batch ({shared['max_rel_diff']:.1e}) — "
              f"otherwise each parameter shard is trained on its own rank's 1/N of the batch, a "
              f"local-SGD-like update{grow}.")
    top = next((p for p in plan if p.update == "exact" and p.bytes_saved_per_rank > 0), None)
    third = saving_sentence(None if top is None else top.action, None if top is None else top.from_scheme,
                            None if top is None else top.to_scheme,
                            None if top is None else top.bytes_saved_over_psi,
                            f"N = {cfg.n}, {comm_bytes}-byte wire elements")
    return " ".join((first, second)), third


def saving_sentence(action: str | None, from_scheme: str | None, to_scheme: str | None,
                    bytes_per_parameter: float | None, basis: str) -> str:
    """The verdict's last sentence: the best exact saving of the plan and where it was priced.

    ``basis`` says on what it was priced (``"N = 4, 2-byte wire elements"`` for the simulation's plan,
    the chosen cluster for the report); ``action`` None means no exact change saves bytes there.
    """
    if action is None:
        return (f"Priced at {basis}, no exact change of scheme saves bytes; only changing the update rule "
                "(periodic averaging) or quantising would.")
    return (f"The saving the issue is after exists only against implementations that all-reduce: "
            f"{action.split(' (')[0]} ({from_scheme} → {to_scheme}) saves "
            f"{bytes_per_parameter:.3g} bytes per parameter per rank per step ({basis}) without "
            "changing the update.")


def run_feasibility(cfg: FeasibilityConfig | None = None, schemes: Sequence[str] | None = None, *,
                    plan_psi: int = 7_500_000_000, plan_comm_bytes: int = DEFAULT_PLAN_COMM_BYTES,
                    plan_period: int = 4) -> FeasibilityResult:
    """Simulate ``schemes`` (default: all) and the colocated proposal, compare each with the reference
    and with the symbolic model, test the conditions under which colocated is exact, and derive the
    plan (model bytes at ``plan_psi`` parameters, ``plan_comm_bytes`` per element, the run's N and G)
    and the verdict."""
    cfg = cfg if cfg is not None else FeasibilityConfig()
    names = list(SIMULATED_SCHEMES) if schemes is None else [_check_scheme(s) for s in schemes]
    names = list(dict.fromkeys(names))
    if not names:
        raise ConfigError("no scheme given; name at least one, e.g. dp,colocated (or omit it for all)",
                          option="--schemes")
    if plan_period < 2:
        raise ConfigError(f"must be ≥ 2, got {plan_period}", option="--plan-period")
    ref = simulate_reference(cfg)
    runs = {name: simulate_scheme(name, cfg, ref) for name in names}
    col = runs.get("colocated") or simulate_scheme("colocated", cfg, ref)
    psi = cfg.model.psi
    model_exact = {name: model_bytes_exact(name, psi=psi, n=cfg.n, gpus_per_node=cfg.g)
                   for name in names}
    lower = lower_bound_bytes(psi, cfg.n)

    def cond(label: str, c: FeasibilityConfig, theta: np.ndarray | None = None,
             ref_theta: np.ndarray | None = None) -> dict:
        if theta is None:
            c_ref = simulate_reference(c)
            theta, ref_theta = simulate_scheme("colocated", c, c_ref).final_params, c_ref[-1]
        a, r = _diff(theta, ref_theta)
        return {"condition": label, "n": c.n, "shared_micro_batch": c.shared_micro_batch, "steps": c.steps,
                "compared_with": ("shard-wise local training" if "shard" in label
                                  else "data-parallel reference"),
                "max_abs_diff": a, "max_rel_diff": r,
                "equivalent": None if c.steps == 0 else r <= REL_TOL}

    conditions = (
        cond("N = 1", replace(cfg, n=1, gpus_per_node=None)),
        cond("every rank on the same micro-batch", replace(cfg, shared_micro_batch=True)),
        cond("distinct micro-batches (data parallelism)", cfg, col.final_params, ref[-1]),
        cond("each shard trained on its own rank's micro-batch", cfg, col.final_params,
             simulate_shardwise_local(cfg)),
    )
    divergence = tuple({"step": t + 1, "max_rel_diff": d} for t, d in enumerate(col.diff_by_step))
    plan = _plan(cfg, runs, psi=plan_psi, comm_bytes=plan_comm_bytes, period=plan_period)
    findings, saving = _verdict(cfg, runs, col, conditions, lower, plan, plan_comm_bytes)
    return FeasibilityResult(
        config=cfg, runs=tuple(runs.values()), model_bytes=model_exact,
        lower_bound_bytes_per_rank=lower, conditions=conditions, divergence=divergence, plan=plan,
        plan_basis={"psi": plan_psi, "n": cfg.n, "gpus_per_node": cfg.g, "comm_bytes": plan_comm_bytes,
                    "period": plan_period, "algorithm": "ring"},
        verdict=f"{findings} {saving}", findings=findings,
    )
