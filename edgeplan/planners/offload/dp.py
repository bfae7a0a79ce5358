"""Exact dynamic programming over states ``(b, side)``: the data sit on ``side`` before layer ``b``.

From state ``(b, s)`` the next segment ``b..j`` runs on side ``t`` and costs the transfer at boundary ``b`` (if
``s != t``) plus ``T_t[b, j]``; it leads to ``(j + 1, t)``. The start is ``(0, mobile)``; ending in ``(n, cloud)``
adds the download of the outputs. Every schedule is one path, so the shortest path is the optimum.

Without limits this is a scalar backward recursion, ``O(n^2)``, vectorised over ``j`` and the two sides. With a
battery budget or a cloud-time limit it is an exact label-setting DP: each state keeps the Pareto set of
(objective, limited quantities) labels; a label is dropped when another is no worse in every quantity, when its
limited quantity plus the least still to come already exceeds the limit, or when its objective plus the least
still to come exceeds that of a feasible schedule already found (all costs are >= 0, so no dropped label can
lead to an optimum). Feasible schedules come early from a few scalarised policies (weighted sums of the
quantities) completed from every new label. Ties go to the lexicographically smallest label, then the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.planners.offload.costs import OffloadProblem
from edgeplan.planners.offload.plan import ABS_TOL, REL_TOL, SIDES, Segment, Solution

__all__ = ["METRICS", "EdgeCosts", "dp_optimum", "edge_costs", "metric_range", "solve_dp"]

METRICS = ("latency", "energy", "cloud")
"""Quantities the DP can minimise or limit: latency (ms), mobile energy (mJ), cloud time (ms)."""

_MOBILE, _CLOUD = 0, 1


@dataclass(frozen=True)
class EdgeCosts:
    """Transition costs of the DP for one metric.

    Attributes
    ----------
    step
        ``(2, 2, n, n)``: ``[s, t, b, j]`` is the cost of running layers ``b..j`` on side ``t`` when the data are
        on side ``s`` (index 0: mobile, 1: cloud); ``inf`` for ``j < b``.
    final
        ``(2,)``: the cost of ending on each side (the download of the outputs from the cloud).
    """

    step: np.ndarray
    final: np.ndarray


def edge_costs(problem: OffloadProblem, metric: str) -> EdgeCosts:
    """The DP's transition costs for ``metric`` (one of :data:`METRICS`).

    Parameters
    ----------
    problem
        The problem.
    metric
        ``"latency"``, ``"energy"`` or ``"cloud"``.

    Returns
    -------
    EdgeCosts
    """
    costs, net, power = problem.costs, problem.network, problem.power
    n = costs.n
    upper = np.triu(np.ones((n, n), dtype=bool))
    t_mobile = np.where(upper, costs.mobile_ms, 0.0)
    t_cloud = np.where(upper, costs.cloud_ms, 0.0)
    size = np.asarray(costs.boundary_bytes, dtype=np.float64)
    up_ms = size * 8.0 / (net.up_mbps * 1e6) * 1e3
    down_ms = size * 8.0 / (net.down_mbps * 1e6) * 1e3
    if metric == "latency":
        seg = (t_mobile, t_cloud)
        up, down = up_ms, down_ms
    elif metric == "energy":
        seg = (power.compute_mw * t_mobile / 1000.0, power.idle_mw * t_cloud / 1000.0)
        up, down = net.upload_power_mw * up_ms / 1000.0, net.download_power_mw * down_ms / 1000.0
    elif metric == "cloud":
        seg = (np.zeros((n, n)), t_cloud)
        up, down = np.zeros(n + 1), np.zeros(n + 1)
    else:
        raise InvalidInputError(f"metric {metric!r} is unknown; choose one of {', '.join(METRICS)}")
    step = np.empty((2, 2, n, n))
    for s in (_MOBILE, _CLOUD):
        for t in (_MOBILE, _CLOUD):
            move = up[:n] if (s, t) == (_MOBILE, _CLOUD) else down[:n] if (s, t) == (_CLOUD, _MOBILE) else 0.0
            step[s, t] = np.where(upper, np.asarray(move)[..., None] + seg[t], np.inf)
    if not problem.same_side_splits:
        for s in (_MOBILE, _CLOUD):
            step[s, s, 1:] = np.inf  # after the first segment, every segment switches sides
    return EdgeCosts(step, np.array([0.0, down[n]]))


def _cost_to_go(edges: EdgeCosts) -> tuple[np.ndarray, np.ndarray]:
    """Least cost from every state to the end, and the argmin move (flat index over ``(t, j - b)``)."""
    step, n = edges.step, edges.step.shape[-1]
    value = np.empty((n + 1, 2))
    value[n] = edges.final
    choice = np.zeros((n, 2), dtype=np.int64)
    both = np.arange(2)
    for b in range(n - 1, -1, -1):
        total = (step[:, :, b, b:] + value[b + 1 :].T[None]).reshape(2, -1)
        k = np.argmin(total, axis=1)  # first minimum: mobile before cloud, shorter segment first
        value[b] = total[both, k]
        choice[b] = k
    return value, choice


def _scalar_dp(edges: EdgeCosts) -> Solution:
    value, choice = _cost_to_go(edges)
    n = edges.step.shape[-1]
    segments = []
    b, s = 0, _MOBILE
    while b < n:
        k = int(choice[b, s])
        t, j = divmod(k, n - b)
        segments.append(Segment(b, b + j, SIDES[t]))
        b, s = b + j + 1, t
    return Solution(tuple(segments), float(value[0, _MOBILE]))


def _pareto(vecs: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels no other label is at least as good as in every column; ties keep the earliest."""
    order = np.lexsort(vecs.T[::-1])  # stable: equal vectors stay in insertion order
    vecs, ids = vecs[order], ids[order]
    if vecs.shape[1] == 1:
        return vecs[:1], ids[:1]
    if vecs.shape[1] == 2:
        best_before = np.minimum.accumulate(vecs[:, 1])
        keep = np.concatenate(([True], vecs[1:, 1] < best_before[:-1]))
        return vecs[keep], ids[keep]
    # Sorted lexicographically, a dominating label comes first; dominance is transitive, so test every earlier one.
    keep = np.ones(len(vecs), dtype=bool)
    for lo in range(0, len(vecs), 512):
        block = vecs[lo : lo + 512]
        dominated = np.all(vecs[None, :, :] <= block[:, None, :], axis=2)  # [row in block, earlier row]
        dominated &= np.arange(len(vecs))[None, :] < (lo + np.arange(len(block)))[:, None]
        keep[lo : lo + len(block)] = ~dominated.any(axis=1)
    return vecs[keep], ids[keep]


def _policies(step: np.ndarray, final: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cost-to-go under a few scalarised objectives, and what each metric totals along those policies.

    Policy 0 minimises metric 0, policy ``r < k`` minimises metric ``r`` (their values are exact lower bounds),
    the others minimise weighted sums (their paths are candidate complete schedules for the upper bound).

    Returns
    -------
    value
        ``(k, n + 1, 2)``: least cost to go of each single metric.
    totals
        ``(P, n + 1, 2, k)``: every metric summed along policy ``p`` from each state to the end.
    """
    k, n = step.shape[0], step.shape[-1]
    finite = np.where(np.isfinite(step), step, 0.0)
    scale = np.array([max(float(finite[r].mean()), 1e-300) for r in range(k)])
    weights = [np.eye(k)[r] for r in range(k)]
    for lam in (0.1, 0.3, 1.0, 3.0, 10.0):
        weights.append(np.concatenate(([1.0], np.full(k - 1, lam))) / scale)
        if k > 2:
            weights += [(np.eye(k)[0] + lam * np.eye(k)[r]) / scale for r in range(1, k)]
    w = np.array(weights)
    n_pol = len(w)
    wstep = np.einsum("pk,kstbj->pstbj", w, finite)
    wstep[:, np.isinf(step).any(axis=0)] = np.inf  # forbidden moves stay forbidden under every weighting
    value = np.empty((n_pol, n + 1, 2))
    value[:, n] = w @ final
    totals = np.empty((n_pol, n + 1, 2, k))
    totals[:, n] = final.T[None]
    pol, sides = np.arange(n_pol)[:, None], np.arange(2)[None, :]
    for b in range(n - 1, -1, -1):
        width = n - b
        flat = (wstep[:, :, :, b, b:] + value[:, None, b + 1 :, :].transpose(0, 1, 3, 2)).reshape(n_pol, 2, -1)
        choice = np.argmin(flat, axis=2)
        value[:, b] = np.take_along_axis(flat, choice[..., None], axis=2)[..., 0]
        t, j = choice // width, b + choice % width
        totals[:, b] = np.moveaxis(finite[:, sides, t, b, j], 0, -1) + totals[pol, j + 1, t]
    return value[:k], totals


def _label_dp(objective: EdgeCosts, limited: list[tuple[EdgeCosts, float]]) -> Solution | None:
    """Exact constrained shortest path: minimise the first metric with each limited metric <= its limit.

    Labels are pruned by Pareto dominance, by the limits (quantity so far + least to go > limit) and by the
    objective (objective so far + least to go > best complete schedule found, up to REL_TOL): none of the pruned
    labels can lead to an optimal schedule.
    """
    all_edges = [objective] + [e for e, _ in limited]
    step = np.stack([e.step for e in all_edges])  # (k, 2, 2, n, n)
    final = np.stack([e.final for e in all_edges])  # (k, 2)
    n, k = step.shape[-1], len(all_edges)
    bounds = np.array([np.inf] + [limit + REL_TOL * abs(limit) + ABS_TOL for _, limit in limited])
    least, totals = _policies(step, final)
    best = np.inf  # the objective of the best complete feasible schedule seen so far

    def improve(candidates: np.ndarray) -> None:
        nonlocal best
        values = candidates[..., 0][np.all(candidates[..., 1:] <= bounds[1:], axis=-1)]
        if values.size:
            best = min(best, float(values.min()))

    improve(totals[:, 0, _MOBILE])
    # Label tree: node -> (parent, first, last, side); node 0 is the start.
    parent, first, last, side = [-1], [0], [-1], [_MOBILE]
    start = (np.zeros((1, k)), np.zeros(1, dtype=np.int64))
    pending: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]] = {(0, _MOBILE): [start]}
    for b in range(n):
        for s in (_MOBILE, _CLOUD):
            blocks = pending.pop((b, s), None)
            if not blocks:
                continue
            vecs, ids = np.concatenate([v for v, _ in blocks]), np.concatenate([i for _, i in blocks])
            alive = vecs[:, 0] + least[0, b, s] <= best + REL_TOL * abs(best) + ABS_TOL
            if not alive.any():
                continue
            vecs, ids = _pareto(vecs[alive], ids[alive])
            for t in (_MOBILE, _CLOUD):
                new = vecs[:, None, :] + step[:, s, t, b, b:].T[None]  # (labels, j - b, k)
                improve(new[:, :, None, :] + totals[:, b + 1 :, t].transpose(1, 0, 2)[None])
                ok = np.all(new + least[:, b + 1 :, t].T[None] <= bounds, axis=2)
                ok &= new[:, :, 0] + least[0, b + 1 :, t][None, :] <= best + REL_TOL * abs(best) + ABS_TOL
                for jj in np.flatnonzero(ok.any(axis=0)):
                    rows = ok[:, jj]
                    count = int(rows.sum())
                    node_ids = np.arange(len(parent), len(parent) + count)
                    parent.extend(ids[rows].tolist())
                    first.extend([b] * count)
                    last.extend([b + int(jj)] * count)
                    side.extend([t] * count)
                    pending.setdefault((b + int(jj) + 1, t), []).append((new[rows, jj, :], node_ids))
    done_vecs, done_ids = [], []
    for s in (_MOBILE, _CLOUD):
        for vecs, ids in pending.get((n, s), []):
            vecs = vecs + final[:, s]
            ok = np.all(vecs <= bounds, axis=1)
            done_vecs.append(vecs[ok])
            done_ids.append(ids[ok])
    if not done_vecs or sum(len(v) for v in done_vecs) == 0:
        return None
    vecs, ids = np.concatenate(done_vecs), np.concatenate(done_ids)
    winner = int(np.lexsort(vecs.T[::-1])[0])
    segments = []
    node = int(ids[winner])
    while node > 0:
        segments.append(Segment(first[node], last[node], SIDES[side[node]]))
        node = parent[node]
    return Solution(tuple(reversed(segments)), float(vecs[winner, 0]))


def dp_optimum(problem: OffloadProblem, metric: str, limits: Mapping[str, float]) -> Solution | None:
    """The schedule minimising ``metric`` subject to ``limits`` (the problem's own limits are ignored).

    Parameters
    ----------
    problem
        The problem (costs, network, power).
    metric
        What to minimise: ``"latency"``, ``"energy"`` or ``"cloud"``.
    limits
        Upper limits by metric name, e.g. ``{"energy": 40.0, "cloud": 50.0}``; may be empty.

    Returns
    -------
    Solution or None
        ``None`` when no schedule meets the limits.
    """
    objective = edge_costs(problem, metric)
    limited = [(edge_costs(problem, name), float(limit)) for name, limit in limits.items() if name != metric]
    if metric in limits:  # a limit on the objective itself: the minimum either meets it or nothing does
        solution = _label_dp(objective, limited) if limited else _scalar_dp(objective)
        bound = float(limits[metric])
        if solution is None or solution.objective_value > bound + REL_TOL * abs(bound) + ABS_TOL:
            return None
        return solution
    return _label_dp(objective, limited) if limited else _scalar_dp(objective)


def metric_range(problem: OffloadProblem, metric: str) -> tuple[float, float]:
    """Least and greatest ``metric`` over all schedules (no limits)."""
    edges = edge_costs(problem, metric)
    least = float(_cost_to_go(edges)[0][0, _MOBILE])
    negated = EdgeCosts(np.where(np.isfinite(edges.step), -edges.step, np.inf), -edges.final)
    most = -float(_cost_to_go(negated)[0][0, _MOBILE])
    return least, most


def solve_dp(problem: OffloadProblem) -> Solution | None:
    """The optimal schedule of ``problem`` by dynamic programming (``None``: infeasible)."""
    return dp_optimum(problem, problem.objective, problem.limits)
