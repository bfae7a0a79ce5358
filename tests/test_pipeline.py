"""Pipelines of Ray actors: stages cover the graph, only the point crosses a cut, outputs equal a local run."""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.zoo import load_graph
from edgeplan.ir import Graph, OpKind, Ref
from edgeplan.ir.cut_points import cut_points
from edgeplan.measure.graph_exec import GraphExecutor
from edgeplan.planners.partition.from_graph import partition_problem
from edgeplan.planners.partition.partitions import PartitionProblem
from edgeplan.runtimes.pipeline import PipelineOptions, Stage, pipeline_stages, run_pipeline, transfer_ms

RUNS = ((0, 8), (9, 16), (17, 22))  # resnet18 in three stages, cut after layer2.0 and layer4.0


@pytest.fixture(scope="module")
def graph() -> Graph:
    return load_graph("torchvision:resnet18")


@pytest.fixture(scope="module")
def problem(graph: Graph) -> PartitionProblem:
    return partition_problem(cut_points(graph), 1e12)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_stages_cover_every_node_once_and_send_the_points(graph: Graph, problem: PartitionProblem) -> None:
    stages = pipeline_stages(graph, problem.points, RUNS)
    ran = [name for s in stages for name in s.nodes]
    assert ran == [n.name for n in graph.nodes if n.kind is not OpKind.INPUT]
    assert stages[0].receives == tuple(Ref(n.name) for n in graph.inputs)
    for (_, b), before, after in zip(RUNS, stages, stages[1:], strict=False):
        assert before.sends == after.receives == (Ref(problem.points[b]),)
    assert stages[-1].sends == graph.outputs


def test_stages_run_in_one_process_compute_the_model(graph: Graph, problem: PartitionProblem) -> None:
    local = GraphExecutor(graph, seed=3)
    env = local.example_inputs()
    message = tuple(env[r].numpy() for r in pipeline_stages(graph, problem.points, RUNS)[0].receives)
    for spec in pipeline_stages(graph, problem.points, RUNS):
        message, _ = Stage(graph, spec, seed=3, threads=1).run(message)
    assert torch.allclose(torch.from_numpy(message[0]), local.run(env)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("runs", [((0, 8), (10, 22)), ((0, 8), (9, 16)), ((1, 22),), ((0, 30),), ()])
def test_runs_that_do_not_cover_the_points_are_refused(graph: Graph, problem: PartitionProblem,
                                                       runs: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(InvalidInputError, match="runs"):
        pipeline_stages(graph, problem.points, runs)


def test_a_cut_inside_a_residual_block_names_the_skip_tensor(graph: Graph, problem: PartitionProblem) -> None:
    names = [n.name for n in graph.nodes]
    before = problem.points[3]  # maxpool; the first residual block of layer1 follows, then the point after it
    inside = names[(names.index(before) + names.index(problem.points[4])) // 2]
    with pytest.raises(InvalidInputError, match=rf"after '{re.escape(inside)}' would also send \['{before}"):
        pipeline_stages(graph, [inside, problem.points[-1]], ((0, 0), (1, 1)))


def test_points_must_end_at_the_last_node_and_stages_must_run_something(graph: Graph,
                                                                        problem: PartitionProblem) -> None:
    with pytest.raises(InvalidInputError, match="belong to no stage"):
        pipeline_stages(graph, problem.points[:5], ((0, 4),))
    with pytest.raises(InvalidInputError, match="runs no node"):
        pipeline_stages(graph, (graph.inputs[0].name, *problem.points), ((0, 0), (1, 23)))
    with pytest.raises(InvalidInputError, match="not nodes"):
        pipeline_stages(graph, ("nope", problem.points[-1]), ((0, 1),))


def test_bad_options_are_refused_before_ray_starts(graph: Graph, problem: PartitionProblem) -> None:
    with pytest.raises(InvalidInputError, match="one value per link"):
        run_pipeline(graph, problem.points, RUNS, [10.0])
    with pytest.raises(InvalidInputError, match="positive"):
        run_pipeline(graph, problem.points, RUNS, [10.0, 0.0])
    with pytest.raises(InvalidInputError, match="inputs >= 2"):
        run_pipeline(graph, problem.points, RUNS, [10.0, 10.0], options=PipelineOptions(inputs=1))


@pytest.mark.slow
@pytest.mark.usefixtures("ray_local")
def test_three_stage_pipeline_matches_a_local_run(graph: Graph, problem: PartitionProblem) -> None:
    # 401,408 B at 80 Mbit/s, and 100,352 B compressed 2x at 10 Mbit/s: 40 ms per link
    result = run_pipeline(graph, problem.points, RUNS, [80.0, 10.0], compression=[1.0, 2.0], nodes=[4, 1, 7],
                          options=PipelineOptions(inputs=8, warmup=2))
    assert result.outputs_match and result.max_abs_error <= 1e-4
    assert result.stages == 3 and result.stage_nodes == tuple(len(s.nodes) for s in
                                                               pipeline_stages(graph, problem.points, RUNS))
    assert result.cuts == (problem.points[8], problem.points[16])
    assert result.link_bytes == (401_408, 100_352)
    assert result.link_ms == pytest.approx([transfer_ms(401_408, 80.0), transfer_ms(100_352, 10.0, 2.0)])
    parts = {**{f"stage {i}": ms for i, ms in enumerate(result.stage_ms)},
             **{f"link {i}": ms for i, ms in enumerate(result.link_ms)}}
    assert result.predicted_ms == max(parts.values()) == parts[result.bottleneck]
    assert result.period_median_ms > 0 and result.period_mean_ms > 0
    assert result.throughput_per_s == pytest.approx(1e3 / result.period_mean_ms)
    assert result.period_ratio == pytest.approx(result.period_mean_ms / result.predicted_ms)
    assert all(ms > 0 for ms in (*result.loaded_stage_ms, *result.loaded_link_ms))
    assert result.nodes == (4, 1, 7) and result.inputs == 8 and result.threads == 1
    data = result.to_dict()
    assert data["stages"] == 3 and data["ray_version"] and np.isfinite(data["period_ratio"])
