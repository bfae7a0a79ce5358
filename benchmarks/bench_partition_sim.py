"""parthasarathy2022 §IV-V: the paper's simulation grid, its Figs. 7-10 and claims, paper vs edgeplan.

The full grid of the paper, nothing cut: 8 models (our zoo's versions of the paper's Keras models), node memory
64/128/256/512 MB, 5/10/15/20/50 nodes, 2 to 20 bandwidth classes, 50 random clusters per configuration (link
model ``"min"``), and 1000 clusters of 50 nodes and 64 MB for Fig. 10
(:func:`experiments.parthasarathy2022.run_simulation`). Alg. 1 cuts every model (uncompressed transfers);
the stages are placed by the paper's k-path algorithm, exactly, by the joint greedy and random baselines and by
edgeplan's own planner. Printed: the report (tables of Figs. 7-10, ratios, the paper's claims checked), the
paths of the figures (``campaigns/partition_figs/``), and the two Done-when figures: the exact solver's time at 50
nodes and the own planner's ratio to the optimum and planning time.

Then, as before: the ZFP x LZ4 compression ratio (tolerance 1e-3) of the activations at ResNet-18's candidate
points, and the time of the exact placement at 50 nodes for 3 to 12 stages (random transfers, ``"min"`` links)
and for 20 and 30 stages with ``"pairwise"`` links (the hard case: no ordering of nodes by capacity).

``--link relay`` or ``--link pairwise`` reruns the whole experiment under that link model too (about as long
again). The default run takes about 10 minutes on one core of this machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _machine import machine

from edgeplan.frontends.zoo import load_graph
from edgeplan.ir.cut_points import cut_points
from edgeplan.planners.partition import PlacementProblem, place_exact
from edgeplan.planners.partition.simulate import random_cluster
from edgeplan.runtimes.compression import measure_compression
from experiments.parthasarathy2022 import (
    TARGETS,
    SimulationConfig,
    SimulationResult,
    format_report,
    own_ratio,
    run_simulation,
)
from experiments.parthasarathy2022_plots import plot_partition_figures

FIGURES = Path(__file__).resolve().parent.parent / "campaigns" / "partition_figs"


def _done_when(result: SimulationResult) -> list[str]:
    t = result.timings

    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    own = own_ratio(result)
    return [
        f"exact solver at {t.nodes} nodes: median {s(t.exact_median_s)} s, max {s(t.exact_max_s)} s (target <= "
        f"{TARGETS['exact_median_s']:g} s), proven optimal {t.exact_proven}/{t.exact_count}",
        f"default (own) planner: mean ratio to optimum {'-' if own is None else f'{own:.4f}'} (target <= "
        f"{TARGETS['own_ratio_opt']}), planning time median/max at {t.nodes} nodes {s(t.own_median_s)} / "
        f"{s(t.own_max_s)} s (target <= {TARGETS['own_time_s']:g} s)",
    ]


def _experiment(link: str, figures: Path) -> None:
    start = time.perf_counter()
    result = run_simulation(SimulationConfig(link=link), progress=True)
    print(format_report(result))
    print(f"\nfigures ({link!r} links):")
    for path in plot_partition_figures(result, figures):
        print(f"  {path}")
    print("\nDone-when figures:")
    for line in _done_when(result):
        print(f"  {line}")
    print(f"experiment time ({link!r} links): {time.perf_counter() - start:.0f} s", flush=True)


def _exact_times(stages: int, link: str, instances: int, seed: int, rng: np.random.Generator,
                 time_limit_s: float | None) -> tuple[list[float], int]:
    times, proven = [], 0
    for run in range(instances):
        problem = PlacementProblem(tuple(float(t) for t in rng.lognormal(12, 1.5, size=stages - 1)),
                                   random_cluster(50, seed=seed + run, link=link))
        begin = time.perf_counter()
        proven += place_exact(problem, time_limit_s=time_limit_s).proven_optimal
        times.append(time.perf_counter() - begin)
    return times, proven


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--link", choices=("relay", "pairwise"), help="also rerun the experiment with these links")
    args = parser.parse_args(argv)
    clock = time.perf_counter()
    print(machine(1), flush=True)
    _experiment("min", FIGURES)
    if args.link:
        print(f"\n=== rerun with {args.link!r} links ===")
        _experiment(args.link, FIGURES / args.link)

    graph = load_graph("torchvision:resnet18")
    ratios = [c.ratio for c in measure_compression(graph, cut_points(graph).inner).values()]
    print(f"\nZFP x LZ4 at tolerance 1e-3, torchvision:resnet18 (random weights), {len(ratios)} candidate points: "
          f"ratio min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")
    rng = np.random.default_rng(0)
    print("exact placement at 50 nodes, 5 random instances per stage count (median / max ms):")
    for stages in (3, 5, 8, 12):
        times, _ = _exact_times(stages, "min", 5, 1000, rng, None)
        print(f"  {stages:>2} stages: {1e3 * statistics.median(times):7.1f} / {1e3 * max(times):7.1f} ms")
    print("exact placement at 50 nodes, 'pairwise' links (the hard case), 5 random instances, 60 s limit each "
          "(median / max s, proven optimal):")
    for stages in (20, 30):
        times, proven = _exact_times(stages, "pairwise", 5, 2000, rng, 60.0)
        print(f"  {stages:>2} stages: {statistics.median(times):6.2f} / {max(times):6.2f} s, proven {proven}/5")
    print(f"\ntotal benchmark time: {time.perf_counter() - clock:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
