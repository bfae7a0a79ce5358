"""Candidate partition points over the zoo (parthasarathy2022 §III-A; paper: 64 of 66 Keras models partitionable).

For every torchvision classification model and the `timm-cnns` model set: import the graph, find
the candidate points by dominators, check them against the definition (remove a node: are the outputs still
reachable?), and print the statistics table: nodes, points, inner points (neither an input nor the last node),
partitionable or not, the largest share of the model's MACs between two consecutive points (a pipeline stage
cannot be smaller), and the time of both methods. NASNet and PNASNet (timm) are included for the paper's claim
that NASNet cannot be partitioned.
"""

from __future__ import annotations

import itertools
import sys
import time

from _machine import machine

from edgeplan.errors import EdgeplanError
from edgeplan.frontends.zoo import load_graph, torchvision_names
from edgeplan.ir import Graph
from edgeplan.ir.cut_points import cut_points, cut_points_brute


def max_stage_share(graph: Graph, points: tuple[str, ...]) -> float:
    """Largest share of MACs between consecutive cut points (every node lies between two of them)."""
    position = {node.name: k for k, node in enumerate(graph.nodes)}
    bounds = sorted({-1, *(position[p] for p in points), len(graph.nodes) - 1})
    total = sum(node.macs for node in graph.nodes) or 1
    return max(sum(n.macs for n in graph.nodes[a + 1 : b + 1]) for a, b in itertools.pairwise(bounds)) / total


def main() -> int:
    print(machine(1))
    from edgeplan.measure.model_sets import model_set

    specs = [f"torchvision:{n}" for n in torchvision_names()] + model_set("timm-cnns")
    specs += ["timm:nasnetalarge", "timm:pnasnet5large"]
    print(f"{'model':<40} {'nodes':>6} {'points':>7} {'inner':>6} {'cut?':>5} {'max stage':>9} {'agree':>6} "
          f"{'dom ms':>7} {'brute ms':>9}")
    agree = partitionable = balanced = done = 0
    failed = []
    for spec in specs:
        try:
            graph = load_graph(spec)
        except EdgeplanError as e:
            failed.append(f"{spec}: {str(e)[:80]}")
            continue
        t0 = time.perf_counter()
        cuts = cut_points(graph)
        t1 = time.perf_counter()
        brute = cut_points_brute(graph)
        t2 = time.perf_counter()
        same = cuts.points == brute
        agree += same
        partitionable += cuts.partitionable
        done += 1
        share = max_stage_share(graph, cuts.points)
        balanced += share < 0.5
        print(f"{spec:<40} {len(graph.nodes):>6} {len(cuts.points):>7} {len(cuts.inner):>6} "
              f"{'yes' if cuts.partitionable else 'NO':>5} {share:>9.1%} {'yes' if same else 'NO':>6} "
              f"{(t1 - t0) * 1e3:>7.1f} {(t2 - t1) * 1e3:>9.1f}", flush=True)
    print(f"\n{done} models imported ({len(failed)} could not be: {failed}); dominators agree with the definition "
          f"on {agree}/{done}; partitionable: {partitionable}/{done} (paper: 64/66 Keras models); with no stage "
          f"above half the MACs: {balanced}/{done}")
    return 0 if agree == done and done >= 30 else 1


if __name__ == "__main__":
    sys.exit(main())
