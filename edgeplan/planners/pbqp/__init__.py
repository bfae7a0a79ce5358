"""Primitive selection as a Partitioned Boolean Quadratic Problem (mulder2020 §2, after Anderson & Gregg).

:class:`PBQPProblem` holds node cost vectors and edge cost matrices; :func:`solve` minimises it with one of
interchangeable solvers (exact reductions plus branch and bound by default, the RN heuristic, an ILP on HiGHS,
brute force), and :func:`evaluate_assignment` recomputes any answer's cost. Loads without torch.
"""

from __future__ import annotations

from edgeplan.planners.pbqp.instances import SHAPES, random_instance
from edgeplan.planners.pbqp.problem import PBQPProblem, evaluate_assignment
from edgeplan.planners.pbqp.reduce import ReductionCounts
from edgeplan.planners.pbqp.solve import BRUTE_FORCE_LIMIT, SOLVERS, PBQPSolution, solve

__all__ = [
    "BRUTE_FORCE_LIMIT",
    "SHAPES",
    "SOLVERS",
    "PBQPProblem",
    "PBQPSolution",
    "ReductionCounts",
    "evaluate_assignment",
    "random_instance",
    "solve",
]
