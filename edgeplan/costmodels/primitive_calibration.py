"""A primitive performance model moved to a user's machine from the layers measured on it, the transfer method
chosen by cross-validation (``edgeplan primitives transfer --name NAME`` without ``--fraction``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.performance_model import PerformanceModel
from edgeplan.costmodels.primitive_models import NN1Model, NN2Model
from edgeplan.costmodels.transfer_learning import FitOptions, check_seed, check_transfer, hold_out, transfer_on
from edgeplan.costmodels.transfer_steps import aligned_columns, tensor_table
from edgeplan.errors import InvalidInputError
from edgeplan.measure.metrics import mdrae_per_column
from edgeplan.measure.primitive_data import PrimitiveDataset

__all__ = ["CALIBRATION_FOLDS", "PrimitiveCalibration", "calibrate_primitives"]

FloatArray = npt.NDArray[np.float64]

CALIBRATION_FOLDS = 5
"""Folds of the cross-validation by which :func:`calibrate_primitives` scores and chooses its method."""


@dataclass(frozen=True)
class PrimitiveCalibration:
    """A performance model moved to a user's machine from the layers measured on it.

    Attributes
    ----------
    model
        The calibrated model, fitted with :attr:`method` on every measured layer.
    method
        The transfer method used (``direct``, ``factor``, ``finetune`` or ``factor-finetune``).
    scores
        Per method tried, the cross-validated median MdRAE over the primitives (a fraction): every measured layer
        predicted by the method fitted on the other folds, errors pooled, MdRAE per primitive, median.
    transform_scores
        The same for the layout transformations (median over the non-identity ones; NaN without such columns). The
        folds split layers, and a transformation depends on the ``(c, im)`` tensor only, so a held-out layer's
        tensor may occur in a training fold: this is the paper's row protocol, not a held-out-tensor score.
    rows
        Measured layers used.
    folds
        Folds of the cross-validation (0: too few layers to cross-validate).
    """

    model: PerformanceModel
    method: str
    scores: dict[str, float]
    transform_scores: dict[str, float]
    rows: int
    folds: int


def calibrate_primitives(source: PerformanceModel, target: PrimitiveDataset, *, method: str = "auto", seed: int = 0,
                         threads: int | None = None, folds: int = CALIBRATION_FOLDS,
                         progress: Any = None) -> PrimitiveCalibration:
    """Move ``source`` to the machine that measured ``target``, choosing the method by cross-validation.

    Every method tried (``direct``, ``factor`` and, for a neural source, ``finetune`` and ``factor-finetune``; or
    only ``method``) is scored by ``folds``-fold cross-validation over the target's layers: each fold is predicted
    by the method fitted on the other folds (:func:`transfer_on`; the fine-tuning methods early-stop on a seeded
    20 % of those), the relative errors are pooled, and the score is the median over primitives of their MdRAE.
    ``auto`` keeps the best. The returned model is that method fitted on every layer. The method is measured rather
    than fixed because the best one depends on how far the machines differ and on how many layers were measured
    (``docs/figures.md``). The chosen method's score is the lowest of several noisy estimates, so it is optimistic.

    Parameters
    ----------
    source
        The model of a measured platform (e.g. the shipped one of the reference machine).
    target
        Layers measured on the new machine (mulder2021 format; columns a subset of the source's is fine).
    method
        ``auto`` (default), ``direct``, ``factor``, ``finetune`` or ``factor-finetune``.
    seed
        Seed of the folds, the early-stopping hold-out and fine-tuning.
    threads
        Torch threads for fine-tuning (default: the source's).
    folds
        Folds of the cross-validation, at least 2 (at most one per layer; none with a single layer, where ``auto``
        keeps the factor).
    progress
        Called as ``progress(done, total)`` after every fit (CV folds and the final fit).

    Returns
    -------
    PrimitiveCalibration

    Raises
    ------
    InvalidInputError
        An unknown method, a table sharing no primitive with the source, no layer, or ``finetune`` from a linear
        source.
    """
    if not isinstance(source, PerformanceModel) or not isinstance(target, PrimitiveDataset):
        raise InvalidInputError("calibrate_primitives needs a PerformanceModel (load_performance_model(DIR)) and a "
                                "PrimitiveDataset (load_primitive_csv(FILE)), got "
                                f"{type(source).__name__} and {type(target).__name__}")
    if threads is not None:
        from edgeplan.measure.harness import check_thread_count

        check_thread_count(threads)
    neural = isinstance(source.primitives, NN1Model | NN2Model)
    methods: tuple[str, ...]
    if method == "auto":
        methods = ("direct", "factor", "finetune", "factor-finetune") if neural else ("direct", "factor")
    elif method in ("direct", "factor", "finetune", "factor-finetune"):
        methods = (method,)
    else:
        raise InvalidInputError(f"unknown calibration method {method!r}; use auto, direct, factor, finetune or "
                                f"factor-finetune")
    check_transfer(source, target, methods[-1])
    if not neural and any(m.endswith("finetune") for m in methods):
        raise InvalidInputError(f"finetune continues training a neural model; the source is {source.kind!r}: use "
                                f"factor or auto")
    if isinstance(folds, bool) or not isinstance(folds, int | np.integer) or folds < 2:
        raise InvalidInputError(f"folds {folds!r}: cross-validation needs at least 2 folds")
    n = len(target)

    def plain(m: str) -> FitOptions:  # each method as such: no refit, no blend
        return FitOptions(seed, method=m, refit=False, blend=False, threads=threads)

    if n == 0:
        raise InvalidInputError(f"{target.source or 'the measurements'}: no layer; measure at least one")
    k = min(int(folds), n) if n >= 2 else 0
    fold_of = np.random.default_rng([check_seed(seed, "seed"), 2]).permutation(n) % k if k else np.zeros(0)
    total = len(methods) * k + 1
    done = 0
    outputs = source.primitive_names
    y_true = aligned_columns(target.primitive_ns, target.primitives, outputs)
    scores: dict[str, float] = {}
    transform_scores: dict[str, float] = {}
    for m in methods if k else ():
        pred = np.full_like(y_true, np.nan)
        t_true: list[FloatArray] = []
        t_pred: list[FloatArray] = []
        for fold in range(k):
            train, held = np.flatnonzero(fold_of != fold), np.flatnonzero(fold_of == fold)
            model = transfer_on(source, target, hold_out(train, seed), plain(m))
            pred[held] = model.predict_primitives(target.features[held])
            if model.transforms is not None and target.transforms:
                tx, ty, names = tensor_table(target, held)
                t_true.append(aligned_columns(ty, names, model.transform_names))
                t_pred.append(model.predict_transforms(tx))
            done += 1
            if progress is not None:
                progress(done, total)
        per = mdrae_per_column(y_true, pred, outputs)
        scores[m] = float(np.nanmedian([v for v in per.values() if not math.isnan(v)] or [math.nan]))
        transform_scores[m] = _transform_score(t_true, t_pred, source.transform_names)
    chosen = min(scores, key=lambda m: scores[m]) if method == "auto" and scores else methods[-1]
    if method == "auto" and not scores:
        chosen = "factor"  # one layer: nothing to cross-validate; the factor is what one sample can support
    model = transfer_on(source, target, hold_out(np.arange(n), seed), plain(chosen))
    if progress is not None:
        progress(total, total)
    model.info["transfer"]["calibration"] = {
        "method": method, "chosen": chosen, "folds": k,
        "scores": {m: v if math.isfinite(v) else None for m, v in scores.items()},
        "transform_scores": {m: v if math.isfinite(v) else None for m, v in transform_scores.items()}}
    return PrimitiveCalibration(model, chosen, scores, transform_scores, n, k)


def _transform_score(truth: list[FloatArray], pred: list[FloatArray], names: tuple[str, ...]) -> float:
    """Median over the non-identity transformations of their pooled MdRAE (NaN with none)."""
    if not truth:
        return math.nan
    per = mdrae_per_column(np.vstack(truth), np.vstack(pred), names)
    found = [v for name, v in per.items() if name.split("-to-")[0] != name.split("-to-")[-1] and not math.isnan(v)]
    return float(np.median(found)) if found else math.nan
