"""The paper's placement: bandwidth classes and colour-coding k-paths (parthasarathy2022 §III-B2, Alg. 2 and 3).

* **Classes** (eqs. 5 and 8). The paper says only that its class thresholds are "based on the distribution"; we
  use equal-frequency thresholds: with ``c`` classes, the ``j/c`` quantiles of the transfer sizes split the
  transfers, the ``j/c`` quantiles of the link bandwidths split the links, and a value at or above
  threshold ``j`` is in class ``j`` (class ``c - 1`` is the highest), as eq. 8 states.
* **Colour-coding k-path** (Alon, Yuster and Zwick, 1995): colour the vertices at random with ``K`` colours (a
  balanced colouring: shuffled vertices take the colours in turn) and
  find, by dynamic programming over colour sets, a path whose ``K`` vertices have distinct colours; repeat with
  new colourings. A found path is always valid; a path that exists may be missed when every colouring fails, so
  the algorithm is randomised (``trials`` colourings, seeded). As in the paper the search may start at a given
  vertex and end at a given vertex, and only free vertices may be used in between.
* **Alg. 2** (:func:`max_threshold_path`): binary search over the edge weights, sorted in descending order, for
  the largest threshold at which a ``K``-path exists among the edges at or above it.
* **Alg. 3** (:func:`place_kpath`): the transfers are split into maximal runs ("subarrays") of one class; from
  the highest class down and the longest run first, each run of ``L`` transfers is matched to a path of
  ``L + 1`` nodes over links of that bandwidth class or a higher one, found by Alg. 2, starting at the node
  already chosen for the stage before the run and ending at the node already chosen after it, if any. When
  some run finds no path, the paper re-runs with fewer classes; so do we, down to one class (every link), and
  record how many classes were used. (The other reading, links of exactly the run's class, forces small
  transfers onto slow links and leaves the paper's algorithm several times worse than the optimum.)

The dynamic programme keeps, per colour set, the set of end vertices as a bit mask, so a query costs about
``2**K`` set operations; runs longer than :data:`MAX_PATH_NODES` vertices are refused (the paper notes the
method is polynomial only for ``K = O(log n)``), which makes that number of classes fail.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgeplan.errors import InfeasibleError, InvalidInputError
from edgeplan.planners.partition.placement import Placement, PlacementProblem, bottleneck_ms

__all__ = ["MAX_PATH_NODES", "KPathPlacement", "classify", "colour_coding_path", "max_threshold_path", "place_kpath"]

MAX_PATH_NODES = 16


@dataclass(frozen=True)
class KPathPlacement(Placement):
    """A placement by Alg. 3, with the number of classes asked for and the number that succeeded."""

    classes_asked: int = 1
    classes_used: int = 1


def classify(values: Sequence[float], population: Sequence[float], classes: int) -> list[int]:
    """Class (0 = lowest) of each value, with thresholds at the ``j / classes`` quantiles of ``population``."""
    if classes < 1:
        raise InvalidInputError(f"the number of classes must be at least 1, got {classes}")
    if classes == 1 or not len(population):
        return [0] * len(values)
    thresholds = np.quantile(np.asarray(population, dtype=np.float64), [j / classes for j in range(1, classes)])
    return [int(np.searchsorted(thresholds, v, side="right")) for v in values]


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def colour_coding_path(adjacency: Sequence[int], length: int, free: int, start: int | None = None,
                       end: int | None = None, trials: int = 30, rng: random.Random | None = None
                       ) -> tuple[int, ...] | None:
    """A simple path of ``length`` vertices, by colour coding, or ``None`` when no colouring found one.

    Parameters
    ----------
    adjacency
        ``adjacency[v]``: bit mask of the neighbours of ``v`` (symmetric).
    length
        Number of vertices on the path (at least 1, at most :data:`MAX_PATH_NODES`).
    free
        Bit mask of the vertices the path may use (``start`` and ``end`` are allowed in any case).
    start, end
        Fixed first and last vertex, or ``None`` for any free vertex.
    trials
        Random colourings to try.
    rng
        Source of the colourings (a fixed seed when ``None``).
    """
    if not 1 <= length <= MAX_PATH_NODES:
        raise InvalidInputError(f"colour coding handles paths of 1 to {MAX_PATH_NODES} vertices, asked {length}")
    rng = rng or random.Random(0)
    starts = free if start is None else 1 << start
    ends = free if end is None else 1 << end
    usable = free | starts | ends
    if start is not None and end is not None and start == end:
        return None if length > 1 else (start,)
    if length == 1:
        choice = starts & ends
        return (_bits(choice)[0],) if choice else None
    inner = free & ~(0 if start is None else 1 << start) & ~(0 if end is None else 1 << end)
    vertices = _bits(usable)
    full = (1 << length) - 1
    for _ in range(trials):
        # balanced random colouring: shuffled vertices take the colours in turn (distinct when they are few)
        order = vertices[:]
        rng.shuffle(order)
        colour = {v: j % length for j, v in enumerate(order)}
        by_colour = [0] * length
        for v, c in colour.items():
            by_colour[c] |= 1 << v
        layer: dict[int, int] = {}
        for s in _bits(starts):
            layer[1 << colour[s]] = layer.get(1 << colour[s], 0) | 1 << s
        history = [layer]
        for step in range(1, length):
            last = step == length - 1
            allowed = ends if last else inner
            nxt: dict[int, int] = {}
            for mask, tails in layer.items():
                reach = 0
                for v in _bits(tails):
                    reach |= adjacency[v]
                reach &= allowed
                if not reach:
                    continue
                for c in range(length):
                    if not mask >> c & 1 and reach & by_colour[c]:
                        key = mask | 1 << c
                        nxt[key] = nxt.get(key, 0) | (reach & by_colour[c])
            layer = nxt
            history.append(layer)
            if not layer:
                break
        if full not in layer or not layer[full]:
            continue
        # walk back: any predecessor in the previous layer with the remaining colours is a valid one
        v = _bits(layer[full])[0]
        path, mask = [v], full
        for step in range(length - 2, -1, -1):
            mask &= ~(1 << colour[v])
            candidates = history[step].get(mask, 0) & adjacency[v]
            v = _bits(candidates)[0]
            path.append(v)
        path.reverse()
        return tuple(path)
    return None


def max_threshold_path(bandwidth: Sequence[Sequence[float]], links: Sequence[tuple[int, int]], length: int,
                       free: int, start: int | None = None, end: int | None = None, trials: int = 30,
                       rng: random.Random | None = None) -> tuple[int, ...] | None:
    """Alg. 2: the path of ``length`` vertices over ``links`` whose weakest link is as strong as colour coding can
    find, by binary search over the link bandwidths in descending order; ``None`` when none is found."""
    rng = rng or random.Random(0)
    n = len(bandwidth)
    weights = sorted({bandwidth[u][v] for u, v in links}, reverse=True)
    if length == 1:
        return colour_coding_path([0] * n, 1, free, start, end, trials, rng)
    if not weights:
        return None

    def search(threshold: float) -> tuple[int, ...] | None:
        adjacency = [0] * n
        for u, v in links:
            if bandwidth[u][v] >= threshold:
                adjacency[u] |= 1 << v
                adjacency[v] |= 1 << u
        return colour_coding_path(adjacency, length, free, start, end, trials, rng)

    lo, hi = 0, len(weights) - 1  # find the smallest index (largest threshold) with a path
    best = search(weights[hi])
    if best is None:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        found = search(weights[mid])
        if found is None:
            lo = mid + 1
        else:
            best, hi = found, mid
    return best


def _runs(classes: Sequence[int], level: int) -> list[tuple[int, int]]:
    """Maximal runs ``(first, count)`` of consecutive transfers of class ``level``, longest first."""
    runs, i = [], 0
    while i < len(classes):
        if classes[i] == level:
            j = i
            while j < len(classes) and classes[j] == level:
                j += 1
            runs.append((i, j - i))
            i = j
        else:
            i += 1
    return sorted(runs, key=lambda r: (-r[1], r[0]))


def _match(problem: PlacementProblem, classes: int, trials: int, rng: random.Random,
           same_class_only: bool = False) -> tuple[int, ...] | None:
    n, k = problem.nodes, problem.stages
    bw = problem.bandwidth_mbps
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    transfer_class = classify(problem.transfers_bytes, problem.transfers_bytes, classes)
    link_class = classify([bw[u][v] for u, v in pairs], [bw[u][v] for u, v in pairs], classes)
    chosen: list[int | None] = [None] * k
    for level in range(classes - 1, -1, -1):
        links = [p for p, c in zip(pairs, link_class, strict=True) if (c == level if same_class_only else c >= level)]
        for first, count in _runs(transfer_class, level):
            if count + 1 > MAX_PATH_NODES:
                return None
            used = {v for v in chosen if v is not None}
            free = sum(1 << v for v in range(n) if v not in used)
            start, end = chosen[first], chosen[first + count]
            path = max_threshold_path(bw, links, count + 1, free, start, end, trials, rng)
            if path is None:
                return None
            for offset, v in enumerate(path):
                chosen[first + offset] = v
    if k == 1:
        chosen[0] = 0
    if any(v is None for v in chosen):  # pragma: no cover - every stage touches a transfer when k > 1
        return None
    return tuple(v for v in chosen if v is not None)


def place_kpath(problem: PlacementProblem, classes: int = 5, trials: int = 30, seed: int = 0, *,
                same_class_only: bool = False) -> KPathPlacement:
    """The paper's placement (Alg. 3 with Alg. 2), retrying with fewer classes until every run is matched.

    Parameters
    ----------
    problem
        Transfers and bandwidths (compute and memory restrictions are not part of the paper's algorithm and are
        not supported here: use :func:`edgeplan.planners.partition.joint.plan_own`).
    classes
        Number of transfer-size and bandwidth classes (the paper: 2 to 20).
    trials
        Colourings per k-path query.
    seed
        Seed of the colourings.
    same_class_only
        Match a run only to links of exactly its class (the other reading of Alg. 3); default: its class or a
        higher one (see the module docstring).

    Raises
    ------
    InvalidInputError
        For a problem with per-node compute times or memory restrictions.
    InfeasibleError
        When even one class finds no path (only possible with very long pipelines or very few trials).
    """
    if problem.stage_ms is not None or problem.allowed is not None:
        raise InvalidInputError("the k-path algorithm assumes identical nodes and leaves compute out; use the "
                                "'own' planner for compute times or nodes of different memory")
    rng = random.Random(seed)
    for c in range(max(classes, 1), 0, -1):
        nodes = _match(problem, c, trials, rng, same_class_only)
        if nodes is not None:
            method = "kpath-same-class" if same_class_only else "kpath"
            return KPathPlacement(nodes, bottleneck_ms(problem, nodes), method, classes_asked=classes,
                                  classes_used=c)
    raise InfeasibleError(f"the k-path matching found no path for {problem.stages} stages on {problem.nodes} nodes "
                          f"(colour coding handles at most {MAX_PATH_NODES} nodes per run); use the exact or own "
                          "planner")
