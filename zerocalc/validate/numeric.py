"""The model's numbers for the check, without sympy: the schemes' phases (:mod:`zerocalc.schemes`) and
the ring's bytes per rank (:func:`zerocalc.collectives.bytes_sent_per_rank`) as expression trees,
evaluated at numbers exactly as sympy evaluates the expressions they come from.

The check only evaluates the model at the trace's Ψ, N, element widths and micro-batches; importing
sympy for that costs about half a second to a second of a core (more than the check of a small log
itself). So the expressions are kept, as trees, in :mod:`zerocalc.validate.numeric_table`, whose text
:func:`table_source` makes from the symbolic model (:data:`REGENERATE`; tests/test_validate_numeric.py
checks that the committed table is what the model gives now, and that every tree evaluates to sympy's
own number, bit for bit).

A tree is a symbol ``("s", name)``, a rational number ``("n", p, q)``, a sum ``("+", *terms)``, a
product ``("*", *factors)``, an integer power ``("^", base, k)`` or ``("max", *args)`` /
``("min", *args)``; the terms and factors in sympy's own order. :func:`evaluate` follows sympy's
evaluation of the expression with the symbols replaced (``xreplace``): integers and rationals stay
exact (:class:`fractions.Fraction`); a float (sympy's ``Float``, 53 bits) makes each operation it
takes part in a float operation, rounded once, in the order sympy combines the numbers (a sum's or a
product's numbers left to right: ``Add.flatten``, ``Mul.flatten``), so the result is the float sympy
gives.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from fractions import Fraction

from zerocalc.errors import UnknownNameError

#: The command that writes :mod:`zerocalc.validate.numeric_table` again after a change to the model.
REGENERATE = ('python -c "from zerocalc.validate.numeric import table_source; '
              "print(table_source(), end='')\" > zerocalc/validate/numeric_table.py")


@dataclass(frozen=True)
class NumericPhase:
    """One phase of a scheme (:class:`zerocalc.schemes.Phase`) as trees: its collective, side
    (param, grad or fixed), whether it runs every micro-batch under each gradient-sync mode, and its
    group size, elements, calls and bytes per element."""

    collective: str
    side: str
    per_micro_batch: dict[str, bool]
    size: tuple
    elements: tuple
    calls: tuple
    elem_bytes: tuple

    def runs_per_micro_batch(self, grad_sync: str) -> bool:
        """Whether the phase runs in every micro-batch under ``grad_sync`` (``Phase.runs``: a mode
        that is not one is an error only where the phase's cadence depends on it)."""
        modes = set(self.per_micro_batch.values())
        if grad_sync in self.per_micro_batch or len(modes) == 1:
            return self.per_micro_batch.get(grad_sync, next(iter(modes)))
        raise UnknownNameError("gradient-sync mode", grad_sync, list(self.per_micro_batch))

    @property
    def reuse_priced(self) -> bool:
        """Whether the phase's elements depend on DeepSpeed's reuse distance (``D_reuse``)."""
        return "D_reuse" in symbols(self.elements)


@dataclass(frozen=True)
class NumericScheme:
    """A scheme's name, whether its update is data parallelism's, and its phases in order."""

    name: str
    equivalent_to_dp: bool
    phases: tuple[NumericPhase, ...]


def scheme(name) -> NumericScheme:
    """The scheme called ``name`` (or an alias, any case), as :func:`zerocalc.schemes.get_scheme` finds
    it, from the table; a :class:`~zerocalc.schemes.Scheme` object is made into trees itself.
    :class:`UnknownNameError` for a name no scheme has."""
    from zerocalc.validate import numeric_table as T

    if isinstance(name, NumericScheme):
        return name
    if not isinstance(name, str):
        return _from_scheme(name)
    got = T.SCHEMES.get(name) or T.SCHEMES.get(name.strip().lower())
    if got is None:
        raise UnknownNameError("scheme", name, (*T.SCHEME_NAMES, *T.SCHEME_ALIASES))
    return _scheme_of(got, T.GRAD_SYNC_MODES)


def scheme_names() -> tuple[str, ...]:
    """:data:`zerocalc.schemes.SCHEME_NAMES`, from the table."""
    from zerocalc.validate import numeric_table as T

    return T.SCHEME_NAMES


def default_reuse_distance() -> float:
    """:data:`zerocalc.evaluate.DEFAULT_REUSE_DISTANCE`, from the table."""
    from zerocalc.validate import numeric_table as T

    return T.DEFAULT_REUSE_DISTANCE


def ring_bytes(op: str, p: int) -> float:
    """:func:`zerocalc.collectives.bytes_sent_per_rank` of one element's vector under the ring on a
    group of ``p`` ranks (an integer), as a float: sympy's number for the same call."""
    from zerocalc.validate import numeric_table as T

    return float(evaluate(T.RING_BYTES[op], {"P": p}))


def _scheme_of(entry: tuple, modes: tuple[str, ...] | None = None) -> NumericScheme:
    """A scheme from its entry in the table (``modes``: the table's GRAD_SYNC_MODES; ``None``: each
    phase's runs given as (mode, runs every micro-batch) pairs, as :func:`_entry` makes them)."""
    name, equivalent, phases = entry
    return NumericScheme(name=name, equivalent_to_dp=equivalent,
                         phases=tuple(NumericPhase(c, side, dict(per if modes is None else zip(modes, per,
                                                                                               strict=True)),
                                                   *trees)
                                      for c, side, per, *trees in phases))


def symbols(tree: tuple) -> set[str]:
    """The names of the symbols in a tree."""
    if tree[0] == "s":
        return {tree[1]}
    if tree[0] == "n":
        return set()
    return set().union(*(symbols(t) for t in tree[1:] if isinstance(t, tuple)))


def number(v):
    """A value as sympy takes it: an integer (a Python or numpy integer) or a fraction exact, anything
    else a float."""
    if isinstance(v, Fraction):
        return v
    if isinstance(v, float):
        return v
    try:
        return Fraction(operator.index(v))
    except TypeError:
        return float(v)


def _mul(a, b):
    return a * b if type(a) is type(b) else float(a) * float(b)


def _add(a, b):
    return a + b if type(a) is type(b) else float(a) + float(b)


def evaluate(tree: tuple, values: dict[str, object]):
    """The value of ``tree`` with each symbol given in ``values`` (by name): a :class:`Fraction` where
    every number it meets is exact, else a float (module docstring). ``KeyError`` for a symbol not
    given."""
    kind = tree[0]
    if kind == "s":
        return number(values[tree[1]])
    if kind == "n":
        return Fraction(tree[1], tree[2])
    if kind == "^":
        base, k = evaluate(tree[1], values), tree[2]
        if isinstance(base, Fraction):
            return base**k
        if k not in (-1, 0, 1, 2):  # sympy's float power rounds otherwise than Python's
            raise ValueError(f"a float to the power {k} is not evaluated without sympy: {tree!r}")
        return 1.0 / base if k == -1 else base**k
    args = [evaluate(t, values) for t in tree[1:]]
    if kind == "+":
        out = Fraction(0)
        for a in args:
            out = _add(out, a)
        return out
    if kind == "*":
        out = Fraction(1)
        for a in args:
            out = _mul(out, a)
        return out
    if kind in ("max", "min"):
        return (max if kind == "max" else min)(args)
    raise ValueError(f"not a numeric tree: {tree!r}")


# -- the table, from the symbolic model (imports sympy) --------------------------------------------


def tree(expr) -> tuple:
    """A sympy expression (or a Python number) as a tree; ``ValueError`` for a node no tree has (a
    function other than Max and Min, a power that is not an integer)."""
    import sympy

    expr = sympy.sympify(expr)
    if expr.is_Symbol:
        return ("s", expr.name)
    if expr.is_Rational:
        return ("n", int(expr.p), int(expr.q))
    if expr.is_Add or expr.is_Mul:
        return ("+" if expr.is_Add else "*", *(tree(a) for a in expr.args))
    if expr.is_Pow and expr.exp.is_Integer:
        return ("^", tree(expr.base), int(expr.exp))
    if isinstance(expr, sympy.Max | sympy.Min):
        return ("max" if isinstance(expr, sympy.Max) else "min", *(tree(a) for a in expr.args))
    raise ValueError(f"no numeric tree for {expr!r} ({type(expr).__name__})")


def _entry(s) -> tuple:
    """A :class:`~zerocalc.schemes.Scheme` as the table holds it."""
    from zerocalc.schemes import GradSync

    return (s.name, bool(s.equivalent_to_dp), tuple(
        (str(ph.collective.value), str(ph.side.value),
         tuple((g.value, ph.runs(g) != 1) for g in GradSync),
         tree(ph.group.size), tree(ph.elements), tree(ph.calls), tree(ph.elem_bytes))
        for ph in s.phases))


def _from_scheme(s) -> NumericScheme:
    return _scheme_of(_entry(s))


def table_source() -> str:
    """The text of :mod:`zerocalc.validate.numeric_table` from the symbolic model as it is now."""
    import pprint

    import sympy

    from zerocalc import collectives
    from zerocalc.evaluate import DEFAULT_REUSE_DISTANCE
    from zerocalc.schemes import SCHEME_ALIASES, SCHEME_NAMES, SCHEMES, GradSync

    def item(obj, indent: int) -> str:
        text = repr(obj)
        if indent + len(text) + 1 > 110:
            text = pprint.pformat(obj, width=110 - indent).replace("\n", "\n" + " " * indent)
        return " " * indent + text + ","

    p = sympy.Symbol("P", positive=True, integer=True)
    lines = [
        '"""The schemes\' phases and the ring\'s bytes per rank as trees (:mod:`zerocalc.validate.numeric`).',
        "",
        "Written by zerocalc.validate.numeric.table_source (REGENERATE there) from zerocalc.schemes,",
        "zerocalc.collectives and zerocalc.evaluate; do not edit (tests/test_validate_numeric.py checks it",
        "against them). A scheme: (name, equivalent to DP, phases); a phase: (collective, side, whether it",
        "runs every micro-batch under each of GRAD_SYNC_MODES, group size, elements, calls, bytes per",
        "element).",
        '"""',
        "",
        f"SCHEME_NAMES = {pprint.pformat(tuple(SCHEME_NAMES), width=100, compact=True)}",
        f"SCHEME_ALIASES = {dict(SCHEME_ALIASES)!r}",
        f"DEFAULT_REUSE_DISTANCE = {float(DEFAULT_REUSE_DISTANCE)!r}",
        f"GRAD_SYNC_MODES = {tuple(g.value for g in GradSync)!r}",
        "RING_BYTES = {",
        *(f"    {c.value!r}: {tree(collectives.bytes_sent_per_rank(c, 1, p))!r},"
          for c in collectives.Collective),
        "}",
        "SCHEMES = {",
    ]
    for key, s in SCHEMES.items():
        name, equivalent, phases = _entry(s)
        lines.append(f"    {key!r}: ({name!r}, {equivalent!r}, (")
        lines += [item((c, side, tuple(r for _, r in per), *trees), 8) for c, side, per, *trees in phases]
        lines.append("    )),")
    lines += ["}", ""]
    return "\n".join(lines)

