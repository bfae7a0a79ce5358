"""Transfer of a platform's performance model to another platform from a few target samples (mulder2020 §4.4, §5.3).

:func:`transfer` turns a fitted *source* :class:`~edgeplan.costmodels.performance_model.PerformanceModel` (say the
Intel NN2) into a model of a *target* platform (say AMD), given the target's timing table, of which it uses only a
``fraction`` of the training part of its seeded 80/10/10 split (``split_seed``); the validation and test parts are
never used. It does one thing, the design measured best (``docs/figures.md`` has the figures and the commands that
give them):

1. **Samples in two rounds of single timings** (one primitive timed on one layer, mulder2020's "sample points"):
   ``fraction`` of the training part's defined primitive cells in all. :data:`ADAPTIVE_FIRST` of them first, shared
   evenly among the primitives (:func:`even_shares`), each primitive's on layers drawn at random
   (:func:`draw_samples`); a transfer from those predicts every training layer, and the rest go to the layers'
   *close contenders* (:func:`contender_cells`): the :data:`CONTENDERS` predicted fastest primitives within
   :data:`CONTENDER_MARGIN` of a layer's predicted best, timed side by side on that layer, which is what the
   selection has to decide. The transfer is then made again from both rounds (twice the fitting time).
2. **A factor correction, pooled** (:func:`~edgeplan.costmodels.transfer_steps.pooled_scales`): each primitive's
   median ``target time / source prediction``, pulled towards the platform's common scale by how few cells it rests
   on; a primitive without a cell gets the common scale.
3. **Fine-tuning** from the corrected source with the learning rate times
   :data:`~edgeplan.costmodels.transfer_steps.FINETUNE_LR_FACTOR`, **cross-fitted** over the ensemble's members
   (:func:`~edgeplan.costmodels.transfer_steps.stopping_plan`) and **refitted**: the folds choose one epoch count
   together (:func:`~edgeplan.costmodels.transfer_steps.common_epoch`), then every member trains on all the drawn
   samples for that long.
4. **A blend** with the source corrected by one boosted model shared by all primitives
   (:mod:`edgeplan.costmodels.blend`), when the samples hold enough timings for it
   (:data:`~edgeplan.costmodels.blend.MIN_TIMINGS`; ``info["transfer"]["blend"]`` is None without it).

The layout transformations are the source's, factor-corrected per transformation over the distinct ``(c, im)``
tensors of the rows a uniform draw of the fraction gives. Target columns the source does not predict are ignored
(``info["transfer"]["ignored_columns"]``); source columns the samples never define stay masked (no loss, gradient or
factor sample) and are still predicted.

:func:`transfer_on` makes a transfer on given rows with one of :data:`METHODS` (``direct``: the source as is;
``factor``: the plain factor correction; ``finetune``; ``factor-finetune``), as
:func:`~edgeplan.costmodels.primitive_calibration.calibrate_primitives` does to choose among them by
cross-validation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.blend import BLEND_WEIGHT, CORRECTION_PARAMS, MIN_TIMINGS, fit_blend
from edgeplan.costmodels.performance_model import PerformanceModel
from edgeplan.costmodels.primitive_models import NN1Model, NN2Model, PrimitiveEstimator
from edgeplan.costmodels.transfer_steps import (
    FINETUNE_LR_FACTOR,
    aligned_columns,
    copy_estimator,
    cross_fits,
    ensemble_size,
    factor_scales,
    finetune,
    pooled_scales,
    scaled,
    stopping_plan,
    transfer_transforms,
)
from edgeplan.errors import InvalidInputError
from edgeplan.measure.primitive_data import LAYER_FEATURES, PrimitiveDataset, split_indices

__all__ = ["ADAPTIVE_FIRST", "CONTENDERS", "CONTENDER_MARGIN", "METHODS", "STOP_FRACTION", "FitOptions",
           "TransferSample", "check_seed", "check_transfer", "contender_cells", "draw_samples", "even_shares",
           "hold_out", "transfer", "transfer_on"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

METHODS: tuple[str, ...] = ("direct", "factor", "finetune", "factor-finetune")
"""The methods of :func:`transfer_on` (:func:`transfer` uses ``factor-finetune``)."""

ADAPTIVE_FIRST = 0.75
"""Share of the timings drawn in the first round (:func:`draw_samples`); the rest go to close contenders."""

CONTENDERS = 3
"""Most primitives the second round times on one layer (:func:`contender_cells`)."""

CONTENDER_MARGIN = 0.15
"""A contender's predicted time is at most this much (relative) above the layer's predicted best."""

STOP_FRACTION = 0.2
"""Share of the drawn rows held out for early stopping when the fine-tuning is not cross-fitted (at least one of two
or more)."""


@dataclass(frozen=True)
class FitOptions:
    """How :func:`transfer_on` fits.

    Attributes
    ----------
    seed
        Seed of the early-stopping hold-out, the folds and the shuffling in fine-tuning.
    method
        One of :data:`METHODS`.
    refit
        After the cross-fitted folds choose an epoch count together, train every member on all the drawn rows for
        that long (fine-tuning methods).
    blend
        Blend the fine-tuned model with the source corrected by one shared boosted model
        (:mod:`edgeplan.costmodels.blend`; fine-tuning methods).
    threads
        Torch threads for training (default: the source's).
    """

    seed: int
    method: str = "factor-finetune"
    refit: bool = True
    blend: bool = True
    threads: int | None = None


@dataclass(frozen=True)
class TransferSample:
    """The target rows a transfer uses (indices into the target table, each sorted).

    Attributes
    ----------
    fit_rows
        Rows trained on (when the fine-tuning is not cross-fitted).
    stop_rows
        Rows held out for early stopping (empty with a single drawn sample).
    cells
        ``(m, 2)`` array of the drawn ``(row, primitive column)`` pairs of the target table, sorted; None: every
        defined primitive cell of the rows (rows given to :func:`transfer_on`).
    tensor_rows
        Rows whose layout-transformation times are used; None: :attr:`rows`.
    """

    fit_rows: IntArray
    stop_rows: IntArray
    cells: IntArray | None = None
    tensor_rows: IntArray | None = None

    @property
    def rows(self) -> IntArray:
        """Every drawn row (``factor`` uses them all)."""
        return np.sort(np.concatenate([self.fit_rows, self.stop_rows]))

    @property
    def transform_rows(self) -> IntArray:
        """The rows whose layout-transformation times the transfer uses."""
        return self.rows if self.tensor_rows is None else self.tensor_rows

    def primitive_times(self, target: PrimitiveDataset) -> FloatArray:
        """``target``'s primitive times as this sample sees them: all of them for given rows; for drawn cells a
        copy with every undrawn cell NaN (unknown, so no loss, gradient or factor sample)."""
        if self.cells is None:
            return target.primitive_ns
        seen = np.full_like(target.primitive_ns, np.nan)
        r, c = self.cells[:, 0], self.cells[:, 1]
        seen[r, c] = target.primitive_ns[r, c]
        return seen

    @property
    def drawn_cells(self) -> int | None:
        """How many single timings were drawn (None for given rows)."""
        return None if self.cells is None else len(self.cells)

    def __len__(self) -> int:
        return int(len(self.fit_rows) + len(self.stop_rows))


def _check_fraction(fraction: float) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, int | float | np.floating):
        raise InvalidInputError(f"fraction {fraction!r}: give a number in (0, 1], e.g. 0.01 for 1 % of the target's "
                                f"training part")
    value = float(fraction)
    if not (0.0 < value <= 1.0):
        raise InvalidInputError(f"fraction {value:g} is outside (0, 1]; give the share of the target's training part "
                                f"to use, e.g. 0.01 for 1 %")
    return value


def check_seed(seed: int, what: str) -> int:
    """``seed`` as an int, refused unless a non-negative integer (``what`` names it in the message)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InvalidInputError(f"{what} {seed!r}: use a non-negative integer (0, 1, 2, ...)")
    return int(seed)


def draw_samples(target: PrimitiveDataset, fraction: float, seed: int, split_seed: int = 0) -> TransferSample:
    """Draw ``fraction`` of the single timings of the target's training part, as many per primitive.

    Parameters
    ----------
    target
        The target platform's table.
    fraction
        Share of the training part's defined primitive cells, in ``(0, 1]``; at least one is drawn.
    seed
        Seed of the draw and of the hold-out (a non-negative integer).
    split_seed
        Seed of the target's 80/10/10 split.

    Returns
    -------
    TransferSample
        ``max(1, round(fraction * cells))`` cells shared evenly among the primitives (:func:`even_shares`), each
        primitive's on layers drawn uniformly from those it applies to; the rows they fall in split by
        :func:`hold_out`; the layout transformations of ``max(1, round(fraction * len(train)))`` training rows drawn
        uniformly.

    Raises
    ------
    InvalidInputError
        ``fraction`` outside ``(0, 1]``, a negative seed, or a training part without a defined primitive cell.
    """
    fraction = _check_fraction(fraction)
    seed = check_seed(seed, "seed")
    train = split_indices(target.features, check_seed(split_seed, "split seed")).train
    if len(train) == 0:
        raise InvalidInputError(f"{target.source or 'the target table'}: {len(target)} layer(s) leave no training part "
                                f"in the 80/10/10 split; profile more layers")
    n = max(1, round(fraction * len(train)))
    tensors = np.sort(np.random.default_rng(seed).permutation(train)[:n])
    defined = ~np.isnan(target.primitive_ns[train])
    if not defined.any():
        raise InvalidInputError(f"{target.source or 'the target table'}: its training part has no primitive time to "
                                f"draw; use a table with measured primitives")
    shares = even_shares(defined.sum(axis=0), max(1, round(fraction * int(defined.sum()))), seed)
    rng = np.random.default_rng([seed, 3])
    pick = np.vstack([np.column_stack([rng.choice(np.flatnonzero(defined[:, j]), k, replace=False), np.full(k, j)])
                      for j, k in enumerate(shares) if k > 0])
    cells = np.column_stack([train[pick[:, 0]], pick[:, 1]]).astype(np.int64)
    cells = cells[np.lexsort((cells[:, 1], cells[:, 0]))]
    rows = hold_out(np.unique(cells[:, 0]), seed)
    return TransferSample(rows.fit_rows, rows.stop_rows, cells, tensors)


def even_shares(available: npt.ArrayLike, n: int, seed: int) -> IntArray:
    """``n`` draws shared as evenly as possible among columns (each primitive's share of :func:`draw_samples`).

    Every column gets the same number (the remainder goes to columns chosen by the seed), none more than it has;
    what a column cannot take is shared among the others.

    Parameters
    ----------
    available
        Per column, how many cells it has to draw from (non-negative integers).
    n
        Draws to share.
    seed
        Seed of the columns that take the remainder.

    Returns
    -------
    numpy.ndarray
        Per column, its draws; they sum to ``min(n, sum(available))``.
    """
    room = np.asarray(available, dtype=np.int64)
    take = np.zeros_like(room)
    rng = np.random.default_rng([seed, 5])
    left = min(int(n), int(room.sum()))
    while left > 0:
        open_ = np.flatnonzero(take < room)
        share, extra = divmod(left, len(open_))
        add = np.full(len(open_), share)
        add[rng.choice(len(open_), extra, replace=False)] += 1
        add = np.minimum(add, room[open_] - take[open_])
        take[open_] += add
        left -= int(add.sum())
    return take


def contender_cells(model: PerformanceModel, target: PrimitiveDataset, first: TransferSample, total: int, seed: int,
                    split_seed: int = 0, contenders: int = CONTENDERS,
                    margin: float = CONTENDER_MARGIN) -> TransferSample:
    """The second round of :func:`transfer`'s samples: time the close contenders of layers, as ``model`` sees them.

    The training part's layers are visited in a seeded random order. On each, the primitives the target defines
    there and ``model`` predicts are ranked by ``model``'s prediction; those of the first ``contenders`` that are
    predicted at most ``margin`` above the best and not yet drawn are drawn, if at least two are (a pair of new
    timings on one layer; a layer where only one is new is passed over). Visiting stops when ``first`` and the drawn
    contenders make ``total`` timings, so the last layer visited may get a single one.

    Parameters
    ----------
    model
        A model of the target fitted on ``first`` (e.g. :func:`transfer_on` on it).
    target
        The target platform's table.
    first
        The first round (from :func:`draw_samples`).
    total
        Timings of both rounds together.
    seed
        Seed of the order of the layers.
    split_seed
        Seed of the target's 80/10/10 split (the layers are its training part's).
    contenders
        Most primitives drawn on one layer (at least 2).
    margin
        Relative margin over the layer's predicted best within which a primitive is a contender (non-negative).

    Returns
    -------
    TransferSample
        ``first``'s cells and the contenders' (``total`` of them unless the layers run out first), the rows they fall
        in held out as :func:`hold_out` does, and ``first``'s transformation rows.

    Raises
    ------
    InvalidInputError
        ``first`` without cells (or with none), fewer than 2 ``contenders`` or a negative ``margin``.
    """
    if first.cells is None or len(first.cells) == 0:
        raise InvalidInputError("the first round must be single timings (from draw_samples), at least one")
    if contenders < 2 or not margin >= 0.0:
        raise InvalidInputError(f"contenders {contenders} and margin {margin}: use at least 2 contenders and a "
                                f"non-negative margin")
    train = split_indices(target.features, check_seed(split_seed, "split seed")).train
    times = aligned_columns(model.predict_primitives(target.features[train]), model.primitive_names, target.primitives)
    times[np.isnan(target.primitive_ns[train]) | ~(times > 0)] = np.inf  # not applicable, or no usable prediction
    taken = {(int(r), int(c)) for r, c in first.cells}
    cells = sorted(taken)
    need = int(total) - len(cells)
    for i in np.random.default_rng([check_seed(seed, "seed"), 11]).permutation(len(train)):
        if need <= 0:
            break
        order = np.argsort(times[i], kind="stable")[:contenders]
        best = times[i, order[0]]
        row = int(train[i])
        picks = [int(j) for j in order if times[i, j] <= best * (1.0 + margin) and (row, int(j)) not in taken]
        if not np.isfinite(best) or len(picks) < 2:
            continue
        for j in picks[:need]:
            cells.append((row, j))
            taken.add((row, j))
            need -= 1
    drawn = np.array(sorted(cells), dtype=np.int64)
    rows = hold_out(np.unique(drawn[:, 0]), seed)
    return TransferSample(rows.fit_rows, rows.stop_rows, drawn, first.tensor_rows)


def hold_out(rows: npt.ArrayLike, seed: int) -> TransferSample:
    """Split target ``rows`` into fit and early-stopping rows as :func:`draw_samples` does (seeded).

    Parameters
    ----------
    rows
        Row indices of the target table (any order; at least one).
    seed
        Seed of the hold-out.

    Returns
    -------
    TransferSample
        ``max(1, round(STOP_FRACTION * n))`` of the ``n`` rows (none when ``n = 1``) as ``stop_rows``.
    """
    drawn = np.asarray(rows, dtype=np.int64)
    n = len(drawn)
    if n == 0:
        raise InvalidInputError("no target rows to transfer from; measure at least one layer")
    n_stop = max(1, round(STOP_FRACTION * n)) if n >= 2 else 0
    held = np.random.default_rng([check_seed(seed, "seed"), 1]).permutation(n)[:n_stop]
    stop = np.zeros(n, dtype=bool)
    stop[held] = True
    return TransferSample(np.sort(drawn[~stop]), np.sort(drawn[stop]))


def transfer(source: PerformanceModel, target: PrimitiveDataset, *, fraction: float, seed: int, split_seed: int = 0,
             threads: int | None = None) -> PerformanceModel:
    """A performance model of the target platform, from ``source`` and ``fraction`` of the target's training part.

    Draws the samples in two rounds, then factor-corrects, fine-tunes (cross-fitted, refitted) and blends the source
    (see the module docstring).

    Parameters
    ----------
    source
        A fitted performance model of the source platform (NN2 or NN1: it is fine-tuned).
    target
        The target platform's timing table; only the drawn cells of its training part are used.
    fraction
        Share of the training part's timings to draw, in ``(0, 1]`` (e.g. 0.01); at least one.
    seed
        Seed of the draw, the folds and the shuffling in fine-tuning.
    split_seed
        Seed of the target's 80/10/10 split; the transferred model records it for its evaluation.
    threads
        Torch threads for training (default: the source's setting).

    Returns
    -------
    PerformanceModel
        A new model (``source`` is not modified) with ``info["transfer"]`` describing the transfer:
        ``adaptive_rounds`` the two rounds' timings, ``seconds`` both rounds' fitting time.

    Raises
    ------
    InvalidInputError
        ``fraction`` outside ``(0, 1]``, a negative seed, no primitive column shared with the source, or a source
        that cannot be fine-tuned (a linear model).
    """
    options = FitOptions(seed, threads=threads)
    check_transfer(source, target, options.method)
    if not isinstance(source.primitives, NN1Model | NN2Model):
        raise InvalidInputError(f"transfer fine-tunes the source's networks, and its primitives model is "
                                f"{source.primitives.kind!r}: transfer an nn2 or nn1 model (`edgeplan primitives fit "
                                f"--model nn2`)")
    started, settings = time.monotonic(), (fraction, split_seed)
    full = draw_samples(target, fraction, seed, split_seed)
    assert full.cells is not None
    first = draw_samples(target, fraction * ADAPTIVE_FIRST, seed, split_seed)
    first = replace(first, tensor_rows=full.tensor_rows)
    guide = transfer_on(source, target, first, _blendable(options, source, target, first), settings)
    sample = contender_cells(guide, target, first, len(full.cells), seed, split_seed)
    model = transfer_on(source, target, sample, _blendable(options, source, target, sample), settings)
    assert first.cells is not None and sample.cells is not None
    model.info["transfer"]["adaptive_rounds"] = [len(first.cells), len(sample.cells) - len(first.cells)]
    model.info["transfer"]["seconds"] = round(time.monotonic() - started, 3)
    return model


def _blendable(options: FitOptions, source: PerformanceModel, target: PrimitiveDataset,
               sample: TransferSample) -> FitOptions:
    """``options`` without the blend when ``sample`` holds fewer timings of the source's primitives than the blend's
    correction needs (:data:`~edgeplan.costmodels.blend.MIN_TIMINGS`)."""
    assert sample.cells is not None
    shared = np.isin(np.asarray(target.primitives, dtype=object)[sample.cells[:, 1]],
                     np.asarray(source.primitive_names, dtype=object))
    return options if int(shared.sum()) >= MIN_TIMINGS else replace(options, blend=False)


def transfer_on(source: PerformanceModel, target: PrimitiveDataset, sample: TransferSample, options: FitOptions,
                settings: tuple[float | None, int | None] = (None, None)) -> PerformanceModel:
    """A transfer of ``source`` fitted on given target rows or cells (``sample``), with ``options``.

    Parameters
    ----------
    source, target
        As for :func:`transfer`.
    sample
        The rows (or cells) to fit on, and the rows to early-stop on (e.g. from :func:`hold_out`).
    options
        The method and how it fits.
    settings
        ``(fraction, split_seed)`` recorded in the model's ``info``; ``None`` when the rows were not drawn from a
        split (a calibration).

    Returns
    -------
    PerformanceModel

    Raises
    ------
    InvalidInputError
        An unknown method, no primitive column shared with the source, fine-tuning a linear source, or a blend
        or refit without fine-tuning.
    """
    method = options.method
    check_transfer(source, target, method)
    tunes = method in ("finetune", "factor-finetune")
    if (options.blend or options.refit) and not tunes:
        raise InvalidInputError(f"blend and refit shape a fine-tuning; method {method!r} has none: use finetune or "
                                f"factor-finetune, or leave them out")
    fraction, split_seed = settings
    started = time.monotonic()
    outputs = source.primitive_names
    y_all = aligned_columns(sample.primitive_times(target), target.primitives, outputs)
    x_all = target.features
    plan: list[tuple[IntArray, IntArray]] = []
    refit_epochs: int | None = None
    scales: dict[str, float] = {}
    counts: dict[str, int] = {}
    prim: PrimitiveEstimator = source.primitives
    if method in ("factor", "factor-finetune"):
        scaling = factor_scales if method == "factor" else pooled_scales  # the paper's factor is the plain one
        found, n_cells = scaling(source.primitives, x_all[sample.rows], y_all[sample.rows])
        prim = scaled(source.primitives, found)
        scales = dict(zip(outputs, map(float, found), strict=True))
        counts = dict(zip(outputs, map(int, n_cells), strict=True))
    if tunes:
        plan = stopping_plan(sample, ensemble_size(prim), options.seed)
        prim, refit_epochs = finetune(prim, x_all, y_all, plan, options.seed, options.threads, options.refit)
        if options.blend:  # the source itself, uncorrected, is what the shared correction corrects
            prim = fit_blend(prim, source.primitives, x_all[sample.rows], y_all[sample.rows])
    elif method == "direct":
        prim = copy_estimator(source.primitives)
    trans, paper, t_scales = transfer_transforms((source.transforms, source.transforms_paper), target,
                                                 sample.transform_rows, method)
    info = _info(source, target, method, (fraction, options.seed, split_seed), sample, time.monotonic() - started)
    crossed = bool(plan) and cross_fits(len(sample), len(plan))
    if crossed:  # every drawn row trains most members and stops one
        info.update({"train_rows": len(sample), "val_rows": len(sample)})
    info["transfer"].update({"cross_fit_folds": [len(stop) for _, stop in plan] if crossed else None,
                             "stop_rows": 0 if crossed else len(sample.stop_rows), "refit_epochs": refit_epochs,
                             "blend": {"weight": BLEND_WEIGHT, "correction": CORRECTION_PARAMS}
                             if options.blend else None,
                             "ignored_columns": [p for p in target.primitives if p not in source.primitive_names],
                             "primitive_scales": scales, "primitive_scale_samples": counts,
                             "transform_scales": t_scales})
    return PerformanceModel(prim.kind, prim, trans, info, paper)


def check_transfer(source: PerformanceModel, target: PrimitiveDataset, method: str) -> None:
    """Refuse an unknown method, or a target sharing no primitive column with the source."""
    if method not in METHODS:
        raise InvalidInputError(f"unknown transfer method {method!r}; use one of {', '.join(METHODS)}")
    shared = [p for p in target.primitives if p in source.primitive_names]
    if not shared:
        raise InvalidInputError(f"{target.source or 'the target table'}: no primitive column in common with the source "
                                f"model ({len(source.primitive_names)} primitives such as "
                                f"{', '.join(source.primitive_names[:3])}); is it a table of the same primitives?")


def _info(source: PerformanceModel, target: PrimitiveDataset, method: str,
          settings: tuple[float | None, int, int | None], sample: TransferSample, elapsed_s: float) -> dict[str, Any]:
    """The transferred model's provenance (JSON-able); fraction and split seed are None for given rows."""
    fraction, seed, split_seed = settings
    train_rows = len(split_indices(target.features, split_seed).train) if split_seed is not None else len(target)
    return {"data": target.source, "split_seed": split_seed, "recipe": source.info.get("recipe"),
            "rows": len(target), "train_rows": len(sample.fit_rows), "val_rows": len(sample.stop_rows),
            "transform_model": source.transform_kind,
            "transfer": {"method": method, "fraction": None if fraction is None else float(fraction), "seed": seed,
                         "drawn_rows": len(sample), "drawn_cells": sample.drawn_cells,
                         "target_train_rows": train_rows,
                         "stop_rows": len(sample.stop_rows), "stop_fraction": STOP_FRACTION,
                         "lr_factor": FINETUNE_LR_FACTOR if method.endswith("finetune") else None,
                         "seconds": round(elapsed_s, 3), "source_data": source.info.get("data"),
                         "source_split_seed": source.info.get("split_seed"),
                         "source_kind": source.kind, "features": list(LAYER_FEATURES)},
            "fit_primitives_s": round(elapsed_s, 3)}
