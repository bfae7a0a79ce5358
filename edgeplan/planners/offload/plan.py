"""Schedules, their cost, the plan the solvers return, and the independent checker.

A schedule is a sequence of :class:`Segment` objects covering layers ``0..n-1`` contiguously in order. Consecutive
segments may be on the same side (the paper allows ``m[i, j] = m[j+1, k] = 1``): nothing crosses the link there,
but their costs are ``T[i, j] + T[j+1, k]``, not ``T[i, k]``. :func:`evaluate_schedule` is a plain loop, written
apart from the solvers, and :func:`check_plan` uses it to recompute every number a plan states.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from edgeplan.errors import InvalidInputError
from edgeplan.planners.offload.costs import OffloadProblem

__all__ = [
    "ABS_TOL",
    "REL_TOL",
    "SIDES",
    "OffloadPlan",
    "PlanCheck",
    "ScheduleCost",
    "Segment",
    "Solution",
    "Transfer",
    "check_plan",
    "close",
    "cloud_only",
    "evaluate_schedule",
    "mobile_only",
    "transfers_of",
    "within_limit",
]

SIDES = ("mobile", "cloud")
"""Where a segment runs."""

REL_TOL = 1e-9
ABS_TOL = 1e-9
"""Tolerances for comparing recomputed numbers and for testing a limit (a value may exceed it by this much)."""


def within_limit(value: float, limit: float) -> bool:
    """Whether ``value <= limit`` up to :data:`REL_TOL` and :data:`ABS_TOL` (float sums differ by order)."""
    return value <= limit + REL_TOL * abs(limit) + ABS_TOL


def close(a: float, b: float) -> bool:
    """Whether two recomputed numbers agree up to :data:`REL_TOL` and :data:`ABS_TOL`."""
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


@dataclass(frozen=True)
class Segment:
    """Layers ``first..last`` (inclusive) run in one go on ``side`` (``"mobile"`` or ``"cloud"``)."""

    first: int
    last: int
    side: str

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise InvalidInputError(f"segment {self.first}..{self.last}: side {self.side!r} is not 'mobile' or 'cloud'")
        for name in ("first", "last"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"segment {self.first}..{self.last}: {name} is {value!r}; need an int >= 0")
        if self.last < self.first:
            raise InvalidInputError(f"segment {self.first}..{self.last}: last is before first")


@dataclass(frozen=True)
class Transfer:
    """Data crossing the link at boundary ``boundary`` (before layer ``boundary``; ``n``: the outputs)."""

    boundary: int
    direction: Literal["upload", "download"]
    size_bytes: int
    time_ms: float
    energy_mj: float


@dataclass(frozen=True)
class ScheduleCost:
    """What a schedule costs.

    Attributes
    ----------
    latency_ms
        End to end: ``compute_ms + transfer_ms``.
    energy_mj
        Mobile energy: compute, radio and idle-while-the-cloud-computes.
    cloud_ms
        Total cloud compute time (the quantity of the cloud-time limit, eq. 14).
    compute_ms
        Compute time on both sides.
    transfer_ms
        Time on the link.
    """

    latency_ms: float
    energy_mj: float
    cloud_ms: float
    compute_ms: float
    transfer_ms: float


@dataclass(frozen=True)
class Solution:
    """What a solver returns: a schedule and the objective value the solver itself computed for it."""

    segments: tuple[Segment, ...]
    objective_value: float


def _check_cover(n: int, segments: Sequence[Segment]) -> None:
    if not segments:
        raise InvalidInputError("schedule is empty; it must cover layers 0..n-1")
    expected = 0
    for k, seg in enumerate(segments):
        if not isinstance(seg, Segment):
            raise InvalidInputError(f"schedule entry {k} is a {type(seg).__name__}, not a Segment")
        if seg.first != expected:
            raise InvalidInputError(
                f"schedule segment {k} ({seg.first}..{seg.last}) starts at layer {seg.first}; expected {expected}"
            )
        expected = seg.last + 1
    if expected != n:
        raise InvalidInputError(f"schedule ends at layer {expected - 1}; the network has layers 0..{n - 1}")


def transfers_of(problem: OffloadProblem, segments: Sequence[Segment]) -> tuple[Transfer, ...]:
    """The transfers a schedule needs, in order.

    Parameters
    ----------
    problem
        The problem (its boundary sizes and network).
    segments
        A schedule covering layers ``0..n-1``.

    Returns
    -------
    tuple of Transfer
        An upload of the inputs if the first segment is on the cloud, one transfer at each side switch, a download
        of the outputs if the last segment is on the cloud.

    Raises
    ------
    InvalidInputError
        The segments do not cover ``0..n-1`` contiguously.
    """
    costs, net = problem.costs, problem.network
    _check_cover(costs.n, segments)
    sides = ["mobile", *(s.side for s in segments), "mobile"]
    starts = [s.first for s in segments] + [costs.n]
    out = []
    for k, boundary in enumerate(starts):
        before, after = sides[k], sides[k + 1]
        if before == after:
            continue
        size = costs.boundary_bytes[boundary]
        if after == "cloud":
            out.append(Transfer(boundary, "upload", size, net.upload_ms(size), net.upload_mj(size)))
        else:
            out.append(Transfer(boundary, "download", size, net.download_ms(size), net.download_mj(size)))
    return tuple(out)


def evaluate_schedule(problem: OffloadProblem, segments: Sequence[Segment]) -> ScheduleCost:
    """Latency, mobile energy and cloud time of a schedule, by a plain loop over its segments.

    Parameters
    ----------
    problem
        The problem.
    segments
        A schedule covering layers ``0..n-1`` contiguously.

    Returns
    -------
    ScheduleCost

    Raises
    ------
    InvalidInputError
        The segments do not cover ``0..n-1`` contiguously.
    """
    costs, power = problem.costs, problem.power
    transfers = transfers_of(problem, segments)
    compute_ms = energy_mj = cloud_ms = 0.0
    for seg in segments:
        if seg.side == "mobile":
            t = float(costs.mobile_ms[seg.first, seg.last])
            energy_mj += power.compute_mw * t / 1000.0
        else:
            t = float(costs.cloud_ms[seg.first, seg.last])
            energy_mj += power.idle_mw * t / 1000.0
            cloud_ms += t
        compute_ms += t
    transfer_ms = 0.0
    for tr in transfers:
        transfer_ms += tr.time_ms
        energy_mj += tr.energy_mj
    return ScheduleCost(compute_ms + transfer_ms, energy_mj, cloud_ms, compute_ms, transfer_ms)


def mobile_only(n: int) -> tuple[Segment, ...]:
    """The schedule running all ``n`` layers on the mobile in one go."""
    return (Segment(0, n - 1, "mobile"),)


def cloud_only(n: int) -> tuple[Segment, ...]:
    """The schedule running all ``n`` layers on the cloud in one go."""
    return (Segment(0, n - 1, "cloud"),)


@dataclass(frozen=True)
class OffloadPlan:
    """An optimal schedule with its cost, the baselines and the limits it was solved under.

    Attributes
    ----------
    segments, transfers
        The schedule and the transfers it needs.
    layer_names
        The layer names of the costs (for :meth:`layers_on` and :meth:`to_dict`).
    latency_ms, energy_mj, cloud_ms
        What the schedule costs (recomputed by :func:`evaluate_schedule`).
    objective, solver
        What was minimised, and by which solver (``"dp"``, ``"ilp"`` or ``"brute"``).
    solve_time_ms
        Wall time of the solver alone.
    mobile_only, cloud_only
        The two baselines: one segment on the mobile, one on the cloud.
    battery_budget_mj, cloud_limit_ms
        The limits of eqs. 13 and 14 (``None``: none).
    network
        Name of the link.
    """

    segments: tuple[Segment, ...]
    transfers: tuple[Transfer, ...]
    layer_names: tuple[str, ...]
    latency_ms: float
    energy_mj: float
    cloud_ms: float
    objective: str
    solver: str
    solve_time_ms: float
    mobile_only: ScheduleCost
    cloud_only: ScheduleCost
    battery_budget_mj: float | None = None
    cloud_limit_ms: float | None = None
    network: str = ""

    def layers_on(self, side: str) -> tuple[str, ...]:
        """Names of the layers the plan runs on ``side`` (``"mobile"`` or ``"cloud"``), in order."""
        if side not in SIDES:
            raise InvalidInputError(f"side {side!r} is not 'mobile' or 'cloud'")
        return tuple(self.layer_names[k] for s in self.segments if s.side == side for k in range(s.first, s.last + 1))

    @property
    def pattern(self) -> str:
        """The side sequence with same-side runs merged: ``"M"``, ``"C"``, ``"M→C"``, ``"M→C→M"``, ..."""
        letters: list[str] = []
        for seg in self.segments:
            letter = "M" if seg.side == "mobile" else "C"
            if not letters or letters[-1] != letter:
                letters.append(letter)
        return "→".join(letters)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, with the layer names of each segment."""
        return {
            "pattern": self.pattern,
            "objective": self.objective,
            "solver": self.solver,
            "network": self.network,
            "latency_ms": self.latency_ms,
            "energy_mj": self.energy_mj,
            "cloud_ms": self.cloud_ms,
            "solve_time_ms": self.solve_time_ms,
            "battery_budget_mj": self.battery_budget_mj,
            "cloud_limit_ms": self.cloud_limit_ms,
            "segments": [
                {
                    "first": s.first,
                    "last": s.last,
                    "side": s.side,
                    "layers": list(self.layer_names[s.first : s.last + 1]),
                }
                for s in self.segments
            ],
            "transfers": [asdict(t) for t in self.transfers],
            "mobile_only": asdict(self.mobile_only),
            "cloud_only": asdict(self.cloud_only),
        }


@dataclass(frozen=True)
class PlanCheck:
    """What :func:`check_plan` recomputed.

    Attributes
    ----------
    latency_ms, energy_mj, cloud_ms
        Recomputed cost of the plan's schedule.
    battery_slack_mj, cloud_slack_ms
        Limit minus value (negative: violated); ``None`` where the problem has no such limit.
    feasible
        Every limit holds (up to :data:`REL_TOL` and :data:`ABS_TOL`).
    matches
        The plan's stated numbers, transfers and baselines equal the recomputed ones.
    """

    latency_ms: float
    energy_mj: float
    cloud_ms: float
    battery_slack_mj: float | None
    cloud_slack_ms: float | None
    feasible: bool
    matches: bool


def check_plan(problem: OffloadProblem, plan: OffloadPlan) -> PlanCheck:
    """Recompute a plan's cost and feasibility from scratch and compare with what it states.

    Parameters
    ----------
    problem
        The problem the plan claims to solve.
    plan
        The plan.

    Returns
    -------
    PlanCheck

    Raises
    ------
    InvalidInputError
        The plan's segments do not cover the problem's layers.
    """
    n = problem.costs.n
    cost = evaluate_schedule(problem, plan.segments)
    battery_slack = None if problem.battery_mj is None else problem.battery_mj - cost.energy_mj
    cloud_slack = None if problem.cloud_ms is None else problem.cloud_ms - cost.cloud_ms
    feasible = (problem.battery_mj is None or within_limit(cost.energy_mj, problem.battery_mj)) and (
        problem.cloud_ms is None or within_limit(cost.cloud_ms, problem.cloud_ms)
    )
    if not problem.same_side_splits:
        feasible &= all(a.side != b.side for a, b in zip(plan.segments, plan.segments[1:], strict=False))
    numbers = [
        (plan.latency_ms, cost.latency_ms),
        (plan.energy_mj, cost.energy_mj),
        (plan.cloud_ms, cost.cloud_ms),
    ]
    for stated, base in ((plan.mobile_only, mobile_only(n)), (plan.cloud_only, cloud_only(n))):
        again = evaluate_schedule(problem, base)
        numbers += list(zip(_fields(stated), _fields(again), strict=True))
    transfers = transfers_of(problem, plan.segments)
    same_transfers = len(transfers) == len(plan.transfers) and all(
        a.boundary == b.boundary
        and a.direction == b.direction
        and a.size_bytes == b.size_bytes
        and close(a.time_ms, b.time_ms)
        and close(a.energy_mj, b.energy_mj)
        for a, b in zip(transfers, plan.transfers, strict=True)
    )
    matches = (
        same_transfers
        and all(close(a, b) for a, b in numbers)
        and plan.battery_budget_mj == problem.battery_mj
        and plan.cloud_limit_ms == problem.cloud_ms
        and plan.objective == problem.objective
        and plan.layer_names == problem.costs.layers
    )
    return PlanCheck(cost.latency_ms, cost.energy_mj, cost.cloud_ms, battery_slack, cloud_slack, feasible, matches)


def _fields(cost: ScheduleCost) -> tuple[float, ...]:
    return (cost.latency_ms, cost.energy_mj, cost.cloud_ms, cost.compute_ms, cost.transfer_ms)
