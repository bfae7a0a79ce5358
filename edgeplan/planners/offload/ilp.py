"""The paper's integer linear program (Eshratifar & Pedram 2018, §3), solved with HiGHS (``scipy.optimize.milp``).

Variables, for layers ``i <= j`` (0-based here, 1-based in the paper):

* ``m[i, j]``, ``c[i, j]`` binary: layers ``i..j`` run in one go on the mobile / the cloud;
* ``u[i, j] = m[i, j] * sum_k c[j+1, k]`` and ``d[i, j] = c[i, j] * sum_k m[j+1, k]`` (eq. 7): the output of
  layer ``j`` is uploaded / downloaded. They are linearised by the three inequalities each of eq. 8. For
  ``j = n - 1`` the sum is empty and ``u = d = 0``, so they exist only for ``j <= n - 2``.

The sums ``sum_k c[j+1, k]`` and ``sum_k m[j+1, k]`` are given names (continuous variables fixed by an
equality each), so that every row of eq. 8 has three terms instead of ``n - j``: the same linearisation, with
O(n^2) instead of O(n^3) non-zeros, which is what makes HiGHS fast on 36 layers.

Rows: eq. 5 (``m + c <= 1``), eq. 6 (every layer is covered exactly once), eq. 8, and the optional battery
budget (eq. 13) and cloud-time limit (eq. 14). Objective: latency (eqs. 2-4, with the input upload
``sum_i c[0, i]`` and output download ``sum_i c[i, n-1]`` terms) or mobile energy (eqs. 9-11 with our energy:
compute on the mobile, idle while the cloud computes, radio energy of each transfer), all linear in m, c, u, d.

Because ``m``, ``c`` are binary and ``sum_k c[j+1, k] <= 1`` (eq. 6), eq. 8 forces ``u`` and ``d`` to the
product even when they are continuous in ``[0, 1]``; ``binary_links=False`` uses that equivalent MILP.

Strengthening (``strengthen=True``, the default; not in the paper). The paper's LP relaxation is weak: it can
spread ``m`` and ``c`` fractionally so that eq. 8 lets ``u = d = 0``, and HiGHS then branches for seconds at
``n = 36``. We add, at every inner boundary ``b = j + 1``, the flow-conservation equality::

    sum_i m[i, j] + sum_i d[i, j] = sum_k m[j+1, k] + sum_i u[i, j]

(mobile segments ending at ``j`` plus downloads = mobile segments starting at ``b`` plus uploads). Every integer
solution of eqs. 5-8 satisfies it (check the four cases M→M, M→C, C→M, C→C, and "no cut"), so the feasible
schedules and the optimum are unchanged; but with it (and eq. 6) every LP-feasible point is a unit flow in the
DP's state graph of the same cost, so without limits the LP bound equals the optimum (the shortest-path LP is
integral). ``strengthen=False`` solves the paper's rows only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, OptimizeResult, milp

from edgeplan.errors import SolverError
from edgeplan.planners.offload.costs import OffloadProblem
from edgeplan.planners.offload.plan import ABS_TOL, REL_TOL, SIDES, Segment, Solution

__all__ = ["IlpModel", "build_ilp", "solve_ilp"]

_HIGHS_TUNING = {"mip_heuristic_run_feasibility_jump": False, "mip_detect_symmetry": False}
"""HiGHS options that scipy passes through verbatim (with a warning, silenced here). Together with HiGHS presolve
off they cut the n = 36 solve about 3x (presolve off alone 2-3x; with HiGHS 1.12 its presolve also declared one
feasible n = 36 instance infeasible). The answer is unchanged. A HiGHS that lacks them ignores them; scipy
bindings that lack them make us retry without them."""


@dataclass(frozen=True)
class IlpModel:
    """The assembled MILP: ``min objective @ x`` s.t. ``lower <= rows @ x <= upper``, ``x`` in ``[0, 1]``.

    Attributes
    ----------
    objective
        Cost vector over ``[m, c, u, d]`` (``P, P, Q, Q`` entries, ``P = n(n+1)/2``, ``Q = n(n-1)/2``).
    rows, lower, upper
        The sparse constraint matrix and its bounds.
    integrality
        1 for binary variables, 0 for continuous ones.
    first, last
        Layer range of each of the ``P`` pairs, in the order of ``m`` and ``c``.
    """

    objective: np.ndarray
    rows: sp.csr_array
    lower: np.ndarray
    upper: np.ndarray
    integrality: np.ndarray
    first: np.ndarray
    last: np.ndarray


def _ranges(starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ``range(starts[k], stops[k])``: (owner k of each value, the values)."""
    lengths = np.maximum(stops - starts, 0)
    owner = np.repeat(np.arange(len(starts)), lengths)
    offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return owner, starts[owner] + offsets


def _metric_coefficients(problem: OffloadProblem, first: np.ndarray, last: np.ndarray) -> dict[str, np.ndarray]:
    """Coefficients of latency, energy and cloud time over ``[m, c, u, d]``."""
    costs, net, power = problem.costs, problem.network, problem.power
    n = costs.n
    size = np.asarray(costs.boundary_bytes, dtype=np.float64)
    up_ms = size * 8.0 / (net.up_mbps * 1e6) * 1e3
    down_ms = size * 8.0 / (net.down_mbps * 1e6) * 1e3
    up_mj, down_mj = net.upload_power_mw * up_ms / 1000.0, net.download_power_mw * down_ms / 1000.0
    t_mobile = costs.mobile_ms[first, last]
    t_cloud = costs.cloud_ms[first, last]
    starts_at_0, ends_at_n = first == 0, last == n - 1
    out_boundary = last[last <= n - 2] + 1  # u[i, j], d[i, j] move the output of layer j: boundary j + 1
    return {
        "latency": np.concatenate(
            [
                t_mobile,
                t_cloud + starts_at_0 * up_ms[0] + ends_at_n * down_ms[n],
                up_ms[out_boundary],
                down_ms[out_boundary],
            ]
        ),
        "energy": np.concatenate(
            [
                power.compute_mw * t_mobile / 1000.0,
                power.idle_mw * t_cloud / 1000.0 + starts_at_0 * up_mj[0] + ends_at_n * down_mj[n],
                up_mj[out_boundary],
                down_mj[out_boundary],
            ]
        ),
        "cloud": np.concatenate([np.zeros_like(t_mobile), t_cloud, np.zeros(2 * len(out_boundary))]),
    }


def build_ilp(problem: OffloadProblem, *, binary_links: bool = True, strengthen: bool = True) -> IlpModel:
    """Assemble the paper's ILP for ``problem``.

    Parameters
    ----------
    problem
        The problem; its objective and limits decide the cost vector and the extra rows.
    binary_links
        ``True``: ``u`` and ``d`` are binary, as in the paper; ``False``: continuous in ``[0, 1]`` (equivalent).
    strengthen
        Add the flow-conservation equalities (see the module docstring): the same integer solutions, a much
        tighter LP relaxation. ``False``: the paper's rows only.

    Returns
    -------
    IlpModel
    """
    n = problem.costs.n
    first, last = np.triu_indices(n)
    n_pairs = len(first)
    pair = np.full((n, n), -1, dtype=np.int64)
    pair[first, last] = np.arange(n_pairs)
    link = np.flatnonzero(last <= n - 2)  # pairs that have u and d
    n_links = len(link)
    m_col, c_col = np.arange(n_pairs), n_pairs + np.arange(n_pairs)
    u_col, d_col = 2 * n_pairs + np.arange(n_links), 2 * n_pairs + n_links + np.arange(n_links)

    entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    lower: list[np.ndarray] = []
    upper: list[np.ndarray] = []
    n_rows = 0

    def add_rows(count: int, row: np.ndarray, col: np.ndarray, value: np.ndarray | float, lo: float, hi: float) -> None:
        nonlocal n_rows
        entries.append((n_rows + row, col, np.broadcast_to(np.asarray(value, dtype=np.float64), row.shape)))
        lower.append(np.full(count, lo))
        upper.append(np.full(count, hi))
        n_rows += count

    pairs = np.arange(n_pairs)
    # eq. 5: m[i, j] + c[i, j] <= 1
    add_rows(n_pairs, np.concatenate([pairs, pairs]), np.concatenate([m_col, c_col]), 1.0, -np.inf, 1.0)
    # eq. 6: every layer l is covered exactly once by the pairs i <= l <= j
    owner, layer = _ranges(first, last + 1)
    add_rows(n, np.concatenate([layer, layer]), np.concatenate([m_col[owner], c_col[owner]]), 1.0, 1.0, 1.0)
    # eq. 8, for u (m then c) and d (c then m), with the sums named: start_m[j] = sum_k m[j+1, k] and
    # start_c[j] = sum_k c[j+1, k] ("a mobile / cloud segment starts at j + 1"), so each row has 3 terms, not n.
    links = np.arange(n_links)
    n_starts = max(n - 1, 0)
    start_m_col = 2 * n_pairs + 2 * n_links + np.arange(n_starts)
    start_c_col = start_m_col + n_starts
    begins = np.flatnonzero(first >= 1)
    for start_col, seg_col in ((start_m_col, m_col), (start_c_col, c_col)):
        add_rows(n_starts, np.concatenate([np.arange(n_starts), first[begins] - 1]),
                 np.concatenate([start_col, seg_col[begins]]),
                 np.concatenate([np.ones(n_starts), -np.ones(len(begins))]), 0.0, 0.0)
    for link_col, this_col, next_col in ((u_col, m_col, start_c_col), (d_col, c_col, start_m_col)):
        nxt = next_col[last[link]]
        # u <= m
        add_rows(n_links, np.concatenate([links, links]), np.concatenate([link_col, this_col[link]]),
                 np.concatenate([np.ones(n_links), -np.ones(n_links)]), -np.inf, 0.0)
        # u <= sum_k c[j+1, k]
        add_rows(n_links, np.concatenate([links, links]), np.concatenate([link_col, nxt]),
                 np.concatenate([np.ones(n_links), -np.ones(n_links)]), -np.inf, 0.0)
        # m + sum_k c[j+1, k] - u <= 1
        add_rows(n_links, np.concatenate([links, links, links]), np.concatenate([this_col[link], nxt, link_col]),
                 np.concatenate([np.ones(n_links), np.ones(n_links), -np.ones(n_links)]), -np.inf, 1.0)

    if strengthen and n > 1:
        # Flow conservation at every inner boundary b = j + 1 (valid for every integer solution of eqs. 5-8):
        # mobile segments ending at j + downloads at b = mobile segments starting at b + uploads at b.
        ends, starts = np.flatnonzero(last <= n - 2), np.flatnonzero(first >= 1)
        add_rows(
            n - 1,
            np.concatenate([last[ends], first[starts] - 1, last[link], last[link]]),
            np.concatenate([m_col[ends], m_col[starts], d_col, u_col]),
            np.concatenate([np.ones(len(ends)), -np.ones(len(starts)), np.ones(n_links), -np.ones(n_links)]),
            0.0,
            0.0,
        )

    if not problem.same_side_splits and n > 1:
        # No two consecutive segments on one side: a mobile segment ending at j is followed by a cloud segment
        # starting at j + 1 and vice versa (alternation), so every segment that ends before the last layer is
        # followed by a transfer: u[i, j] = m[i, j] and d[i, j] = c[i, j]. Both sets of equalities are valid
        # for every integer schedule without same-side splits; they keep the LP relaxation integral in practice.
        ends, starts = np.flatnonzero(last <= n - 2), np.flatnonzero(first >= 1)
        for this_col, next_col in ((m_col, c_col), (c_col, m_col)):
            add_rows(n - 1, np.concatenate([last[ends], first[starts] - 1]),
                     np.concatenate([this_col[ends], next_col[starts]]),
                     np.concatenate([np.ones(len(ends)), -np.ones(len(starts))]), 0.0, 0.0)
        for link_col, this_col in ((u_col, m_col), (d_col, c_col)):
            add_rows(n_links, np.concatenate([links, links]), np.concatenate([link_col, this_col[link]]),
                     np.concatenate([np.ones(n_links), -np.ones(n_links)]), 0.0, 0.0)

    coefficients = {k: np.concatenate([v, np.zeros(2 * n_starts)])
                    for k, v in _metric_coefficients(problem, first, last).items()}
    n_vars = 2 * n_pairs + 2 * n_links + 2 * n_starts
    every = np.arange(n_vars)
    for metric, limit in (("energy", problem.battery_mj), ("cloud", problem.cloud_ms)):  # eqs. 13 and 14
        if limit is not None:
            bound = float(limit) + REL_TOL * abs(float(limit)) + ABS_TOL  # the tolerance every solver allows
            add_rows(1, np.zeros(n_vars, dtype=np.int64), every, coefficients[metric], -np.inf, bound)

    row = np.concatenate([e[0] for e in entries])
    col = np.concatenate([e[1] for e in entries])
    val = np.concatenate([e[2] for e in entries])
    keep = val != 0.0
    matrix = sp.csr_array(sp.coo_array((val[keep], (row[keep], col[keep])), shape=(n_rows, n_vars)))
    integrality = np.ones(n_vars, dtype=np.int64)
    integrality[2 * n_pairs + 2 * n_links :] = 0  # the named sums are determined by the binary m and c
    if not binary_links:
        integrality[2 * n_pairs :] = 0
    return IlpModel(
        objective=coefficients[problem.objective],
        rows=matrix,
        lower=np.concatenate(lower),
        upper=np.concatenate(upper),
        integrality=integrality,
        first=first,
        last=last,
    )


def _decode(model: IlpModel, x: np.ndarray, n: int) -> tuple[Segment, ...]:
    n_pairs = len(model.first)
    chosen = []
    for k, offset in enumerate((0, n_pairs)):
        for p in np.flatnonzero(x[offset : offset + n_pairs] > 0.5):
            chosen.append(Segment(int(model.first[p]), int(model.last[p]), SIDES[k]))
    chosen.sort(key=lambda s: s.first)
    expected = 0
    for seg in chosen:
        if seg.first != expected:
            raise SolverError(f"the ILP solution does not cover layer {expected} exactly once: {chosen}")
        expected = seg.last + 1
    if expected != n:
        raise SolverError(f"the ILP solution does not cover layers {expected}..{n - 1}: {chosen}")
    return tuple(chosen)


def _run_highs(model: IlpModel, options: dict[str, Any], relax: bool = False) -> OptimizeResult:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Unrecognized options detected")
        return milp(
            model.objective,
            integrality=np.zeros_like(model.integrality) if relax else model.integrality,
            bounds=Bounds(0.0, 1.0),
            constraints=LinearConstraint(model.rows, model.lower, model.upper),
            options=options,
        )


def solve_ilp(
    problem: OffloadProblem, *, binary_links: bool = True, strengthen: bool = True, time_limit_s: float = 60.0,
    relaxation_first: bool = True,
) -> Solution | None:
    """The optimal schedule of ``problem`` from the paper's ILP, solved by HiGHS.

    Parameters
    ----------
    problem
        The problem.
    binary_links, strengthen
        See :func:`build_ilp`.
    time_limit_s
        HiGHS time limit.
    relaxation_first
        Solve the LP relaxation first and return its solution when it is integral (then it is an optimal solution
        of the ILP: the relaxation's optimum bounds the ILP's from below and is attained by a feasible integer
        point); otherwise branch and bound. With the strengthening rows and no limits, the relaxation's value is the
        optimum (module docstring) and its solution is usually integral, at a fraction of the MIP's time.

    Returns
    -------
    Solution or None
        ``None`` when HiGHS proves the ILP infeasible.

    Raises
    ------
    SolverError
        HiGHS stopped for another reason (time limit, numerical trouble) or returned an invalid schedule.
    """
    model = build_ilp(problem, binary_links=binary_links, strengthen=strengthen)
    if relaxation_first:
        lp = _run_highs(model, {"time_limit": time_limit_s, "presolve": False}, relax=True)
        if lp.status == 2:
            return None  # the relaxation is infeasible, so is the ILP
        if lp.status == 0 and lp.x is not None:
            ints = model.integrality.astype(bool)
            if np.all(np.abs(lp.x[ints] - np.round(lp.x[ints])) <= 1e-7):
                return Solution(_decode(model, np.round(lp.x), problem.costs.n), float(lp.fun))
    options: dict[str, Any] = {"mip_rel_gap": REL_TOL, "time_limit": time_limit_s, "presolve": False}
    try:
        result = _run_highs(model, {**options, **_HIGHS_TUNING})
    except AttributeError:  # a scipy whose HiGHS bindings do not expose a tuning option
        result = _run_highs(model, options)
    if result.status == 2:
        return None
    if result.status != 0 or result.x is None:
        raise SolverError(f"HiGHS did not solve the offloading ILP (n = {problem.costs.n}): {result.message}")
    return Solution(_decode(model, result.x, problem.costs.n), float(result.fun))
