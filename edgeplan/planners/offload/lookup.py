"""Plans over a bandwidth grid, stored as a table on the phone (paper end of §3.2)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edgeplan.errors import InfeasibleError, InvalidInputError
from edgeplan.planners.offload.costs import MobilePowerModel, OffloadCosts, OffloadProblem
from edgeplan.planners.offload.plan import Segment
from edgeplan.planners.offload.presets import custom_network
from edgeplan.planners.offload.solve import solve

__all__ = ["LookupEntry", "LookupOptions", "lookup_table"]


@dataclass(frozen=True)
class LookupEntry:
    """The plan for one (uplink, downlink) speed pair.

    Attributes
    ----------
    up_mbps, down_mbps
        The grid point.
    pattern
        The plan's side sequence (``"M→C"``, ...); ``""`` when no plan meets the limits.
    segments
        The schedule (empty when infeasible).
    latency_ms, energy_mj, cloud_ms
        Its cost (``None`` when infeasible).
    infeasible
        The infeasibility message, ``""`` when a plan exists.
    """

    up_mbps: float
    down_mbps: float
    pattern: str
    segments: tuple[Segment, ...]
    latency_ms: float | None
    energy_mj: float | None
    cloud_ms: float | None
    infeasible: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "up_mbps": self.up_mbps,
            "down_mbps": self.down_mbps,
            "pattern": self.pattern,
            "segments": [{"first": s.first, "last": s.last, "side": s.side} for s in self.segments],
            "latency_ms": self.latency_ms,
            "energy_mj": self.energy_mj,
            "cloud_ms": self.cloud_ms,
            "infeasible": self.infeasible,
        }


def _grid(name: str, values: Sequence[float]) -> list[float]:
    out = [float(v) for v in values]
    if not out:
        raise InvalidInputError(f"lookup table: {name} is empty; give at least one speed")
    bad = [v for v in out if not (math.isfinite(v) and v > 0)]
    if bad:
        raise InvalidInputError(f"lookup table: {name} contains {bad[0]!r}; speeds must be finite and > 0")
    return out


@dataclass(frozen=True)
class LookupOptions:
    """The limits and the solver of every plan in a :func:`lookup_table`.

    Attributes
    ----------
    battery_mj, cloud_ms
        The optional limits (eqs. 13 and 14).
    solver
        ``"dp"``, ``"ilp"`` or ``"brute"``.
    same_side_splits
        As in :class:`~edgeplan.planners.offload.costs.OffloadProblem`.
    """

    battery_mj: float | None = None
    cloud_ms: float | None = None
    solver: str = "dp"
    same_side_splits: bool = True


def lookup_table(
    costs: OffloadCosts,
    power: MobilePowerModel,
    objective: str,
    up_mbps_grid: Sequence[float],
    down_mbps_grid: Sequence[float],
    *,
    like: str = "wifi",
    options: LookupOptions | None = None,
) -> list[LookupEntry]:
    """Solve the offloading problem at every (uplink, downlink) speed pair of a grid.

    Parameters
    ----------
    costs, power, objective
        As in :class:`~edgeplan.planners.offload.costs.OffloadProblem`.
    up_mbps_grid, down_mbps_grid
        The speeds, in Mbit/s; every pair is solved.
    like
        The network preset whose radio power model is used at every grid point.
    options
        The limits and the solver; default :class:`LookupOptions`.

    Returns
    -------
    list of LookupEntry
        Row-major: uplink speeds outer, downlink inner. A grid point with no feasible plan is an entry with
        ``pattern == ""`` and the reason in ``infeasible``.

    Raises
    ------
    InvalidInputError
        Empty or non-positive grid, unknown preset, objective or solver.
    """
    options = options or LookupOptions()
    entries = []
    for up in _grid("up_mbps_grid", up_mbps_grid):
        for down in _grid("down_mbps_grid", down_mbps_grid):
            problem = OffloadProblem(costs, custom_network(up, down, like=like), power, objective, options.battery_mj,
                                     options.cloud_ms, options.same_side_splits)
            try:
                plan = solve(problem, solver=options.solver)
            except InfeasibleError as e:
                entries.append(LookupEntry(up, down, "", (), None, None, None, infeasible=str(e)))
                continue
            entries.append(
                LookupEntry(up, down, plan.pattern, plan.segments, plan.latency_ms, plan.energy_mj, plan.cloud_ms)
            )
    return entries
