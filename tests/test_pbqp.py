"""PBQP solvers: closed-form toys, every solver against brute force and the ILP, reductions, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplan.errors import InfeasibleError, InvalidInputError
from edgeplan.planners.pbqp import SHAPES, PBQPProblem, evaluate_assignment, random_instance, solve

INF = math.inf


def _close(a: float, b: float, rel: float = 1e-9) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def test_two_nodes_closed_form() -> None:
    # alone, node 0 prefers option 0 and node 1 option 1, but the pair (0, 1) costs 10: the optimum is (1, 1)
    p = PBQPProblem.build([[1.0, 2.0], [3.0, 1.0]], {(0, 1): [[0.0, 10.0], [0.0, 0.0]]})
    for solver in ("exact", "heuristic", "ilp", "brute"):
        s = solve(p, solver)
        assert s.assignment == (1, 1), solver
        assert s.cost == pytest.approx(3.0)
        assert s.optimal
    assert evaluate_assignment(p, (0, 1)) == pytest.approx(12.0)


def test_edge_given_reversed_is_transposed_and_duplicates_add() -> None:
    p = PBQPProblem.build([[0.0, 0.0], [0.0, 0.0, 0.0]], {(1, 0): np.arange(6.0).reshape(3, 2),
                                                          (0, 1): np.ones((2, 3))})
    assert list(p.edges) == [(0, 1)]
    np.testing.assert_array_equal(p.edges[(0, 1)], np.arange(6.0).reshape(3, 2).T + 1)
    assert evaluate_assignment(p, (1, 2)) == pytest.approx(6.0)


def test_isolated_nodes_use_r0_and_pick_the_minimum() -> None:
    p = PBQPProblem.build([[3.0, 1.0, INF], [INF, 5.0]])
    s = solve(p)
    assert s.assignment == (1, 1) and s.cost == pytest.approx(6.0)
    assert s.counts.r0 == 2 and s.counts.rn == 0 and s.branch_nodes == 0


def test_chain_and_residual_block_need_no_rn() -> None:
    chain = random_instance(3, 40, shape="chain")
    residual = random_instance(4, 60, shape="cnn")
    for p in (chain, residual):
        s = solve(p, "heuristic")
        assert s.counts.rn == 0 and s.optimal
        assert _close(s.cost, solve(p, "ilp").cost, 1e-7)


def test_k4_needs_rn_and_search_is_exact() -> None:
    # a complete graph on four nodes has no node of degree <= 2
    rng = np.random.default_rng(0)
    edges = {(u, v): rng.random((3, 3)) for u in range(4) for v in range(u + 1, 4)}
    p = PBQPProblem.build([rng.random(3) for _ in range(4)], edges)
    exact, brute = solve(p, "exact"), solve(p, "brute")
    assert exact.counts.rn >= 1
    assert _close(exact.cost, brute.cost) and exact.optimal
    assert solve(p, "heuristic").cost >= brute.cost - 1e-12


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("style", ["layout", "dense"])
def test_exact_matches_brute_force_on_seeded_instances(shape: str, style: str) -> None:
    for seed in range(15):
        p = random_instance(seed, 2 + seed % 7, shape=shape, style=style, options=(2, 5), forbidden=0.2)
        brute = solve(p, "brute")
        for solver in ("exact", "ilp"):
            s = solve(p, solver)
            assert s.optimal
            assert _close(s.cost, brute.cost, 1e-7), (shape, style, seed, solver)
            assert _close(evaluate_assignment(p, s.assignment), s.cost)
        h = solve(p, "heuristic")
        assert h.cost >= brute.cost - 1e-9 * max(1.0, brute.cost)
        if h.optimal:
            assert _close(h.cost, brute.cost)


@pytest.mark.parametrize(("shape", "n"), [("cnn", 120), ("cnn+chords", 80), ("random", 30)])
def test_exact_matches_ilp_on_larger_instances(shape: str, n: int) -> None:
    p = random_instance(7, n, shape=shape, options=(2, 10))
    exact, ilp = solve(p, "exact"), solve(p, "ilp")
    assert exact.optimal and ilp.optimal
    assert _close(exact.cost, ilp.cost, 1e-7)


costs_st = st.lists(st.one_of(st.floats(0, 100, allow_nan=False), st.just(INF)), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_property_exact_equals_brute_force(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 6))
    costs = [data.draw(costs_st) for _ in range(n)]
    edges = {}
    for u in range(n):
        for v in range(u + 1, n):
            if data.draw(st.booleans()):
                edges[(u, v)] = data.draw(st.lists(
                    st.lists(st.one_of(st.floats(0, 100, allow_nan=False), st.just(INF)),
                             min_size=len(costs[v]), max_size=len(costs[v])),
                    min_size=len(costs[u]), max_size=len(costs[u])))
    p = PBQPProblem.build(costs, edges)
    try:
        brute = solve(p, "brute")
    except InfeasibleError:
        for solver in ("exact", "heuristic", "ilp"):
            with pytest.raises(InfeasibleError):
                solve(p, solver)
        return
    for solver in ("exact", "ilp"):
        assert _close(solve(p, solver).cost, brute.cost, 1e-7)
    assert solve(p, "heuristic").cost >= brute.cost - 1e-9 * max(1.0, brute.cost)


def test_infeasible_names_the_node() -> None:
    p = PBQPProblem.build([[1.0], [INF, INF]], {(0, 1): [[0.0, 0.0]]}, names=["conv1", "conv2"])
    with pytest.raises(InfeasibleError, match="conv2"):
        solve(p)


def test_forbidden_pairs_can_make_it_infeasible() -> None:
    p = PBQPProblem.build([[1.0, 1.0], [1.0, 1.0]], {(0, 1): [[INF, INF], [INF, INF]]})
    for solver in ("exact", "heuristic", "ilp", "brute"):
        with pytest.raises(InfeasibleError):
            solve(p, solver)


def test_heuristic_dead_end_falls_back_to_the_search() -> None:
    # K4: RN fixes node 0 to its locally cheapest option 0, which forces nodes 1 and 2 to option 0, a forbidden pair
    swap = [[0.0, 1.0], [1.0, 0.0]]
    edges = {(0, 1): [[0.0, INF], [0.0, 0.0]], (0, 2): [[0.0, INF], [0.0, 0.0]], (1, 2): [[INF, 0.0], [0.0, 0.0]],
             (0, 3): swap, (1, 3): swap, (2, 3): swap}
    p = PBQPProblem.build([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]], edges)
    s = solve(p, "heuristic")
    assert s.solver == "exact" and s.optimal
    assert s.assignment[0] == 1 and _close(s.cost, solve(p, "brute").cost)


def test_time_limit_returns_an_unproven_incumbent() -> None:
    p = random_instance(1, 80, shape="random", options=(4, 8), mean_degree=5.0)
    s = solve(p, "exact", time_limit_s=0.0)
    assert not s.optimal
    assert _close(evaluate_assignment(p, s.assignment), s.cost)


@pytest.mark.parametrize(("costs", "edges", "match"), [
    ([[1.0, float("nan")]], {}, "NaN"),
    ([[]], {}, "no option"),
    ([[1.0], [1.0]], {(0, 0): [[1.0]]}, "self-loop"),
    ([[1.0], [1.0]], {(0, 5): [[1.0]]}, "does not exist"),
    ([[1.0, 2.0], [1.0]], {(0, 1): [[1.0, 2.0]]}, "expected"),
    ([[-INF]], {}, "-inf"),
])
def test_bad_instances_are_refused(costs: list, edges: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidInputError, match=match):
        PBQPProblem.build(costs, edges)


def test_bad_solver_assignment_and_brute_limit() -> None:
    p = random_instance(0, 12, options=(8, 8))
    with pytest.raises(InvalidInputError, match="unknown PBQP solver"):
        solve(p, "magic")
    with pytest.raises(InvalidInputError, match="brute force"):
        solve(p, "brute")
    with pytest.raises(InvalidInputError, match="entries"):
        evaluate_assignment(p, (0,))
    with pytest.raises(InvalidInputError, match="out of range"):
        evaluate_assignment(p, (99,) * 12)
