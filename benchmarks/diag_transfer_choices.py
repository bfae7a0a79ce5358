"""Where a transferred model's selection increase comes from (issue 5 diagnostic, no target).

The selection increase of ``bench_transfer.py`` is the measured time of the six networks' selections made with a
transferred model, over the measured optimum, minus one. This script splits it, draw by draw, into:

- **what part**: the increase with the model's primitive times and the measured layout-transformation times, and
  with the measured primitive times and the model's transformation times (the two parts of a selection's cost);
- **which choices**: every conv layer whose primitive in the selection differs from the optimum's, with the measured
  time it loses there (the primitive's alone) and both primitives' predicted / measured ratios; summed over the draws
  per (chosen, optimal) pair of primitives;
- **the winner's curse**: the median predicted / measured ratio over every option of the networks' layers, over the
  options the selections chose, and over the optimal ones. The PBQP takes the cheapest prediction, so among close
  competitors it takes the most under-predicted one: a chosen option's ratio under the others' is that bias.

Transfers as ``bench_transfer.py`` runs them (``--method`` takes its variant suffixes, e.g.
``factor-finetune-refit``; ``--design``, ``--bag``). Reads ../shared/data/mulder2021 and the Intel NN2 of
``make bench-costmodels`` (out/costmodels/intel-nn2). Pin it to one core: it measures accuracy, not time.

Outcome (2026-11-30, 1 %, seeds 0-7, one core each; medians over the seeds; logs
``campaigns/diag_choices_{cells,kmeans,kmeans_bodybag}_s38.log``): the increase with every cost predicted / with the
measured transformation times: ``--design cells`` (``factor-finetune-refit``) 5.28 / 4.98 %, ``--design kmeans`` 4.37
/ 4.23 %, ``--design kmeans --method factor-finetune-body --bag 5`` 2.82 / 2.63 %; with the measured primitive times
and the predicted transformations 0.18 % in every design: the increase is the primitives'. 86-91 % of the time lost at
the layers that chose otherwise is between primitives of one family, mostly Winograd 3x3 variants of another tile or
vector width (the costliest pair: with kmeans rows winograd-4x4-3x3-vec-8 instead of winograd-3x3-3x3-vec-4, with
single timings winograd-4x4-3x3 instead of winograd-4x4-3x3-vec-4). The chosen options' median
predicted / measured ratio is 0.896 / 0.929 / 0.964 against 1.006 / 1.019 / 1.025 for all options: the design that
selects best has the smallest winner's curse. The costliest layer in all three is AlexNet's first (3, 64, 224, 11, 4;
MEC optimal, an im2 primitive chosen; 0.51-0.61 points of the mean increase); next come VGG-19's (64, 64, 224, 3, 1)
with the kmeans rows (0.40-0.42 points, missed in 7-8 of 8 draws), the table's only 3x3 stride-1 layer at 224 pixels
with more than four input channels, whose row is in the test part, so that no draw can hold it, and with single
timings VGG-11's (512, 512, 28, 3, 1) (0.44 points; its row in the validation part).

Blended (``--design cells --method factor-finetune-refit-blend``, 2026-11-30, log
``campaigns/diag_choices_cells_blend_s39.log``): 3.03 / 2.88 %, the chosen options' ratio 0.951 against 1.008 over
all options, 76 % of the lost time within one family; AlexNet's first layer still the costliest (0.65 points), then
VGG-19's test-part layer (0.32) and ResNet's (512, 512, 7, 3, 1), where the optimal im2row-scan-abt-ik is
over-predicted by 13-28 % in every draw.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine
from bench_transfer import DATA, family, load_source, variant_of

from edgeplan.costmodels.transfer_learning import DESIGNS
from edgeplan.planners.pbqp.costgraph import SelectionCosts, SelectionPlan, plan_cost, select_primitives
from edgeplan.planners.pbqp.network import SelectionStructure
from experiments.mulder2020 import measured_choice


def priced_increase(structure: SelectionStructure, measured: SelectionCosts, costs: SelectionCosts,
                    optimum: SelectionPlan | None = None) -> float:
    """Percent by which the selection made with ``costs``, priced with ``measured``, exceeds the measured optimum
    (``optimum``: that selection, if already made)."""
    best = optimum or select_primitives(structure, measured)
    chosen = measured_choice(measured, select_primitives(structure, costs))
    return 100 * (sum(plan_cost(structure, measured, chosen)[:2]) / best.total_ms - 1)


def split_increase(structure: SelectionStructure, measured: SelectionCosts, predicted: SelectionCosts,
                   optimum: SelectionPlan | None = None) -> dict[str, float]:
    """The increase with every cost predicted (``all``), with the predicted primitives and the measured
    transformations (``primitives``), and with the measured primitives and the predicted transformations
    (``transforms``)."""
    best = optimum or select_primitives(structure, measured)
    return {"all": priced_increase(structure, measured, predicted, best),
            "primitives": priced_increase(structure, measured,
                                          dataclasses.replace(predicted, transform_ms=measured.transform_ms), best),
            "transforms": priced_increase(structure, measured,
                                          dataclasses.replace(measured, transform_ms=predicted.transform_ms), best)}


def wrong_choices(structure: SelectionStructure, measured: SelectionCosts, predicted: SelectionCosts,
                  optimum: SelectionPlan | None = None) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """The conv layers where the selection made with ``predicted`` differs from the measured optimum, and the
    predicted / measured ratios of all options, the chosen ones and the optimal ones.

    Returns
    -------
    tuple
        A list of ``{"layer", "conv", "chosen", "optimal", "lost_ms", "chosen_ratio", "optimal_ratio"}`` (``lost_ms``:
        the chosen primitive's measured time minus the optimal one's, transformations not counted;
        ``optimal_ratio`` None when ``predicted`` has no time for the optimal primitive), and
        ``{"all": [...], "chosen": [...], "optimal": [...]}`` ratios (those the model prices).
    """
    chosen = measured_choice(measured, select_primitives(structure, predicted))
    best = (optimum or select_primitives(structure, measured)).choice
    wrong: list[dict[str, Any]] = []
    ratios: dict[str, list[float]] = {"all": [], "chosen": [], "optimal": []}
    for i, node in enumerate(structure.nodes):
        if node.kind != "conv":
            continue
        names = [o.name for o in measured.options[i]]
        guess = {o.name: float(t) for o, t in zip(predicted.options[i], predicted.primitive_ms[i], strict=True)}
        truth = measured.primitive_ms[i]
        ratio = [guess[n] / float(t) if n in guess else float("nan") for n, t in zip(names, truth, strict=True)]
        ratios["all"].extend(r for r in ratio if np.isfinite(r))
        ratios["chosen"].append(ratio[chosen[i]])
        if np.isfinite(ratio[best[i]]):  # the model may not price the optimal primitive (it predicts no time)
            ratios["optimal"].append(ratio[best[i]])
        if chosen[i] != best[i]:
            wrong.append({"layer": node.name, "conv": list(node.conv[:5]) if node.conv else None,
                          "chosen": names[chosen[i]], "optimal": names[best[i]],
                          "lost_ms": float(truth[chosen[i]] - truth[best[i]]), "chosen_ratio": ratio[chosen[i]],
                          "optimal_ratio": ratio[best[i]] if np.isfinite(ratio[best[i]]) else None})
    return wrong, ratios


def analyse(model: Any, amd: Any, structures: dict[str, SelectionStructure], formats: dict[str, tuple[str, str]],
            split_seed: int = 0) -> dict[str, Any]:
    """:func:`split_increase` and :func:`wrong_choices` of one model over the networks (means of the increases); each
    wrong choice also says which part of the table's 80/10/10 split (``split_seed``) its layer's row is in
    (``train``, ``val``, ``test``): only training rows can be drawn."""
    from edgeplan.decisions.select import model_costs, table_costs
    from edgeplan.measure.primitive_data import split_indices

    split = split_indices(amd.features, split_seed)
    part = {tuple(int(v) for v in amd.features[r]): name for name in ("train", "val", "test")
            for r in getattr(split, name)}

    parts: dict[str, list[float]] = defaultdict(list)
    wrong: list[dict[str, Any]] = []
    ratios: dict[str, list[float]] = defaultdict(list)
    networks: dict[str, dict[str, Any]] = {}
    for name, structure in structures.items():
        measured = table_costs(structure, amd, formats)
        predicted = model_costs(structure, model, formats, restrict_to=measured)
        optimum = select_primitives(structure, measured)
        split = split_increase(structure, measured, predicted, optimum)
        for k, v in split.items():
            parts[k].append(v)
        networks[name] = {"increase_pct": split, "optimum_ms": optimum.total_ms}
        w, r = wrong_choices(structure, measured, predicted, optimum)
        wrong.extend({"network": name, **x, "part": part.get(tuple(x["conv"])) if x["conv"] else None} for x in w)
        for k, v in r.items():
            ratios[k].extend(v)
    return {"increase_pct": {k: statistics.fmean(v) for k, v in parts.items()},
            "median_ratio": {k: float(np.median(v)) if v else float("nan") for k, v in ratios.items()},
            "networks": networks, "wrong": wrong}


def costliest_layers(runs: list[dict[str, Any]]) -> list[tuple[str, str, float, int]]:
    """(network, layer, mean points of the six-network mean increase it costs per run, runs it chose wrongly in),
    the costliest first: a layer's lost time over its network's optimum, divided by the number of networks. The
    layer is named with its shape and, when known, the split part of its row."""
    points: dict[tuple[str, str], float] = defaultdict(float)
    count: dict[tuple[str, str], int] = defaultdict(int)
    for run in runs:
        nets = run["networks"]
        for w in run["wrong"]:
            where = f" {w['part']}" if w.get("part") else ""
            key = (w["network"], f"{w['layer']} {tuple(w['conv']) if w['conv'] else ''}{where}".strip())
            points[key] += 100 * w["lost_ms"] / nets[w["network"]]["optimum_ms"] / len(nets)
            count[key] += 1
    return sorted(((n, layer, p / len(runs), count[n, layer]) for (n, layer), p in points.items()),
                  key=lambda t: -t[2])


def by_pair(runs: list[dict[str, Any]]) -> list[tuple[str, str, float, int]]:
    """(chosen, optimal, summed lost ms, layers) over every run's wrong choices, the costliest first."""
    lost: dict[tuple[str, str], float] = defaultdict(float)
    count: dict[tuple[str, str], int] = defaultdict(int)
    for run in runs:
        for w in run["wrong"]:
            lost[w["chosen"], w["optimal"]] += w["lost_ms"]
            count[w["chosen"], w["optimal"]] += 1
    return sorted(((a, b, ms, count[a, b]) for (a, b), ms in lost.items()), key=lambda t: -t[2])


def within_family_share(runs: list[dict[str, Any]]) -> float:
    """Share of the lost time (every run's wrong choices) where the chosen and the optimal primitive are of one
    family (``bench_transfer.family``: wino3, im2, ...); NaN when nothing was lost."""
    lost = [(w["lost_ms"], family(w["chosen"]) == family(w["optimal"])) for run in runs for w in run["wrong"]]
    total = sum(ms for ms, _ in lost)
    return sum(ms for ms, same in lost if same) / total if total > 0 else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--method", default="factor-finetune-refit",
                        help="a bench_transfer.py method, variant suffixes allowed (default factor-finetune-refit)")
    parser.add_argument("--design", choices=list(DESIGNS), default="uniform")
    parser.add_argument("--bag", type=int, default=1)
    parser.add_argument("--split-seed", type=int, default=0, help="seed of AMD's 80/10/10 split (default 0)")
    parser.add_argument("--source", type=Path, default=Path("out/costmodels/intel-nn2"))
    parser.add_argument("--top", type=int, default=10, help="costliest (chosen, optimal) pairs to list")
    parser.add_argument("--json", type=Path, help="write every run's analysis here")
    args = parser.parse_args()
    if not (DATA / "amd.csv").is_file():
        print(f"skipped: {DATA} is absent")
        return 0
    import torch

    from edgeplan.costmodels import load_primitive_csv, transfer
    from edgeplan.decisions.select import load_formats
    from experiments.mulder2020 import structures

    torch.set_num_threads(1)
    print(machine(1))
    source, amd = load_source(args.source), load_primitive_csv(DATA / "amd.csv")
    nets, formats = structures(amd), load_formats(DATA / "formats.csv")
    base, suffixes = variant_of(args.method)
    runs = []
    for seed in args.seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = transfer(source, amd, fraction=args.fraction, seed=seed, method=base, threads=1,
                             split_seed=args.split_seed,
                             cross_fit="-holdout" not in suffixes, design=args.design, refit="-refit" in suffixes,
                             bag=args.bag if "finetune" in base else 1,
                             train="body" if "-body" in suffixes else "all", blend="-blend" in suffixes)
        run = {"seed": seed, **analyse(model, amd, nets, formats, args.split_seed)}
        runs.append(run)
        inc, ratio = run["increase_pct"], run["median_ratio"]
        print(f"seed {seed:>2}: increase {inc['all']:5.2f} % (primitives predicted {inc['primitives']:5.2f} %, "
              f"transformations predicted {inc['transforms']:5.2f} %); median predicted / measured: all options "
              f"{ratio['all']:.3f}, chosen {ratio['chosen']:.3f}, optimal {ratio['optimal']:.3f}; "
              f"{len(run['wrong'])} layers chose otherwise", flush=True)
    print(f"\n{args.method}, {100 * args.fraction:g} %, design {args.design}, bag {args.bag}, seeds "
          f"{' '.join(map(str, args.seeds))}; medians over the seeds:")
    for part in ("all", "primitives", "transforms"):
        value = statistics.median(r["increase_pct"][part] for r in runs)
        print(f"  increase, {part + ' predicted':<24} {value:6.2f} %")
    for part in ("all", "chosen", "optimal"):
        print(f"  predicted / measured, {part + ' options':<16} "
              f"{statistics.median(r['median_ratio'][part] for r in runs):.3f}")
    print(f"\ncostliest wrong choices over the seeds (measured ms lost, primitive time only; layers); "
          f"{100 * within_family_share(runs):.0f} % of the lost time between primitives of one family:")
    for chosen, optimal, ms, n in by_pair(runs)[:args.top]:
        print(f"  {chosen:<28} instead of {optimal:<28} {ms:8.2f} ms  {n:>4}")
    print("\ncostliest layers (their row's split part; points of the mean increase over the six networks, averaged "
          "over the seeds; seeds that chose otherwise there):")
    for network, layer, pts, n in costliest_layers(runs)[:args.top]:
        print(f"  {network:<10} {layer:<46} {pts:6.2f}  {n:>3} of {len(runs)}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
