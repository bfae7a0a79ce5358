"""Cutting a model into pipeline partitions at its candidate points (parthasarathy2022 §III-B1, Alg. 1).

Input: the candidate partition points ``p_0 < ... < p_{m-1}`` of a model in execution order (the last one is
the model's output), the bytes sent when cutting after each point (compressed or not), and the memory a
partition needs. A partition is a run of consecutive points ``a..b``: it computes every node after ``p_{a-1}``
up to ``p_b`` and, unless ``b`` is the last point, sends ``p_b``'s output to the next partition.

The paper builds the *partition graph*: one vertex per contiguous run of points whose partition fits in a
node's memory, an edge from ``a..b`` to ``(b+1)..c``, weighted by the transfer size (class) at ``p_b``, and takes
the shortest path from a root (a run starting at the first point) to a leaf (a run ending at the last).
:func:`partition_graph` builds it explicitly; :func:`shortest_partition_path` solves it by memoised dynamic
programming over the end points (what Alg. 1's memo on partition points amounts to), either for the sum of
transfer sizes (the paper) or for the largest single transfer (``objective="max"``, the bottleneck-friendly
variant). :func:`brute_partitions` enumerates every partition of the points for tests.

Pure numpy-free Python; no torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from edgeplan.errors import InfeasibleError, InvalidInputError

__all__ = ["PartitionPlan", "PartitionProblem", "brute_partitions", "partition_graph", "shortest_partition_path"]


@dataclass(frozen=True)
class PartitionProblem:
    """Points, transfer sizes and memory of one model, and the memory of a compute node.

    Attributes
    ----------
    points
        Names of the candidate points in execution order; the last is the model's output.
    transfer_bytes
        ``transfer_bytes[k]``: bytes sent when cutting after point ``k`` (ignored for the last point).
    memory_bytes
        ``memory_bytes[a][b]`` for ``a <= b``: memory of the partition ``a..b`` (parameters and activations).
    memory_limit_bytes
        Memory of a compute node.
    """

    points: tuple[str, ...]
    transfer_bytes: tuple[float, ...]
    memory_bytes: tuple[tuple[float, ...], ...]
    memory_limit_bytes: float

    def __post_init__(self) -> None:
        m = len(self.points)
        if m < 1:
            raise InvalidInputError("a partition problem needs at least one candidate point")
        if len(self.transfer_bytes) != m or len(self.memory_bytes) != m or any(len(r) != m for r in self.memory_bytes):
            raise InvalidInputError(f"transfer_bytes and memory_bytes must have {m} entries (one per point)")
        if any(t < 0 for t in self.transfer_bytes):
            raise InvalidInputError("transfer sizes must be non-negative")
        if not self.memory_limit_bytes > 0:
            raise InvalidInputError(f"memory limit must be positive, got {self.memory_limit_bytes}")

    def fits(self, a: int, b: int) -> bool:
        """Whether partition ``a..b`` fits in a node's memory."""
        return self.memory_bytes[a][b] <= self.memory_limit_bytes


@dataclass(frozen=True)
class PartitionPlan:
    """Partitions as ``(first point, last point)`` runs, the transfers between them and the objective value."""

    runs: tuple[tuple[int, int], ...]
    transfers_bytes: tuple[float, ...]
    objective: str
    value: float


def _value(problem: PartitionProblem, runs: Sequence[tuple[int, int]], objective: str) -> float:
    sent = [problem.transfer_bytes[b] for _, b in runs[:-1]]
    if objective == "sum":
        return float(sum(sent))
    return float(max(sent, default=0.0))


def partition_graph(problem: PartitionProblem) -> dict[tuple[int, int], list[tuple[tuple[int, int], float]]]:
    """The paper's partition graph: vertex ``(a, b)`` for every run that fits; edges to the runs that follow it.

    Returns
    -------
    dict
        ``(a, b) -> [((b + 1, c), transfer_bytes[b]), ...]``.
    """
    m = len(problem.points)
    vertices = [(a, b) for a in range(m) for b in range(a, m) if problem.fits(a, b)]
    return {(a, b): [((b + 1, c), problem.transfer_bytes[b]) for (s, c) in vertices if s == b + 1]
            for (a, b) in vertices}


def shortest_partition_path(problem: PartitionProblem, objective: str = "sum") -> PartitionPlan:
    """The partitioning that minimises the sum (paper) or the maximum of the transfer sizes.

    Raises
    ------
    InfeasibleError
        When some stretch between consecutive points does not fit in a node's memory; names it and the memory it
        needs.
    """
    if objective not in ("sum", "max"):
        raise InvalidInputError(f"objective {objective!r} is not 'sum' or 'max'")
    m = len(problem.points)
    too_big = [k for k in range(m) if not problem.fits(k, k)]
    if too_big:  # name the largest unsplittable stretch: the smallest node that fits them all
        k = max(too_big, key=lambda i: problem.memory_bytes[i][i])
        need = problem.memory_bytes[k][k]
        more = f" (and {len(too_big) - 1} smaller one(s) over it too)" if len(too_big) > 1 else ""
        raise InfeasibleError(
            f"the partition ending at {problem.points[k]!r} needs {need / 2**20:.1f} MiB, more than a node's "
            f"{problem.memory_limit_bytes / 2**20:.1f} MiB, and cannot be split further{more}; use nodes with at "
            f"least {need / 2**20:.1f} MiB")
    best: list[float] = [0.0] * (m + 1)  # best[b + 1]: best value of the points 0..b, cut after b
    choice = [0] * (m + 1)
    for b in range(m):
        candidates = []
        for a in range(b + 1):
            if problem.fits(a, b):
                sent = problem.transfer_bytes[b] if b < m - 1 else 0.0
                value = best[a] + sent if objective == "sum" else max(best[a], sent)
                candidates.append((value, a))
        best[b + 1], choice[b + 1] = min(candidates)
    runs = []
    b = m
    while b > 0:
        a = choice[b]
        runs.append((a, b - 1))
        b = a
    runs.reverse()
    return PartitionPlan(tuple(runs), tuple(problem.transfer_bytes[b] for _, b in runs[:-1]), objective,
                         _value(problem, runs, objective))


def brute_partitions(problem: PartitionProblem, objective: str = "sum") -> float | None:
    """The best value over every way to cut the points (``None``: nothing fits); for tests, ``m <= 16``."""
    m = len(problem.points)
    if m > 16:
        raise InvalidInputError(f"brute force over 2**{m - 1} cuttings refused; use shortest_partition_path")
    best = None
    for mask in itertools.product((False, True), repeat=m - 1):
        ends = [k for k in range(m - 1) if mask[k]] + [m - 1]
        runs = list(zip([0] + [e + 1 for e in ends[:-1]], ends, strict=True))
        if all(problem.fits(a, b) for a, b in runs):
            value = _value(problem, runs, objective)
            best = value if best is None else min(best, value)
    return best
