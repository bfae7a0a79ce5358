"""The paper's k-path placement and baselines, and edgeplan's own planner, against brute force and the optimum."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from edgeplan.errors import InfeasibleError, InvalidInputError
from edgeplan.planners.partition import (
    PartitionProblem,
    PlacementProblem,
    bottleneck_ms,
    joint,
    place_brute,
    place_exact,
    shortest_partition_path,
)
from edgeplan.planners.partition.joint import joint_greedy, joint_random, plan_own
from edgeplan.planners.partition.kpath import classify, colour_coding_path, max_threshold_path, place_kpath
from edgeplan.planners.partition.simulate import random_cluster


def _bw(rng: np.random.Generator, n: int) -> tuple[tuple[float, ...], ...]:
    b = rng.uniform(1.0, 50.0, size=(n, n))
    return tuple(map(tuple, ((b + b.T) / 2).tolist()))


def _partition_problem(rng: np.random.Generator, m: int, limit_share: float) -> PartitionProblem:
    sizes = rng.uniform(1.0, 100.0, size=m)
    memory = tuple(tuple(float(sizes[a : b + 1].sum()) if a <= b else 0.0 for b in range(m)) for a in range(m))
    limit = max(float(sizes.max()), float(sizes.sum()) * limit_share)
    transfers = tuple(float(t) for t in rng.lognormal(12, 1.5, size=m))
    return PartitionProblem(tuple(f"p{k}" for k in range(m)), transfers, memory, limit)


def test_classes_follow_quantiles_and_the_threshold_rule() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert classify(values, values, 1) == [0, 0, 0, 0]
    assert classify(values, values, 2) == [0, 0, 1, 1]
    assert classify([2.5], values, 2) == [1]  # at or above the threshold: the class itself (eq. 8)
    with pytest.raises(InvalidInputError):
        classify(values, values, 0)


def _is_path(adjacency: list[int], path: tuple[int, ...]) -> bool:
    return len(set(path)) == len(path) and all(adjacency[u] >> v & 1 for u, v in itertools.pairwise(path))


def test_colour_coding_finds_paths_that_exist_and_only_valid_ones() -> None:
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(2, 7)
        adjacency = [0] * n
        for u, v in itertools.combinations(range(n), 2):
            if rng.random() < 0.5:
                adjacency[u] |= 1 << v
                adjacency[v] |= 1 << u
        length = rng.randint(1, n)
        start = rng.choice([None, rng.randrange(n)])
        end = rng.choice([None, rng.randrange(n)])
        exists = any(_is_path(adjacency, p) and (start is None or p[0] == start) and (end is None or p[-1] == end)
                     for p in itertools.permutations(range(n), length))
        found = colour_coding_path(adjacency, length, (1 << n) - 1, start, end, trials=200, rng=random.Random(0))
        if found is not None:
            assert _is_path(adjacency, found) and len(found) == length
            assert (start is None or found[0] == start) and (end is None or found[-1] == end)
        assert (found is not None) == exists  # 200 balanced colourings of at most 7 vertices miss nothing here


def test_max_threshold_path_maximises_the_weakest_link() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(3, 7))
        bw = _bw(rng, n)
        links = list(itertools.combinations(range(n), 2))
        length = int(rng.integers(2, n + 1))
        path = max_threshold_path(bw, links, length, (1 << n) - 1, trials=200)
        assert path is not None
        best = max(min(bw[u][v] for u, v in itertools.pairwise(p)) for p in itertools.permutations(range(n), length))
        assert min(bw[u][v] for u, v in itertools.pairwise(path)) == pytest.approx(best)


def test_kpath_placements_are_valid_and_never_beat_the_optimum() -> None:
    rng = np.random.default_rng(4)
    for _ in range(150):
        n = int(rng.integers(2, 7))
        k = int(rng.integers(1, n + 1))
        problem = PlacementProblem(tuple(float(t) for t in rng.lognormal(12, 1.5, size=k - 1)), _bw(rng, n))
        classes = int(rng.integers(1, 6))
        placement = place_kpath(problem, classes=classes, seed=int(rng.integers(100)))
        assert placement.bottleneck_ms == bottleneck_ms(problem, placement.nodes)
        assert placement.bottleneck_ms >= place_brute(problem).bottleneck_ms * (1 - 1e-9)
        assert 1 <= placement.classes_used <= classes


def test_kpath_is_optimal_when_one_link_class_decides() -> None:
    # one transfer: Alg. 2 puts it on the best link, which is optimal (Theorem 1 is tight)
    bw = random_cluster(20, seed=3, link="pairwise")
    problem = PlacementProblem((1e6,), bw)
    assert place_kpath(problem, classes=3).bottleneck_ms == pytest.approx(place_exact(problem).bottleneck_ms)


def test_kpath_refuses_compute_and_memory() -> None:
    bw = ((0.0, 5.0), (5.0, 0.0))
    with pytest.raises(InvalidInputError, match="own"):
        place_kpath(PlacementProblem((1.0,), bw, stage_ms=((1.0, 1.0), (1.0, 1.0))))


def _joint_brute(problem: PartitionProblem, bw: tuple[tuple[float, ...], ...]) -> float:
    """Every cutting of the points and every placement of it (the joint optimum), for small cases."""
    m, best = len(problem.points), float("inf")
    for mask in itertools.product((False, True), repeat=m - 1):
        ends = [k for k in range(m - 1) if mask[k]] + [m - 1]
        runs = list(zip([0] + [e + 1 for e in ends[:-1]], ends, strict=True))
        if len(runs) > len(bw) or not all(problem.fits(a, b) for a, b in runs):
            continue
        placement = PlacementProblem(tuple(problem.transfer_bytes[b] for _, b in runs[:-1]), bw)
        best = min(best, place_brute(placement).bottleneck_ms)
    return best


def test_baselines_and_own_planner_against_the_joint_optimum() -> None:
    rng = np.random.default_rng(9)
    own_ratios = []
    for case in range(60):
        n = int(rng.integers(2, 6))
        problem = _partition_problem(rng, int(rng.integers(1, 7)), float(rng.uniform(0.3, 1.0)))
        bw = _bw(rng, n)
        try:
            joint_opt = _joint_brute(problem, bw)
        except InfeasibleError:
            continue
        if joint_opt == float("inf"):
            with pytest.raises(InfeasibleError):
                plan_own(problem, bw)
            continue
        own = plan_own(problem, bw)
        assert own.bottleneck_ms >= joint_opt * (1 - 1e-9)
        alg1 = shortest_partition_path(problem)
        if len(alg1.runs) <= n:  # own is never worse than the exact placement of Alg. 1's partitions
            exact = place_exact(PlacementProblem(alg1.transfers_bytes, bw))
            assert own.bottleneck_ms <= exact.bottleneck_ms * (1 + 1e-9)
        if joint_opt == 0:
            assert own.bottleneck_ms == 0  # the whole model fits one node
        else:
            own_ratios.append(own.bottleneck_ms / joint_opt)
        for plan in (_maybe(joint_greedy, problem, bw), _maybe(joint_random, problem, bw, case)):
            if plan is not None:
                assert all(problem.fits(a, b) for a, b in plan.runs)
                assert plan.bottleneck_ms >= joint_opt * (1 - 1e-9)
    assert len(own_ratios) > 20
    assert float(np.mean(own_ratios)) <= 1.02  # measured: 1.0 on every one of these seeded cases


def _maybe(fn, *args):  # type: ignore[no-untyped-def]
    try:
        return fn(*args)
    except InfeasibleError:
        return None


def test_own_planner_counts_compute_and_unequal_nodes() -> None:
    # two points, each 10 MiB; node 0 is big, node 1 small and fast, node 2 small and slow
    mib = 2**20
    memory = ((10 * mib, 20 * mib), (0.0, 10 * mib))
    problem = PartitionProblem(("a", "b"), (1e5, 0.0), memory, 10 * mib)
    bw = ((0.0, 100.0, 100.0), (100.0, 0.0, 100.0), (100.0, 100.0, 0.0))
    run_ms = ((50.0, 100.0), (0.0, 50.0))
    plan = plan_own(problem, bw, run_ms=run_ms, node_speed=(1.0, 4.0, 0.5),
                    node_memory_bytes=(20 * mib, 10 * mib, 10 * mib))
    # one stage fits only node 0: 100 ms; two stages need node 1 and node 0: max(12.5, 8 ms transfer, 50) = 50 ms
    assert len(plan.runs) == 2 and plan.bottleneck_ms == pytest.approx(50.0)
    assert 1 in plan.placement.nodes and plan.proven_optimal
    # all nodes fast and big: two stages of 12.5 ms beat one of 25 ms; a slow link makes one stage win
    fast = plan_own(problem, bw, run_ms=run_ms, node_speed=(4.0, 4.0, 4.0), node_memory_bytes=(20 * mib,) * 3)
    assert fast.bottleneck_ms == pytest.approx(12.5) and len(fast.runs) == 2
    slow_link = tuple(tuple(v / 100 for v in row) for row in bw)  # 1 Mbit/s: the cut costs 800 ms
    single = plan_own(problem, slow_link, run_ms=run_ms, node_speed=(4.0, 4.0, 4.0),
                      node_memory_bytes=(20 * mib,) * 3)
    assert single.bottleneck_ms == pytest.approx(25.0) and len(single.runs) == 1
    with pytest.raises(InvalidInputError, match="one entry per node"):
        plan_own(problem, bw, node_speed=(1.0,))
    with pytest.raises(InfeasibleError, match="at least 10.0 MiB"):
        plan_own(problem, bw, node_memory_bytes=(mib, mib, mib))


def test_own_plans_mixed_memory_clusters_with_partitions_every_node_holds() -> None:
    # one 30 MiB node and four of 10 MiB: partitionings sized for the big node need several big nodes, so the
    # planner must also try partitionings sized for the smallest node (5 stages of one point)
    mib, m = 2.0**20, 7
    memory = tuple(tuple(10 * mib * (b - a + 1) if b >= a else 0.0 for b in range(m)) for a in range(m))
    problem = PartitionProblem(tuple(f"p{i}" for i in range(m)), (4e6, 1e5, 4e6, 1e5, 4e6, 1e5, 0.0), memory, 30 * mib)
    bw = tuple(tuple(0.0 if i == j else 10.0 + i + j for j in range(5)) for i in range(5))
    nodes_mib = [30, 10, 10, 10, 10]
    plan = plan_own(problem, bw, node_memory_bytes=[x * mib for x in nodes_mib])
    assert len(plan.runs) == len(plan.placement.nodes) <= 5
    for (a, b), v in zip(plan.runs, plan.placement.nodes, strict=True):
        assert memory[a][b] <= nodes_mib[v] * mib
    pp = PlacementProblem(plan.transfers_bytes, bw)
    assert plan.bottleneck_ms == pytest.approx(bottleneck_ms(pp, plan.placement.nodes))
    assert plan.proven_optimal and plan.search_complete
    # two nodes of 30 MiB hold at most 6 of the 7 points: the refusal says how many such nodes it takes
    with pytest.raises(InfeasibleError, match="with at most 2 stages: in nodes of 30.0 MiB it needs 3; use at least 3"):
        plan_own(problem, tuple(row[:2] for row in bw[:2]), node_memory_bytes=[30 * mib, 30 * mib])


def test_time_limits_return_a_valid_unproven_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    problem = PlacementProblem(tuple(float(t) for t in rng.lognormal(12, 1.5, size=19)),
                               random_cluster(50, seed=3, link="pairwise"))
    cut = place_exact(problem, time_limit_s=1e-9)  # the clock runs out after the first (untimed) step
    assert not cut.proven_optimal and len(set(cut.nodes)) == 20
    assert cut.bottleneck_ms == pytest.approx(bottleneck_ms(problem, cut.nodes))
    full = place_exact(problem)
    assert full.proven_optimal and full.bottleneck_ms <= cut.bottleneck_ms * (1 + 1e-12)

    pp = _partition_problem(np.random.default_rng(0), 12, 0.2)
    bw = random_cluster(12, seed=0, link="pairwise")
    settled = plan_own(pp, bw, time_limit_s=30.0)
    assert settled.search_complete and settled.candidates_tried >= 2  # this instance needs several candidates

    class Clock:  # the planner's clock jumps past its budget once it has placed its first candidate
        calls = 0

        @staticmethod
        def perf_counter() -> float:
            Clock.calls += 1
            return 0.0 if Clock.calls == 1 else 1e6

    monkeypatch.setattr(joint, "time", Clock)
    hurried = plan_own(pp, bw, time_limit_s=1.0)
    assert not hurried.search_complete and not hurried.proven_optimal and hurried.candidates_tried == 1
    assert settled.bottleneck_ms <= hurried.bottleneck_ms * (1 + 1e-12)
