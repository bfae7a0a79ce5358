"""A :class:`PartitionProblem` from a graph and its candidate points: transfer sizes and memory, from the IR.

Transfer size at a point (paper eq. 4): the bytes of the point's outputs divided by a compression ratio (1 for
none; :mod:`edgeplan.runtimes.compression` measures ZFP x LZ4 ratios on real activations).

Memory of a partition, conservative as in the paper (§III-B1: no quantization, room left for the container):
the parameters of its nodes, plus every activation its nodes produce (no buffer reuse), plus the tensor it
receives from the previous partition (the model input for the first).
"""

from __future__ import annotations

from collections.abc import Mapping

from edgeplan.errors import InvalidInputError
from edgeplan.ir.cut_points import CutPoints
from edgeplan.ir.ops import OpKind
from edgeplan.planners.partition.partitions import PartitionProblem

__all__ = ["partition_problem"]


def partition_problem(cuts: CutPoints, memory_limit_bytes: float,
                      compression: Mapping[str, float] | None = None) -> PartitionProblem:
    """Build the partitioning problem of ``cuts.graph`` at its candidate points.

    Parameters
    ----------
    cuts
        The candidate points (:func:`edgeplan.ir.cut_points.cut_points`).
    memory_limit_bytes
        Memory of one compute node.
    compression
        Compression ratio per point name (missing points: 1).

    Raises
    ------
    InvalidInputError
        When the last candidate point is not the graph's last node (nothing after it could be placed) or a
        ratio is not positive.
    """
    graph = cuts.graph
    points = [p for p in cuts.points if graph.node(p).kind is not OpKind.INPUT]
    if not points or points[-1] != graph.nodes[-1].name:
        raise InvalidInputError(f"graph {graph.name!r}: its last node is not a candidate point (several outputs?); "
                                "it cannot be cut into a pipeline")
    ratios = dict(compression or {})
    for name, ratio in ratios.items():
        if not ratio > 0:
            raise InvalidInputError(f"compression ratio of {name!r} must be positive, got {ratio}")
    position = {node.name: k for k, node in enumerate(graph.nodes)}
    ends = [position[p] for p in points]
    starts = [0, *[e + 1 for e in ends[:-1]]]
    own = [sum(n.param_bytes + (n.activation_bytes if n.kind is not OpKind.INPUT else 0)
               for n in graph.nodes[s : e + 1]) for s, e in zip(starts, ends, strict=True)]
    received = [sum(n.activation_bytes for n in graph.inputs)]
    received += [graph.node(p).activation_bytes for p in points[:-1]]
    m = len(points)
    memory = tuple(tuple(float(received[a] + sum(own[a : b + 1])) if a <= b else 0.0 for b in range(m))
                   for a in range(m))
    transfers = tuple(graph.node(p).activation_bytes / ratios.get(p, 1.0) for p in points)
    return PartitionProblem(tuple(points), transfers, memory, float(memory_limit_bytes))
