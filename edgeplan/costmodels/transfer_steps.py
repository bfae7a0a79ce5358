"""The steps of a transfer (:mod:`edgeplan.costmodels.transfer_learning`): factor corrections of a source's outputs,
the fine-tuning of its networks on a few target samples, and the transformation models moved with them.

A factor correction is folded into the estimator's output standardization (``y_mean_ += log(scale)``; outputs are
``exp(z * y_std_ + y_mean_)``), which is exact and leaves an ordinary estimator that saves and loads like any other.
"""

from __future__ import annotations

import copy
import math
from typing import Protocol

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.primitive_models import NN1Model, NN2Model, PrimitiveEstimator
from edgeplan.errors import InvalidInputError
from edgeplan.measure.primitive_data import PrimitiveDataset

__all__ = ["CROSS_FIT_MIN_ROWS", "FINETUNE_LR_FACTOR", "aligned_columns", "common_epoch", "copy_estimator",
           "cross_fits", "ensemble_size", "factor_ratios", "factor_scales", "finetune", "pooled_scales", "scaled",
           "stopping_plan", "tensor_table", "transfer_transforms"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
EstimatorPair = tuple[PrimitiveEstimator | None, PrimitiveEstimator | None]

FINETUNE_LR_FACTOR = 0.1
"""Fine-tuning learning rate relative to the source's (mulder2020 Table 3: "lowered by a factor of 10")."""

CROSS_FIT_MIN_ROWS = 2
"""Drawn rows per ensemble member from which fine-tuning is cross-fitted (:func:`stopping_plan`)."""


class SampleRows(Protocol):
    """What :func:`stopping_plan` reads of a sample (:class:`~edgeplan.costmodels.transfer_learning.TransferSample`)."""

    @property
    def fit_rows(self) -> IntArray: ...

    @property
    def stop_rows(self) -> IntArray: ...

    @property
    def rows(self) -> IntArray: ...


def copy_estimator(est: PrimitiveEstimator) -> PrimitiveEstimator:
    """An independent copy through the saved state (what a save and load gives; no pickle)."""
    meta, arrays = est.to_state()
    return type(est).from_state(meta, {k: np.array(v, copy=True) for k, v in arrays.items()})


def aligned_columns(values: FloatArray, names: tuple[str, ...], outputs: tuple[str, ...]) -> FloatArray:
    """``values`` (columns ``names``) laid out in the columns ``outputs``; NaN where ``names`` lacks one."""
    out = np.full((values.shape[0], len(outputs)), np.nan)
    index = {n: j for j, n in enumerate(names)}
    for j, name in enumerate(outputs):
        if name in index:
            out[:, j] = values[:, index[name]]
    return out


def factor_scales(est: PrimitiveEstimator, x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Per output, the median of ``y / est.predict(x)`` over the cells where both are defined.

    Parameters
    ----------
    est
        A fitted estimator.
    x
        Its inputs, ``(n, d)``.
    y
        Target times ``(n, len(est.output_names_))``, NaN where undefined.

    Returns
    -------
    tuple of numpy.ndarray
        The scales, and per output how many cells they came from. An output with no cell gets the median of the
        others' scales (1 when no output has a cell).
    """
    return _median_scales(*factor_ratios(est, x, y))


def factor_ratios(est: PrimitiveEstimator, x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, BoolArray]:
    """``y / est.predict(x)`` and where it is defined (finite and positive)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.asarray(y, dtype=np.float64) / est.predict(x)
    return ratio, np.isfinite(ratio) & (ratio > 0)


def _median_scales(ratio: FloatArray, defined: npt.NDArray[np.bool_]) -> tuple[FloatArray, FloatArray]:
    """:func:`factor_scales` from the ratios."""
    counts = defined.sum(axis=0).astype(np.float64)
    scales = np.full(ratio.shape[1], np.nan)
    for j in np.flatnonzero(counts):
        scales[j] = float(np.median(ratio[defined[:, j], j]))
    found = scales[np.isfinite(scales)]
    fallback = float(np.median(found)) if found.size else 1.0
    return np.where(np.isfinite(scales), scales, fallback), counts


def pooled_scales(est: PrimitiveEstimator, x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """:func:`factor_scales` with each primitive's scale pooled towards the platform's common scale.

    A primitive's scale from few cells is mostly noise. In log space,
    the primitive's median log ratio ``m_j`` (from ``n_j`` cells) is pulled towards the median ``g`` of the
    primitives' ``m_j`` by
    the empirical-Bayes weight ``w_j = tau^2 / (tau^2 + pi/2 * sigma^2 / n_j)``: ``sigma`` is the spread of a
    log ratio within a primitive (robust, pooled over the primitives with at least two cells; ``pi/2`` is the
    median's variance relative to the mean's), ``tau^2`` the spread of the primitives' true scales, estimated as the
    robust variance of the ``m_j`` (from their median absolute deviation, so that the one-cell outliers being pooled
    do not inflate it) less their median sampling variance (floored at a hundredth of it). Everything comes from
    the given cells; with one primitive, none with two cells, or no spread within the primitives, the plain scales
    are returned.

    Parameters
    ----------
    est, x, y
        As for :func:`factor_scales`.

    Returns
    -------
    tuple of numpy.ndarray
        The pooled scales, and per output how many cells they came from (an output without cells gets ``exp(g)``).
    """
    ratio, defined = factor_ratios(est, x, y)
    plain, counts = _median_scales(ratio, defined)
    found = counts > 0
    m = np.log(plain)
    resid = np.log(np.where(defined, ratio, np.nan)) - m  # NaN where no cell
    spread_from = counts >= 2
    if found.sum() < 2 or not spread_from.any():
        return plain, counts
    sigma2 = float((1.4826 * np.nanmedian(np.abs(resid[:, spread_from]))) ** 2)
    if sigma2 == 0.0:  # the cells agree exactly within each primitive: nothing to pool against
        return plain, counts
    g = float(np.median(m[found]))
    v = np.full(len(m), np.inf)
    v[found] = 0.5 * math.pi * sigma2 / counts[found]
    spread = float((1.4826 * np.median(np.abs(m[found] - g))) ** 2)  # robust: one wild m_j does not inflate it
    tau2 = max(spread - float(np.median(v[found])), 0.01 * float(np.median(v[found])))
    w = np.where(found, tau2 / (tau2 + v), 0.0)
    return np.exp(g + w * (np.where(found, m, g) - g)), counts


def scaled(est: PrimitiveEstimator, scales: FloatArray) -> PrimitiveEstimator:
    """A copy of ``est`` whose outputs are multiplied by ``scales`` (folded into its output standardization)."""
    out = copy_estimator(est)
    out.y_mean_ = np.asarray(out.y_mean_ + np.log(scales), dtype=np.float64)
    return out


def stopping_plan(sample: SampleRows, members: int, seed: int) -> list[tuple[IntArray, IntArray]]:
    """Per ensemble member, the drawn rows it is fine-tuned on and the rows it early-stops on.

    With two or more members and at least :data:`CROSS_FIT_MIN_ROWS` drawn rows per member, the fine-tuning is
    **cross-fitted**: the drawn rows are cut into one seeded fold per member; member ``k`` early-stops on fold ``k``
    and trains on the others. Every drawn row then trains most of the ensemble and stops one member, and the members
    differ by what they stopped on, which the average then smooths. Otherwise every member trains on
    ``sample.fit_rows`` and stops on ``sample.stop_rows`` (its training rows when there are none).

    Parameters
    ----------
    sample
        The drawn rows.
    members
        Ensemble members of the model being fine-tuned.
    seed
        Seed of the folds.

    Returns
    -------
    list of (numpy.ndarray, numpy.ndarray)
        ``members`` pairs ``(fit rows, stop rows)``, each sorted.
    """
    rows = sample.rows
    if cross_fits(len(rows), members):
        folds = np.array_split(np.random.default_rng([int(seed), 2]).permutation(rows), members)
        return [(np.setdiff1d(rows, fold), np.sort(fold)) for fold in folds]
    stop = sample.stop_rows if len(sample.stop_rows) else sample.fit_rows
    return [(sample.fit_rows, stop)] * members


def cross_fits(rows: int, members: int) -> bool:
    """Whether fine-tuning ``members`` networks on ``rows`` drawn rows is cross-fitted (:func:`stopping_plan`)."""
    return members >= 2 and rows >= CROSS_FIT_MIN_ROWS * members


def ensemble_size(est: PrimitiveEstimator) -> int:
    """Ensemble members of a neural estimator (1 for any other)."""
    return max(1, int(getattr(est, "n_members", 1) or 1))


def common_epoch(curves: list[list[float]]) -> int:
    """The epoch (from 1) with the lowest summed loss over ``curves``, within the epochs every curve has.

    Parameters
    ----------
    curves
        Per cross-fitted member, its validation loss after each epoch (weighted by its fold's cells), at least one
        epoch each.

    Returns
    -------
    int
        The first epoch of the lowest sum.
    """
    if not curves or min(map(len, curves)) == 0:
        raise ValueError("common_epoch needs at least one curve of at least one epoch")
    common = min(map(len, curves))
    return int(np.argmin(np.sum([c[:common] for c in curves], axis=0))) + 1


def finetune(est: PrimitiveEstimator, x: FloatArray, y: FloatArray, plan: list[tuple[IntArray, IntArray]],
             seed: int, threads: int | None, refit: bool = False) -> tuple[PrimitiveEstimator, int | None]:
    """A copy of a neural ``est`` trained further on the rows of ``x``, ``y`` (y in its columns) that ``plan``
    gives each member (see :func:`stopping_plan`), and the epoch count of the refit (None without one).

    With ``refit`` and a cross-fitted plan, the members' fold runs only choose the epoch count: the one with the
    lowest validation loss summed over the folds (each fold's mean loss times its defined cells), within the epochs
    every member ran; then every member is trained afresh from ``est`` on all drawn rows for that many epochs."""
    from edgeplan.costmodels._mlp import EpochInfo, TrainConfig, torch_threads, train_masked

    if not isinstance(est, NN1Model | NN2Model):
        raise InvalidInputError(f"method finetune continues training a neural model; the source's primitives model "
                                f"is {est.kind!r}: use method factor")
    tuned = copy_estimator(est)
    assert isinstance(tuned, NN1Model | NN2Model)
    x_all, y_all = tuned._scale_x(x), tuned._scale_y(y)  # the source's standardization, kept
    lr = float(tuned.lr) * FINETUNE_LR_FACTOR
    per_member = max(1, len(tuned.nets_) // ensemble_size(tuned))
    every = np.union1d(*plan[0])  # all drawn rows (the first member's fit and stop rows)
    refit = refit and cross_fits(len(every), len(plan))

    def config(k: int, epochs: int, patience: int) -> TrainConfig:
        return TrainConfig(lr=lr, weight_decay=tuned.weight_decay, batch_size=tuned.batch_size,
                           max_epochs=epochs, patience=patience, lr_schedule=tuned.lr_schedule,
                           min_lr=min(float(tuned.min_lr), lr), seed=seed + k // per_member,
                           time_limit_s=tuned.time_limit_s,
                           ema_decay=0.0)  # no weight average: a few samples make an epoch one step

    logs, curves = [], []
    with torch_threads(int(threads or tuned.threads)):
        for k, (cols, net) in enumerate(zip(tuned.groups_, tuned.nets_, strict=True)):
            fit, stop = plan[min(k // per_member, len(plan) - 1)]
            xs, ys, xv, yv = x_all[fit], y_all[fit], x_all[stop], y_all[stop]
            rows = ~np.isnan(ys[:, cols]).all(axis=1)
            if not rows.any():  # no target sample for this net's outputs: it keeps the source's weights
                continue
            curve: list[float] = []
            cells = float(np.isfinite(yv[:, cols]).sum())

            def record(info: EpochInfo, curve: list[float] = curve, cells: float = cells) -> None:
                curve.append(info.val_loss * cells)

            trained = copy.deepcopy(net) if refit else net
            logs.append(train_masked(trained, xs[rows], ys[rows][:, cols], xv, yv[:, cols],
                                     config(k, tuned.max_epochs, tuned.patience), record if refit else None))
            if cells > 0:
                curves.append(curve)
        epochs = None
        if refit and curves:
            epochs = common_epoch(curves)
            for k, (cols, net) in enumerate(zip(tuned.groups_, tuned.nets_, strict=True)):
                ys = y_all[every][:, cols]
                rows = ~np.isnan(ys).all(axis=1)
                if not rows.any():
                    continue
                none = np.full((1, len(cols)), np.nan)  # no validation cell: it keeps its lowest training loss
                train_masked(net, x_all[every][rows], ys[rows], x_all[every][:1], none,
                             config(k, epochs, epochs + 1))
    tuned.n_epochs_ = tuple(log.epochs for log in logs)
    tuned.best_epochs_ = tuple(e for log in logs for e in log.best_epochs)
    tuned.stopped_by_ = tuple(log.stopped_by for log in logs)
    tuned.on_validation_ = tuple(v for log in logs for v in log.on_validation)
    tuned.fit_time_s_ = float(sum(log.elapsed_s for log in logs))
    return tuned, epochs


def tensor_table(target: PrimitiveDataset, rows: IntArray) -> tuple[FloatArray, FloatArray, tuple[str, ...]]:
    """Distinct ``(c, im)`` of ``rows`` and their transformation times."""
    table = target.subset(rows).transform_table()
    return table.features, table.times_ns, table.names


def transfer_transforms(source: EstimatorPair, target: PrimitiveDataset, rows: IntArray, method: str
                         ) -> tuple[PrimitiveEstimator | None, PrimitiveEstimator | None, dict[str, float]]:
    """The transformation models of the transferred model (see the module docstring) and their scales.

    ``direct`` keeps the source's; the other methods factor-correct them per transformation over the distinct
    ``(c, im)`` tensors of ``rows``. A target without transformation columns leaves them uncorrected (empty scales).
    """
    trans, paper = source
    if trans is None or method == "direct":
        return trans, paper, {}
    if not target.transforms:
        return trans, paper, {}
    tx, ty, names = tensor_table(target, rows)
    scales, _ = factor_scales(trans, tx, aligned_columns(ty, names, trans.output_names_))
    corrected_paper = None
    if paper is not None:
        paper_scales, _ = factor_scales(paper, tx, aligned_columns(ty, names, paper.output_names_))
        corrected_paper = scaled(paper, paper_scales)
    return scaled(trans, scales), corrected_paper, dict(zip(trans.output_names_, map(float, scales), strict=True))
