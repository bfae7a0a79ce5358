"""Brute force over every schedule, vectorised with numpy across schedules (for tests and small chains).

A schedule is coded by an integer: its lowest base-2 digit is the side of the first segment, then one base-3 digit
per inner boundary ``b = 1..n-1``: 0 no cut, 1 cut and stay on the same side, 2 cut and switch sides. There are
``2 * 3**(n-1)`` of them (354,294 for ``n = 12``). The costs of all schedules are accumulated in a loop over the
layer positions with arrays over the schedules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.planners.offload.costs import OffloadProblem
from edgeplan.planners.offload.plan import ABS_TOL, REL_TOL, SIDES, Segment, Solution

__all__ = [
    "MAX_BRUTE_LAYERS",
    "ScheduleTable",
    "brute_optimum",
    "decode_schedule",
    "enumerate_schedules",
    "solve_brute",
]

MAX_BRUTE_LAYERS = 14
"""The longest chain brute force accepts (``2 * 3**13`` = 3.2 million schedules)."""


@dataclass(frozen=True)
class ScheduleTable:
    """The cost of every schedule of a problem, indexed by schedule code (see :func:`decode_schedule`)."""

    n: int
    latency_ms: np.ndarray
    energy_mj: np.ndarray
    cloud_ms: np.ndarray
    same_side_cut: np.ndarray | None = None

    def metric(self, name: str) -> np.ndarray:
        """The column for ``"latency"``, ``"energy"`` or ``"cloud"``."""
        columns = {"latency": self.latency_ms, "energy": self.energy_mj, "cloud": self.cloud_ms}
        if name not in columns:
            raise InvalidInputError(f"metric {name!r} is unknown; choose one of {', '.join(columns)}")
        return columns[name]


def decode_schedule(code: int, n: int) -> tuple[Segment, ...]:
    """The segments of schedule number ``code`` of an ``n``-layer chain."""
    side, rest = code % 2, code // 2
    segments, start = [], 0
    for b in range(1, n):
        rest, action = divmod(rest, 3)
        if action:
            segments.append(Segment(start, b - 1, SIDES[side]))
            start = b
            side ^= action == 2
    segments.append(Segment(start, n - 1, SIDES[side]))
    return tuple(segments)


def enumerate_schedules(problem: OffloadProblem) -> ScheduleTable:
    """Latency, mobile energy and cloud time of all ``2 * 3**(n-1)`` schedules.

    Raises
    ------
    InvalidInputError
        ``n > MAX_BRUTE_LAYERS``.
    """
    costs, net, power = problem.costs, problem.network, problem.power
    n = costs.n
    if n > MAX_BRUTE_LAYERS:
        raise InvalidInputError(
            f"brute force enumerates 2 * 3**(n-1) schedules and refuses n = {n} > {MAX_BRUTE_LAYERS}; use solver 'dp'"
        )
    size = np.asarray(costs.boundary_bytes, dtype=np.float64)
    up_ms = size * 8.0 / (net.up_mbps * 1e6) * 1e3
    down_ms = size * 8.0 / (net.down_mbps * 1e6) * 1e3
    up_mj, down_mj = net.upload_power_mw * up_ms / 1000.0, net.download_power_mw * down_ms / 1000.0
    code = np.arange(2 * 3 ** (n - 1), dtype=np.int64)
    on_cloud = (code % 2).astype(bool)
    rest = code // 2
    start = np.zeros_like(code)
    latency = np.where(on_cloud, up_ms[0], 0.0)
    energy = np.where(on_cloud, up_mj[0], 0.0)
    cloud = np.zeros(len(code))
    same_side_cut = np.zeros(len(code), dtype=bool)

    def close_segment(mask: np.ndarray | None, last: int) -> None:
        t_mobile = costs.mobile_ms[:, last][start]
        t_cloud = costs.cloud_ms[:, last][start]
        t = np.where(on_cloud, t_cloud, t_mobile)
        e = np.where(on_cloud, power.idle_mw * t_cloud, power.compute_mw * t_mobile) / 1000.0
        c = np.where(on_cloud, t_cloud, 0.0)
        if mask is not None:
            t, e, c = np.where(mask, t, 0.0), np.where(mask, e, 0.0), np.where(mask, c, 0.0)
        latency[:] += t
        energy[:] += e
        cloud[:] += c

    for b in range(1, n):
        action = rest % 3
        rest //= 3
        cut = action != 0
        same_side_cut |= action == 1
        close_segment(cut, b - 1)
        switch = action == 2
        latency += np.where(switch, np.where(on_cloud, down_ms[b], up_ms[b]), 0.0)
        energy += np.where(switch, np.where(on_cloud, down_mj[b], up_mj[b]), 0.0)
        on_cloud ^= switch
        start = np.where(cut, b, start)
    close_segment(None, n - 1)
    latency += np.where(on_cloud, down_ms[n], 0.0)
    energy += np.where(on_cloud, down_mj[n], 0.0)
    return ScheduleTable(n, latency, energy, cloud, same_side_cut)


def brute_optimum(table: ScheduleTable, metric: str, limits: Mapping[str, float],
                  same_side_splits: bool = True) -> Solution | None:
    """The schedule of ``table`` minimising ``metric`` subject to ``limits`` (``None``: none meets them).

    Ties go to the lowest schedule code. ``same_side_splits=False`` skips schedules with two consecutive
    segments on one side.
    """
    ok = np.ones(len(table.latency_ms), dtype=bool)
    if not same_side_splits and table.same_side_cut is not None:
        ok &= ~table.same_side_cut
    for name, limit in limits.items():
        ok &= table.metric(name) <= limit + REL_TOL * abs(limit) + ABS_TOL
    if not ok.any():
        return None
    values = np.where(ok, table.metric(metric), np.inf)
    best = int(np.argmin(values))
    return Solution(decode_schedule(best, table.n), float(values[best]))


def solve_brute(problem: OffloadProblem) -> Solution | None:
    """The optimal schedule of ``problem`` by enumerating all of them (``None``: infeasible).

    Raises
    ------
    InvalidInputError
        ``n > MAX_BRUTE_LAYERS``.
    """
    return brute_optimum(enumerate_schedules(problem), problem.objective, problem.limits, problem.same_side_splits)
