"""The training loop the simulated ranks run: a small MLP, Adam, the micro-batches and the reference.

A two-layer MLP (tanh hidden layer, softmax cross-entropy) trained with Adam (Kingma & Ba 2015,
Algorithm 1, bias-corrected). Every rank draws its own micro-batch each step (ZeRO §2.1), or its own
``micro_batches`` micro-batches under gradient accumulation, each rank's gradient then their mean.
The reference is one process training on the concatenation of the N (× micro-batches) micro-batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from zerocalc.errors import ConfigError
from zerocalc.sim.world import chunk_bounds

__all__ = [
    "MAX_RANKS",
    "MAX_STEPS",
    "MLP",
    "Adam",
    "FeasibilityConfig",
    "micro_batch",
    "simulate_reference",
    "simulate_shardwise_local",
]

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
MAX_RANKS, MAX_STEPS, MAX_MICRO_BATCHES = 64, 1000, 64


@dataclass(frozen=True)
class FeasibilityConfig:
    """One simulation: N ranks (``gpus_per_node`` per node), ``steps`` Adam steps of ``micro_batches``
    micro-batches of ``micro_batch`` samples per rank (gradient accumulation when more than one), all
    randomness from ``seed``. ``shared_micro_batch`` gives every rank the same micro-batches (no data
    parallelism left)."""

    n: int = 4
    steps: int = 20
    seed: int = 0
    gpus_per_node: int | None = None
    micro_batch: int = 8
    model: MLP = field(default_factory=MLP)
    optimizer: Adam = field(default_factory=Adam)
    shared_micro_batch: bool = False
    #: in-network reduction the simulated switches offer: some of ``("nvls", "sharp")``
    #: (:mod:`zerocalc.in_network`, :mod:`zerocalc.sim.switch`); empty: rings only
    in_network: tuple[str, ...] = ()
    #: the collectives that go through the switch (the others run as rings)
    switch_ops: tuple[str, ...] = ("all_reduce", "reduce_scatter", "all_gather")
    #: micro-batches per optimizer step (gradient accumulation); each scheme runs each collective per
    #: micro-batch or per step as its implementation does (:mod:`zerocalc.schemes`, ``micro_batch_rule``)
    micro_batches: int = 1

    def __post_init__(self) -> None:
        if self.in_network:
            from zerocalc.in_network import KINDS, parse_kinds

            kinds = parse_kinds(self.in_network, option="--in-network")
            object.__setattr__(self, "in_network", tuple(k for k in KINDS if k in kinds))
        for name, low in (("n", 1), ("steps", 0), ("micro_batch", 1), ("micro_batches", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ConfigError(f"must be an integer ≥ {low}, got {value!r}",
                                  option="--" + name.replace("_", "-"))
        if self.seed < 0:
            raise ConfigError(f"must be ≥ 0, got {self.seed}", option="--seed")
        for name, high in (("n", MAX_RANKS), ("steps", MAX_STEPS), ("micro_batches", MAX_MICRO_BATCHES)):
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
                teacher: tuple[np.ndarray, np.ndarray], index: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Micro-batch ``index`` (0-based) of ``rank`` at ``step`` (1-based): Gaussian inputs labelled by a
    fixed random teacher network with label noise. With ``shared_micro_batch`` every rank gets rank 0's."""
    r = 0 if cfg.shared_micro_batch else rank
    rng = np.random.default_rng([cfg.seed, step, r] + ([index] if index else []))
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
        batches = [micro_batch(cfg, t, r, teacher, j) for r in range(cfg.n) for j in range(cfg.micro_batches)]
        x = np.concatenate([b[0] for b in batches])
        y = np.concatenate([b[1] for b in batches])
        theta = cfg.optimizer.update(theta, cfg.model.gradient(theta, x, y), m, v, t)
        out.append(theta.copy())
    return out


def simulate_shardwise_local(cfg: FeasibilityConfig) -> np.ndarray:
    """What the colocated update *is*, written as one process: at every step shard r of θ takes an Adam
    step with the gradient of rank r's micro-batch(es) alone (1/N of the global batch) — each shard
    trained on its own slice of the data, like local SGD with a different data shard per parameter
    shard. Several micro-batches: their gradients summed in order, then divided by their number."""
    teacher, theta = _teacher(cfg), _theta0(cfg)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    part = chunk_bounds(theta.size, cfg.n)
    k = cfg.micro_batches

    def own(t: int, r: int) -> np.ndarray:
        g = cfg.model.gradient(theta, *micro_batch(cfg, t, r, teacher))
        for j in range(1, k):
            g = g + cfg.model.gradient(theta, *micro_batch(cfg, t, r, teacher, j))
        return g / k if k > 1 else g

    for t in range(1, cfg.steps + 1):
        g = np.concatenate([own(t, r)[a:b] for r, (a, b) in enumerate(part)])
        theta = cfg.optimizer.update(theta, g, m, v, t)
    return theta
