"""Placing pipeline stages on the nodes of an edge cluster to minimise the bottleneck (parthasarathy2022 §III-B2).

``k`` stages run in a chain; stage ``i`` sends ``transfers_bytes[i]`` to stage ``i + 1``. Each stage goes to a
different node; the link between nodes ``u`` and ``v`` carries ``bandwidth_mbps[u][v]``. The bottleneck latency
of a placement is the slowest transfer, ``max_i transfers_bytes[i] * 8 / bandwidth(v_i, v_{i+1})`` (compute time is
left out, as in the paper; throughput is its inverse).

* :func:`theorem1_bound`: the paper's lower bound (the largest transfer on the best link), and
  :func:`matching_bound`, a tighter one (the ``j``-th largest transfer cannot use a better link than the
  ``j``-th best, since a chain uses distinct links).
* :func:`place_exact`: the true optimum, by binary search over the candidate bottleneck values (every
  ``transfer / bandwidth`` ratio) with an exact depth-first search for a chain of distinct nodes whose links are
  fast enough at each step. Measured at 50 nodes with random bandwidths: about 10 ms up to 12 stages; the search
  is exponential in the worst case and does not finish in reasonable time at 20 stages (a CP-SAT formulation is
  the next step for long pipelines).
* :func:`place_greedy` and :func:`place_random`: the baselines of §IV.
* :func:`place_brute`: every ordered choice of nodes, for tests.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from edgeplan.errors import InfeasibleError, InvalidInputError

__all__ = ["Placement", "PlacementProblem", "bottleneck_ms", "matching_bound", "place_brute", "place_exact",
           "place_greedy", "place_random", "theorem1_bound"]


@dataclass(frozen=True)
class PlacementProblem:
    """Transfers between consecutive stages and the cluster's link bandwidths (symmetric, Mbit/s)."""

    transfers_bytes: tuple[float, ...]
    bandwidth_mbps: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        n = len(self.bandwidth_mbps)
        if any(len(row) != n for row in self.bandwidth_mbps):
            raise InvalidInputError("the bandwidth matrix must be square")
        for u in range(n):
            for v in range(n):
                if u != v and not self.bandwidth_mbps[u][v] > 0:
                    raise InvalidInputError(f"bandwidth between nodes {u} and {v} must be positive")
        if any(t < 0 for t in self.transfers_bytes):
            raise InvalidInputError("transfer sizes must be non-negative")
        if self.stages > n:
            raise InfeasibleError(f"{self.stages} stages need {self.stages} nodes, the cluster has {n}; use fewer "
                                  "partitions (more memory per node) or more nodes")

    @property
    def stages(self) -> int:
        """Number of pipeline stages (transfers + 1)."""
        return len(self.transfers_bytes) + 1

    @property
    def nodes(self) -> int:
        """Number of nodes in the cluster."""
        return len(self.bandwidth_mbps)


@dataclass(frozen=True)
class Placement:
    """The node of every stage, and the resulting bottleneck latency."""

    nodes: tuple[int, ...]
    bottleneck_ms: float
    method: str


def _ms(size_bytes: float, mbps: float) -> float:
    return size_bytes * 8.0 / (mbps * 1e6) * 1e3


def bottleneck_ms(problem: PlacementProblem, nodes: Sequence[int]) -> float:
    """The bottleneck latency of placing stage ``i`` on ``nodes[i]`` (checked: distinct nodes, one per stage)."""
    if len(nodes) != problem.stages or len(set(nodes)) != len(nodes):
        raise InvalidInputError(f"a placement needs {problem.stages} distinct nodes, got {list(nodes)}")
    if not all(0 <= v < problem.nodes for v in nodes):
        raise InvalidInputError(f"nodes must be in 0..{problem.nodes - 1}, got {list(nodes)}")
    return max((_ms(t, problem.bandwidth_mbps[nodes[i]][nodes[i + 1]])
                for i, t in enumerate(problem.transfers_bytes)), default=0.0)


def _links(problem: PlacementProblem) -> list[float]:
    n = problem.nodes
    return sorted((problem.bandwidth_mbps[u][v] for u in range(n) for v in range(u + 1, n)), reverse=True)


def theorem1_bound(problem: PlacementProblem) -> float:
    """The paper's Theorem 1: the largest transfer over the best link."""
    if not problem.transfers_bytes:
        return 0.0
    return _ms(max(problem.transfers_bytes), _links(problem)[0])


def matching_bound(problem: PlacementProblem) -> float:
    """A tighter lower bound: the ``j``-th largest transfer over the ``j``-th best link, maximised over ``j``."""
    links = _links(problem)
    transfers = sorted(problem.transfers_bytes, reverse=True)
    return max((_ms(t, links[j]) for j, t in enumerate(transfers)), default=0.0)


def _chain(problem: PlacementProblem, limit_ms: float) -> tuple[int, ...] | None:
    """A chain of distinct nodes whose every transfer takes at most ``limit_ms`` (exact DFS), or ``None``."""
    n, k = problem.nodes, problem.stages
    need = [0.0 if t == 0 else t * 8.0 / (limit_ms * 1e3) if limit_ms > 0 else float("inf")
            for t in problem.transfers_bytes]  # the bandwidth (Mbit/s) each transfer needs
    bw = problem.bandwidth_mbps
    # try the most promising successors first: the fastest links
    order = [sorted((v for v in range(n) if v != u), key=bw[u].__getitem__, reverse=True) for u in range(n)]
    path: list[int] = []
    used = [False] * n

    def extend(u: int) -> bool:
        i = len(path) - 1
        if i == k - 1:
            return True
        for v in order[u]:
            if not used[v] and bw[u][v] >= need[i] * (1 - 1e-12):
                used[v] = True
                path.append(v)
                if extend(v):
                    return True
                path.pop()
                used[v] = False
            elif bw[u][v] < need[i]:
                break  # successors are sorted by bandwidth: no later one is fast enough
        return False

    for start in range(n):
        used[start] = True
        path.append(start)
        if extend(start):
            return tuple(path)
        path.pop()
        used[start] = False
    return None


def place_exact(problem: PlacementProblem) -> Placement:
    """The placement with the least bottleneck latency (exact; see the module docstring)."""
    if problem.stages == 1:
        return Placement((0,), 0.0, "exact")
    n = problem.nodes
    candidates = sorted({_ms(t, problem.bandwidth_mbps[u][v]) for t in problem.transfers_bytes
                         for u in range(n) for v in range(u + 1, n)})
    lo = bisect.bisect_left(candidates, matching_bound(problem) * (1 - 1e-12))
    hi = len(candidates) - 1
    best = _chain(problem, candidates[hi])
    if best is None:  # pragma: no cover - the largest ratio admits every link
        raise InfeasibleError("no chain of distinct nodes exists")
    while lo < hi:
        mid = (lo + hi) // 2
        found = _chain(problem, candidates[mid])
        if found is None:
            lo = mid + 1
        else:
            best, hi = found, mid
    return Placement(best, bottleneck_ms(problem, best), "exact")


def place_greedy(problem: PlacementProblem) -> Placement:
    """Greedy joint baseline: the first two stages on the best link, then each next stage on the unused node
    with the fastest link from the previous one."""
    n = problem.nodes
    if problem.stages == 1:
        return Placement((0,), 0.0, "greedy")
    u, v = max(((a, b) for a in range(n) for b in range(n) if a != b),
               key=lambda e: problem.bandwidth_mbps[e[0]][e[1]])
    path = [u, v]
    while len(path) < problem.stages:
        last = path[-1]
        path.append(max((w for w in range(n) if w not in path), key=lambda w: problem.bandwidth_mbps[last][w]))
    return Placement(tuple(path), bottleneck_ms(problem, path), "greedy")


def place_random(problem: PlacementProblem, seed: int = 0) -> Placement:
    """Random baseline: distinct nodes drawn uniformly."""
    nodes = tuple(random.Random(seed).sample(range(problem.nodes), problem.stages))
    return Placement(nodes, bottleneck_ms(problem, nodes), "random")


def place_brute(problem: PlacementProblem) -> Placement:
    """Every ordered choice of distinct nodes (for tests; refuses more than 200,000 of them)."""
    count = 1
    for j in range(problem.stages):
        count *= problem.nodes - j
    if count > 200_000:
        raise InvalidInputError(f"brute force over {count} placements refused; use place_exact")
    best = min(itertools.permutations(range(problem.nodes), problem.stages),
               key=lambda p: bottleneck_ms(problem, p))
    return Placement(tuple(best), bottleneck_ms(problem, best), "brute")
