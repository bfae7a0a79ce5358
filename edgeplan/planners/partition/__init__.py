"""Partitioning and placement of a model over a cluster of edge devices (parthasarathy2022). Loads without torch.

Cutting the chain of candidate points into partitions that fit a node's memory (Alg. 1), and placing the stages
on nodes: the paper's bounds and colour-coding k-path matching (Alg. 2-3), a certified exact placement (DFS,
then CP-SAT), the paper's joint greedy and random baselines, and edgeplan's own planner (candidate partitionings,
each placed exactly, with compute times and nodes of different memory and speed).
"""

from __future__ import annotations

from edgeplan.planners.partition.joint import JointPlan, joint_greedy, joint_random, plan_own
from edgeplan.planners.partition.kpath import KPathPlacement, place_kpath
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
    "JointPlan",
    "KPathPlacement",
    "PartitionPlan",
    "PartitionProblem",
    "Placement",
    "PlacementProblem",
    "bottleneck_ms",
    "brute_partitions",
    "joint_greedy",
    "joint_random",
    "matching_bound",
    "partition_graph",
    "place_brute",
    "place_exact",
    "place_greedy",
    "place_kpath",
    "place_random",
    "plan_own",
    "shortest_partition_path",
    "theorem1_bound",
]
