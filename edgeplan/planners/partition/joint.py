"""Joint partitioning and placement: the paper's two baselines (§IV) and edgeplan's own planner.

* :func:`joint_greedy`, the paper's "joint-optimization algorithm": the partitions are chosen greedily (from the
  current point, the partition that fits and sends the fewest bytes; the last partition sends nothing), and
  from every start node the stages follow the fastest link to an unused node; the best start node wins.
* :func:`joint_random`, the paper's "random algorithm": each partition ends at a random point among those that
  fit, and the stages go to random distinct nodes.
* :func:`plan_own`, edgeplan's planner. It differs from the paper in what it optimises and what it assumes:

  - it counts each stage's compute time (``run_ms``, scaled by each node's ``node_speed``) next to the
    transfers, where the paper drops compute;
  - nodes may differ in memory (``node_memory_bytes``: a partition goes only where it fits) and speed, where the
    paper takes the smallest node's memory for all;
  - it does not fix the partitions first. Candidate partitionings are the paper's Alg. 1 (least total
    transfer), and for every number of stages ``s`` the partitioning whose largest transfer is least and, with
    compute times, the one whose slowest stage is least. Each candidate's placement is solved exactly
    (:func:`~edgeplan.planners.partition.placement.place_exact`), best lower bound first, skipping candidates
    whose bound cannot beat the best placement so far, within a time budget.

  The result is never worse than the exact placement of Alg. 1's partitions when the budget suffices. Its
  ``proven_optimal`` says that every candidate it tried was solved to proven optimality (the optimum over the
  candidates, not over every partitioning), and ``lower_bound_ms`` is the least matching bound over them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from edgeplan.errors import InfeasibleError, InvalidInputError
from edgeplan.planners.partition.partitions import PartitionProblem, shortest_partition_path
from edgeplan.planners.partition.placement import (
    Placement,
    PlacementProblem,
    bottleneck_ms,
    matching_bound,
    place_exact,
)

__all__ = ["JointPlan", "joint_greedy", "joint_random", "plan_own"]


@dataclass(frozen=True)
class JointPlan:
    """Partitions (runs of candidate points), their placement, and how the plan was found.

    For :func:`plan_own`, ``proven_optimal`` means optimal over its candidate partitionings (every candidate
    placed exactly or pruned by a lower bound, every placement certified), not over all partitionings;
    ``search_complete`` is false when the time budget stopped the search before every candidate was settled.
    """

    runs: tuple[tuple[int, int], ...]
    transfers_bytes: tuple[float, ...]
    placement: Placement
    method: str
    lower_bound_ms: float = 0.0
    proven_optimal: bool = False
    candidates_tried: int = 1
    candidates_total: int = 1
    notes: tuple[str, ...] = field(default_factory=tuple)
    search_complete: bool = True

    @property
    def bottleneck_ms(self) -> float:
        """Bottleneck latency of the plan (ms)."""
        return self.placement.bottleneck_ms


def _transfers(problem: PartitionProblem, runs: Sequence[tuple[int, int]]) -> tuple[float, ...]:
    return tuple(problem.transfer_bytes[b] for _, b in runs[:-1])


def _greedy_runs(problem: PartitionProblem) -> list[tuple[int, int]]:
    m = len(problem.points)
    runs, a = [], 0
    while a < m:
        fitting = [b for b in range(a, m) if problem.fits(a, b)]
        if not fitting:
            raise InfeasibleError(f"the partition starting at {problem.points[a]!r} fits in no node's memory "
                                  f"({problem.memory_limit_bytes / 2**20:.1f} MiB)")
        b = min(fitting, key=lambda e: (problem.transfer_bytes[e] if e < m - 1 else 0.0, -e))
        runs.append((a, b))
        a = b + 1
    return runs


def joint_greedy(problem: PartitionProblem, bandwidth_mbps: tuple[tuple[float, ...], ...]) -> JointPlan:
    """The paper's joint greedy baseline (§IV, "joint-optimization algorithm")."""
    runs = tuple(_greedy_runs(problem))
    placement_problem = PlacementProblem(_transfers(problem, runs), bandwidth_mbps)
    n, k = placement_problem.nodes, placement_problem.stages
    bw = placement_problem.bandwidth_mbps
    best: tuple[int, ...] | None = None
    best_ms = float("inf")
    for start in range(n):
        path = [start]
        while len(path) < k:
            last = path[-1]
            path.append(max((w for w in range(n) if w not in path), key=bw[last].__getitem__))
        ms = bottleneck_ms(placement_problem, path)
        if ms < best_ms:
            best, best_ms = tuple(path), ms
    assert best is not None
    return JointPlan(runs, placement_problem.transfers_bytes, Placement(best, best_ms, "greedy"), "greedy")


def joint_random(problem: PartitionProblem, bandwidth_mbps: tuple[tuple[float, ...], ...], seed: int = 0) -> JointPlan:
    """The paper's random baseline: random partitions that fit and random distinct nodes."""
    rng = random.Random(seed)
    m, n = len(problem.points), len(bandwidth_mbps)
    for _ in range(1000):
        runs, a = [], 0
        while a < m:
            fitting = [b for b in range(a, m) if problem.fits(a, b)]
            if not fitting:
                raise InfeasibleError(f"the partition starting at {problem.points[a]!r} fits in no node's memory")
            b = rng.choice(fitting)
            runs.append((a, b))
            a = b + 1
        if len(runs) <= n:
            placement_problem = PlacementProblem(_transfers(problem, runs), bandwidth_mbps)
            nodes = tuple(rng.sample(range(n), len(runs)))
            placement = Placement(nodes, bottleneck_ms(placement_problem, nodes), "random")
            return JointPlan(tuple(runs), placement_problem.transfers_bytes, placement, "random")
    raise InfeasibleError(f"random partitioning drew more stages than the {n} nodes 1000 times")


def _minmax_by_count(problem: PartitionProblem, value: Sequence[Sequence[float]], cut_cost: Sequence[float],
                     max_stages: int) -> dict[int, list[tuple[int, int]]]:
    """For every stage count, the partitioning minimising the largest of run values and cut costs (exact DP)."""
    m = len(problem.points)
    inf = float("inf")
    # best[s][b]: least max over the first s runs covering points 0..b-1 (b = number of points covered)
    best = [[inf] * (m + 1) for _ in range(max_stages + 1)]
    back = [[-1] * (m + 1) for _ in range(max_stages + 1)]
    best[0][0] = 0.0
    for s in range(1, max_stages + 1):
        for b in range(1, m + 1):
            for a in range(b):
                if best[s - 1][a] == inf or not problem.fits(a, b - 1):
                    continue
                sent = cut_cost[b - 1] if b < m else 0.0
                v = max(best[s - 1][a], value[a][b - 1], sent)
                if v < best[s][b]:
                    best[s][b], back[s][b] = v, a
    out: dict[int, list[tuple[int, int]]] = {}
    for s in range(1, max_stages + 1):
        if best[s][m] == inf:
            continue
        runs, b, c = [], m, s
        while c > 0:
            a = back[c][b]
            runs.append((a, b - 1))
            b, c = a, c - 1
        out[s] = runs[::-1]
    return out


def plan_own(problem: PartitionProblem, bandwidth_mbps: tuple[tuple[float, ...], ...], *,
             run_ms: Sequence[Sequence[float]] | None = None, node_speed: Sequence[float] | None = None,
             node_memory_bytes: Sequence[float] | None = None, time_limit_s: float = 0.8) -> JointPlan:
    """edgeplan's planner: candidate partitionings, each placed exactly, compute and unequal nodes counted.

    Parameters
    ----------
    problem
        Points, transfer sizes and partition memory; its ``memory_limit_bytes`` is every node's memory unless
        ``node_memory_bytes`` is given.
    bandwidth_mbps
        Symmetric link bandwidths (Mbit/s).
    run_ms
        ``run_ms[a][b]``: compute time of partition ``a..b`` on a node of speed 1; ``None`` leaves compute out.
    node_speed
        Relative speed of each node (compute time is divided by it); default 1 for all.
    node_memory_bytes
        Memory of each node; default ``problem.memory_limit_bytes`` for all.
    time_limit_s
        Budget for the whole search; when it runs out the best plan so far is returned (not proven optimal). The
        default, 0.8 s, leaves room for the step under way and the set-up, so planning stays under 1 s.

    Raises
    ------
    InfeasibleError
        When no partitioning fits the largest node or needs no more stages than there are nodes.
    """
    deadline = time.perf_counter() + time_limit_s
    n, m = len(bandwidth_mbps), len(problem.points)
    speed = list(node_speed) if node_speed is not None else [1.0] * n
    memory = list(node_memory_bytes) if node_memory_bytes is not None else [problem.memory_limit_bytes] * n
    if len(speed) != n or len(memory) != n:
        raise InvalidInputError(f"node_speed and node_memory_bytes need one entry per node ({n})")
    if any(not s > 0 for s in speed) or any(not x > 0 for x in memory):
        raise InvalidInputError("node speeds and memories must be positive")
    if run_ms is not None and (len(run_ms) != m or any(len(r) != m for r in run_ms)):
        raise InvalidInputError(f"run_ms must be a {m} x {m} matrix (one row and column per candidate point)")
    candidates: dict[tuple[tuple[int, int], ...], str] = {}
    zero = [[0.0] * m for _ in range(m)]
    max_stages = min(n, m)
    # partitionings that fit the largest node, and (on mixed clusters) ones that fit every node, so that a
    # cluster of one big and many small nodes always has a candidate its nodes can hold
    for limit in sorted({max(memory), min(memory)}, reverse=True):
        sized = PartitionProblem(problem.points, problem.transfer_bytes, problem.memory_bytes, limit)
        tag = "" if limit == max(memory) else "-smallest-node"
        try:
            candidates.setdefault(tuple(shortest_partition_path(sized, "sum").runs), "alg1-sum" + tag)
        except InfeasibleError:
            if not tag:
                raise  # a partition fits no node at all: the error names it and the memory it needs
            continue  # a partition fits none of the smallest nodes
        for s, runs in _minmax_by_count(sized, zero, problem.transfer_bytes, max_stages).items():
            candidates.setdefault(tuple(runs), f"minmax-transfer-{s}{tag}")
        if run_ms is not None:
            slowest = 1.0 / max(speed)
            scaled = [[v * slowest for v in row] for row in run_ms]
            for s, runs in _minmax_by_count(sized, scaled, [0.0] * m, max_stages).items():
                candidates.setdefault(tuple(runs), f"minmax-compute-{s}{tag}")

    def placement_problem(runs: tuple[tuple[int, int], ...]) -> PlacementProblem | None:
        if len(runs) > n:
            return None
        allowed = tuple(tuple(problem.memory_bytes[a][b] <= memory[v] for v in range(n)) for a, b in runs)
        stage_ms = None if run_ms is None else tuple(tuple(run_ms[a][b] / speed[v] for v in range(n))
                                                     for a, b in runs)
        try:
            return PlacementProblem(_transfers(problem, runs), bandwidth_mbps, stage_ms, allowed)
        except InfeasibleError:
            return None

    scored = []
    for cand, origin in candidates.items():
        pp = placement_problem(cand)
        if pp is not None:
            scored.append((matching_bound(pp), origin, cand, pp))
    if not scored:
        fewest = _fewest_stages(problem.memory_bytes, max(memory))
        raise InfeasibleError(f"no partitioning fits the nodes ({max(memory) / 2**20:.1f} MiB at most) with at most "
                              f"{n} stages: in nodes of {max(memory) / 2**20:.1f} MiB it needs {fewest}; use at "
                              f"least {fewest} nodes, or nodes with more memory")
    scored.sort(key=lambda c: c[0])
    best: JointPlan | None = None
    proven, complete, tried = True, True, 0
    for bound, origin, cand, pp in scored:
        if best is not None and bound >= best.bottleneck_ms * (1 - 1e-12):
            continue  # cannot beat the best plan so far: its bound is already higher
        left = deadline - time.perf_counter()
        if left <= 0 and best is not None:
            proven = complete = False
            break
        try:
            placement = place_exact(pp, time_limit_s=max(left, 0.05))
        except InfeasibleError:
            if time.perf_counter() >= deadline:
                proven = complete = False  # cut short by the clock, not shown infeasible
            continue
        tried += 1
        proven = proven and placement.proven_optimal
        if best is None or placement.bottleneck_ms < best.bottleneck_ms:
            best = JointPlan(cand, pp.transfers_bytes, Placement(placement.nodes, placement.bottleneck_ms, "own",
                                                                  placement.proven_optimal),
                             "own", notes=(origin,))
    if best is None:
        raise InfeasibleError("no candidate partitioning could be placed on distinct nodes that hold it")
    lower = min(c[0] for c in scored)
    return JointPlan(best.runs, best.transfers_bytes, best.placement, "own", lower_bound_ms=lower,
                     proven_optimal=proven, candidates_tried=tried, candidates_total=len(scored), notes=best.notes,
                     search_complete=complete)


def _fewest_stages(memory_bytes: Sequence[Sequence[float]], limit: float) -> int:
    """Fewest consecutive runs of points that each fit in ``limit`` bytes: each run is extended while the next point
    fits (optimal when a longer run never needs less memory, as parameters and activations only add up)."""
    m, a, stages = len(memory_bytes), 0, 0
    while a < m:
        b = a
        while b + 1 < m and memory_bytes[a][b + 1] <= limit:
            b += 1
        stages, a = stages + 1, b + 1
    return stages
