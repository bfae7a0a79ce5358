"""The one entry point: :func:`solve` picks a solver by name, checks its answer and explains infeasibility."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from edgeplan.errors import EdgeplanError, InfeasibleError, InvalidInputError, SolverError
from edgeplan.planners.offload.brute import solve_brute
from edgeplan.planners.offload.costs import OffloadProblem
from edgeplan.planners.offload.dp import dp_optimum, solve_dp
from edgeplan.planners.offload.ilp import solve_ilp
from edgeplan.planners.offload.plan import (
    OffloadPlan,
    Solution,
    check_plan,
    cloud_only,
    evaluate_schedule,
    mobile_only,
    transfers_of,
    within_limit,
)

__all__ = ["SOLVERS", "OffloadInfeasibleError", "solve"]

SOLVERS: dict[str, Callable[[OffloadProblem], Solution | None]] = {
    "dp": solve_dp,
    "ilp": solve_ilp,
    "brute": solve_brute,
}
"""The interchangeable solvers: exact DP (default), the paper's ILP (HiGHS), brute force (``n <= 14``)."""


class OffloadInfeasibleError(InfeasibleError):
    """No schedule meets the limits; says which limit and the smallest value that would be feasible.

    Attributes
    ----------
    constraint
        ``"battery_mj"`` (the battery budget, eq. 13; a cloud-time limit alone is always feasible, since the
        mobile-only schedule uses no cloud time).
    limit
        The infeasible value.
    smallest_feasible
        The least mobile energy of any schedule meeting the other limit: the smallest feasible budget.
    smallest_cloud_ms
        With both limits: the least cloud time of any schedule within the battery budget (the smallest feasible
        cloud-time limit keeping the budget), ``None`` if no cloud-time limit makes the budget feasible.
    """

    def __init__(
        self,
        message: str,
        *,
        constraint: str,
        limit: float,
        smallest_feasible: float,
        smallest_cloud_ms: float | None = None,
    ) -> None:
        super().__init__(message)
        self.constraint = constraint
        self.limit = limit
        self.smallest_feasible = smallest_feasible
        self.smallest_cloud_ms = smallest_cloud_ms


def _round_up(value: float) -> str:
    """``value`` with 6 significant digits, rounded up (so that the printed value is itself feasible)."""
    if value <= 0 or not math.isfinite(value):
        return f"{value:g}"
    quantum = 10.0 ** (math.floor(math.log10(value)) - 5)
    return f"{math.ceil(value / quantum - 1e-9) * quantum:.6g}"


def _explain_infeasible(problem: OffloadProblem, solver: str) -> EdgeplanError:
    """The error to raise when ``solver`` found no schedule; exact numbers come from the DP."""
    battery, cloud = problem.battery_mj, problem.cloud_ms
    if battery is None:
        return SolverError(f"solver {solver!r} found no plan, but the mobile-only plan meets the cloud-time limit")
    least = dp_optimum(problem, "energy", {} if cloud is None else {"cloud": float(cloud)})
    if least is None:
        return SolverError("the mobile-only plan uses no cloud time, yet the DP found no plan under the cloud limit")
    if within_limit(least.objective_value, battery):
        return SolverError(
            f"solver {solver!r} found no plan, but dynamic programming finds one within every limit "
            f"(mobile energy {least.objective_value:g} mJ); report this as a bug"
        )
    where = "" if cloud is None else f" with cloud time <= {cloud:g} ms"
    message = (
        f"battery budget (eq. 13) {battery:g} mJ is infeasible: the least mobile energy of any plan{where} is "
        f"{least.objective_value:.6g} mJ; raise --battery-mj to at least {_round_up(least.objective_value)}"
    )
    smallest_cloud = None
    if cloud is not None:
        alternative = dp_optimum(problem, "cloud", {"energy": float(battery)})
        if alternative is None:
            unlimited = dp_optimum(problem, "energy", {})
            least_any = math.nan if unlimited is None else unlimited.objective_value
            message += (
                f"; no cloud-time limit (eq. 14) makes the budget feasible: even with unlimited cloud time the least "
                f"mobile energy is {least_any:.6g} mJ"
            )
        else:
            smallest_cloud = alternative.objective_value
            message += (
                f"; or keep the budget and raise the cloud-time limit (eq. 14) --cloud-ms to at least "
                f"{_round_up(smallest_cloud)}"
            )
    return OffloadInfeasibleError(
        message,
        constraint="battery_mj",
        limit=float(battery),
        smallest_feasible=least.objective_value,
        smallest_cloud_ms=smallest_cloud,
    )


def solve(problem: OffloadProblem, solver: str = "dp") -> OffloadPlan:
    """The schedule of ``problem`` minimising its objective within its limits.

    Parameters
    ----------
    problem
        Costs, network, power, objective (latency or mobile energy) and the optional battery budget and
        cloud-time limit.
    solver
        ``"dp"`` (exact dynamic programming, default), ``"ilp"`` (the paper's ILP solved by HiGHS) or
        ``"brute"`` (all ``2 * 3**(n-1)`` schedules; ``n <= 14``). All return an optimal schedule; ties may be
        broken differently.

    Returns
    -------
    OffloadPlan
        The schedule, its cost recomputed by :func:`~edgeplan.planners.offload.plan.evaluate_schedule`, the
        mobile-only and cloud-only baselines and the solver's wall time.

    Raises
    ------
    InvalidInputError
        Unknown solver, or brute force asked for ``n > 14``.
    OffloadInfeasibleError
        No schedule meets the limits; the message names the limit and the smallest feasible value.
    SolverError
        The solver failed, or its answer did not pass :func:`~edgeplan.planners.offload.plan.check_plan`.
    """
    if solver not in SOLVERS:
        raise InvalidInputError(f"unknown offloading solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if not isinstance(problem, OffloadProblem):
        raise InvalidInputError(f"solve needs an OffloadProblem, got {type(problem).__name__}")
    start = time.perf_counter()
    solution = SOLVERS[solver](problem)
    solve_time_ms = (time.perf_counter() - start) * 1e3
    if solution is None:
        raise _explain_infeasible(problem, solver)
    n = problem.costs.n
    cost = evaluate_schedule(problem, solution.segments)
    achieved = cost.latency_ms if problem.objective == "latency" else cost.energy_mj
    if not math.isclose(solution.objective_value, achieved, rel_tol=1e-6, abs_tol=1e-6):
        raise SolverError(
            f"solver {solver!r} claims {problem.objective} {solution.objective_value!r} for its plan, which costs "
            f"{achieved!r}; report this as a bug"
        )
    plan = OffloadPlan(
        segments=tuple(solution.segments),
        transfers=transfers_of(problem, solution.segments),
        layer_names=problem.costs.layers,
        latency_ms=cost.latency_ms,
        energy_mj=cost.energy_mj,
        cloud_ms=cost.cloud_ms,
        objective=problem.objective,
        solver=solver,
        solve_time_ms=solve_time_ms,
        mobile_only=evaluate_schedule(problem, mobile_only(n)),
        cloud_only=evaluate_schedule(problem, cloud_only(n)),
        battery_budget_mj=problem.battery_mj,
        cloud_limit_ms=problem.cloud_ms,
        network=problem.network.name,
    )
    check = check_plan(problem, plan)
    if not (check.feasible and check.matches):
        raise SolverError(
            f"solver {solver!r} returned a plan that fails the independent check (feasible={check.feasible}, "
            f"matches={check.matches}, battery slack {check.battery_slack_mj} mJ, cloud slack "
            f"{check.cloud_slack_ms} ms); report this as a bug"
        )
    return plan
