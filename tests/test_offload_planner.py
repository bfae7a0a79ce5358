"""The offloading planner: closed-form toy chains, DP / ILP / brute force agreement on seeded random instances, the
independent checker, infeasibility diagnostics, input validation, presets and lookup tables."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplan.errors import InfeasibleError, InvalidInputError
from edgeplan.planners.offload import (
    LookupOptions,
    MobilePowerModel,
    NetworkModel,
    OffloadCosts,
    OffloadInfeasibleError,
    OffloadProblem,
    Segment,
    check_plan,
    custom_network,
    evaluate_schedule,
    load_network_presets,
    lookup_table,
    network_preset,
    solve,
    transfers_of,
)
from edgeplan.planners.offload.brute import ScheduleTable, brute_optimum, enumerate_schedules
from edgeplan.planners.offload.ilp import solve_ilp
from edgeplan.planners.offload.synthetic import LIMIT_KINDS, random_problem

SOLVER_NAMES = ("dp", "ilp", "brute")

# A link where 1000 bytes take 1 ms each way and the radio draws 1000 mW: 1 mJ per ms on the link.
TOY_NET = NetworkModel(
    "toy", up_mbps=8.0, down_mbps=8.0, alpha_up_mw_per_mbps=0.0, alpha_down_mw_per_mbps=0.0, beta_mw=1000.0
)
TOY_POWER = MobilePowerModel(compute_mw=1000.0, idle_mw=0.0)  # 1 mJ per ms of mobile compute


def additive(per_layer: list[float]) -> np.ndarray:
    """Range latencies that are sums of per-layer latencies (NaN below the diagonal)."""
    n = len(per_layer)
    out = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(i, n):
            out[i, j] = sum(per_layer[i : j + 1])
    return out


def toy_problem(mobile: np.ndarray, cloud: np.ndarray, sizes: tuple[int, ...], **kw: object) -> OffloadProblem:
    n = mobile.shape[0]
    costs = OffloadCosts(tuple(f"L{k}" for k in range(n)), mobile, cloud, sizes)
    return OffloadProblem(costs, TOY_NET, TOY_POWER, **kw)  # type: ignore[arg-type]


def objective_of(problem: OffloadProblem, plan_latency: float, plan_energy: float) -> float:
    return plan_latency if problem.objective == "latency" else plan_energy


# ---------------------------------------------------------------- closed-form toy cases


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_one_layer_goes_to_the_cloud_when_cheaper(solver: str) -> None:
    # cloud: upload 2 ms + 1 ms + download 3 ms = 6 ms < 10 ms on the mobile
    problem = toy_problem(np.array([[10.0]]), np.array([[1.0]]), (2000, 3000))
    plan = solve(problem, solver)
    assert plan.segments == (Segment(0, 0, "cloud"),)
    assert plan.pattern == "C"
    assert plan.latency_ms == pytest.approx(6.0)
    assert plan.energy_mj == pytest.approx(5.0)  # radio only: 2 + 3 mJ, idle power 0
    assert plan.cloud_ms == pytest.approx(1.0)
    assert [t.direction for t in plan.transfers] == ["upload", "download"]
    assert plan.mobile_only.latency_ms == pytest.approx(10.0)
    assert plan.cloud_only.latency_ms == pytest.approx(6.0)


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_one_layer_stays_on_the_mobile_when_transfers_dominate(solver: str) -> None:
    problem = toy_problem(np.array([[10.0]]), np.array([[1.0]]), (5000, 5000))
    plan = solve(problem, solver)
    assert plan.segments == (Segment(0, 0, "mobile"),)
    assert plan.latency_ms == pytest.approx(10.0)
    assert plan.transfers == ()


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_cheap_cloud_and_tiny_tensors_run_everything_on_the_cloud(solver: str) -> None:
    problem = toy_problem(additive([10.0, 10.0, 10.0, 10.0]), additive([1.0] * 4), (100,) * 5)
    plan = solve(problem, solver)
    assert plan.pattern == "C"
    assert plan.latency_ms == pytest.approx(0.1 + 4.0 + 0.1)
    assert plan.layers_on("cloud") == ("L0", "L1", "L2", "L3")


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_huge_tensors_keep_everything_on_the_mobile(solver: str) -> None:
    problem = toy_problem(additive([5.0, 5.0, 5.0]), additive([0.1] * 3), (10**7,) * 4)
    plan = solve(problem, solver)
    assert plan.pattern == "M"
    assert plan.latency_ms == pytest.approx(15.0)
    assert plan.layers_on("cloud") == ()


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_mobile_cloud_mobile_optimum(solver: str) -> None:
    # Inputs and outputs are big (1000 ms on the link), the middle tensors small (1 ms); layer 1 is slow on the
    # mobile. Best: L0 on the mobile (1), upload (1), L1 on the cloud (0.5), download (1), L2 on the mobile (1).
    problem = toy_problem(additive([1.0, 100.0, 1.0]), additive([0.5, 0.5, 0.5]), (10**6, 1000, 1000, 10**6))
    plan = solve(problem, solver)
    assert plan.segments == (Segment(0, 0, "mobile"), Segment(1, 1, "cloud"), Segment(2, 2, "mobile"))
    assert plan.pattern == "M→C→M"
    assert plan.latency_ms == pytest.approx(4.5)
    assert [(t.boundary, t.direction) for t in plan.transfers] == [(1, "upload"), (2, "download")]
    assert plan.to_dict()["segments"][1]["layers"] == ["L1"]


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_splitting_a_same_side_range_pays_off_when_ranges_are_not_additive(solver: str) -> None:
    mobile = np.array([[1.0, 5.0], [np.nan, 1.0]])  # running both layers in one go is slower than one by one
    problem = toy_problem(mobile, np.array([[50.0, 50.0], [np.nan, 50.0]]), (10, 10, 10))
    plan = solve(problem, solver)
    assert plan.segments == (Segment(0, 0, "mobile"), Segment(1, 1, "mobile"))
    assert plan.pattern == "M"  # same-side segments merge in the pattern
    assert plan.latency_ms == pytest.approx(2.0)
    assert plan.transfers == ()


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_energy_objective_can_differ_from_latency(solver: str) -> None:
    # Mobile: 10 ms, 10 mJ. Cloud: 3 + 5 + 3 = 11 ms, 6 mJ of radio energy.
    mobile, cloud, sizes = np.array([[10.0]]), np.array([[5.0]]), (3000, 3000)
    assert solve(toy_problem(mobile, cloud, sizes, objective="latency"), solver).pattern == "M"
    plan = solve(toy_problem(mobile, cloud, sizes, objective="energy"), solver)
    assert plan.pattern == "C"
    assert plan.energy_mj == pytest.approx(6.0)


def test_idle_power_counts_while_the_cloud_computes() -> None:
    problem = toy_problem(np.array([[10.0]]), np.array([[5.0]]), (3000, 3000), objective="energy")
    problem = dataclasses.replace(problem, power=MobilePowerModel(compute_mw=1000.0, idle_mw=200.0))
    cost = evaluate_schedule(problem, (Segment(0, 0, "cloud"),))
    assert cost.energy_mj == pytest.approx(6.0 + 0.2 * 5.0)
    assert cost.compute_ms == pytest.approx(5.0)
    assert cost.transfer_ms == pytest.approx(6.0)


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_battery_budget_forces_the_cloud(solver: str) -> None:
    problem = toy_problem(np.array([[10.0]]), np.array([[5.0]]), (3000, 3000), battery_mj=8.0)
    plan = solve(problem, solver)
    assert plan.pattern == "C"
    assert plan.latency_ms == pytest.approx(11.0)
    check = check_plan(problem, plan)
    assert check.feasible and check.matches
    assert check.battery_slack_mj == pytest.approx(2.0)
    assert check.cloud_slack_ms is None


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_cloud_limit_keeps_work_on_the_mobile(solver: str) -> None:
    problem = toy_problem(additive([10.0, 10.0]), additive([1.0, 1.0]), (100, 100, 100), cloud_ms=1.5)
    plan = solve(problem, solver)
    assert plan.cloud_ms <= 1.5
    assert plan.latency_ms == pytest.approx(0.1 + 1.0 + 0.1 + 10.0)  # one layer on the cloud, one on the mobile


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_infeasible_battery_budget_names_the_constraint_and_the_least_energy(solver: str) -> None:
    problem = toy_problem(np.array([[10.0]]), np.array([[5.0]]), (3000, 3000), battery_mj=5.0)
    with pytest.raises(OffloadInfeasibleError) as info:
        solve(problem, solver)
    err = info.value
    assert isinstance(err, InfeasibleError)
    assert err.constraint == "battery_mj"
    assert err.smallest_feasible == pytest.approx(6.0)
    assert "battery budget (eq. 13)" in str(err)
    assert "raise --battery-mj to at least 6" in str(err)


def test_infeasible_with_both_limits_reports_the_cloud_limit_that_would_do() -> None:
    # Cloud limit 0: only the mobile (10 mJ); a 7 mJ budget needs the cloud (6 mJ), i.e. a cloud limit of 5 ms.
    problem = toy_problem(np.array([[10.0]]), np.array([[5.0]]), (3000, 3000), battery_mj=7.0, cloud_ms=0.0)
    with pytest.raises(OffloadInfeasibleError) as info:
        solve(problem)
    assert info.value.smallest_feasible == pytest.approx(10.0)
    assert info.value.smallest_cloud_ms == pytest.approx(5.0)
    assert "cloud-time limit (eq. 14)" in str(info.value) and "--cloud-ms to at least 5" in str(info.value)
    no_help = dataclasses.replace(problem, battery_mj=3.0)
    with pytest.raises(OffloadInfeasibleError) as info:
        solve(no_help)
    assert info.value.smallest_cloud_ms is None
    assert "no cloud-time limit (eq. 14) makes the budget feasible" in str(info.value)


# ---------------------------------------------------------------- seeded random instances, all solvers


def _expected(table: ScheduleTable, problem: OffloadProblem) -> float | None:
    best = brute_optimum(table, problem.objective, problem.limits)
    return None if best is None else best.objective_value


@pytest.mark.parametrize("chunk", range(10))
def test_random_instances_dp_ilp_brute_agree(chunk: int) -> None:
    """1000 instances (100 per chunk), n in 1..8, each limit kind a quarter of them, checked against the brute-force
    table of all schedules."""
    rng = np.random.default_rng(1000 + chunk)
    for k in range(100):
        n = int(rng.integers(1, 9))
        problem = random_problem(rng, n, limits=LIMIT_KINDS[k % 4])
        table = enumerate_schedules(problem)
        expected = _expected(table, problem)
        for solver in SOLVER_NAMES:
            if expected is None:
                with pytest.raises(OffloadInfeasibleError) as info:
                    solve(problem, solver)
                least = brute_optimum(table, "energy", {k: v for k, v in problem.limits.items() if k == "cloud"})
                assert least is not None
                assert info.value.smallest_feasible == pytest.approx(least.objective_value, rel=1e-9, abs=1e-12)
                within = brute_optimum(table, "cloud", {"energy": problem.battery_mj or 0.0})
                if problem.cloud_ms is None or within is None:
                    assert info.value.smallest_cloud_ms is None
                else:
                    assert info.value.smallest_cloud_ms == pytest.approx(within.objective_value, rel=1e-9, abs=1e-12)
                continue
            plan = solve(problem, solver)
            check = check_plan(problem, plan)
            assert check.feasible and check.matches, (chunk, k, solver)
            value = objective_of(problem, plan.latency_ms, plan.energy_mj)
            rel = 1e-6 if solver == "ilp" else 1e-9
            assert value == pytest.approx(expected, rel=rel, abs=1e-9), (chunk, k, solver)


def test_paper_ilp_rows_alone_and_continuous_links_give_the_same_optimum() -> None:
    rng = np.random.default_rng(99)
    for k in range(80):
        problem = random_problem(rng, int(rng.integers(1, 7)), limits=LIMIT_KINDS[k % 4])
        expected = _expected(enumerate_schedules(problem), problem)
        for strengthen, binary_links in ((False, True), (False, False), (True, False)):
            got = solve_ilp(problem, strengthen=strengthen, binary_links=binary_links)
            if expected is None:
                assert got is None
            else:
                assert got is not None
                cost = evaluate_schedule(problem, got.segments)
                assert objective_of(problem, cost.latency_ms, cost.energy_mj) == pytest.approx(expected, rel=1e-6)


def test_dp_is_deterministic() -> None:
    problem = random_problem(np.random.default_rng(5), 20, limits="both")
    try:
        first = solve(problem).segments
    except OffloadInfeasibleError:
        pytest.skip("instance infeasible")
    assert all(solve(problem).segments == first for _ in range(3))


def test_explicitly_infeasible_budgets_report_the_exact_least_energy() -> None:
    rng = np.random.default_rng(7)
    for k in range(60):
        problem = random_problem(rng, int(rng.integers(1, 8)), limits="cloud" if k % 2 else "none")
        table = enumerate_schedules(problem)
        least = brute_optimum(table, "energy", problem.limits)
        assert least is not None
        tight = dataclasses.replace(problem, battery_mj=least.objective_value * 0.9)
        with pytest.raises(OffloadInfeasibleError) as info:
            solve(tight, "dp" if k % 3 else "ilp")
        assert info.value.smallest_feasible == pytest.approx(least.objective_value, rel=1e-9)
        printed = float(re.search(r"raise --battery-mj to at least ([0-9.e+-]+)", str(info.value)).group(1))  # type: ignore[union-attr]
        assert least.objective_value <= printed <= least.objective_value * (1 + 1e-5)
        for budget in (least.objective_value, printed):  # the exact value and the printed one are both feasible
            exact = dataclasses.replace(problem, battery_mj=budget)
            assert check_plan(exact, solve(exact)).feasible


# ---------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), objective=st.sampled_from(["latency", "energy"]))
def test_unconstrained_optimum_beats_both_baselines(seed: int, n: int, objective: str) -> None:
    problem = random_problem(np.random.default_rng(seed), n, objective=objective)
    plan = solve(problem)
    best = objective_of(problem, plan.latency_ms, plan.energy_mj)
    for base in (plan.mobile_only, plan.cloud_only):
        assert best <= objective_of(problem, base.latency_ms, base.energy_mj) * (1 + 1e-12) + 1e-12


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 9), kind=st.sampled_from(["battery", "cloud", "both"]))
def test_adding_a_limit_never_improves_the_objective(seed: int, n: int, kind: str) -> None:
    limited = random_problem(np.random.default_rng(seed), n, limits=kind)
    free = dataclasses.replace(limited, battery_mj=None, cloud_ms=None)
    free_plan = solve(free)
    try:
        plan = solve(limited)
    except OffloadInfeasibleError:
        return
    assert objective_of(limited, plan.latency_ms, plan.energy_mj) >= objective_of(
        free, free_plan.latency_ms, free_plan.energy_mj
    ) * (1 - 1e-12)


# ---------------------------------------------------------------- the checker


def test_check_plan_catches_wrong_numbers_and_violated_limits() -> None:
    problem = toy_problem(additive([1.0, 100.0, 1.0]), additive([0.5] * 3), (10**6, 1000, 1000, 10**6))
    plan = solve(problem)
    assert check_plan(problem, plan).matches
    assert not check_plan(problem, dataclasses.replace(plan, latency_ms=plan.latency_ms * 0.99)).matches
    assert not check_plan(problem, dataclasses.replace(plan, transfers=plan.transfers[:1])).matches
    tighter = dataclasses.replace(problem, cloud_ms=0.1)
    check = check_plan(tighter, dataclasses.replace(plan, cloud_limit_ms=0.1))
    assert not check.feasible
    assert check.cloud_slack_ms == pytest.approx(0.1 - 0.5)


def test_plan_to_dict_is_json() -> None:
    problem = toy_problem(additive([1.0, 100.0, 1.0]), additive([0.5] * 3), (10**6, 1000, 1000, 10**6))
    data = json.loads(json.dumps(solve(problem, "ilp").to_dict()))
    assert data["pattern"] == "M→C→M"
    assert data["solver"] == "ilp"
    assert data["transfers"][0] == {
        "boundary": 1,
        "direction": "upload",
        "size_bytes": 1000,
        "time_ms": 1.0,
        "energy_mj": 1.0,
    }


# ---------------------------------------------------------------- bad input


def test_costs_validation_names_the_entry() -> None:
    good = additive([1.0, 2.0, 3.0])
    bad = good.copy()
    bad[1, 2] = -1.0
    with pytest.raises(InvalidInputError, match=r"mobile_ms\[1, 2\] is -1.0"):
        OffloadCosts(("a", "b", "c"), bad, good, (1, 1, 1, 1))
    bad[1, 2] = np.inf
    with pytest.raises(InvalidInputError, match=r"cloud_ms\[1, 2\] is inf"):
        OffloadCosts(("a", "b", "c"), good, bad, (1, 1, 1, 1))
    with pytest.raises(InvalidInputError, match="shape"):
        OffloadCosts(("a", "b"), good, good, (1, 1, 1))
    with pytest.raises(InvalidInputError, match="n \\+ 1 = 4"):
        OffloadCosts(("a", "b", "c"), good, good, (1, 1, 1))
    with pytest.raises(InvalidInputError, match=r"boundary_bytes\[2\] is 1.5"):
        OffloadCosts(("a", "b", "c"), good, good, (1, 1, 1.5, 1))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="at least one layer"):
        OffloadCosts((), np.zeros((0, 0)), np.zeros((0, 0)), (0,))
    lower_nan = good.copy()
    lower_nan[2, 0] = -5.0  # below the diagonal: ignored
    assert OffloadCosts(("a", "b", "c"), lower_nan, good, (1, 1, 1, 1)).n == 3


def test_problem_and_network_validation() -> None:
    costs = OffloadCosts(("a",), np.array([[1.0]]), np.array([[1.0]]), (1, 1))
    with pytest.raises(InvalidInputError, match="objective 'speed'"):
        OffloadProblem(costs, TOY_NET, TOY_POWER, objective="speed")
    with pytest.raises(InvalidInputError, match="battery_mj"):
        OffloadProblem(costs, TOY_NET, TOY_POWER, battery_mj=-1.0)
    with pytest.raises(InvalidInputError, match="cloud_ms"):
        OffloadProblem(costs, TOY_NET, TOY_POWER, cloud_ms=math.nan)
    with pytest.raises(InvalidInputError, match="up_mbps is 0"):
        NetworkModel("x", 0, 1.0, 1.0, 1.0, 1.0)
    with pytest.raises(InvalidInputError, match="compute_mw"):
        MobilePowerModel(compute_mw=-3.0)


def test_unknown_solver_and_oversized_brute_force() -> None:
    problem = toy_problem(np.array([[1.0]]), np.array([[1.0]]), (1, 1))
    with pytest.raises(InvalidInputError, match="dp, ilp, brute"):
        solve(problem, "gurobi")
    big = random_problem(np.random.default_rng(0), 15)
    with pytest.raises(InvalidInputError, match="n = 15 > 14"):
        solve(big, "brute")
    assert solve(big).latency_ms > 0


def test_schedules_must_cover_the_chain() -> None:
    problem = toy_problem(additive([1.0, 1.0, 1.0]), additive([1.0] * 3), (1, 1, 1, 1))
    with pytest.raises(InvalidInputError, match="starts at layer 2; expected 1"):
        evaluate_schedule(problem, (Segment(0, 0, "mobile"), Segment(2, 2, "cloud")))
    with pytest.raises(InvalidInputError, match="ends at layer 1"):
        transfers_of(problem, (Segment(0, 1, "mobile"),))
    with pytest.raises(InvalidInputError, match="empty"):
        evaluate_schedule(problem, ())
    with pytest.raises(InvalidInputError, match="side 'edge'"):
        Segment(0, 1, "edge")
    with pytest.raises(InvalidInputError, match="last is before first"):
        Segment(2, 1, "mobile")


# ---------------------------------------------------------------- costs helpers, presets, lookup tables


def test_costs_round_trip_through_json() -> None:
    costs = random_problem(np.random.default_rng(3), 4).costs
    data = json.loads(json.dumps(costs.to_dict()))
    assert data["mobile_ms"][2][0] is None and data["mobile_ms"][0][2] is not None
    again = OffloadCosts.from_dict(data)
    rows, cols = np.triu_indices(4)
    assert np.array_equal(again.mobile_ms[rows, cols], costs.mobile_ms[rows, cols])
    assert np.array_equal(again.cloud_ms[rows, cols], costs.cloud_ms[rows, cols])
    assert again.boundary_bytes == costs.boundary_bytes and again.layers == costs.layers
    with pytest.raises(InvalidInputError, match="missing key"):
        OffloadCosts.from_dict({"layers": ["a"]})


def test_cloud_speedup() -> None:
    costs = OffloadCosts(("a", "b"), additive([2.0, 4.0]), additive([9.0, 9.0]), (1, 1, 1))
    fast = costs.with_cloud_speedup(2.0, "server")
    assert fast.cloud_ms[0, 1] == pytest.approx(3.0) and fast.cloud_label == "server"
    with pytest.raises(InvalidInputError):
        costs.with_cloud_speedup(0.0)


def test_network_presets_are_the_paper_tables() -> None:
    presets = load_network_presets()
    assert sorted(presets) == ["3g", "4g", "wifi"]
    wifi = network_preset("Wi-Fi")
    assert (wifi.down_mbps, wifi.up_mbps) == (54.97, 18.88)
    assert (wifi.alpha_up_mw_per_mbps, wifi.alpha_down_mw_per_mbps, wifi.beta_mw) == (283.17, 137.01, 132.86)
    g3 = network_preset("3G")
    assert (g3.down_mbps, g3.up_mbps, g3.alpha_up_mw_per_mbps, g3.alpha_down_mw_per_mbps, g3.beta_mw) == (
        2.0275,
        1.1,
        868.98,
        122.12,
        817.88,
    )
    g4 = network_preset("4g")
    assert (g4.down_mbps, g4.up_mbps, g4.alpha_up_mw_per_mbps, g4.alpha_down_mw_per_mbps, g4.beta_mw) == (
        13.76,
        5.85,
        438.39,
        51.97,
        1288.04,
    )
    assert "Table 2" in g4.source and "Table 3" in g4.source
    assert g4.upload_power_mw == pytest.approx(438.39 * 5.85 + 1288.04)
    assert g4.upload_ms(1_000_000) == pytest.approx(8e6 / 5.85e6 * 1e3)
    assert g4.download_mj(1000) == pytest.approx(g4.download_power_mw * g4.download_ms(1000) / 1000)
    with pytest.raises(InvalidInputError, match="3g, 4g, wifi"):
        network_preset("5g")
    custom = custom_network(3.0, 9.0, like="4g")
    assert (custom.up_mbps, custom.down_mbps, custom.beta_mw) == (3.0, 9.0, 1288.04)
    with pytest.raises(InvalidInputError):
        custom_network(0.0, 9.0)


def test_lookup_table_matches_solve_at_every_grid_point() -> None:
    problem = random_problem(np.random.default_rng(11), 6, objective="latency")
    entries = lookup_table(problem.costs, problem.power, "latency", [0.5, 20.0], [1.0, 80.0], like="4g")
    assert [(e.up_mbps, e.down_mbps) for e in entries] == [(0.5, 1.0), (0.5, 80.0), (20.0, 1.0), (20.0, 80.0)]
    for entry in entries:
        direct = solve(
            OffloadProblem(
                problem.costs, custom_network(entry.up_mbps, entry.down_mbps, like="4g"), problem.power, "latency"
            )
        )
        assert entry.latency_ms == pytest.approx(direct.latency_ms)
        assert entry.pattern == direct.pattern and entry.segments == direct.segments
    assert json.loads(json.dumps([e.to_dict() for e in entries]))[0]["infeasible"] == ""
    starved = lookup_table(problem.costs, problem.power, "latency", [1.0], [1.0],
                           options=LookupOptions(battery_mj=1e-9))
    assert starved[0].pattern == "" and starved[0].latency_ms is None and "battery budget" in starved[0].infeasible
    with pytest.raises(InvalidInputError, match="empty"):
        lookup_table(problem.costs, problem.power, "latency", [], [1.0])


def test_package_loads_without_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, edgeplan.planners.offload as o; o.solve; "
        "assert 'torch' not in sys.modules and 'onnx' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
