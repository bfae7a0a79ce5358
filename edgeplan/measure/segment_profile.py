"""Compute time of the segments between consecutive candidate partition points, measured on this machine.

Segment ``k`` is every node after point ``k - 1`` up to point ``k`` (the first starts after the graph inputs).
Each repeat runs the whole model once, segment after segment, reading the clock between segments (one sample of
every segment per repeat, in the order a pipeline stage would run them); the median over repeats is reported.
A partition ``a..b`` costs the sum of its segments: that drops the small cache effects of running the segments
together, which the range profiles of :mod:`edgeplan.measure.range_profile` would capture at ``O(m^2)`` cost.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch

from edgeplan.ir.graph import Graph
from edgeplan.ir.ops import OpKind
from edgeplan.measure.graph_exec import Env, GraphExecutor
from edgeplan.measure.harness import use_threads

__all__ = ["run_ms_matrix", "segment_ms", "segments"]


def segments(graph: Graph, points: Sequence[str]) -> list[list[str]]:
    """The node names of each segment, in execution order (points as in :class:`PartitionProblem`)."""
    position = {node.name: k for k, node in enumerate(graph.nodes)}
    out, start = [], 0
    for p in points:
        end = position[p]
        out.append([n.name for n in graph.nodes[start : end + 1] if n.kind is not OpKind.INPUT])
        start = end + 1
    return out


@torch.inference_mode()
def segment_ms(graph: Graph, points: Sequence[str], threads: int = 1, repeats: int = 7, warmup: int = 2,
               seed: int = 0) -> list[float]:
    """Median compute time (ms) of every segment, at ``threads`` threads.

    Parameters
    ----------
    graph
        The model.
    points
        Candidate points in execution order, the last being the model's output.
    threads
        Torch intra-op threads.
    repeats, warmup
        Timed and untimed whole-model runs.
    seed
        Seed of the weights and the input.
    """
    executor = GraphExecutor(graph, seed=seed)
    parts = segments(graph, points)
    samples: list[list[float]] = [[] for _ in parts]
    with use_threads(threads):
        for run in range(warmup + repeats):
            env: Env = dict(executor.example_inputs())
            marks = [time.perf_counter_ns()]
            for names in parts:
                executor.run_nodes(names, env)
                marks.append(time.perf_counter_ns())
            if run >= warmup:
                for k in range(len(parts)):
                    samples[k].append((marks[k + 1] - marks[k]) / 1e6)
    return [statistics.median(s) for s in samples]


def run_ms_matrix(per_segment_ms: Sequence[float]) -> tuple[tuple[float, ...], ...]:
    """``run_ms[a][b]`` = the sum of segments ``a..b`` (0 below the diagonal)."""
    m = len(per_segment_ms)
    prefix = [0.0]
    for v in per_segment_ms:
        prefix.append(prefix[-1] + v)
    return tuple(tuple(prefix[b + 1] - prefix[a] if a <= b else 0.0 for b in range(m)) for a in range(m))
