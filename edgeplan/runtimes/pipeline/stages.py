"""A partition plan as pipeline stages, checked against the graph's structure, and the size and transfer time of
what crosses a cut.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.ir import Graph, OpKind, Ref

__all__ = ["Message", "PipelineStage", "message_bytes", "pipeline_stages", "transfer_ms"]

Message = tuple[np.ndarray, ...]
"""What crosses a cut: the tensors of :attr:`PipelineStage.sends`, in that order, as C-contiguous arrays."""


@dataclass(frozen=True)
class PipelineStage:
    """One stage of a pipeline: the nodes it runs and the tensors it receives and sends.

    Attributes
    ----------
    index
        Position in the pipeline.
    nodes
        Names of the graph nodes it runs, in execution order (graph inputs excluded).
    receives
        Tensors it gets from the previous stage (the graph inputs for the first stage).
    sends
        Tensors it passes on: the outputs of its last point that later nodes read (the graph outputs for the last
        stage).
    """

    index: int
    nodes: tuple[str, ...]
    receives: tuple[Ref, ...]
    sends: tuple[Ref, ...]


def _check_runs(points: Sequence[str], runs: Sequence[tuple[int, int]]) -> None:
    m = len(points)
    if not runs:
        raise InvalidInputError("runs is empty: a pipeline needs at least one stage")
    expected = 0
    for a, b in runs:
        if a != expected or b < a or b >= m:
            raise InvalidInputError(f"runs {list(runs)} do not cover the points 0..{m - 1} in order without gaps "
                                    f"(run ({a}, {b}) should start at {expected} and end at or before {m - 1})")
        expected = b + 1
    if expected != m:
        raise InvalidInputError(f"runs {list(runs)} end at point {expected - 1}, not at the last point {m - 1} "
                                f"({points[-1]!r})")


def _positions(graph: Graph, points: Sequence[str]) -> list[int]:
    position = {node.name: k for k, node in enumerate(graph.nodes)}
    unknown = [p for p in points if p not in position]
    if unknown:
        raise InvalidInputError(f"points {unknown} are not nodes of {graph.name!r}")
    pos = [position[p] for p in points]
    if any(b <= a for a, b in itertools.pairwise(pos)):
        raise InvalidInputError(f"points of {graph.name!r} must be distinct and in execution order, got {list(points)}")
    if pos[-1] != len(graph.nodes) - 1:
        raise InvalidInputError(f"node {graph.nodes[pos[-1] + 1].name!r} of {graph.name!r} comes after the last point "
                                f"{points[-1]!r} and would belong to no stage; the last point must be the last node")
    return pos


def _lifetimes(graph: Graph) -> dict[Ref, tuple[int, float]]:
    """For every tensor: the position of its producer (-1 for graph inputs) and of its last reader (inf: output)."""
    life: dict[Ref, tuple[int, float]] = {}
    for k, node in enumerate(graph.nodes):
        born = -1 if node.kind is OpKind.INPUT else k
        for i in range(len(node.output_shapes)):
            life[Ref(node.name, i)] = (born, -math.inf)
        for ref in node.inputs:
            life[ref] = (life[ref][0], max(life[ref][1], k))
    for ref in graph.outputs:
        life[ref] = (life[ref][0], math.inf)
    return life


def pipeline_stages(graph: Graph, points: Sequence[str], runs: Sequence[tuple[int, int]]) -> tuple[PipelineStage, ...]:
    """The stages of a partition plan: nodes per stage and the tensors that cross each cut.

    Parameters
    ----------
    graph
        The graph.
    points
        Candidate points in execution order (e.g. :attr:`PartitionProblem.points
        <edgeplan.planners.partition.PartitionProblem.points>`); the last must be the graph's last node.
    runs
        ``(first point, last point)`` per stage (:attr:`PartitionPlan.runs
        <edgeplan.planners.partition.PartitionPlan.runs>`): stage ``a..b`` runs every node after point ``a - 1``
        up to point ``b``, in ``graph.nodes`` order.

    Returns
    -------
    tuple of PipelineStage

    Raises
    ------
    InvalidInputError
        When the runs do not cover the points in order, a point is not a node, a stage would run no node, or a
        tensor other than the cut point's outputs crosses a cut (naming it: the point is not a valid cut).
    """
    _check_runs(points, runs)
    pos = _positions(graph, points)
    life = _lifetimes(graph)
    receives = tuple(Ref(n.name, i) for n in graph.inputs for i in range(len(n.output_shapes)))
    stages: list[PipelineStage] = []
    for index, (a, b) in enumerate(runs):
        start, end = (pos[a - 1] + 1 if a > 0 else 0), pos[b]
        nodes = tuple(n.name for n in graph.nodes[start : end + 1] if n.kind is not OpKind.INPUT)
        if not nodes:
            raise InvalidInputError(f"stage {index} (points {a}..{b}) of {graph.name!r} runs no node; drop the "
                                    "graph inputs from the points")
        if index == len(runs) - 1:
            sends = tuple(graph.outputs)
        else:
            crossing = sorted((r for r, (born, last) in life.items() if born <= end < last), key=str)
            stray = [str(r) for r in crossing if r.node != points[b]]
            if stray:
                raise InvalidInputError(f"cutting {graph.name!r} after {points[b]!r} would also send {stray}; "
                                        "cut only at candidate points (edgeplan.ir.cut_points)")
            sends = tuple(crossing)
        stages.append(PipelineStage(index, nodes, receives, sends))
        receives = sends
    return tuple(stages)


def transfer_ms(size_bytes: float, bandwidth_mbps: float, compression: float = 1.0) -> float:
    """Time to send ``size_bytes`` (compressed by ``compression``) over a ``bandwidth_mbps`` link, in ms.

    Parameters
    ----------
    size_bytes
        Uncompressed size of the message.
    bandwidth_mbps
        Link bandwidth in Mbit/s.
    compression
        Compression ratio (size before / size after).

    Returns
    -------
    float
        ``size_bytes / compression * 8 / bandwidth``, in milliseconds.
    """
    return size_bytes / compression * 8.0 / (bandwidth_mbps * 1e6) * 1e3


def message_bytes(message: Message) -> int:
    """Bytes of the tensors of a message.

    Parameters
    ----------
    message
        The arrays that cross a cut.

    Returns
    -------
    int
        The sum of their ``nbytes``.
    """
    return sum(int(a.nbytes) for a in message)
