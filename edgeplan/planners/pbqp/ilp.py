"""PBQP as an integer linear program, solved by HiGHS (``scipy.optimize.milp``): the independent reference of the
reduction-based solvers on instances too large for brute force.

Variables: ``x[u, a]`` binary (node ``u`` takes option ``a``) and, per edge ``(u, v)``, ``y[u, v, a, b]`` in
``[0, 1]`` (the pair ``(a, b)`` is taken). Rows::

    sum_a x[u, a] = 1                                   every node takes one option
    sum_b y[u, v, a, b] = x[u, a]    for every a        the local-marginal linearisation of x[u, a] * x[v, b]
    sum_a y[u, v, a, b] = x[v, b]    for every b

With ``x`` integral the two marginal rows force ``y[u, v, a, b] = x[u, a] x[v, b]``, so ``y`` may stay
continuous. Objective: ``sum c[u, a] x[u, a] + sum M[a, b] y[u, v, a, b]``; an ``inf`` cost becomes an upper bound
of 0 on its variable. The MIP gap is set to 0 so that "optimal" means optimal to HiGHS's feasibility tolerance.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from edgeplan.errors import InfeasibleError, SolverError
from edgeplan.planners.pbqp.problem import PBQPProblem

__all__ = ["solve_ilp"]


def solve_ilp(problem: PBQPProblem, *, time_limit_s: float = 60.0) -> tuple[list[int], bool]:
    """Solve the instance's ILP.

    Parameters
    ----------
    problem
        The instance.
    time_limit_s
        HiGHS's time limit.

    Returns
    -------
    tuple of (list of int, bool)
        The assignment and whether HiGHS proved it optimal.

    Raises
    ------
    InfeasibleError
        No assignment of finite cost exists.
    SolverError
        HiGHS stopped without any feasible assignment for another reason (time limit, numerical trouble).
    """
    x_offset = np.cumsum([0, *problem.n_options])
    n_x = int(x_offset[-1])
    cost_parts = [c for c in problem.costs]
    y_offsets: dict[tuple[int, int], int] = {}
    n_vars = n_x
    for key, m in problem.edges.items():
        y_offsets[key] = n_vars
        n_vars += m.size
        cost_parts.append(m.ravel())
    objective = np.concatenate(cost_parts)
    upper = np.where(np.isfinite(objective), 1.0, 0.0)
    objective = np.where(np.isfinite(objective), objective, 0.0)

    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    n_rows = 0
    for u, m_u in enumerate(problem.n_options):  # one option per node
        rows.append(np.full(m_u, n_rows))
        cols.append(np.arange(x_offset[u], x_offset[u] + m_u))
        vals.append(np.ones(m_u))
        n_rows += 1
    for (u, v), m in problem.edges.items():
        m_u, m_v = m.shape
        y = y_offsets[(u, v)] + np.arange(m.size).reshape(m_u, m_v)
        for side, (node, count, axis) in enumerate(((u, m_u, 1), (v, m_v, 0))):
            # rows n_rows .. n_rows + count - 1: sum over the other node's options of y, minus x
            owner = np.repeat(np.arange(count), y.shape[axis]) if side == 0 else np.tile(np.arange(count), m_u)
            rows.append(n_rows + owner)
            cols.append(y.ravel())
            vals.append(np.ones(m.size))
            rows.append(n_rows + np.arange(count))
            cols.append(x_offset[node] + np.arange(count))
            vals.append(-np.ones(count))
            n_rows += count
    matrix = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(n_rows, n_vars))
    lower_rhs = np.zeros(n_rows)
    lower_rhs[: problem.n_nodes] = 1.0
    integrality = np.zeros(n_vars)
    integrality[:n_x] = 1
    result = milp(objective, constraints=LinearConstraint(matrix, lower_rhs, lower_rhs), integrality=integrality,
                  bounds=Bounds(np.zeros(n_vars), upper),
                  options={"time_limit": float(time_limit_s), "mip_rel_gap": 0.0, "presolve": True})
    if result.x is None:
        if result.status == 2:
            raise InfeasibleError("PBQP: the ILP is infeasible: every assignment uses a forbidden (inf) cost")
        raise SolverError(f"HiGHS found no assignment (status {result.status}: {result.message})")
    x = result.x[:n_x]
    assignment = [int(np.argmax(x[x_offset[u]:x_offset[u + 1]])) for u in range(problem.n_nodes)]
    return assignment, bool(result.status == 0)
