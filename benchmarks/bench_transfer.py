"""Transfer learning of the primitive performance model, Intel -> AMD (mulder2020 §4.4, §5.3, Figs. 8-10, Table 5).

The source is the Intel NN2 model (``--source``, fitted on the seed-0 80/10/10 split of the mulder2021 Intel table;
fit it once with ``edgeplan primitives fit --data ../shared/data/mulder2021/intel.csv --out DIR``). For every
fraction of AMD's training part (default the paper's 0.1, 1, 2.5, 5, 10 and 25 %) and every repeat (default 25; the
repeat number is the seed of the draw), each method of ``--methods`` is fitted and scored:

- ``default``: :func:`~edgeplan.costmodels.transfer` as shipped (``edgeplan primitives transfer --fraction``): two
  rounds of single timings (three quarters shared evenly among the primitives, the rest on the close contenders a
  transfer from the first round predicts), the pooled factor, fine-tuning cross-fitted and refitted, blended with
  one boosted correction of the source shared by all primitives;
- ``finetune`` and ``factor-finetune`` (the pooled factor, then fine-tuning), each as such (no refit, no blend) on
  one round of the same number of single timings (:func:`~edgeplan.costmodels.draw_samples`), fitted by
  :func:`~edgeplan.costmodels.transfer_learning.transfer_on` as ``primitives transfer`` without ``--fraction``
  fits its candidates;

plus ``direct`` (the Intel model as is, once) and, at 1 %, ``factor`` (per-primitive scale from the one-round
draw). The variants the library no longer has (uniform, k-means and cells-uniform designs, training from scratch,
bags, the hidden layers alone, unblended or unrefitted two-round transfers) are in the git history of this file
(before the CLI consolidation; their figures: docs/figures.md). Scores:

- the MdRAE on AMD's test part (median over primitives), and
- the selection increase: each network's selection made with the transferred model, priced with the measured AMD
  table, over the measured optimum (as ``python -m experiments.mulder2020`` does), mean over the six
  networks of mulder2020; GoogLeNet's alone beside it (the paper's Figs. 8-10 use GoogLeNet).

Reported: median and quartiles over the repeats, and each method paired by draw against ``default``. With ``--native
DIR`` (default the AMD model of ``bench_costmodels.py`` when present) the AMD model trained on all of AMD's training
part is scored beside (the paper's dotted lines). Targets of issue 5 (medians over repeats): at 1 %, fine-tuned
MdRAE <= 7 % and increase <= 3 %; at 10 %, <= 4.5 % and <= 1.2 %.

``--ceiling``: what a per-primitive rescaling reaches however many target samples it is given (all of AMD's training
part): Intel's measured times scaled per primitive by the median AMD / Intel ratio (no model error at all), and the
Intel NN2's factor correction with its selection increase. A transfer that moves only per-primitive levels cannot do
better; the 1 % targets ask for more than that. Beside them, the ratio modelled per primitive as a gradient-boosted
function of the layer (c, k, im, f, s), from all of the training part and from 1 % of it (median of 5 draws): how
much of AMD's difference from Intel is layer-dependent, and whether 1 % of the layers can carry it.

``--first-seed S`` runs seeds ``S .. S + repeats - 1``, so that a long sweep can run in parts (on several cores);
``--merge A.json B.json ...`` prints the report of the parts' ``--json`` files as one sweep.

``--shared-correction``: beside each fine-tuning run, the source NN2 corrected by **one** boosted model of
log(AMD / source prediction) shared by all primitives (features: the layer's (c, k, im, f, s), its operation, input,
weight and output sizes, the source's log prediction, the primitive's family and the primitive itself; absolute loss),
fitted on the same drawn rows, and the geometric mean of that and the fine-tuned model: MdRAE on AMD's test part
only (a diagnostic: neither is a saved model, so no selection increase). Pooling the primitives gives the boosted
model some 2,600 cells from 1 % of the layers where a per-primitive one (``--ceiling``) has 37.

``--table5``: Table 5: the Intel model fine-tuned with only one family's columns of ``--table5-fraction`` of AMD's
training part (default 10 %; the paper does not say how much; one round of single timings of that family's
primitives, :func:`~edgeplan.costmodels.draw_samples`, where the paper drew rows), scored per family on AMD's test
part (median MdRAE over the family's primitives), rows divided by their diagonal; median over
``--table5-repeats``. ``--table5-method factor-finetune`` (not the paper's) puts the pooled factor first: the trained
family's cells also set the common scale that every other primitive then gets, so the matrix shows what fine-tuning
adds beyond the platform's level.
``--table5-level own`` (a diagnostic, not the paper's) then rescales each evaluated family by one factor, the median
ratio of AMD's times to the model's over that family's cells in the same drawn rows, so that the matrix shows how
well one family's data teaches the others their shape once each is at its own level. The matrix ends with its
Spearman rank correlations with the paper's ratios (:func:`table5_agreement`). Until 2026-11-29 fine-tuning let
Adam's weight decay pull the untrained families' output weights to zero, so their outputs sank to their means (off
the diagonal 34-89 %; Spearman +0.24 over the entries, +0.11 over the rows, +0.86 over the columns). With those
weights held (:func:`edgeplan.costmodels._mlp.train_masked`), the median of 3 repeats (then from drawn rows;
``make bench-transfer-table5`` of that time, 2026-11-29): +0.84 / +0.68 / +0.93, im2's row 2.9-9.4x its diagonal
(paper 3-8x), direct-sum's the worst (12-17x; paper 18-44x); from a source fitted by ``--recipe paper`` (``--source``)
+0.38 / +0.14 / +0.64; with the pooled factor first -0.12 / -0.11 / -0.75 (one family's level misleads the
others').

The data are read from ../shared/data/mulder2021; the benchmark skips when they are absent. Pin it to one core and
use ``--threads 1`` on a shared machine: it measures accuracy, not time.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mulder2021"
PAPER_FRACTIONS = (0.001, 0.01, 0.025, 0.05, 0.1, 0.25)
FAMILIES = ("direct", "im2", "kn2", "wino3", "wino5", "c1x1", "mec")
PAPER_TABLE5 = {  # mulder2020 Table 5: rows trained on, columns evaluated on, rows divided by the diagonal
    "direct": (1, 44, 32, 28, 28, 26, 18), "im2": (3, 1, 6, 8, 8, 3, 3), "kn2": (2, 13, 1, 10, 8, 8, 4),
    "wino3": (5, 18, 11, 1, 3, 3, 4), "wino5": (6, 16, 10, 4, 1, 4, 5), "c1x1": (8, 32, 24, 11, 15, 1, 12),
    "mec": (5, 36, 24, 23, 21, 19, 1),
}
PAPER = {  # (fraction, method): (MdRAE %, increase %) from mulder2020 §5.3 (AMD, uniform rows); None: not given
    (0.1, "finetune"): (5.0, 1.4), (0.01, "finetune"): (None, 4.0),
}
PAPER_NOTES = {(0.01, "finetune"): "increase < 4 %"}
METHODS = ("default", "factor-finetune", "finetune")
"""The methods ``--methods`` offers (see the module docstring); ``direct`` and ``factor`` run besides."""
TARGETS = {0.01: (7.0, 3.0), 0.1: (4.5, 1.2)}  # fine-tuned (MdRAE %, increase %), medians over repeats


def family(name: str) -> str:
    """mulder2020 Table 6 family of a mulder2021 column name (or ``fft`` / ``runtime`` for edgeplan's own)."""
    from edgeplan.costmodels.blend import family as column_family

    found = column_family(name)
    if found == "other":
        raise ValueError(f"no family for column {name!r}")
    return found


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """Median and quartiles, each the nearest order statistic (so an infinite value stays one); NaN when empty."""
    if not values:
        return math.nan, math.nan, math.nan
    q = np.quantile(np.asarray(values, dtype=float), [0.5, 0.25, 0.75], method="nearest")
    return float(q[0]), float(q[1]), float(q[2])


def fmt(stats: tuple[float, float, float]) -> str:
    """``median [q1, q3]``; ``inf``: a model with no prediction for a layer or most of a primitive's cells."""
    med, lo, hi = stats
    if math.isnan(med):
        return f"{'-':>24}"
    return f"{med:7.2f} [{lo:6.2f}, {hi:6.2f}]"


class Scorer:
    """MdRAE on AMD's test part and the selection increase on the six networks for a model."""

    def __init__(self, amd: Any, formats: dict[str, tuple[str, str]], split_seed: int) -> None:
        from experiments.mulder2020 import structures

        self.amd, self.formats, self.split_seed = amd, formats, split_seed
        self.structures = structures(amd)

    def __call__(self, model: Any) -> dict[str, Any]:
        from edgeplan.costmodels import evaluate_performance_model
        from edgeplan.errors import InvalidInputError
        from experiments.mulder2020 import network_result

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = evaluate_performance_model(model, self.amd, "test", self.split_seed)
        increases: dict[str, float] = {}
        for name, structure in self.structures.items():
            try:
                r = network_result("amd", name, structure, self.amd, model, self.formats, repeats=1)
                increases[name] = r.increase_pct
            except InvalidInputError:  # a layer the model predicts no applicable primitive for
                increases[name] = math.inf
        return {"mdrae_pct": 100 * result.median_primitive_mdrae, "primitive_mdrae": result.primitive_mdrae,
                "increase_pct": statistics.fmean(increases.values()), "googlenet_pct": increases.get("googlenet"),
                "increases": increases}


def load_source(folder: Path) -> Any:
    from edgeplan.costmodels import load_performance_model

    top = folder / "model.json"
    fit = f"edgeplan primitives fit --data {DATA / 'intel.csv'} --out {folder}"
    if not top.is_file():
        sys.exit(f"no source model in {folder}; fit it once with: {fit}")
    if not json.loads(top.read_text()).get("has_transforms_paper"):
        sys.exit(f"{folder} holds a model of an older format (no paper-protocol transformation model); refit it "
                 f"with: {fit}")
    return load_performance_model(folder)


def fitted_run(source: Any, target: Any, fraction: float, seed: int, method: str, args: argparse.Namespace,
               score: Any) -> tuple[Any, dict[str, Any]]:
    """One transfer and its scores: (model, row). ``default``: :func:`~edgeplan.costmodels.transfer` as shipped;
    ``direct``, ``factor``, ``finetune`` and ``factor-finetune``: that method alone (no refit, no blend) on one
    round of single timings of the same number (:func:`~edgeplan.costmodels.draw_samples`)."""
    from edgeplan.costmodels import draw_samples, transfer
    from edgeplan.costmodels.transfer_learning import FitOptions, transfer_on

    started = time.monotonic()
    if method == "default":
        model = transfer(source, target, fraction=fraction, seed=seed, split_seed=args.split_seed,
                         threads=args.threads)
    else:
        sample = draw_samples(target, fraction, seed, args.split_seed)
        options = FitOptions(seed, method=method, refit=False, blend=False, threads=args.threads)
        model = transfer_on(source, target, sample, options, (fraction, args.split_seed))
    fit_s = time.monotonic() - started
    return model, {"fraction": fraction, "seed": seed, "method": method, "fit_s": fit_s,
                   "drawn_rows": model.info["transfer"]["drawn_rows"],
                   "drawn_cells": model.info["transfer"].get("drawn_cells"), **score(model)}


def print_run(row: dict[str, Any]) -> None:
    """One line per run: rows drawn, MdRAE, mean and GoogLeNet selection increase, fitting time."""
    cells = f" ({row['drawn_cells']} timings)" if row.get("drawn_cells") is not None else ""
    print(f"  {row['method']:<21} {100 * row['fraction']:6.2f} % seed {row['seed']:>2}: {row['drawn_rows']:>4} "
          f"rows{cells}, MdRAE {row['mdrae_pct']:7.2f} %, increase {row['increase_pct']:7.2f} % (GoogLeNet "
          f"{row['googlenet_pct']:7.2f} %), {row['fit_s']:5.1f} s", flush=True)


def sweep(args: argparse.Namespace, source: Any, amd: Any, score: Scorer) -> list[dict[str, Any]]:
    """Every (fraction, repeat, method), plus direct once and factor at 1 %."""
    from edgeplan.costmodels import draw_samples

    runs: list[dict[str, Any]] = []

    def one(fraction: float, seed: int, method: str) -> None:
        model, row = fitted_run(source, amd, fraction, seed, method, args, score)
        row.pop("primitive_mdrae")
        if args.shared_correction and method == "finetune":
            rows = draw_samples(amd, fraction, seed, args.split_seed).rows
            row["shared_correction_mdrae_pct"], row["with_finetune_mdrae_pct"] = shared_correction(source, amd, model,
                                                                                                   rows, args)
            print(f"  {'shared corr.':<21} {100 * fraction:6.2f} % seed {seed:>2}: MdRAE "
                  f"{row['shared_correction_mdrae_pct']:7.2f} %, geometric mean with finetune "
                  f"{row['with_finetune_mdrae_pct']:7.2f} %", flush=True)
        runs.append(row)
        print_run(row)

    one(args.fractions[0], 0, "direct")
    for fraction in args.fractions:
        for seed in range(args.first_seed, args.first_seed + args.repeats):
            for method in args.methods:
                one(fraction, seed, method)
            if math.isclose(fraction, 0.01):
                one(fraction, seed, "factor")
    return runs


def grouped(runs: list[dict[str, Any]]) -> dict[tuple[float, str], list[dict[str, Any]]]:
    """The runs by (fraction, method), in the order they ran."""
    groups: dict[tuple[float, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["fraction"], r["method"]), []).append(r)
    return groups


def paired(base: list[dict[str, Any]], variant: list[dict[str, Any]]) -> dict[str, tuple[int, int, float]]:
    """Per score, over the seeds both ran: (seeds, seeds where ``variant`` is lower, median of variant - base)."""
    by_seed = {r["seed"]: r for r in base}
    pairs = [(by_seed[r["seed"]], r) for r in variant if r["seed"] in by_seed]
    out = {}
    for key in ("mdrae_pct", "increase_pct", "googlenet_pct"):
        diffs = [v[key] - b[key] for b, v in pairs]
        out[key] = (len(diffs), sum(d < 0 for d in diffs), statistics.median(diffs) if diffs else math.nan)
    return out


def print_paired(groups: dict[tuple[float, str], list[dict[str, Any]]]) -> None:
    """Each method against ``default`` (the shipped transfer) on the same seeds (paired by seed)."""
    lines = []
    for (fraction, method), rs in groups.items():
        base = groups.get((fraction, "default"))
        if base and method not in ("default", "direct"):
            p = paired(base, rs)
            lines.append(f"{100 * fraction:>8g}% {method:<22} vs {'default':<16}"
                         + "".join(f"  {p[k][1]:>2} of {p[k][0]:>2} lower, {p[k][2]:+6.2f}"
                                   for k in ("mdrae_pct", "increase_pct", "googlenet_pct")))
    if lines:
        print("\nPaired by draw: how often the method is lower than the default, and the median paired difference "
              "(points):")
        print(f"{'':>9} {'':<42}  {'MdRAE %':<22}  {'increase % (6 nets)':<22}  GoogLeNet incr. %")
        print("\n".join(lines))


def report(args: argparse.Namespace, runs: list[dict[str, Any]], native: dict[str, Any] | None) -> None:
    print(f"\nIntel -> AMD, AMD test part (split seed {args.split_seed}); {args.repeats} repeat(s) per fraction, "
          f"default: two rounds of single timings, others: one round; median [q1, q3] over repeats")
    print(f"{'fraction':>9} {'method':<21} {'n':>3} {'MdRAE %':>24} {'increase % (6 nets)':>24} "
          f"{'GoogLeNet incr. %':>24}   paper (AMD)")
    groups = grouped(runs)
    for (fraction, method), rs in groups.items():
        paper = PAPER.get((fraction, method))
        note = PAPER_NOTES.get((fraction, method), "")
        if paper and not note:
            note = f"MdRAE {paper[0]:g} %, increase {paper[1]:g} %"
        label = "any" if method == "direct" else f"{100 * fraction:g} %"
        print(f"{label:>9} {method:<21} {len(rs):>3} {fmt(quartiles([r['mdrae_pct'] for r in rs]))} "
              f"{fmt(quartiles([r['increase_pct'] for r in rs]))} "
              f"{fmt(quartiles([r['googlenet_pct'] for r in rs]))}   {note}")
    if native is not None:
        print(f"{'100 %':>9} {'native':<21} {1:>3} {native['mdrae_pct']:7.2f} {'':>16} {native['increase_pct']:7.2f} "
              f"{'':>16} {native['googlenet_pct']:7.2f}   (AMD NN2 on all of AMD's training part; paper's dotted "
              f"lines)")
    shared = {k: rs for k, rs in groups.items() if any("shared_correction_mdrae_pct" in r for r in rs)}
    if shared:
        print("\nOne boosted correction shared by all primitives (--shared-correction), MdRAE % on AMD's test part:")
        print(f"{'fraction':>9} {'fine-tuned':>24} {'shared correction':>24} {'geometric mean of both':>24}")
        for (fraction, _), rs in shared.items():
            print(f"{100 * fraction:>8g}% {fmt(quartiles([r['mdrae_pct'] for r in rs]))} "
                  f"{fmt(quartiles([r['shared_correction_mdrae_pct'] for r in rs]))} "
                  f"{fmt(quartiles([r['with_finetune_mdrae_pct'] for r in rs]))}")
    print_paired(groups)
    print("\nTargets (issue 5; each fine-tuning method run, medians over repeats):")
    for fraction, (t_mdrae, t_inc) in TARGETS.items():
        tuned = [(method, rs) for (f, method), rs in groups.items()
                 if f == fraction and ("finetune" in method or method == "default")]
        if not tuned:
            print(f"  {100 * fraction:g} %: not run")
        for method, rs in tuned:
            m = quartiles([r["mdrae_pct"] for r in rs])[0]
            inc = quartiles([r["increase_pct"] for r in rs])[0]
            google = quartiles([r["googlenet_pct"] for r in rs])[0]
            verdict = "PASS" if m <= t_mdrae and inc <= t_inc else "FAIL"
            print(f"  {100 * fraction:g} % {method}: MdRAE {m:.2f} % (target <= {t_mdrae} %), increase {inc:.2f} % "
                  f"(target <= {t_inc} %): {verdict} ({len(rs)} repeat(s); "
                  f"GoogLeNet's increase alone, the paper's network: {google:.2f} %)")


def _correction_inputs(features: np.ndarray, log_source: np.ndarray, names: tuple[str, ...]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs of the shared correction for every defined (layer, primitive) cell: (X, layer row, column); the
    primitive described by its family and its column (one-hot), not by the blend's name tokens."""
    from edgeplan.costmodels.blend import correction_inputs

    families = sorted({family(n) for n in names})
    onehot_family = np.array([[family(n) == f for f in families] for n in names], dtype=float)
    return correction_inputs(features, log_source, np.hstack([onehot_family, np.eye(len(names))]))


def shared_correction(source: Any, amd: Any, tuned: Any, drawn: np.ndarray, args: argparse.Namespace
                      ) -> tuple[float, float]:
    """MdRAE % on AMD's test part of the source corrected by one boosted model shared by all primitives, fitted on
    the ``drawn`` rows, and of the geometric mean of that and the fine-tuned model ``tuned``."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from edgeplan.measure.primitive_data import split_indices

    names = tuple(p for p in amd.primitives if p in source.primitive_names)
    truth = amd.primitive_ns[:, [amd.primitives.index(p) for p in names]]

    def predicted(model: Any, rows: np.ndarray) -> np.ndarray:
        pred = model.primitives.predict(amd.features[rows])
        return np.log(pred[:, [model.primitives.output_names_.index(p) for p in names]])

    test = np.asarray(split_indices(amd.features, args.split_seed).test)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_drawn, log_test = predicted(source, drawn), predicted(source, test)
        log_drawn[~np.isfinite(truth[drawn])] = np.nan
        x, r, c = _correction_inputs(amd.features[drawn], log_drawn, names)
        y = np.log(truth[drawn][r, c]) - log_drawn[r, c]
        model = HistGradientBoostingRegressor(loss="absolute_error", max_iter=300, learning_rate=0.05,
                                              max_leaf_nodes=15, min_samples_leaf=20, l2_regularization=1.0,
                                              random_state=0).fit(x, y)
        xt, rt, ct = _correction_inputs(amd.features[test], log_test, names)
        corrected = np.full_like(log_test, np.nan)
        corrected[rt, ct] = log_test[rt, ct] + model.predict(xt)
        mean = (corrected + predicted(tuned, test)) / 2

    return _median_mdrae_pct(truth[test], np.exp(corrected), names), _median_mdrae_pct(truth[test], np.exp(mean), names)


def _median_mdrae_pct(truth: np.ndarray, pred: np.ndarray, names: tuple[str, ...]) -> float:
    """Median over primitives (those scored) of the per-primitive MdRAE, in %."""
    from edgeplan.measure.metrics import mdrae_per_column

    per = mdrae_per_column(truth, pred, names)
    return 100 * float(np.nanmedian([v for v in per.values() if math.isfinite(v)]))


def ceiling(args: argparse.Namespace, source: Any, amd: Any, score: Scorer) -> dict[str, Any]:
    """How far a per-primitive rescaling of Intel can go on AMD, whatever the number of target samples.

    (a) Intel's *measured* times (no model error) times, per primitive, the median AMD / Intel ratio over all of
    AMD's training part, scored on AMD's test part; (b) the factor correction of the Intel NN2 from all of AMD's
    training part (the ``factor`` method at 100 %), with its selection increase.
    """
    from edgeplan.costmodels import load_primitive_csv
    from edgeplan.costmodels.transfer_learning import FitOptions, hold_out, transfer_on
    from edgeplan.measure.primitive_data import split_indices

    intel = load_primitive_csv(DATA / "intel.csv")
    if intel.features.shape != amd.features.shape or not np.array_equal(intel.features, amd.features):
        raise SystemExit("the Intel and AMD tables do not list the same layers in the same order")
    split = split_indices(amd.features, args.split_seed)
    names = tuple(p for p in amd.primitives if p in intel.primitives)
    a = amd.primitive_ns[:, [amd.primitives.index(p) for p in names]]
    i = intel.primitive_ns[:, [intel.primitives.index(p) for p in names]]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a primitive never defined on both in the training part
        scale = np.nanmedian(a[split.train] / i[split.train], axis=0)
    measured = _median_mdrae_pct(a[split.test], i[split.test] * scale, names)
    every = hold_out(split.train, 0)  # all of the training part, as the factor at 100 %
    factor = score(transfer_on(source, amd, every, FitOptions(0, method="factor", refit=False, blend=False),
                               (1.0, args.split_seed)))
    print("\nCeiling of a per-primitive rescaling (all of AMD's training part):")
    print(f"  Intel's measured times x per-primitive median AMD/Intel ratio: MdRAE {measured:.2f} % on AMD's test part "
          f"({len(names)} primitives)")
    print(f"  Intel NN2 x per-primitive factor: MdRAE {factor['mdrae_pct']:.2f} %, increase "
          f"{factor['increase_pct']:.2f} % (GoogLeNet {factor['googlenet_pct']:.2f} %)")
    train = np.asarray(split.train)
    layered = {"all": _layer_ratio_mdrae(amd.features, a, i, train, np.asarray(split.test), names)}
    few = max(1, round(0.01 * len(train)))
    draws = [_layer_ratio_mdrae(amd.features, a, i, np.random.default_rng(seed).choice(train, few, replace=False),
                                np.asarray(split.test), names) for seed in range(5)]
    layered["1%"] = float(np.median(draws))
    print(f"  Intel's measured times x a per-primitive boosted function of the layer: MdRAE {layered['all']:.2f} % "
          f"from all of the training part, {layered['1%']:.2f} % from 1 % of it ({few} layers, median of 5 draws)")
    return {"measured_scaled_mdrae_pct": measured, "factor_all": {k: v for k, v in factor.items()
                                                                   if k != "primitive_mdrae"},
            "measured_layer_ratio_mdrae_pct": layered}


def _layer_ratio_mdrae(features: np.ndarray, a: np.ndarray, i: np.ndarray, rows: np.ndarray, test: np.ndarray,
                       names: tuple[str, ...]) -> float:
    """MdRAE on ``test`` of Intel's measured times times a per-primitive boosted model of log(AMD / Intel) fitted
    on ``rows`` from the layer's (c, k, im, f, s); a primitive defined on too few of ``rows`` keeps its median."""
    from sklearn.ensemble import HistGradientBoostingRegressor


    with np.errstate(invalid="ignore", divide="ignore"):
        log_ratio = np.log(a) - np.log(i)
    pred = np.full((len(test), len(names)), np.nan)
    for j in range(len(names)):
        ok = rows[np.isfinite(log_ratio[rows, j])]
        if len(ok) == 0:
            continue
        if len(ok) < 20:
            pred[:, j] = np.median(log_ratio[ok, j])
            continue
        model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, min_samples_leaf=max(2, len(ok) // 50),
                                              random_state=0)
        pred[:, j] = model.fit(features[ok], log_ratio[ok, j]).predict(features[test])
    return _median_mdrae_pct(a[test], i[test] * np.exp(pred), names)


def own_levels(model: Any, amd: Any, rows: Any) -> Any:
    """``model`` with each family's outputs rescaled by one factor, the median ratio of AMD's times to the model's
    over that family's cells in the drawn ``rows`` (all of AMD's columns there, not only the trained family's)."""
    import copy

    from edgeplan.costmodels.transfer_steps import aligned_columns, factor_ratios, scaled

    names = model.primitive_names
    ratio, defined = factor_ratios(model.primitives, amd.features[rows],
                                   aligned_columns(amd.primitive_ns[rows], amd.primitives, names))
    log_ratio = np.log(np.where(defined, ratio, np.nan))
    scales = np.ones(len(names))
    for f in FAMILIES:
        cols = [j for j, p in enumerate(names) if family(p) == f]
        cells = log_ratio[:, cols][np.isfinite(log_ratio[:, cols])]
        if cells.size:
            scales[cols] = math.exp(float(np.median(cells)))
    leveled = copy.copy(model)
    leveled.primitives = scaled(model.primitives, scales)
    return leveled


def table5_agreement(ratios: dict[str, dict[str, float]]) -> dict[str, float]:
    """Spearman rank correlations of a Table 5 (rows divided by their diagonal) with the paper's: over the 42
    off-diagonal entries, over the rows' geometric means off the diagonal (whose data transfers best) and over the
    columns' (which family is hardest to reach)."""
    from scipy.stats import spearmanr

    ours = np.array([[ratios[t][f] for f in FAMILIES] for t in FAMILIES], dtype=np.float64)
    paper = np.array([PAPER_TABLE5[t] for t in FAMILIES], dtype=np.float64)
    off = ~np.eye(len(FAMILIES), dtype=bool)

    def gmeans(m: Any, axis: int) -> Any:
        logs = np.where(off, np.log(m), 0.0)
        return logs.sum(axis=axis) / off.sum(axis=axis)

    return {"entries": float(spearmanr(ours[off], paper[off]).statistic),
            "rows": float(spearmanr(gmeans(ours, 1), gmeans(paper, 1)).statistic),
            "columns": float(spearmanr(gmeans(ours, 0), gmeans(paper, 0)).statistic)}


def table5(args: argparse.Namespace, source: Any, amd: Any) -> dict[str, Any]:
    """Fine-tune (``--table5-method``) on one family's columns, score per family; rows divided by their diagonal."""
    from edgeplan.costmodels import PrimitiveDataset, draw_samples, evaluate_performance_model

    def per_family(model: Any) -> dict[str, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores = evaluate_performance_model(model, amd, "test", args.split_seed).primitive_mdrae
        return {f: float(np.median([v for k, v in scores.items() if family(k) == f])) for f in FAMILIES}

    raw: dict[str, dict[str, list[float]]] = {}
    print(f"\nTable 5: Intel NN2 {args.table5_method} on one family's columns of {100 * args.table5_fraction:g} % of "
          f"AMD's training part ({args.table5_repeats} repeat(s)), per-family test MdRAE"
          + (", then each family at its own level from the drawn rows" if args.table5_level == "own" else ""),
          flush=True)
    for trained in FAMILIES:
        cols = [j for j, p in enumerate(amd.primitives) if family(p) == trained]
        subset = PrimitiveDataset(amd.features, tuple(amd.primitives[j] for j in cols), amd.primitive_ns[:, cols],
                                  amd.transforms, amd.transform_ns, amd.source)
        raw[trained] = {f: [] for f in FAMILIES}
        for seed in range(args.table5_repeats):
            started = time.monotonic()
            model, _ = fitted_run(source, subset, args.table5_fraction, seed, args.table5_method, args,
                                  lambda _model: {})
            if args.table5_level == "own":
                drawn = draw_samples(subset, args.table5_fraction, seed, args.split_seed).rows
                model = own_levels(model, amd, drawn)
            for f, v in per_family(model).items():
                raw[trained][f].append(v)
            print(f"  trained on {trained:<6} seed {seed}: {time.monotonic() - started:5.1f} s", flush=True)
    direct = per_family(source if args.table5_level == "trained" else
                        own_levels(source, amd, draw_samples(amd, args.table5_fraction, 0, args.split_seed).rows))
    med = {t: {f: float(np.median(v)) for f, v in row.items()} for t, row in raw.items()}
    print("\nraw MdRAE % (rows: trained on; columns: evaluated on)")
    print(f"{'':<8}" + "".join(f"{f:>8}" for f in FAMILIES))
    print(f"{'none':<8}" + "".join(f"{100 * direct[f]:8.1f}" for f in FAMILIES) + "   (the Intel model as is"
          + (", each family at its level from seed 0's draw)" if args.table5_level == "own" else ")"))
    for t in FAMILIES:
        print(f"{t:<8}" + "".join(f"{100 * med[t][f]:8.1f}" for f in FAMILIES))
    print("\nrows divided by their diagonal: edgeplan | paper")
    print(f"{'':<8}" + "".join(f"{f:>7}" for f in FAMILIES) + "  |" + "".join(f"{f:>7}" for f in FAMILIES))
    for t in FAMILIES:
        diag = med[t][t]
        print(f"{t:<8}" + "".join(f"{med[t][f] / diag:7.1f}" for f in FAMILIES) + "  |"
              + "".join(f"{v:7d}" for v in PAPER_TABLE5[t]))
    agreement = table5_agreement({t: {f: med[t][f] / med[t][t] for f in FAMILIES} for t in FAMILIES})
    print("Spearman with the paper's ratios: {entries:+.2f} over the off-diagonal entries, {rows:+.2f} over the rows' "
          "geometric means (which family's data transfers best), {columns:+.2f} over the columns' (which family is "
          "hardest to reach)".format(**agreement))
    return {"fraction": args.table5_fraction, "repeats": args.table5_repeats, "method": args.table5_method,
            "level": args.table5_level, "agreement": agreement, "mdrae": raw, "direct": direct}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("out/costmodels/intel-nn2"),
                        help="The Intel NN2 model folder (current format).")
    parser.add_argument("--native", type=Path, default=Path("out/costmodels/amd-nn2"),
                        help="An AMD model fitted on all of AMD's training part, scored beside (if present).")
    parser.add_argument("--fractions", type=float, nargs="+", default=list(PAPER_FRACTIONS))
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="Seeds first-seed .. first-seed + repeats - 1 (a long sweep in parts; every run is "
                             "deterministic per seed)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS,
                        help="default: the shipped transfer (edgeplan.costmodels.transfer); finetune, "
                             "factor-finetune: that method alone on one round of single timings (no refit, no blend)")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--table5", action="store_true", help="Also the family-to-family matrix (Table 5).")
    parser.add_argument("--table5-only", action="store_true", help="Only Table 5.")
    parser.add_argument("--table5-fraction", type=float, default=0.1)
    parser.add_argument("--table5-repeats", type=int, default=1)
    parser.add_argument("--table5-level", default="trained", choices=["trained", "own"],
                        help="own: each evaluated family then gets its own level from the drawn rows (a diagnostic)")
    parser.add_argument("--table5-method", default="finetune", choices=list(METHODS),
                        help="factor-finetune: the pooled factor first (not the paper's method); default: the shipped "
                             "transfer")
    parser.add_argument("--ceiling", action="store_true",
                        help="Also what a per-primitive rescaling reaches with all of AMD's training part.")
    parser.add_argument("--shared-correction", action="store_true",
                        help="Beside fine-tuning, the source corrected by one boosted model shared by all primitives "
                             "and its geometric mean with the fine-tuned model (MdRAE only).")
    parser.add_argument("--json", type=Path, default=None, help="Write every run's figures to this file.")
    parser.add_argument("--merge", type=Path, nargs="+", default=None, metavar="JSON",
                        help="Only print the report of the runs in these --json files (the parts of one sweep run "
                             "with --first-seed)")
    args = parser.parse_args()
    if args.merge:
        merged: dict[tuple[float, int, str], dict[str, Any]] = {}
        for path in args.merge:
            try:
                part = json.loads(path.read_text())
                for row in part.get("runs", []):
                    merged[(float(row["fraction"]), int(row["seed"]), str(row["method"]))] = row
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                sys.exit(f"--merge: {path} is not a --json file of this benchmark ({exc}); give the files its runs "
                         "wrote with --json")
        if not merged:
            sys.exit("--merge: the files hold no runs; give the --json files of runs that finished")
        rows = list(merged.values())
        args.repeats = len({r["seed"] for r in rows if r["method"] != "direct"})
        report(args, rows, None)
        return 0
    if not (DATA / "amd.csv").is_file():
        print(f"skipped: {DATA} not present")
        return 0
    from edgeplan.costmodels import load_performance_model, load_primitive_csv
    from edgeplan.decisions.selection_costs import load_formats

    print(machine(args.threads))
    source = load_source(args.source)
    amd = load_primitive_csv(DATA / "amd.csv")
    print(f"source {args.source} ({source.kind}, {source.info.get('data')}, split seed {source.info.get('split_seed')}"
          f", transformations {source.transform_kind}); target {DATA / 'amd.csv'}")
    out: dict[str, Any] = {"source": str(args.source), "split_seed": args.split_seed}
    if not args.table5_only:
        score = Scorer(amd, load_formats(DATA / "formats.csv"), args.split_seed)
        native = score(load_performance_model(args.native)) if (args.native / "model.json").is_file() else None
        out["runs"] = sweep(args, source, amd, score)
        out["native"] = None if native is None else {k: v for k, v in native.items() if k != "primitive_mdrae"}
        report(args, out["runs"], native)
        if args.ceiling:
            out["ceiling"] = ceiling(args, source, amd, score)
    if args.table5 or args.table5_only:
        out["table5"] = table5(args, source, amd)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, default=float))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
