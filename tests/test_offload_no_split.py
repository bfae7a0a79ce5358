"""Schedules without same-side splits (edgeplan's default): dp, ilp and brute force agree, and every plan alternates."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edgeplan.errors import InfeasibleError
from edgeplan.planners.offload import OffloadCosts, OffloadProblem, check_plan, network_preset, solve
from edgeplan.planners.offload.costs import MobilePowerModel
from edgeplan.planners.offload.synthetic import LIMIT_KINDS, random_problem


def _solve_all(problem: OffloadProblem) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for solver in ("dp", "ilp", "brute"):
        try:
            plan = solve(problem, solver)
        except InfeasibleError:
            out[solver] = None
            continue
        check = check_plan(problem, plan)
        assert check.feasible and check.matches
        assert all(a.side != b.side for a, b in zip(plan.segments, plan.segments[1:], strict=False))
        out[solver] = plan.latency_ms if problem.objective == "latency" else plan.energy_mj
    return out


def test_random_instances_agree_without_same_side_splits() -> None:
    rng = np.random.default_rng(2018)
    for k in range(240):
        base = random_problem(rng, int(rng.integers(1, 9)), limits=LIMIT_KINDS[k % 4])
        problem = dataclasses.replace(base, same_side_splits=False)
        got = _solve_all(problem)
        values = [v for v in got.values() if v is not None]
        assert len(values) in (0, 3), got
        if values:
            assert max(values) == pytest.approx(min(values), rel=1e-6, abs=1e-9)
            # forbidding splits never helps: the paper's model is at least as good
            free = solve(base, "dp")
            assert (free.latency_ms if base.objective == "latency" else free.energy_mj) <= max(values) + 1e-9


def test_a_noise_split_is_not_taken() -> None:
    # two layers: running them apart on the mobile looks 10% cheaper than together (noise in the measurement)
    mobile = np.array([[5.0, 11.0], [np.nan, 5.0]])
    costs = OffloadCosts(("a", "b"), mobile, mobile * 100, (10**9, 10**9, 10**9))
    problem = OffloadProblem(costs, network_preset("wifi"), MobilePowerModel(1000.0))
    assert [s.side for s in solve(problem).segments] == ["mobile", "mobile"]
    merged = solve(dataclasses.replace(problem, same_side_splits=False))
    assert [(s.first, s.last, s.side) for s in merged.segments] == [(0, 1, "mobile")]
    assert merged.latency_ms == 11.0
