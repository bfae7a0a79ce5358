"""A real pipeline of Ray actors against the bottleneck prediction (parthasarathy2022: throughput = 1 / bottleneck).

For each model, Alg. 1 cuts it (sum of transfer sizes, uncompressed) with a node memory of 30% of the model's
memory (parameters plus every activation), which gives 3 to 5 stages; the stages are placed greedily on a
simulated 8-node cluster (:func:`edgeplan.planners.partition.simulate.random_cluster`, seed 0). The cluster's
Wi-Fi links (a few Mbit/s) would make every period several seconds long, so each model's link bandwidths are
all multiplied by the same factor ``k``, chosen so that the slowest link takes 200 ms; ``k`` is printed.

Every stage is a Ray actor on this machine (1 torch thread each), every link an actor that holds a message for
its transfer time; 3 warm-up inputs then 30 timed ones stream through with at most 2 inputs per stage in flight.
Printed per model: the stages, each stage's compute time alone and under load, the predicted bottleneck
(the largest stage compute or link time), the measured period between completions (median and mean), their
ratio, and whether the measured throughput is within 15% of 1 / predicted. Target: >= 3 models within 15%.

A last, compute-bound control (not part of the target) runs the first model's plan with 10 Gbit/s links: then
the stages' compute is the bottleneck, and on a machine with fewer cores than stages they share the cores, so
the period is longer than the slowest stage's time alone; the share ``sum(stage ms) / cores`` is printed next to
it.
"""

from __future__ import annotations

import itertools
import os
import sys

import ray
from _machine import machine

from edgeplan.frontends.zoo import load_graph
from edgeplan.ir.cut_points import cut_points
from edgeplan.planners.partition import PlacementProblem, place_greedy, shortest_partition_path
from edgeplan.planners.partition.from_graph import partition_problem
from edgeplan.planners.partition.simulate import random_cluster
from edgeplan.runtimes.pipeline import PipelineOptions, PipelineResult, run_pipeline, transfer_ms

MODELS = ("torchvision:resnet18", "torchvision:mobilenet_v2", "torchvision:resnet50", "torchvision:squeezenet1_0")
MEMORY_FRACTION = 0.3
CLUSTER_NODES, CLUSTER_SEED = 8, 0
TARGET_LINK_MS = 200.0
THREADS, INPUTS, WARMUP = 1, 30, 3
TOLERANCE = 0.15


def run_model(spec: str, fast_links: bool = False) -> PipelineResult:
    """Cut, place, scale the links (or make them 10 Gbit/s) and run one model; prints its lines."""
    graph = load_graph(spec)
    memory_bytes = MEMORY_FRACTION * sum(n.param_bytes + n.activation_bytes for n in graph.nodes)
    problem = partition_problem(cut_points(graph), memory_bytes)
    plan = shortest_partition_path(problem)
    bandwidth = random_cluster(CLUSTER_NODES, CLUSTER_SEED)
    placement = place_greedy(PlacementProblem(plan.transfers_bytes, bandwidth))
    chain = placement.nodes
    mbps = [bandwidth[u][v] for u, v in itertools.pairwise(chain)]
    k = max(transfer_ms(t, m) for t, m in zip(plan.transfers_bytes, mbps, strict=True)) / TARGET_LINK_MS
    if fast_links:
        mbps, k = [10_000.0] * len(mbps), 1.0
    result = run_pipeline(graph, problem.points, plan.runs, [m * k for m in mbps], nodes=chain,
                          options=PipelineOptions(inputs=INPUTS, warmup=WARMUP, threads=THREADS))
    label = f"{spec} (10 Gbit/s links)" if fast_links else spec
    print(f"{label}: node memory {memory_bytes / 2**20:.1f} MiB, {result.stages} stages on nodes {list(chain)}, "
          f"links {', '.join(f'{m:.2f}' for m in mbps)} Mbit/s x k = {k:.1f}")
    print("  cuts after      ", ", ".join(result.cuts))
    print("  stage ms alone  ", " ".join(f"{ms:7.1f}" for ms in result.stage_ms))
    print("  stage ms loaded ", " ".join(f"{ms:7.1f}" for ms in result.loaded_stage_ms))
    print("  link ms         ", " ".join(f"{ms:7.1f}" for ms in result.link_ms),
          f"({', '.join(f'{b / 1e3:.0f} kB' for b in result.link_bytes)})")
    return result


def main() -> int:
    print(machine(THREADS))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows = []
    try:
        for spec in MODELS:
            rows.append((spec, run_model(spec)))
        control = run_model(MODELS[0], fast_links=True)
        print(f"ray {rows[0][1].ray_version}; {INPUTS} timed inputs after {WARMUP} warm-up, {THREADS} thread per stage")
    finally:
        ray.shutdown()
    print(f"{'model':<26} {'stages':>6} {'bottleneck':>10} {'predicted':>10} {'median':>9} {'mean':>9} "
          f"{'mean/pred':>9} {'within 15%':>10}")
    good = 0
    for spec, r in rows:
        ok = abs(r.period_ratio - 1) <= TOLERANCE
        good += ok
        print(f"{spec:<26} {r.stages:>6} {r.bottleneck:>10} {r.predicted_ms:>8.1f}ms {r.period_median_ms:>7.1f}ms "
              f"{r.period_mean_ms:>7.1f}ms {r.period_ratio:>9.3f} {'yes' if ok else 'NO':>10}")
    met = good >= 3
    print(f"models within 15%: {good} of {len(rows)}; target (>= 3):", "met" if met else "MISSED")
    cores = os.cpu_count() or 1
    print(f"control, compute-bound ({MODELS[0]}, 10 Gbit/s links): predicted {control.predicted_ms:.1f} ms "
          f"({control.bottleneck}), measured mean {control.period_mean_ms:.1f} ms (x{control.period_ratio:.2f}); "
          f"sum of stage compute / {cores} cores = {sum(control.stage_ms) / cores:.1f} ms")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
