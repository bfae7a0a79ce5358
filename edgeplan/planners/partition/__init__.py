"""Partitioning and placement of a model over a cluster of edge devices (parthasarathy2022). Loads without torch.

So far: cutting the chain of candidate points into partitions that fit a node's memory (Alg. 1).
"""

from __future__ import annotations

from edgeplan.planners.partition.partitions import (
    PartitionPlan,
    PartitionProblem,
    brute_partitions,
    partition_graph,
    shortest_partition_path,
)

__all__ = ["PartitionPlan", "PartitionProblem", "brute_partitions", "partition_graph", "shortest_partition_path"]
