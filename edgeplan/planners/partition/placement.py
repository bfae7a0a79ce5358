"""Placing pipeline stages on the nodes of an edge cluster to minimise the bottleneck (parthasarathy2022 §III-B2).

``k`` stages run in a chain; stage ``i`` sends ``transfers_bytes[i]`` to stage ``i + 1``. Each stage goes to a
different node; the link between nodes ``u`` and ``v`` carries ``bandwidth_mbps[u][v]``. The bottleneck latency
of a placement is its slowest part: ``max_i transfers_bytes[i] * 8 / bandwidth(v_i, v_{i+1})`` in the paper,
which leaves compute out. A problem may also give each stage's compute time on each node (``stage_ms``, for
nodes of different speed) and which nodes can hold it (``allowed``, for nodes of different memory); the
bottleneck then also counts ``stage_ms[i][v_i]``. Throughput is the bottleneck's inverse.

* :func:`theorem1_bound`: the paper's lower bound (the largest transfer on the best link), and
  :func:`matching_bound`, a tighter one: the ``j`` largest transfers use ``j`` distinct links, so one of them
  sits on a link no faster than the ``j``-th best, and the bottleneck is at least the ``j``-th largest transfer
  over the ``j``-th best link, for every ``j``; both are raised to the slowest stage's best compute time.
* :func:`place_exact`: the true optimum, certified. Binary search over the candidate bottleneck values (every
  ``transfer / bandwidth`` ratio and compute time); each step asks whether a chain of distinct nodes meets the
  value. A depth-first search answers first, within a budget of extensions; when the budget runs out, CP-SAT
  (OR-Tools) decides. Every "no" is a proof (exhausted search or CP-SAT ``INFEASIBLE``), every "yes" comes with
  its chain, so the result is optimal unless a time limit was given and hit (``proven_optimal`` says which).
* :func:`place_greedy` and :func:`place_random`: placement-only baselines for given partitions (the joint
  baselines of §IV, which also choose the partitions, are in :mod:`edgeplan.planners.partition.joint`).
* :func:`place_brute`: every ordered choice of nodes, for tests.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from edgeplan.errors import InfeasibleError, InvalidInputError

__all__ = ["Placement", "PlacementProblem", "bottleneck_ms", "matching_bound", "place_brute", "place_exact",
           "place_greedy", "place_random", "theorem1_bound"]


@dataclass(frozen=True)
class PlacementProblem:
    """Transfers between consecutive stages and the cluster's link bandwidths (symmetric, Mbit/s).

    Attributes
    ----------
    transfers_bytes
        ``transfers_bytes[i]``: bytes sent from stage ``i`` to stage ``i + 1``.
    bandwidth_mbps
        ``bandwidth_mbps[u][v]``: bandwidth of the link between nodes ``u`` and ``v`` (the diagonal is ignored).
    stage_ms
        Optional ``stage_ms[i][v]``: compute time of stage ``i`` on node ``v`` (``None``: compute is left out, as
        in the paper).
    allowed
        Optional ``allowed[i][v]``: whether node ``v`` can hold stage ``i`` (its memory); ``None``: every node.
    """

    transfers_bytes: tuple[float, ...]
    bandwidth_mbps: tuple[tuple[float, ...], ...]
    stage_ms: tuple[tuple[float, ...], ...] | None = None
    allowed: tuple[tuple[bool, ...], ...] | None = None

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
        for name, table in (("stage_ms", self.stage_ms), ("allowed", self.allowed)):
            if table is not None and (len(table) != self.stages or any(len(row) != n for row in table)):
                raise InvalidInputError(f"{name} must have one row per stage ({self.stages}) and one column per "
                                        f"node ({n})")
        if self.stage_ms is not None and any(not ms >= 0 for row in self.stage_ms for ms in row):
            raise InvalidInputError("stage compute times must be non-negative")
        if self.allowed is not None:
            for i, row in enumerate(self.allowed):
                if not any(row):
                    raise InfeasibleError(f"stage {i} fits on no node; give the nodes more memory or cut the model "
                                          "into smaller partitions")
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

    def can_hold(self, stage: int, node: int) -> bool:
        """Whether ``node`` may run ``stage``."""
        return self.allowed is None or self.allowed[stage][node]

    def compute_ms(self, stage: int, node: int) -> float:
        """Compute time of ``stage`` on ``node`` (0 when the problem leaves compute out)."""
        return 0.0 if self.stage_ms is None else self.stage_ms[stage][node]


@dataclass(frozen=True)
class Placement:
    """The node of every stage, and the resulting bottleneck latency.

    ``proven_optimal`` is true only for an exact solve that finished (every smaller value proven infeasible).
    """

    nodes: tuple[int, ...]
    bottleneck_ms: float
    method: str
    proven_optimal: bool = False


def _ms(size_bytes: float, mbps: float) -> float:
    return size_bytes * 8.0 / (mbps * 1e6) * 1e3


def bottleneck_ms(problem: PlacementProblem, nodes: Sequence[int]) -> float:
    """The bottleneck latency of placing stage ``i`` on ``nodes[i]`` (checked: distinct, allowed nodes)."""
    if len(nodes) != problem.stages or len(set(nodes)) != len(nodes):
        raise InvalidInputError(f"a placement needs {problem.stages} distinct nodes, got {list(nodes)}")
    if not all(0 <= v < problem.nodes for v in nodes):
        raise InvalidInputError(f"nodes must be in 0..{problem.nodes - 1}, got {list(nodes)}")
    for i, v in enumerate(nodes):
        if not problem.can_hold(i, v):
            raise InvalidInputError(f"stage {i} does not fit on node {v}")
    links = (_ms(t, problem.bandwidth_mbps[nodes[i]][nodes[i + 1]]) for i, t in enumerate(problem.transfers_bytes))
    compute = (problem.compute_ms(i, v) for i, v in enumerate(nodes))
    return max(itertools.chain(links, compute), default=0.0)


def _links(problem: PlacementProblem) -> list[float]:
    n = problem.nodes
    return sorted((problem.bandwidth_mbps[u][v] for u in range(n) for v in range(u + 1, n)), reverse=True)


def _compute_bound(problem: PlacementProblem) -> float:
    if problem.stage_ms is None:
        return 0.0
    return max(min(problem.stage_ms[i][v] for v in range(problem.nodes) if problem.can_hold(i, v))
               for i in range(problem.stages))


def theorem1_bound(problem: PlacementProblem) -> float:
    """The paper's Theorem 1: the largest transfer over the best link (and no less than any stage's compute)."""
    if not problem.transfers_bytes:
        return _compute_bound(problem)
    return max(_ms(max(problem.transfers_bytes), _links(problem)[0]), _compute_bound(problem))


def matching_bound(problem: PlacementProblem) -> float:
    """A tighter lower bound: the ``j``-th largest transfer over the ``j``-th best link, maximised over ``j``."""
    links = _links(problem)
    transfers = sorted(problem.transfers_bytes, reverse=True)
    return max([_compute_bound(problem), *(_ms(t, links[j]) for j, t in enumerate(transfers))])


class _BudgetExceeded(Exception):
    pass


class _TimeUp(Exception):
    pass


def _candidates_at(problem: PlacementProblem, limit_ms: float) -> tuple[list[list[int]], list[float]]:
    """Nodes that may run each stage within ``limit_ms``, and the bandwidth each transfer needs."""
    nodes = [[v for v in range(problem.nodes) if problem.can_hold(i, v) and problem.compute_ms(i, v) <= limit_ms
              * (1 + 1e-12)] for i in range(problem.stages)]
    need = [0.0 if t == 0 else t * 8.0 / (limit_ms * 1e3) if limit_ms > 0 else float("inf")
            for t in problem.transfers_bytes]  # the bandwidth (Mbit/s) each transfer needs
    return nodes, need


def _chain_dfs(problem: PlacementProblem, limit_ms: float, budget: int | None,
               deadline: float | None = None) -> tuple[int, ...] | None:
    """A chain of distinct nodes meeting ``limit_ms`` (exact DFS), or ``None``; raises when over ``budget``
    extensions, or past ``deadline`` (a :func:`time.perf_counter` value, checked every 256 extensions)."""
    n, k = problem.nodes, problem.stages
    allowed, need = _candidates_at(problem, limit_ms)
    ok = [[False] * n for _ in range(k)]
    for i, vs in enumerate(allowed):
        for v in vs:
            ok[i][v] = True
    bw = problem.bandwidth_mbps
    # try the most promising successors first: the fastest links
    order = [sorted((v for v in range(n) if v != u), key=bw[u].__getitem__, reverse=True) for u in range(n)]
    path: list[int] = []
    used = [False] * n
    steps = 0

    def extend(u: int) -> bool:
        nonlocal steps
        i = len(path) - 1
        if i == k - 1:
            return True
        steps += 1
        if budget is not None and steps > budget:
            raise _BudgetExceeded
        if deadline is not None and steps % 256 == 0 and time.perf_counter() > deadline:
            raise _TimeUp
        for v in order[u]:
            if bw[u][v] < need[i] * (1 - 1e-12):
                break  # successors are sorted by bandwidth: no later one is fast enough
            if not used[v] and ok[i + 1][v]:
                used[v] = True
                path.append(v)
                if extend(v):
                    return True
                path.pop()
                used[v] = False
        return False

    for start in allowed[0]:
        used[start] = True
        path.append(start)
        if extend(start):
            return tuple(path)
        path.pop()
        used[start] = False
    return None


def _chain_cpsat(problem: PlacementProblem, limit_ms: float,
                 time_limit_s: float | None) -> tuple[tuple[int, ...] | None, bool]:
    """The same question as :func:`_chain_dfs`, decided by CP-SAT; also says whether the answer is proven."""
    from ortools.sat.python import cp_model

    n, k = problem.nodes, problem.stages
    allowed, need = _candidates_at(problem, limit_ms)
    if any(not vs for vs in allowed):
        return None, True
    model = cp_model.CpModel()
    x = {(i, v): model.new_bool_var(f"x{i}_{v}") for i in range(k) for v in allowed[i]}
    for i in range(k):
        model.add_exactly_one(x[i, v] for v in allowed[i])
    for v in range(n):
        on = [x[i, v] for i in range(k) if (i, v) in x]
        if len(on) > 1:
            model.add_at_most_one(on)
    bw = problem.bandwidth_mbps
    for i in range(k - 1):
        for u in allowed[i]:
            fast = [x[i + 1, v] for v in allowed[i + 1] if v != u and bw[u][v] >= need[i] * (1 - 1e-12)]
            model.add_bool_or([x[i, u].negated(), *fast])
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    if time_limit_s is not None:
        solver.parameters.max_time_in_seconds = max(time_limit_s, 0.01)
    status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        chain = tuple(next(v for v in allowed[i] if solver.value(x[i, v])) for i in range(k))
        return chain, True
    return None, status == cp_model.INFEASIBLE


def place_exact(problem: PlacementProblem, time_limit_s: float | None = None,
                dfs_budget: int = 20_000) -> Placement:
    """The placement with the least bottleneck latency, certified optimal (see the module docstring).

    Parameters
    ----------
    problem
        The placement problem.
    time_limit_s
        Stop after about this long and return the best chain found (``proven_optimal`` false when a step was
        left undecided); ``None``: no limit. The clock is read inside the search every 256 extensions and CP-SAT
        gets the time left (at least 10 ms); the first, loosest step, which any chain of allowed nodes answers,
        is not timed, so a plan is always returned when one exists.
    dfs_budget
        Extensions the depth-first search may make per step before CP-SAT takes over.

    Raises
    ------
    InfeasibleError
        When no chain of distinct allowed nodes exists at all.
    """
    deadline = None if time_limit_s is None else time.perf_counter() + time_limit_s
    n = problem.nodes
    values = {_ms(t, problem.bandwidth_mbps[u][v]) for t in problem.transfers_bytes
              for u in range(n) for v in range(u + 1, n)}
    if problem.stage_ms is not None:
        values.update(problem.stage_ms[i][v] for i in range(problem.stages) for v in range(n))
    values.add(0.0)
    candidates = sorted(values)
    lo = bisect.bisect_left(candidates, matching_bound(problem) * (1 - 1e-12))
    hi = len(candidates) - 1

    def decide(limit: float, timed: bool = True) -> tuple[tuple[int, ...] | None, bool]:
        """A chain within ``limit`` or ``None``, and whether that answer is proven (not cut short by the clock)."""
        try:
            return _chain_dfs(problem, limit, dfs_budget, deadline if timed else None), True
        except _TimeUp:
            return None, False
        except _BudgetExceeded:
            left = None if deadline is None or not timed else deadline - time.perf_counter()
            return _chain_cpsat(problem, limit, left)

    # the loosest limit first, without the clock: any chain of allowed nodes answers it, so that a plan exists
    best, proven = decide(candidates[hi], timed=False)
    if best is None:
        if proven:
            raise InfeasibleError("no chain of distinct nodes can hold the stages (memory); give the nodes more "
                                  "memory or use more nodes")
        raise InfeasibleError(f"no placement found within the time limit of {time_limit_s} s")
    certified = True
    while lo < hi:
        if deadline is not None and time.perf_counter() > deadline:
            certified = False
            break
        mid = (lo + hi) // 2
        found, proven = decide(candidates[mid])
        if found is None:
            certified = certified and proven
            lo = mid + 1
        else:
            best, hi = found, mid
    return Placement(best, bottleneck_ms(problem, best), "exact", proven_optimal=certified)


def place_greedy(problem: PlacementProblem) -> Placement:
    """Greedy baseline: the first two stages on the best link, then each next stage on the unused node with the
    fastest link from the previous one (among the nodes that can hold it)."""
    n = problem.nodes
    if problem.stages == 1:
        node = min((v for v in range(n) if problem.can_hold(0, v)), key=lambda v: problem.compute_ms(0, v))
        return Placement((node,), bottleneck_ms(problem, (node,)), "greedy")
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b and problem.can_hold(0, a) and problem.can_hold(1, b)]
    u, v = max(pairs, key=lambda e: problem.bandwidth_mbps[e[0]][e[1]])
    path = [u, v]
    while len(path) < problem.stages:
        last, i = path[-1], len(path)
        free = [w for w in range(n) if w not in path and problem.can_hold(i, w)]
        if not free:
            raise InfeasibleError(f"greedy placement found no free node for stage {i}")
        path.append(max(free, key=lambda w: problem.bandwidth_mbps[last][w]))
    return Placement(tuple(path), bottleneck_ms(problem, path), "greedy")


def place_random(problem: PlacementProblem, seed: int = 0) -> Placement:
    """Random baseline: distinct nodes drawn uniformly (among those that can hold each stage)."""
    rng = random.Random(seed)
    for _ in range(1000):
        nodes = tuple(rng.sample(range(problem.nodes), problem.stages))
        if all(problem.can_hold(i, v) for i, v in enumerate(nodes)):
            return Placement(nodes, bottleneck_ms(problem, nodes), "random")
    raise InfeasibleError("random placement drew no valid placement in 1000 tries")


def place_brute(problem: PlacementProblem) -> Placement:
    """Every ordered choice of distinct nodes (for tests; refuses more than 200,000 of them)."""
    count = 1
    for j in range(problem.stages):
        count *= problem.nodes - j
    if count > 200_000:
        raise InvalidInputError(f"brute force over {count} placements refused; use place_exact")
    valid = [p for p in itertools.permutations(range(problem.nodes), problem.stages)
             if all(problem.can_hold(i, v) for i, v in enumerate(p))]
    if not valid:
        raise InfeasibleError("no placement of distinct allowed nodes exists")
    best = min(valid, key=lambda p: bottleneck_ms(problem, p))
    return Placement(tuple(best), bottleneck_ms(problem, best), "brute", proven_optimal=True)
