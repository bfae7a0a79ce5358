"""Intel -> AMD transfer from a *designed* sample instead of a uniform draw (issue 5 diagnostic).

mulder2020 draws the target's samples uniformly at random and names choosing them as future work (§6: "the particular
subset of relevant training points needed in fine-tuning can be determined"). The mulder2021 tables are a grid: some
420 ``(c, k, im)`` layer sizes, each under the same twelve ``(f, s)`` filter shapes, and a primitive applies to some
shapes only (Winograd 3x3 to ``f = 3, s = 1``). A uniform 1 % (37 layers) gives a shape three layers on average and
sometimes one, and may put several of them at nearly the same size.

For every seed, the same number of rows as the uniform draw, from the same training part, chosen by:

- ``uniform``: :func:`~edgeplan.costmodels.draw_samples` (the paper's and the benchmark's draw);
- ``kmeans``: ``draw_samples(..., design="kmeans")``
  (:func:`~edgeplan.measure.sampling.design_rows`): the ``(c, k, im)`` sizes of the training part
  clustered on their logarithms (standardized) into ``n`` clusters (k-means, seeded, weighted by how many rows each
  size has); per cluster the size nearest its centre; each chosen size then takes the filter shape least used so far
  relative to the shape's weight, the number of primitives that apply to it (ties broken by the seed): stride-1
  shapes, which also feed the Winograd and 1x1 primitives, get more rows than strided ones;
- ``even``: the same with every shape weighted alike (``design_rows`` without ``cells``);
- ``maximin``: the sizes chosen one by one, each the farthest from those already chosen (a seeded random first), the
  shapes balanced the same way;
- ``shapes``: uniform rows within each filter shape, the shapes taking turns: the shape balance alone.

Outcome (2026-11-29, source re-fit that day; medians, MdRAE / mean increase; logs ``campaigns/diag_design_*.log``):
at 1 %, seeds 0-6, fine-tuning and factor then fine-tuning: uniform 12.87 / 4.87 and 10.87 / 4.97, ``kmeans`` 11.27 /
3.89 and 8.58 / 3.76, ``even`` 15.65 / 4.44 and 11.27 / 5.13, ``shapes`` 14.36 / 4.58 and 10.66 / 4.29; on seeds 0-11
``kmeans`` has the lower MdRAE in 9 of 12 draws for both methods (factor then fine-tuning 8.87 % against 10.32 %), and
halves the Winograd primitives' error (``--seeds 0 1 2 --designs uniform kmeans --methods factor-finetune``: wino3
15.98 -> 8.34 %, wino5 15.59 -> 9.56 %); the increases move by one or two points between designs and draws. So the
library's ``design="kmeans"`` weighs the shapes. At 10 %, fine-tuning, seeds 0-4: uniform 3.94 / 1.63, ``kmeans`` 3.46 /
1.07, ``even`` 4.20 / 1.03. 25 seeds: ``benchmarks/bench_transfer.py --design kmeans`` (README).

Each sample is transferred with ``--methods`` (default ``finetune`` and ``factor-finetune``) and scored as
``bench_transfer.py`` does (MdRAE on AMD's test part, mean selection increase over the six networks, GoogLeNet's),
and at the end each primitive family's median MdRAE per design and method.
Reads ../shared/data/mulder2021 and the Intel NN2 of ``make bench-costmodels`` (out/costmodels/intel-nn2). Pin it to
one core: it measures accuracy, not time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import numpy as np
from bench_transfer import FAMILIES, family
from diag_transfer_probe import load_setup, transfer_arguments

from edgeplan.costmodels import draw_samples
from edgeplan.costmodels.transfer_learning import hold_out, transfer_on
from edgeplan.measure.primitive_data import split_indices
from edgeplan.measure.sampling import design_rows

DESIGNS = ("uniform", "kmeans", "even", "maximin", "shapes")


def _maximin(features: np.ndarray, train: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The ``maximin`` design: sizes chosen farthest-first (a seeded random first), shapes balanced."""
    sizes, inverse = np.unique(features[train][:, :3], axis=0, return_inverse=True)
    inverse = inverse.ravel()
    logs = np.log(sizes)
    z = (logs - logs.mean(axis=0)) / np.where(logs.std(axis=0) > 0, logs.std(axis=0), 1.0)
    rng = np.random.default_rng([seed, 7])
    chosen = [int(rng.integers(len(sizes)))]
    dist = ((z - z[chosen[0]]) ** 2).sum(axis=1)
    while len(chosen) < n:
        nxt = int(np.argmax(dist))
        chosen.append(nxt)
        dist = np.minimum(dist, ((z - z[nxt]) ** 2).sum(axis=1))
    used: dict[tuple[float, ...], int] = {}
    picked = []
    for i in rng.permutation(len(chosen)):
        own = train[inverse == chosen[i]]
        best = min(own, key=lambda r: used.get(tuple(features[r, 3:]), 0))
        used[tuple(features[best, 3:])] = used.get(tuple(features[best, 3:]), 0) + 1
        picked.append(best)
    return np.sort(np.asarray(picked, dtype=np.int64))


def _shapes(features: np.ndarray, train: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The ``shapes`` design: uniform rows within each filter shape, the shapes taking turns (stratified)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(train)
    shapes = sorted({tuple(s) for s in features[train][:, 3:]})
    queues = [[r for r in order if tuple(features[r, 3:]) == shape] for shape in shapes]
    picked: list[int] = []
    turn = [int(i) for i in rng.permutation(len(shapes))]
    while len(picked) < n:
        for i in turn:
            if queues[i] and len(picked) < n:
                picked.append(int(queues[i].pop(0)))
    return np.sort(np.asarray(picked, dtype=np.int64))


def designed_rows(amd: Any, n: int, seed: int, design: str) -> np.ndarray:
    """``n`` rows of AMD's training part (split seed 0) chosen by ``design`` (see the module docstring)."""
    if design == "kmeans":
        return draw_samples(amd, n / len(split_indices(amd.features, 0).train), seed, 0, design="kmeans").rows
    train = split_indices(amd.features, 0).train
    if design == "even":
        return design_rows(amd.features, train, n, seed)
    return (_maximin if design == "maximin" else _shapes)(amd.features, train, n, seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    transfer_arguments(parser, repeats=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="these seeds instead of 0 .. repeats-1")
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=DESIGNS)
    parser.add_argument("--methods", nargs="+", default=["finetune", "factor-finetune"],
                        choices=["finetune", "factor-finetune", "factor"])
    args = parser.parse_args()
    loaded = load_setup(args.source)
    if loaded is None:
        return 0
    source, amd, score = loaded
    print(f"Intel -> AMD, {100 * args.fraction:g} % of AMD's training part; MdRAE % / mean selection increase % "
          f"(GoogLeNet %)")
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    per_family: dict[tuple[str, str], dict[str, list[float]]] = {}
    seeds = args.seeds if args.seeds is not None else list(range(args.repeats))
    for seed in seeds:
        uniform = draw_samples(amd, args.fraction, seed, 0)
        for design in args.designs:
            rows = uniform.rows if design == "uniform" else designed_rows(amd, len(uniform), seed, design)
            sample = hold_out(rows, seed)
            shapes = len({tuple(r) for r in amd.features[rows][:, 3:]})
            for method in args.methods:
                started = time.monotonic()
                model = transfer_on(source, amd, sample, seed=seed, method=method, threads=1,
                                    settings=(args.fraction, 0))
                s = score(model)
                results.setdefault((design, method), []).append((s["mdrae_pct"], s["increase_pct"],
                                                                 s["googlenet_pct"]))
                pooled = per_family.setdefault((design, method), {})
                for name, value in s["primitive_mdrae"].items():
                    pooled.setdefault(family(name), []).append(100 * value)
                print(f"seed {seed} {design:<8} {method:<16} {len(rows)} rows, {shapes} shapes: MdRAE "
                      f"{s['mdrae_pct']:6.2f} %, increase {s['increase_pct']:6.2f} % (GoogLeNet "
                      f"{s['googlenet_pct']:5.2f} %) ({time.monotonic() - started:.0f} s)", flush=True)
    print(f"medians over {len(seeds)} seeds:")
    for (design, method), values in results.items():
        cols = list(zip(*values, strict=True))
        print(f"  {design:<8} {method:<16} MdRAE {statistics.median(cols[0]):6.2f} %, increase "
              f"{statistics.median(cols[1]):6.2f} %, GoogLeNet {statistics.median(cols[2]):5.2f} %")
    print("per family: median MdRAE % over the family's primitives, pooled over the seeds")
    print(f"  {'':<8} {'':<16}" + "".join(f"{f:>8}" for f in FAMILIES))
    for (design, method), pooled in per_family.items():
        print(f"  {design:<8} {method:<16}" + "".join(f"{statistics.median(pooled[f]):8.2f}" if f in pooled
                                                       else f"{'-':>8}" for f in FAMILIES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
