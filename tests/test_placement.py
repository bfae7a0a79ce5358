"""Stage placement: the exact search equals brute force, the bounds hold, the baselines are never better."""

from __future__ import annotations

import numpy as np
import pytest

from edgeplan.errors import InfeasibleError, InvalidInputError
from edgeplan.planners.partition import (
    PlacementProblem,
    bottleneck_ms,
    matching_bound,
    place_brute,
    place_exact,
    place_greedy,
    place_random,
    theorem1_bound,
)


def _problem(rng: np.random.Generator, n: int, k: int) -> PlacementProblem:
    b = rng.uniform(1.0, 50.0, size=(n, n))
    b = (b + b.T) / 2
    transfers = tuple(float(t) for t in rng.lognormal(12, 1.5, size=k - 1))
    return PlacementProblem(transfers, tuple(tuple(float(x) for x in row) for row in b))


def test_closed_form() -> None:
    # three nodes; link 0-1 is fast (100), the others slow (1); one transfer of 1 MB: 0-1 wins, 80 ms
    bw = ((0.0, 100.0, 1.0), (100.0, 0.0, 1.0), (1.0, 1.0, 0.0))
    problem = PlacementProblem((1e6,), bw)
    best = place_exact(problem)
    assert set(best.nodes) == {0, 1} and best.bottleneck_ms == pytest.approx(80.0)
    assert theorem1_bound(problem) == pytest.approx(80.0) == matching_bound(problem)


def test_exact_equals_brute_force_and_bounds_hold() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(2, 8))
        problem = _problem(rng, n, int(rng.integers(2, n + 1)))
        exact, brute = place_exact(problem), place_brute(problem)
        assert exact.bottleneck_ms == pytest.approx(brute.bottleneck_ms, rel=1e-9)
        assert bottleneck_ms(problem, exact.nodes) == exact.bottleneck_ms
        assert theorem1_bound(problem) <= matching_bound(problem) * (1 + 1e-12) <= exact.bottleneck_ms * (1 + 1e-9)
        assert place_greedy(problem).bottleneck_ms >= exact.bottleneck_ms * (1 - 1e-9)
        assert place_random(problem, seed=3).bottleneck_ms >= exact.bottleneck_ms * (1 - 1e-9)


def test_bad_placements_and_too_many_stages() -> None:
    bw = ((0.0, 5.0), (5.0, 0.0))
    problem = PlacementProblem((10.0,), bw)
    with pytest.raises(InvalidInputError, match="distinct"):
        bottleneck_ms(problem, (0, 0))
    with pytest.raises(InfeasibleError, match="3 stages need 3 nodes"):
        PlacementProblem((1.0, 2.0), bw)


def test_simulated_cluster_is_calibrated_and_symmetric() -> None:
    from edgeplan.planners.partition.simulate import cluster_positions, random_cluster, shannon_mbps

    assert float(shannon_mbps(np.array(80.0))) == pytest.approx(5.5)
    assert float(shannon_mbps(np.array(0.2))) == float(shannon_mbps(np.array(1.0)))  # clipped at 1 m
    assert float(shannon_mbps(np.array(40.0))) > 5.5 > float(shannon_mbps(np.array(150.0)))
    bw = np.array(random_cluster(20, seed=4))
    assert bw.shape == (20, 20) and np.allclose(bw, bw.T) and (np.diag(bw) == 0).all()
    assert (bw[~np.eye(20, dtype=bool)] > 0).all()
    assert np.array_equal(bw, np.array(random_cluster(20, seed=4)))
    for model in ("relay", "pairwise"):
        other = np.array(random_cluster(20, seed=4, link=model))
        assert np.allclose(other, other.T) and not np.array_equal(other, bw)
    # each link model from the nodes' positions (same seed) and the capacity function, computed independently
    xy = np.array(cluster_positions(20, seed=4))
    cap = shannon_mbps(np.hypot(xy[:, 0], xy[:, 1]))  # each node's capacity to the router
    off = ~np.eye(20, dtype=bool)
    u, v = np.nonzero(off)
    # "min": a link is as fast as the slower of its two nodes
    assert np.allclose(bw[u, v], np.minimum(cap[u], cap[v]), rtol=1e-12)
    # so a node's links to every faster node are equal (its own capacity), and the fastest node's links are the
    # other nodes' capacities
    slowest, fastest = int(np.argmin(cap)), int(np.argmax(cap))
    assert np.allclose(bw[slowest][off[slowest]], cap[slowest], rtol=1e-12)
    assert np.allclose(bw[fastest][off[fastest]], cap[off[fastest]], rtol=1e-12)
    relay = np.array(random_cluster(20, seed=4, link="relay"))
    assert np.allclose(relay[u, v], cap[u] * cap[v] / (cap[u] + cap[v]), rtol=1e-12)
    pairwise = np.array(random_cluster(20, seed=4, link="pairwise"))
    assert np.allclose(pairwise[u, v], shannon_mbps(np.hypot(*(xy[u] - xy[v]).T)), rtol=1e-12)
    with pytest.raises(InvalidInputError, match="link model"):
        random_cluster(3, seed=0, link="mesh")


def _general(rng: np.random.Generator, n: int, k: int) -> PlacementProblem | None:
    b = rng.uniform(1.0, 50.0, size=(n, n))
    b = (b + b.T) / 2
    allowed = rng.random((k, n)) < 0.7
    allowed[np.arange(k), rng.integers(0, n, size=k)] = True
    stage_ms = rng.uniform(0.0, 300.0, size=(k, n))
    transfers = tuple(float(t) for t in rng.lognormal(12, 1.5, size=k - 1))
    return PlacementProblem(transfers, tuple(map(tuple, b.tolist())), tuple(map(tuple, stage_ms.tolist())),
                            tuple(tuple(bool(x) for x in row) for row in allowed))


def test_compute_and_memory_restrictions_match_brute_force_with_dfs_and_cpsat() -> None:
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(150):
        n = int(rng.integers(2, 7))
        problem = _general(rng, n, int(rng.integers(1, n + 1)))
        assert problem is not None
        try:
            brute = place_brute(problem)
        except InfeasibleError:
            with pytest.raises(InfeasibleError):
                place_exact(problem)
            continue
        for budget in (0, 20_000):  # 0: every step goes to CP-SAT
            exact = place_exact(problem, dfs_budget=budget)
            assert exact.proven_optimal
            assert exact.bottleneck_ms == pytest.approx(brute.bottleneck_ms, rel=1e-9)
            assert all(problem.can_hold(i, v) for i, v in enumerate(exact.nodes))
        assert matching_bound(problem) <= brute.bottleneck_ms * (1 + 1e-9)
        checked += 1
    assert checked > 50


def test_exact_at_fifty_nodes_is_proven_and_cpsat_agrees() -> None:
    from edgeplan.planners.partition.simulate import random_cluster

    rng = np.random.default_rng(2)
    for seed in range(3):
        problem = PlacementProblem(tuple(float(t) for t in rng.lognormal(12, 1.5, size=9)),
                                   random_cluster(50, seed=seed, link="pairwise"))
        dfs, cpsat = place_exact(problem), place_exact(problem, dfs_budget=0)
        assert dfs.proven_optimal and cpsat.proven_optimal
        assert dfs.bottleneck_ms == pytest.approx(cpsat.bottleneck_ms, rel=1e-9)
        assert dfs.bottleneck_ms >= matching_bound(problem) * (1 - 1e-12)


def test_stage_that_fits_nowhere_is_named() -> None:
    bw = ((0.0, 5.0), (5.0, 0.0))
    with pytest.raises(InfeasibleError, match="stage 1 fits on no node"):
        PlacementProblem((10.0,), bw, allowed=((True, True), (False, False)))
    with pytest.raises(InvalidInputError, match="one row per stage"):
        PlacementProblem((10.0,), bw, stage_ms=((1.0, 1.0),))
