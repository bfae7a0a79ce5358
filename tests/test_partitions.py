"""Alg. 1 partitioning: the DP over the partition graph equals brute force; memory limits are named."""

from __future__ import annotations

import numpy as np
import pytest

from edgeplan.errors import InfeasibleError
from edgeplan.planners.partition import PartitionProblem, brute_partitions, partition_graph, shortest_partition_path


def _problem(rng: np.random.Generator, m: int) -> PartitionProblem:
    sizes = rng.uniform(1.0, 100.0, size=m)  # memory of the stretch before each point
    memory = tuple(tuple(float(sizes[a : b + 1].sum()) if a <= b else 0.0 for b in range(m)) for a in range(m))
    limit = float(rng.uniform(sizes.max(), sizes.sum() + 1))
    transfers = tuple(float(t) for t in rng.lognormal(10, 2, size=m))
    return PartitionProblem(tuple(f"p{k}" for k in range(m)), transfers, memory, limit)


def test_closed_form() -> None:
    # three points, memory 10 each, limit 20: must cut at least once; cheapest cut is after p0 (transfer 1)
    memory = ((10, 20, 30), (0, 10, 20), (0, 0, 10))
    problem = PartitionProblem(("p0", "p1", "p2"), (1.0, 5.0, 0.0), memory, 20.0)
    plan = shortest_partition_path(problem)
    assert plan.runs == ((0, 0), (1, 2)) and plan.value == 1.0
    graph = partition_graph(problem)
    assert ((1, 2), 1.0) in graph[(0, 0)] and (0, 2) not in graph


@pytest.mark.parametrize("objective", ["sum", "max"])
def test_dp_equals_brute_force_on_random_instances(objective: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        problem = _problem(rng, int(rng.integers(1, 11)))
        plan = shortest_partition_path(problem, objective)
        assert all(problem.fits(a, b) for a, b in plan.runs)
        assert plan.value == pytest.approx(brute_partitions(problem, objective))


def test_a_stretch_larger_than_a_node_is_named() -> None:
    memory = ((10, 60), (0, 50))
    problem = PartitionProblem(("conv1", "fc"), (1.0, 0.0), memory, 20.0 )
    with pytest.raises(InfeasibleError, match="'fc' needs"):
        shortest_partition_path(problem)
    # several too large: the largest is named, so that the node size it asks for fits them all
    mib = 2.0**20
    memory = tuple(tuple(v * mib for v in row) for row in ((30, 40, 100), (0, 10, 70), (0, 0, 60)))
    problem = PartitionProblem(("conv1", "conv2", "fc"), (1.0, 1.0, 0.0), memory, 20 * mib)
    with pytest.raises(InfeasibleError, match=r"'fc' needs 60\.0 MiB.*1 smaller one.*at least 60\.0 MiB"):
        shortest_partition_path(problem)


def test_problem_from_a_zoo_graph_and_real_compression() -> None:
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.cut_points import cut_points
    from edgeplan.planners.partition.from_graph import partition_problem
    from edgeplan.runtimes.compression import measure_compression

    graph = load_graph("torchvision:resnet18")
    cuts = cut_points(graph)
    whole = partition_problem(cuts, 2**40)
    m = len(whole.points)
    assert whole.points[-1] == graph.nodes[-1].name
    params = sum(n.param_bytes for n in graph.nodes)
    assert whole.memory_bytes[0][m - 1] > params  # parameters plus activations, conservatively
    assert shortest_partition_path(whole).runs == ((0, m - 1),)  # everything fits on one node: no cut
    tight = partition_problem(cuts, 0.6 * whole.memory_bytes[0][m - 1])
    assert len(shortest_partition_path(tight).runs) >= 2
    ratios = measure_compression(graph, whole.points[:3])
    assert set(ratios) == set(whole.points[:3])
    assert all(c.raw_bytes == graph.node(p).activation_bytes and c.ratio > 1 for p, c in ratios.items())
    compressed = partition_problem(cuts, 2**40, {p: c.ratio for p, c in ratios.items()})
    assert compressed.transfer_bytes[0] < whole.transfer_bytes[0]
