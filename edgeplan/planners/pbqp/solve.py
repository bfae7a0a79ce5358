"""Interchangeable PBQP solvers behind one function, :func:`solve`, each checked by the independent evaluator.

``exact`` (default)
    R0/RI/RII until every node has degree >= 3, then branch and bound on what remains: branch on a node of
    highest degree (an RN step per option, cheapest first), reduce again, prune with the bound of
    :meth:`~edgeplan.planners.pbqp.reduce.WorkGraph.lower_bound`. The RN heuristic's answer is the first
    incumbent. Optimal unless the time limit stops the search (then ``optimal`` is false).
``heuristic``
    The papers' solver (Scholz & Eckstein; Hames & Scholz): R0/RI/RII, and RN with the locally cheapest option
    when stuck. Optimal whenever RN was never needed (series-parallel graphs: chains, residual blocks, inception
    modules). If RN runs into forbidden (inf) choices, the exact search answers instead and the solution says
    ``solver="exact"``.
``ilp``
    The integer program with the local-marginal linearisation, solved by HiGHS (:mod:`edgeplan.planners.pbqp.ilp`).
``brute``
    Every assignment (only for tiny instances; the reference of the tests).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from edgeplan.errors import InfeasibleError, InvalidInputError, SolverError
from edgeplan.planners.pbqp.problem import PBQPProblem, evaluate_assignment
from edgeplan.planners.pbqp.reduce import ReductionCounts, WorkGraph, back_propagate

__all__ = ["BRUTE_FORCE_LIMIT", "SOLVERS", "PBQPSolution", "solve"]

SOLVERS = ("exact", "heuristic", "ilp", "brute")

BRUTE_FORCE_LIMIT = 2_000_000
"""Most assignments the brute-force solver enumerates."""

_REL_TOL = 1e-9


@dataclass(frozen=True)
class PBQPSolution:
    """A solver's answer.

    Parameters
    ----------
    assignment
        One option index per node.
    cost
        The assignment's cost, recomputed by :func:`~edgeplan.planners.pbqp.problem.evaluate_assignment`.
    optimal
        Whether the solver proved the assignment optimal.
    solver
        Which solver answered.
    time_s
        Wall-clock solve time.
    counts
        Reductions applied (R0, RI, RII, RN) by the reduction-based solvers.
    branch_nodes
        Search nodes the branch and bound visited (0 when the reductions alone solved it).
    """

    assignment: tuple[int, ...]
    cost: float
    optimal: bool
    solver: str
    time_s: float
    counts: ReductionCounts
    branch_nodes: int = 0


def solve(problem: PBQPProblem, solver: str = "exact", *, time_limit_s: float = 60.0) -> PBQPSolution:
    """Minimise a PBQP instance.

    Parameters
    ----------
    problem
        The instance.
    solver
        One of :data:`SOLVERS`.
    time_limit_s
        Budget of the ``exact`` search and the ``ilp`` solve; past it the best assignment found is returned with
        ``optimal=False``.

    Returns
    -------
    PBQPSolution

    Raises
    ------
    InvalidInputError
        Unknown solver, or an instance too large for brute force.
    InfeasibleError
        Every assignment has infinite cost (the message names a node with no finite option, when there is one).
    """
    if solver not in SOLVERS:
        raise InvalidInputError(f"unknown PBQP solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    start = time.perf_counter()
    if problem.n_nodes == 0:
        return PBQPSolution((), 0.0, True, solver, 0.0, ReductionCounts())
    if solver == "brute":
        assignment, optimal, counts, visited = _brute(problem), True, ReductionCounts(), 0
    elif solver == "ilp":
        from edgeplan.planners.pbqp.ilp import solve_ilp

        assignment, optimal = solve_ilp(problem, time_limit_s=time_limit_s)
        counts, visited = ReductionCounts(), 0
    elif solver == "heuristic":
        graph = WorkGraph.of(problem)
        _heuristic(graph)
        assignment, counts, visited = back_propagate(graph.trail, problem.n_nodes), graph.counts, 0
        optimal = counts.rn == 0
    else:
        assignment, optimal, counts, visited = _branch_and_bound(problem, start + time_limit_s)
    cost = evaluate_assignment(problem, assignment)
    if not math.isfinite(cost):
        if solver == "heuristic":
            # RN may have committed to a dead end; the exact search decides feasibility (reported as "exact")
            return solve(problem, "exact", time_limit_s=time_limit_s)
        if not optimal:
            raise SolverError(f"PBQP: the {solver} solver found no finite assignment within {time_limit_s:g} s; "
                              "raise the time limit")
        raise InfeasibleError(_infeasible_message(problem))
    return PBQPSolution(tuple(assignment), cost, optimal, solver, time.perf_counter() - start, counts, visited)


def _infeasible_message(problem: PBQPProblem) -> str:
    for u, c in enumerate(problem.costs):
        if not np.isfinite(c).any():
            return f"PBQP: node {problem.names[u]!r} has no option of finite cost (no applicable primitive?)"
    return "PBQP: every assignment uses a forbidden option or pair (inf cost); check the edge matrices"


def _heuristic(graph: WorkGraph) -> None:
    """Reduce; when stuck, fix the highest-degree node to its locally cheapest option (RN); repeat."""
    graph.reduce()
    while graph.vec:
        u = graph.max_degree_node()
        graph.fix(u, int(np.argmin(graph.local_costs(u))))
        graph.reduce()


def _branch_and_bound(problem: PBQPProblem, deadline: float) -> tuple[list[int], bool, ReductionCounts, int]:
    root = WorkGraph.of(problem)
    root.reduce()
    counts = ReductionCounts()
    counts.add(root.counts)
    if not root.vec:
        return back_propagate(root.trail, problem.n_nodes), True, counts, 0
    incumbent = root.copy()
    _heuristic(incumbent)
    best_trail = incumbent.trail
    best = evaluate_assignment(problem, back_propagate(best_trail, problem.n_nodes))
    visited = 0
    complete = True
    stack = [root]
    while stack:
        if time.perf_counter() > deadline:
            complete = False
            break
        node = stack.pop()
        visited += 1
        if _cannot_improve(node.lower_bound(), best):
            continue
        u = node.max_degree_node()
        scores = node.local_costs(u)
        children = []
        for option in np.argsort(scores, kind="stable"):
            if not math.isfinite(float(scores[option])):
                break
            child = node.copy()
            child.fix(u, int(option))
            child.reduce()
            counts.add(child.counts)
            if not child.vec:
                if child.constant < best:
                    best, best_trail = child.constant, child.trail
                continue
            children.append(child)
        # depth first, cheapest option explored first
        stack.extend(reversed(children))
    return back_propagate(best_trail, problem.n_nodes), complete, counts, visited


def _cannot_improve(bound: float, best: float) -> bool:
    """Whether a branch whose lower bound is ``bound`` can be pruned against the incumbent ``best``."""
    if math.isinf(best):
        return math.isinf(bound)
    return bound >= best - _REL_TOL * max(1.0, abs(best))


def _brute(problem: PBQPProblem) -> list[int]:
    """Every assignment's cost as one broadcast array (one axis per node); its argmin."""
    shape = problem.n_options
    total = math.prod(shape)
    if total > BRUTE_FORCE_LIMIT:
        raise InvalidInputError(f"brute force over {total} assignments is more than {BRUTE_FORCE_LIMIT}; "
                                "use solver='exact' or 'ilp'")
    n = problem.n_nodes
    cost = np.zeros(shape)
    for u, c in enumerate(problem.costs):
        cost = cost + c.reshape([-1 if axis == u else 1 for axis in range(n)])
    for (u, v), m in problem.edges.items():
        cost = cost + m.reshape([m.shape[0] if axis == u else m.shape[1] if axis == v else 1 for axis in range(n)])
    return [int(i) for i in np.unravel_index(int(np.argmin(cost)), shape)]
