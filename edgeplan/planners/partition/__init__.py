"""Partitioning and placement of a model over a cluster of edge devices (parthasarathy2022). Loads without torch.

So far: cutting the chain of candidate points into partitions that fit a node's memory (Alg. 1), and placing
the stages on nodes: bounds, the exact optimum and the random and greedy baselines.
"""

from __future__ import annotations

from edgeplan.planners.partition.partitions import (
    PartitionPlan,
    PartitionProblem,
    brute_partitions,
    partition_graph,
    shortest_partition_path,
)
from edgeplan.planners.partition.placement import (
    Placement,
    PlacementProblem,
    bottleneck_ms,
    matching_bound,
    place_brute,
    place_exact,
    place_greedy,
    place_random,
    theorem1_bound,
)

__all__ = [
    "PartitionPlan",
    "PartitionProblem",
    "Placement",
    "PlacementProblem",
    "bottleneck_ms",
    "brute_partitions",
    "matching_bound",
    "partition_graph",
    "place_brute",
    "place_exact",
    "place_greedy",
    "place_random",
    "shortest_partition_path",
    "theorem1_bound",
]
