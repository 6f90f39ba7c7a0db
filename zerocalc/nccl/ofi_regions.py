"""aws-ofi-nccl v1.10.0-v1.12.1's region tuner: polygons in the (bytes, ranks) plane, one pair each.

``nccl_ofi_tuner_init`` (``src/tuner/nccl_ofi_tuner.c``, identical in v1.10.0-aws, v1.11.0-aws and
v1.11.1-aws) sets the regions by the communicator's shape: 8 ranks per node, 2 per node, 1 per node;
any other shape gets none (NCCL's own choice everywhere). ``nccl_ofi_tuner_get_coll_info`` answers for
all-reduce only: the first region (in the order listed) whose polygon holds the point ``(bytes, ranks)``,
inside or on an edge, names the algorithm and protocol; an NVLS Tree region is skipped when NCCL reports
no NVLS support. A point no region holds leaves NCCL's choice.

v1.12.0-aws and v1.12.1-aws keep the all-reduce regions of 8 and 2 ranks per node; with 1 rank per node
the last all-reduce region names Ring/Simple instead of NVLS Tree/Simple, and all-gather and
reduce-scatter get one Ring/Simple region each. They also answer NCCL's cost-table API (v3, NCCL 2.22
on) by skipping each region whose pair NCCL ignores (``NCCL_ALGO_PROTO_IGNORE``) and setting the first
holding region's cost to 0 (``nccl_ofi_tuner_get_coll_info``); their v2 and v1 entries answer as v1.10's.

The test is ``is_inside_region`` of ``src/tuner/nccl_ofi_regions.c``: a point within 1e-10 of an edge
is on it; else a point outside the polygon's bounding box is out; else a ray from the point to
``(2·TUNER_MAX_SIZE, 2·TUNER_MAX_RANKS)`` counts the edges it crosses (odd: inside). Vertices past the
measured points come from ``extend_region``: the line through two vertices carried to the edges of
``(TUNER_MAX_SIZE, TUNER_MAX_RANKS)`` (``include/nccl_ofi_tuner.h``: 100 GiB, 1024² ranks), to the
farther of its two crossings to v1.13.1 and to the nearer from v1.13.2 (``projected_zy < z.y``). From
v1.19.0 (``nccl_ofi_regions.cpp``) every vertex, the extension and the point are taken in log2 space
(``transform_log2``, 0 read as 1e-6), so an edge is straight in log2(bytes) and log2(ranks). A
degenerate edge (both ends the same vertex, as the three-vertex "line" regions have) is parallel to
every ray and the C code then reads an unset intersection point for its distance; zerocalc counts such
an edge as no edge, which the line's own two edges already cover.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from zerocalc.nccl.release import Algorithm, Collective, Protocol

A, P = Algorithm, Protocol
Point = tuple[float, float]
Extend = Callable[[Point, Point], Point]

#: ``include/nccl_ofi_tuner.h`` (v1.10.0-aws): ``TUNER_MAX_SIZE`` (100 GiB), ``TUNER_MAX_RANKS`` (1024²).
MAX_SIZE = 100.0 * 1024 * 1024 * 1024
MAX_RANKS = 1024.0 * 1024
EPS = 1e-10
#: ``extend_region`` takes the nearer crossing from v1.13.2-aws (``projected_zy < z.y``).
NEAREST_EXTENSION = (1, 13, 2)
#: Regions tested in log2 space from v1.19.0 (``transform_log2`` in ``nccl_ofi_regions.cpp``).
LOG2_SPACE = (1, 19, 0)


@dataclass(frozen=True)
class Region:
    """One region: the pair it names and its polygon's vertices (bytes, ranks), in order."""

    algorithm: Algorithm
    protocol: Protocol
    vertices: tuple[Point, ...]


def _cross(a: Point, b: Point) -> float:
    return a[0] * b[1] - a[1] * b[0]


def _intersect(x0: Point, x1: Point, y0: Point, y1: Point) -> tuple[int, Point | None]:
    """``intersect``: 1 when segment x0→x1 crosses y0→y1, -1 when not, 0 when parallel or the crossing
    lies within ``EPS`` of y0 or y1; with the crossing point on y0→y1's line (``None`` when parallel)."""
    dx = (x1[0] - x0[0], x1[1] - x0[1])
    dy = (y1[0] - y0[0], y1[1] - y0[1])
    d = _cross(dy, dx)
    if abs(d) < EPS:
        return 0, None
    a = (_cross(x0, dx) - _cross(y0, dx)) / d
    sect = (y0[0] + a * dy[0], y0[1] + a * dy[1])
    if a < -EPS or a > 1 + EPS:
        return -1, sect
    if a < EPS or a > 1 - EPS:
        return 0, sect
    a = (_cross(x0, dy) - _cross(y0, dy)) / d
    if a < 0 or a > 1:
        return -1, sect
    return 1, sect


def _distance(x: Point, y0: Point, y1: Point) -> float:
    """``distance``: from ``x`` to its perpendicular foot on y0→y1, infinite when the foot is off it."""
    dy = (y1[0] - y0[0], y1[1] - y0[1])
    r, s = _intersect(x, (x[0] + dy[1], x[1] - dy[0]), y0, y1)
    if r == -1 or s is None:  # None: a degenerate edge (module docstring)
        return math.inf
    return math.hypot(s[0] - x[0], s[1] - x[1])


def is_inside(point: Point, vertices: tuple[Point, ...],
              far: Point = (2.0 * MAX_SIZE, 2.0 * MAX_RANKS)) -> int:
    """``is_inside_region``: 1 inside, 0 on an edge, -1 outside; ``far``: the ray's end, a point outside
    every polygon (in log2 space from v1.19.0)."""
    n = len(vertices)
    for i in range(n):
        if _distance(point, vertices[i], vertices[(i + 1) % n]) < EPS:
            return 0
    xs, ys = [v[0] for v in vertices], [v[1] for v in vertices]
    if not (min(xs) <= point[0] <= max(xs) and min(ys) <= point[1] <= max(ys)):
        return -1
    crosses = sum(1 for i in range(n) if _intersect(point, far, vertices[i], vertices[(i + 1) % n])[0] == 1)
    return 1 if crosses % 2 else -1


def log2_point(p: Point) -> Point:
    """``transform_log2`` (v1.19.0 on): both coordinates' log2, a 0 read as 1e-6."""
    return math.log2(p[0] or 1e-6), math.log2(p[1] or 1e-6)


def extend_region(a: Point, b: Point, z: Point = (MAX_SIZE, MAX_RANKS), *, nearest: bool = False,
                  log2: bool = False) -> Point:
    """``extend_region``: where the line through ``a`` and ``b`` reaches ``z``'s x or ``z``'s y: the
    farther of the two ("the farthest point on that line with either the same x or same y coordinate of
    the third point z", to v1.13.1), or with ``nearest`` the nearer (v1.13.2 on); a vertical line goes
    to ``z``'s y, a horizontal one to its x. With ``log2`` (v1.19.0 on) the line is drawn in log2 space
    and the point returned in bytes and ranks."""
    if log2:
        got = extend_region(log2_point(a), log2_point(b), log2_point(z), nearest=nearest)
        return 2.0 ** got[0], 2.0 ** got[1]
    if a[0] == b[0]:
        return a[0], z[1]
    if a[1] == b[1]:
        return z[0], a[1]
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    y = m * z[0] + c
    at_x = (y < z[1]) if nearest else (y > z[1])
    return (z[0], y) if at_x else ((z[1] - c) / m, z[1])


def _regions_8_per_node(ext: Extend) -> tuple[Region, ...]:
    """``nRanks == 8 * nNodes`` (p5: 8 GPUs per node)."""
    ext_tree_ll128 = ext((402653184, 2048), (402653184, 4096))
    ext_nvlstree_1 = ext((8053063680, 160), (9663676416, 192))
    ext_nvlstree_2 = ext((402653184, 2048), (402653184, 4096))
    ext_ring_simple = ext((8053063680, 160), (9663676416, 192))
    return (
        Region(A.TREE, P.LL128, ((0, 16), (31457280, 16), (37748736, 32), (117440512, 64), (301989888, 128),
                                 (301989888, 256), (335544320, 512), (536870912, 1024), (402653184, 2048),
                                 (402653184, 4096), ext_tree_ll128, (0, ext_tree_ll128[1]))),
        Region(A.NVLS_TREE, P.SIMPLE, ((31457281, 16), (MAX_SIZE, 16), (31457281, 16))),
        Region(A.RING, P.LL128, ((31457280, 17), (1073741824, 17), (2147483648, 64), (2147483648, 128),
                                 (1342177280, 160), (2147483648, 256), (1074790400, 256), (444596224, 160),
                                 (301989888, 128), (117440512, 64), (37748736, 32))),
        Region(A.NVLS_TREE, P.SIMPLE, ((2147483648, 128), (6442450944, 128), (8053063680, 160),
                                       (9663676416, 192), ext_nvlstree_1, ext_nvlstree_2, (402653184, 4096),
                                       (402653184, 2048), (536870912, 1024), (335544320, 512),
                                       (301989888, 256), (310378496, 160), (444596224, 160),
                                       (1074790400, 256), (2684354560, 256), (2147483648, 224),
                                       (1342177280, 160))),
        Region(A.RING, P.SIMPLE, ((1073741824, 17), (ext_ring_simple[0], 17), ext_ring_simple,
                                  (9663676416, 192), (8053063680, 160), (2684354560, 64), (1610612736, 32))),
    )


def _regions_2_per_node(ext: Extend) -> tuple[Region, ...]:
    """``nRanks == 2 * nNodes``."""
    ext_tree_ll128 = ext((88160256, 128), (178163712, 256))
    ext_tree_simple_1 = ext((787480576, 128), (1073741824, 256))
    ext_tree_simple_2 = ext((257114112, 128), (269484032, 256))
    ext_nvlstree = ext((787480576, 128), (1073741824, 256))
    return (
        Region(A.TREE, P.LL128, ((0, 4), (1314816, 4), (1051648, 8), (1051648, 12), (2367488, 16),
                                 (5525504, 32), (9473024, 64), (88160256, 128), (178163712, 256),
                                 ext_tree_ll128, (0, ext_tree_ll128[1]))),
        Region(A.RING, P.LL128, ((1314816, 4), (19736576, 4), (41842688, 8), (296747008, 64),
                                 (257114112, 128), (269484032, 256), (178163712, 256), (88160256, 128),
                                 (9473024, 64), (5525504, 32), (2367488, 16), (1051648, 12), (1051648, 8),
                                 (1314816, 4))),
        Region(A.NVLS_TREE, P.SIMPLE, ((19736576, 4), (81844224, 4), (275775488, 8), (275775488, 48),
                                       (296747008, 64), (41842688, 8))),
        Region(A.TREE, P.LL128, ((81844224, 4), (269484032, 4), (81844224, 4))),
        Region(A.TREE, P.SIMPLE, ((269484032, 4), (MAX_SIZE, 4), (269484032, 4))),
        Region(A.RING, P.SIMPLE, ((81844224, 5), (MAX_SIZE, 5), (MAX_SIZE, 32), (1073741824, 40),
                                  (1073741824, 128), (787480576, 128), (296747008, 64), (275775488, 48),
                                  (275775488, 8), (81844224, 5))),
        Region(A.TREE, P.SIMPLE, ((296747008, 64), (787480576, 128), (1073741824, 256), ext_tree_simple_1,
                                  ext_tree_simple_2, (269484032, 256), (257114112, 128))),
        Region(A.NVLS_TREE, P.SIMPLE, (ext_nvlstree, (1073741824, 256), (787480576, 128), (1073741824, 128),
                                       (1073741824, 40), (MAX_SIZE, 32))),
    )


def _regions_1_per_node(ext: Extend, last: Algorithm) -> tuple[Region, ...]:
    """``nRanks == nNodes``, all-reduce; ``last``: the pair of the third region (NVLS Tree to v1.11.1,
    Ring from v1.12.0), both Simple."""
    ext_tree_ll128 = ext((9999360, 64), (119477248, 128))
    ext_ring_ll128 = ext((4736000, 2), (269484032, 128))
    return (
        Region(A.TREE, P.LL128, ((0, 16), (2367488, 16), (9999360, 64), (119477248, 128), ext_tree_ll128)),
        Region(A.RING, P.LL128, ((0, 2), (4736000, 2), (269484032, 128), ext_ring_ll128, ext_tree_ll128,
                                 (119477248, 128), (9999360, 64), (2367488, 16), (0, 16))),
        Region(last, P.SIMPLE, ((4736000, 2), (MAX_SIZE, 2), ext_ring_ll128, (269484032, 128))),
    )


def _ring_simple_1_per_node(ext: Extend, start: Point, through: Point) -> tuple[Region, ...]:
    """v1.12's all-gather / reduce-scatter region with 1 rank per node: Ring/Simple right of the line
    from ``start`` through ``through``."""
    return (Region(A.RING, P.SIMPLE, (start, (MAX_SIZE, start[1]), ext(start, through), through)),)


def regions_for(version: tuple[int, int, int], coll: Collective, n_nodes: int,
                n_ranks: int) -> tuple[Region, ...]:
    """The regions aws-ofi-nccl ``version``'s ``nccl_ofi_tuner_init`` sets for a communicator and a
    collective (none for other shapes or collectives), in bytes and ranks (:func:`in_space` takes them
    to the space the release tests them in). From v1.13.0 these are the p5/p5e regions
    (``region_init_internal_p5_p5e``, v1.12's point for point to v1.21.1)."""
    v112 = version >= (1, 12, 0)

    def ext(a: Point, b: Point) -> Point:
        return extend_region(a, b, nearest=version >= NEAREST_EXTENSION, log2=version >= LOG2_SPACE)

    if coll == Collective.ALL_REDUCE:
        if n_ranks == 8 * n_nodes:
            return _regions_8_per_node(ext)
        if n_ranks == 2 * n_nodes:
            return _regions_2_per_node(ext)
        if n_ranks == n_nodes:
            return _regions_1_per_node(ext, A.RING if v112 else A.NVLS_TREE)
    elif v112 and n_ranks == n_nodes and coll == Collective.ALL_GATHER:
        return _ring_simple_1_per_node(ext, (4194304, 2), (8589934592, 2048))
    elif v112 and n_ranks == n_nodes and coll == Collective.REDUCE_SCATTER:
        return _ring_simple_1_per_node(ext, (8388608, 2), (4294967296, 1024))
    return ()


def in_space(version: tuple[int, int, int], p: Point) -> Point:
    """A point (bytes, ranks) in the space aws-ofi-nccl ``version`` tests regions in."""
    return log2_point(p) if version >= LOG2_SPACE else p


def region_choice(version: tuple[int, int, int], coll: Collective, n_bytes: int, n_nodes: int,
                  n_ranks: int, nvls_support: bool,
                  usable: Callable[[Algorithm, Protocol], bool] | None = None
                  ) -> tuple[Algorithm, Protocol] | None:
    """``nccl_ofi_tuner_get_coll_info`` of aws-ofi-nccl ``version``: the pair of the first region
    holding ``(n_bytes, n_ranks)``, ``None`` (NCCL's choice) when none does. Through the tuner API v1/v2
    (``usable`` ``None``) an NVLS Tree region is skipped without ``nvls_support``; through v1.12's cost-table
    entry (``usable``: whether NCCL prices the pair, not ``NCCL_ALGO_PROTO_IGNORE``) every region whose
    pair NCCL ignores is."""
    point = in_space(version, (float(n_bytes), float(n_ranks)))
    far = in_space(version, (2.0 * MAX_SIZE, 2.0 * MAX_RANKS))
    for r in regions_for(version, coll, n_nodes, n_ranks):
        if usable is not None and not usable(r.algorithm, r.protocol):
            continue
        if usable is None and r.algorithm == A.NVLS_TREE and not nvls_support:
            continue
        if is_inside(point, tuple(in_space(version, v) for v in r.vertices), far) >= 0:
            return r.algorithm, r.protocol
    return None
