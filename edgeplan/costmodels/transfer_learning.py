"""Transfer of a platform's performance model to another platform from a few target samples (mulder2020 §4.4, §5.3).

:func:`transfer` turns a fitted *source* :class:`~edgeplan.costmodels.performance_model.PerformanceModel` (say the
Intel NN2) into a model of a *target* platform (say AMD), given the target's timing table, of which it uses only a
``fraction`` of the training part. Five methods:

- ``direct``: the source as is (mulder2020 Fig. 8, "Intel").
- ``factor``: the source's outputs times a per-column scale (Fig. 8, "Factor Intel"): for each primitive, the median
  over the drawn samples of ``target time / source prediction``. A primitive without any drawn sample (none of the
  drawn layers has it defined, or the target has no such column) gets **the median of the other primitives' scales**
  (the platform's overall speed ratio; on Intel -> AMD every primitive is 1.9-3.9x slower, so 1 would be the worse
  guess), or 1 when no primitive has a sample. The scale is folded into the estimator's output standardization
  (``y_mean_ += log(scale)``; outputs are ``exp(z * y_std_ + y_mean_)``), which is exact and leaves an ordinary
  estimator that saves and loads like any other (no new class, no pickle).
- ``finetune``: the source NN2 (or NN1) trained further from its weights on the drawn samples with the learning rate
  times :data:`FINETUNE_LR_FACTOR` (0.1, mulder2020 Table 3), keeping the source's input and output standardization
  and its other settings (recipe, schedule, patience, ensemble members: every member is fine-tuned), except the
  moving average of the weights (``ema_decay``), which fine-tuning leaves off: a few samples make an epoch one step.
  No factor correction first (the paper fine-tunes the uncorrected model).
- ``factor-finetune`` (not in the paper): a factor correction first, then fine-tuning from the corrected model
  (the scale moves every output at once, including those of primitives the drawn layers barely cover; the
  fine-tuning then learns what a scale cannot, such as a speed-up that depends on the layer's size). Its factor is
  **pooled** (:func:`pooled_scales`): each primitive's scale is pulled towards the platform's common scale by how
  few cells it rests on. At 1 % of AMD's training part some Winograd primitives have a single drawn layer, and the
  plain scale of one of them, well below its all-data value, sent the 3x3 layers to it (seed 0: selection increase
  23 % with the plain factor, 11 % pooled; ``benchmarks/bench_transfer.py --methods factor-finetune``).
- ``scratch``: a fresh model of the source's family and settings (the weight average and ensemble included: it is
  trained as the source was, only on fewer rows) on the same drawn samples (the paper's baseline):
  its standardization is fitted on them, and it predicts nothing for a layer shape ``(f, s)`` it saw no sample of
  (NaN; scored as an unpredicted cell, never as a hit).

**Samples.** ``n = max(1, round(fraction * len(train)))`` rows drawn uniformly, without replacement, by ``seed``,
from the *training part* of the target's 80/10/10 split (``split_seed``); the target's validation and test parts are
never used. For the same seed and split, a smaller fraction's sample is a prefix of a larger one's (one seeded
permutation of the training part), so the fractions of one repeat are nested. ``design="kmeans"`` (not in the paper,
which leaves the choice of samples to future work) chooses the same number of rows from the training part by
:func:`design_rows` instead: spread over the layer sizes, the filter shapes in proportion to the primitives that apply
to them. ``design="cells"`` (not the paper's draw, but its unit: mulder2020 counts "sample points", one primitive timed
on one layer, and its factor takes "25 sample points from the device (1 % of the profiled dataset)" per primitive) draws
single timings instead of whole rows: ``fraction`` of the training part's defined primitive cells, shared evenly among
the primitives (:func:`even_shares`), each primitive's on layers drawn uniformly from those it applies to. That is as
many timings as a row draw of the same fraction (862 at 1 % of AMD's training part, where 37 rows hold some 23
primitives each), but spread over some 670 layers instead of 37, and as many for a Winograd primitive as for a general
one, where a row draw gives those a few layers of their one filter shape. ``cells-uniform`` draws the timings uniformly
over all cells instead (a primitive then gets its share of the cells). The rows carry only their drawn cells
(:meth:`TransferSample.primitive_times`: the others are unknown, so no loss, gradient or factor sample), and the layout
transformations are those of the rows ``uniform`` draws, so that no transformation is timed more often than there. On
Intel -> AMD at 1 %, factor then fine-tuning refitted (25 seeds; ``benchmarks/bench_transfer.py --fractions 0.01
--repeats 25 --methods factor-finetune-refit --design cells``, log ``campaigns/transfer25_1_cellsbal_refit_s37.log``)
reaches a test MdRAE of 6.82 % [6.69, 7.04], the first design under the 7 % target (kmeans rows: 8.28 %), and
``cells-uniform`` 7.46 % [7.14, 7.77] (log ``campaigns/transfer25_1_cells_refit_s37.log``): the spread over layers gains
0.8 points, the even shares 0.6 more. The selections are worse, not better: a mean increase of 4.84 % [3.88, 6.52]
(``cells-uniform`` 5.68 %) against 3.69 % from kmeans rows. A row times every primitive on the same layer, and the
selection rests on the order of close primitives on one layer, which paired timings pin down and timings spread over
different layers do not. So ``cells`` is the design for a model that predicts times, and rows are the one for a model
that selects primitives; neither meets both 1 % targets. At 10 % (fine-tuning, seeds 0-2; ``--fractions 0.1 --repeats 3
--methods finetune --design cells``, log ``campaigns/transfer3_10_cells_s37.log``) ``cells`` gives 3.20 % / 1.21 %,
against 3.44 % / 1.10 % from kmeans rows (25 seeds).

**Early stopping** (``finetune``, ``factor-finetune`` and ``scratch``): :data:`STOP_FRACTION` (20 %) of the drawn
samples, ``max(1, round(0.2 * n))`` rows for ``n >= 2``, chosen by the seed, are held out of training and early-stopped
on; the model trains on the rest. Not on the target's validation part: that would use more target data than the
fraction says (the validation part is 10 % of the table, more than the 1 % being studied). With a single drawn sample
there is nothing to hold out: it is trained on and stopped on its training loss. Patience and the epoch bound are the
source's (250 epochs and 1500 for the default NN2; on a small sample an epoch is one mini-batch step).

Fine-tuning an ensemble (the default NN2 has four members) from at least :data:`CROSS_FIT_MIN_ROWS` drawn rows per
member is instead **cross-fitted** (:func:`stopping_plan`; not in the paper): the drawn rows are cut into one seeded
fold per member, and member ``k`` early-stops on fold ``k`` and trains on the others. No drawn row is then left out of
training, and the members, stopped on different rows, err differently, which their average smooths: with a few
dozen rows, which rows a single hold-out happens to take decides much of a transfer's quality
(``benchmarks/bench_transfer.py`` reports both ways of stopping, ``--methods finetune finetune-holdout``).

``refit=True`` (not in the paper; off by default): the cross-fitted runs only choose an epoch count, the one with the
lowest validation loss summed over the folds (:func:`common_epoch`), and every member is then trained afresh from the
(factor-corrected) source on all drawn rows for that many epochs. Every drawn row then trains every member, and the
stop rests on all the folds together: with 37 rows a fold is 9 rows, and single folds stopped members anywhere from
7 to 700 epochs. On Intel -> AMD at 1 % (kmeans samples, 25 seeds, ``benchmarks/bench_transfer.py --methods
finetune-refit factor-finetune-refit --design kmeans``) it lowers the MdRAE in 24 of 25 draws for fine-tuning
(median 11.68 -> 10.16 %) and in 20 of 25 for factor then fine-tuning (8.74 -> 8.28 %), but it does not improve the
selections: the mean selection increase rises for fine-tuning (3.45 -> 4.27 %, higher in 20 draws) and stays for
factor then fine-tuning (3.76 -> 3.69 %). At 10 % (seeds 0-4) it changes neither (3.46 -> 3.42 %, 1.07 -> 1.08 %).
The model serves the selection, so the refit is offered, not the default.

``train="body"`` (not in the paper; default ``"all"``): fine-tuning trains the hidden layers only; the output layer
keeps the source's (factor-corrected) weights (:data:`TRAIN_PARTS`). The output layer is where the source tells the
primitives apart from the features it learnt, and the selection rests on the order of close primitives; with a few
dozen rows, training it as well reshapes that order from the few primitives the rows cover. Frozen, the fine-tuning
can only move the shared features, which every output reads in the source's way. On Intel -> AMD at 1 % with kmeans
samples, 25 seeds (``benchmarks/bench_transfer.py --methods factor-finetune factor-finetune-body finetune
finetune-body --design kmeans``): factor then fine-tuning's mean selection increase falls from 3.76 to 3.02 %
(lower in 17 of 25 draws), its MdRAE stays (8.74 -> 8.83 %); in a bag of 5 (``--bag 5``) 2.69 % (lower than the
unbagged body in 21 of 25 draws), MdRAE 8.73 %. Plain fine-tuning gains nothing from it (3.45 -> 3.52 %). Fewer
trained weights than the body cost the MdRAE: the output layer alone, the input layer alone or the biases alone
(``benchmarks/diag_transfer_variants.py --variant part``) are 2-4 points worse. With more rows the output layer is
worth training: at 10 % (373 rows, seeds 0-4) the body alone is worse in every draw (fine-tuning 3.46 % / 1.07 % ->
4.17 % / 1.91 %; factor then fine-tuning 3.25 % / 1.39 % -> 3.72 % / 1.98 %). Nor does it help on the paper's
uniform draws at 1 % (seeds 0-11, factor then fine-tuning): 10.37 % / 3.66 % -> 11.05 % / 4.55 %, in a bag of 5
11.13 % / 4.49 %; it needs the designed samples, which give every filter shape its rows. So it is an option for a
few dozen designed rows, off by default.

``bag=N`` (not in the paper; default 1): the fine-tuning is run ``N`` times from the same (factor-corrected) source
on the same drawn rows, each with its own folds and shuffling (:func:`bag_seed`; the first is the unbagged run), and
all of their networks are kept as one ensemble of ``N`` times the source's members, which averages their log
predictions (one standardization, so one ordinary estimator; prediction and fine-tuning take ``N`` times as long).
Few drawn rows leave each fine-tuning's details to chance, and the selections depend on the order of close
primitives (Winograd variants, the 1x1 GEMMs), which the average steadies: on Intel -> AMD at 1 % with kmeans
samples, factor then fine-tuning, a bag of 5 lowers the mean selection increase in 22 of 25 draws (median 3.76 ->
3.29 %) and the MdRAE a little (8.74 -> 8.51 %) (``benchmarks/diag_transfer_bag.py --design kmeans --repeats 25``).
On uniform draws it did not (see that script).

``blend=True`` (not in the paper; off by default; :mod:`edgeplan.costmodels.blend`): beside the fine-tuning, one
gradient-boosted model of ``log(target time / source prediction)``, **shared by all primitives**, is fitted on the same
samples (inputs: the layer's sizes, the source's log prediction, and the primitive described by its family, the tokens
of its name, its Winograd tile and vector width), and the transferred model predicts the geometric mean of the
fine-tuned model and the source so corrected. A timing of any Winograd variant then informs all of them along what
they share, and the two parts err differently, so that their mean picks the most under-predicted of close competitors
less often. On Intel -> AMD at 1 % of the single timings, factor then fine-tuning refitted, 25 seeds
(``benchmarks/bench_transfer.py --fractions 0.01 --repeats 25 --methods factor-finetune-refit-blend --design cells``,
run as seeds 0-12 and 13-24, logs ``campaigns/transfer25_1_cells_blend_{a,b}_s39.log``): MdRAE 6.47 % [6.27, 6.65]
against 6.82 % without the blend (lower in 22 of 25 draws), mean selection increase 3.23 % [2.86, 4.27] against
4.84 % (lower in 21 of 25, median paired difference -1.13 points; GoogLeNet 3.10 % against 4.14 %, lower in 24 of
25; paired by ``--merge campaigns/transfer25_1_cellsbal_refit_s37.json`` and the two parts' ``--json`` files).
That was the nearest one round of samples came to both 1 % targets (7 % and 3 %); the increase is still above
3 % (two rounds: ``cells-adaptive`` below). The weight (0.5) and the correction's features were chosen on seeds 0-5;
on seeds 6-24 alone (``--repeats 19 --first-seed 6``, logs ``campaigns/transfer19_1_cells_blend_{c,d}_s39.log``) the
increase is higher (3.48 %), so 3.23 % is, if anything, favourable. With more samples
it is worse: at 10 % (kmeans rows, fine-tuning, seeds 0-2; ``--fractions 0.1 --repeats 3 --methods finetune
finetune-blend --design kmeans``, log ``campaigns/transfer3_10_kmeans_blend_s39.log``) 4.24 % / 1.71 % against
3.55 % / 1.36 % unblended: from hundreds of rows the fine-tuned model is better than the corrected source. So the
blend is an option for a few samples, off by default.

``design="cells-adaptive"`` (not in the paper; :func:`contender_cells`) draws the same number of single timings in two
rounds: :data:`ADAPTIVE_FIRST` (three quarters) as ``cells``, then a transfer from them (the same method and options)
predicts every training layer's primitives, and the rest of the timings go to close contenders: on layers visited at
random, the :data:`CONTENDERS` (3) predicted fastest primitives within :data:`CONTENDER_MARGIN` (15 %) of the layer's
predicted best, not yet drawn, when at least two are. The transfer is then made again from both rounds (twice the
fitting time). The first round spreads the timings over the layers for the MdRAE; the second times close competitors
side by side on one layer, which is what a row gives and single timings do not, and only where the selection has to
decide. On Intel -> AMD at 1 %, factor then fine-tuning refitted and blended, 25 seeds (``make bench-transfer-1pct``:
``benchmarks/bench_transfer.py --fractions 0.01 --repeats 25 --threads 1 --methods factor-finetune-refit-blend --design
cells-adaptive``, run as seeds 0-12 and 13-24, logs ``campaigns/transfer25_1_adaptive_blend_{a,b}_s40.log``): MdRAE 6.73
% [6.52, 6.90], mean selection increase 2.41 % [1.82, 2.72] (GoogLeNet 1.72 %; at or under 3 % in 23 of 25 draws, worst
4.88 %): both 1 % targets (7 % and 3 %) with one design. Against one round of balanced timings blended, on the same
seeds, the increase is lower in 22 of 25 draws (median paired difference -1.25 points) and the MdRAE higher in 17 of 25
(+0.17). The share, the contenders and the margin were chosen on seeds 0-5 (shares 1/2 and 3/4 tried, ad hoc; 1/2 cost
0.6 points of MdRAE); on seeds 6-24 alone 6.75 % / 2.36 %. Without the blend two rounds are not enough (seeds 0-11: 6.70
% / 3.70 %, log ``campaigns/transfer12_1_adaptive_noblend_s40.log``). At 10 % (fine-tuning, unblended, seeds 0-2;
``--fractions 0.1 --repeats 3 --methods finetune --design cells-adaptive``, run as seeds 0-1 and 2, logs
``campaigns/transfer3_10_adaptive_{s0,s2}_s40.log``) the design gives 3.04 % / 0.66 %, against one round of cells 3.20 %
/ 1.21 % and kmeans rows 3.55 % / 1.36 % on the same seeds: three draws only, but the same design may serve both
fractions.

**Columns.** The target's primitive columns must share at least one with the source; target columns the source does
not predict are ignored (listed in ``info["transfer"]["ignored_columns"]``). Source columns absent from the target
stay masked: no loss, no gradient, no factor sample; the transferred model still predicts them (``factor``: the
fallback scale; ``finetune``: the shared network as it moved, their output weights held where they were, since
Adam's weight decay alone would otherwise pull them to zero; see :func:`~edgeplan.costmodels._mlp.train_masked`).
The same holds for a source column that the drawn rows (or a member's part of them) never define. Where each
primitive applies (its ``(f, s)``) stays the source's for ``direct``, ``factor`` and ``finetune``.

**Layout transformations.** ``direct``: the source's. ``factor`` and ``finetune``: the source's transformation
models (held-out-tensor and paper-protocol ones) **factor-corrected** the same way, per transformation over the
distinct ``(c, im)`` tensors of the drawn rows (a kernel model or a network fine-tuned on a few dozen tensors gains
little over a scale, and a scale cannot break the power-of-two structure the source learnt). ``scratch``: a fresh
transformation model of the source's family **refitted** on the drawn rows' distinct tensors (its own hold-out for
the kernel model's hyperparameters); it has no paper-protocol twin.

A model calibrated with :func:`calibrate_primitives` (``edgeplan calibrate --primitives``) was fitted on every given
layer and records no split seed: score it on another table with ``--split all``. Otherwise the transferred
model's ``info`` names the target table and ``split_seed``, so
:func:`~edgeplan.costmodels.evaluation.evaluate_performance_model` scores it on the target's test part by default;
``info["transfer"]`` records the method, fraction, seed, the drawn and held-out row counts, the refit's epoch count
(``refit_epochs``, None without a refit; ``bag`` and, for a bag, ``bag_refit_epochs``), what fine-tuning trained
(``train``), the scales and the source.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.blend import BLEND_WEIGHT, CORRECTION_PARAMS, fit_blend
from edgeplan.costmodels.performance_model import PerformanceModel
from edgeplan.costmodels.primitive_models import NN1Model, NN2Model, PrimitiveEstimator, make_estimator
from edgeplan.costmodels.transform_models import make_transform_estimator
from edgeplan.errors import InvalidInputError
from edgeplan.measure.metrics import mdrae_per_column
from edgeplan.measure.primitive_data import LAYER_FEATURES, TRANSFORM_FEATURES, PrimitiveDataset, split_indices
from edgeplan.measure.sampling import design_rows

__all__ = ["ADAPTIVE_FIRST", "CALIBRATION_FOLDS", "CONTENDERS", "CONTENDER_MARGIN", "CROSS_FIT_MIN_ROWS", "DESIGNS",
           "FINETUNE_LR_FACTOR", "METHODS", "STOP_FRACTION", "TRAIN_PARTS", "PrimitiveCalibration", "TransferSample",
           "bag_seed", "calibrate_primitives", "common_epoch", "contender_cells", "draw_samples",
           "even_shares", "factor_scales", "hold_out", "pooled_scales", "stopping_plan", "transfer", "transfer_on"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
EstimatorPair = tuple[PrimitiveEstimator | None, PrimitiveEstimator | None]

METHODS: tuple[str, ...] = ("finetune", "factor", "scratch", "direct", "factor-finetune")
"""The transfer methods of :func:`transfer`."""

TRAIN_PARTS: tuple[str, ...] = ("all", "body")
"""What fine-tuning trains (:func:`transfer`'s ``train``): every layer (the paper) or the hidden layers only."""

DESIGNS: tuple[str, ...] = ("uniform", "kmeans", "cells", "cells-uniform", "cells-adaptive")
"""How :func:`draw_samples` chooses the target samples: rows uniformly at random (the paper), rows by
:func:`design_rows`, or single timings (cells) at random, as many per primitive (``cells``) or uniformly over all of
them (``cells-uniform``); ``cells-adaptive`` draws in two rounds, the second chosen by a model fitted on the first
(:func:`contender_cells`; only :func:`transfer` draws it)."""

ADAPTIVE_FIRST = 0.75
"""Share of a ``cells-adaptive`` sample's timings drawn in its first round, as ``cells`` does."""

CONTENDERS = 3
"""Most primitives the second round of ``cells-adaptive`` times on one layer (:func:`contender_cells`)."""

CONTENDER_MARGIN = 0.15
"""A contender's predicted time is at most this much (relative) above the layer's predicted best."""

FINETUNE_LR_FACTOR = 0.1
"""Fine-tuning learning rate relative to the source's (mulder2020 Table 3: "lowered by a factor of 10")."""

STOP_FRACTION = 0.2
"""Share of the drawn samples held out for early stopping (``scratch``, and the fine-tuning methods when they do not
cross-fit: see :func:`stopping_plan`); at least one of two or more."""

CROSS_FIT_MIN_ROWS = 2
"""Drawn rows per ensemble member from which fine-tuning is cross-fitted (:func:`stopping_plan`)."""


@dataclass(frozen=True)
class TransferSample:
    """The target rows a transfer uses (indices into the target table, each sorted).

    Attributes
    ----------
    fit_rows
        Rows trained on (``finetune``, ``factor-finetune``, ``scratch``).
    stop_rows
        Rows held out for early stopping (empty with a single drawn sample).
    cells
        ``(m, 2)`` array of the drawn ``(row, primitive column)`` pairs of the target table, sorted (the ``cells``
        design); None: every defined primitive cell of the rows is drawn (a row design).
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
        """``target``'s primitive times as this sample sees them: all of them for a row design; for a ``cells``
        sample a copy with every undrawn cell NaN (unknown, so no loss, gradient or factor sample)."""
        if self.cells is None:
            return target.primitive_ns
        seen = np.full_like(target.primitive_ns, np.nan)
        r, c = self.cells[:, 0], self.cells[:, 1]
        seen[r, c] = target.primitive_ns[r, c]
        return seen

    @property
    def drawn_cells(self) -> int | None:
        """How many single timings a ``cells`` sample drew (None for a row design)."""
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


def _check_seed(seed: int, what: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InvalidInputError(f"{what} {seed!r}: use a non-negative integer (0, 1, 2, ...)")
    return int(seed)


def draw_samples(target: PrimitiveDataset, fraction: float, seed: int, split_seed: int = 0,
                 design: str = "uniform") -> TransferSample:
    """Draw ``fraction`` of the target's training part, and hold some of it out for early stopping.

    Parameters
    ----------
    target
        The target platform's table.
    fraction
        Share of the training part, in ``(0, 1]``; at least one row is drawn.
    seed
        Seed of the draw and of the hold-out (a non-negative integer).
    split_seed
        Seed of the target's 80/10/10 split.
    design
        ``uniform`` (default; the paper's draw) or ``kmeans``: the rows :func:`design_rows` chooses from the
        training part (spread over the layer sizes; the filter shapes in proportion to how many of the target's
        primitives apply to them, i.e. its defined cells). ``cells``: ``fraction`` of the training part's defined
        primitive cells (single timings of one primitive on one layer, the paper's "sample points"), shared
        evenly among the primitives (:func:`even_shares`), each primitive's on layers drawn uniformly;
        ``cells-uniform``: the cells drawn uniformly. The rows are those the cells fall in, and the layout
        transformations are those of the rows ``uniform`` would draw (see the module docstring). ``cells-adaptive``
        is refused: its second round needs a model (:func:`transfer` draws it).

    Returns
    -------
    TransferSample
        ``max(1, round(fraction * len(train)))`` training-part rows (``uniform``: the first of one seeded permutation
        of the training part, so a smaller fraction's rows are a subset of a larger one's; ``kmeans`` samples are not
        nested), of which ``max(1, round(STOP_FRACTION * n))`` (none when ``n = 1``), chosen by the seed, are
        ``stop_rows``. For ``cells``: ``max(1, round(fraction * cells))`` of the training part's defined cells, the
        rows they fall in split the same way.

    Raises
    ------
    InvalidInputError
        ``fraction`` outside ``(0, 1]``, a negative seed, an unknown design (or ``cells-adaptive``), or an empty
        training part (for ``cells``: one without a defined primitive cell).
    """
    fraction = _check_fraction(fraction)
    seed = _check_seed(seed, "seed")
    if design not in DESIGNS:
        raise InvalidInputError(f"unknown sample design {design!r}; use one of {', '.join(DESIGNS)}")
    if design == "cells-adaptive":
        raise InvalidInputError("the cells-adaptive design chooses its second round with a model fitted on its first; "
                                "draw it with transfer(..., design='cells-adaptive'), or draw design='cells'")
    train = split_indices(target.features, _check_seed(split_seed, "split seed")).train
    if len(train) == 0:
        raise InvalidInputError(f"{target.source or 'the target table'}: {len(target)} layer(s) leave no training part "
                                f"in the 80/10/10 split; profile more layers")
    n = max(1, round(fraction * len(train)))
    if design == "kmeans":  # the shapes weighted by how many primitives apply there (a NaN cell: not applicable)
        cells = (~np.isnan(target.primitive_ns)).sum(axis=1)
        return hold_out(design_rows(target.features, train, n, seed, cells=cells), seed)
    rows = np.random.default_rng(seed).permutation(train)[:n]
    if design in ("cells", "cells-uniform"):
        return _draw_cells(target, train, fraction, seed, np.sort(rows), balanced=design == "cells")
    return hold_out(rows, seed)


def even_shares(available: npt.ArrayLike, n: int, seed: int) -> IntArray:
    """``n`` draws shared as evenly as possible among columns (the ``cells`` design's share of each primitive).

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


def _draw_cells(target: PrimitiveDataset, train: IntArray, fraction: float, seed: int, tensors: IntArray,
                balanced: bool = True) -> TransferSample:
    """The ``cells`` designs of :func:`draw_samples`: ``fraction`` of the defined primitive cells of the ``train``
    rows, at random (seeded) within each primitive, each primitive as many (:func:`even_shares`; ``balanced``) or
    uniformly over all cells; the rows they fall in held out as :func:`hold_out` does, ``tensors`` the rows whose
    transformations are used."""
    defined = ~np.isnan(target.primitive_ns[train])
    if not defined.any():
        raise InvalidInputError(f"{target.source or 'the target table'}: its training part has no primitive time to "
                                f"draw; use a table with measured primitives")
    n = max(1, round(fraction * int(defined.sum())))
    rng = np.random.default_rng([seed, 3])
    if balanced:
        shares = even_shares(defined.sum(axis=0), n, seed)
        pick = np.vstack([np.column_stack([rng.choice(np.flatnonzero(defined[:, j]), k, replace=False),
                                           np.full(k, j)]) for j, k in enumerate(shares) if k > 0])
    else:
        every = np.argwhere(defined)
        pick = every[rng.choice(len(every), n, replace=False)]
    cells = np.column_stack([train[pick[:, 0]], pick[:, 1]]).astype(np.int64)
    cells = cells[np.lexsort((cells[:, 1], cells[:, 0]))]
    rows = hold_out(np.unique(cells[:, 0]), seed)
    return TransferSample(rows.fit_rows, rows.stop_rows, cells, tensors)


def contender_cells(model: PerformanceModel, target: PrimitiveDataset, first: TransferSample, total: int, seed: int,
                    split_seed: int = 0, contenders: int = CONTENDERS,
                    margin: float = CONTENDER_MARGIN) -> TransferSample:
    """The second round of the ``cells-adaptive`` design: time the close contenders of layers, as ``model`` sees them.

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
        The first round (a ``cells`` sample).
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
        raise InvalidInputError("the first round of cells-adaptive must be single timings (design 'cells'), at least "
                                "one")
    if contenders < 2 or not margin >= 0.0:
        raise InvalidInputError(f"contenders {contenders} and margin {margin}: use at least 2 contenders and a "
                                f"non-negative margin")
    train = split_indices(target.features, _check_seed(split_seed, "split seed")).train
    times = _aligned(model.predict_primitives(target.features[train]), model.primitive_names, target.primitives)
    times[np.isnan(target.primitive_ns[train]) | ~(times > 0)] = np.inf  # not applicable, or no usable prediction
    taken = {(int(r), int(c)) for r, c in first.cells}
    cells = sorted(taken)
    need = int(total) - len(cells)
    for i in np.random.default_rng([_check_seed(seed, "seed"), 11]).permutation(len(train)):
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


def _copy(est: PrimitiveEstimator) -> PrimitiveEstimator:
    """An independent copy through the saved state (what a save and load gives; no pickle)."""
    meta, arrays = est.to_state()
    return type(est).from_state(meta, {k: np.array(v, copy=True) for k, v in arrays.items()})


def _aligned(values: FloatArray, names: tuple[str, ...], outputs: tuple[str, ...]) -> FloatArray:
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
    return _median_scales(*_ratios(est, x, y))


def _ratios(est: PrimitiveEstimator, x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
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

    A primitive's scale from few cells is mostly noise (at 1 % of AMD's training part some Winograd primitives have
    one drawn layer, and one such scale, well below its all-data value, sent every 3x3 layer to it). In log space,
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
    ratio, defined = _ratios(est, x, y)
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


def _scaled(est: PrimitiveEstimator, scales: FloatArray) -> PrimitiveEstimator:
    """A copy of ``est`` whose outputs are multiplied by ``scales`` (folded into its output standardization)."""
    out = _copy(est)
    out.y_mean_ = np.asarray(out.y_mean_ + np.log(scales), dtype=np.float64)
    return out


def stopping_plan(sample: TransferSample, members: int, seed: int) -> list[tuple[IntArray, IntArray]]:
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
    if _cross_fits(len(rows), members):
        folds = np.array_split(np.random.default_rng([_check_seed(seed, "seed"), 2]).permutation(rows), members)
        return [(np.setdiff1d(rows, fold), np.sort(fold)) for fold in folds]
    stop = sample.stop_rows if len(sample.stop_rows) else sample.fit_rows
    return [(sample.fit_rows, stop)] * members


def _cross_fits(rows: int, members: int) -> bool:
    return members >= 2 and rows >= CROSS_FIT_MIN_ROWS * members


def _members(est: PrimitiveEstimator) -> int:
    return max(1, int(getattr(est, "n_members", 1) or 1))


def bag_seed(seed: int, k: int) -> int:
    """Seed of the ``k``-th fine-tuning of a bag (from 0): ``seed`` itself for the first, so that a bag of one is the
    plain transfer, then ``1000 * seed + k``."""
    return seed if k == 0 else 1000 * seed + k


def _check_bag(bag: int, method: str) -> int:
    if isinstance(bag, bool) or not isinstance(bag, int | np.integer) or bag < 1:
        raise InvalidInputError(f"bag {bag!r}: give the number of fine-tunings to average, at least 1")
    if bag > 1 and method not in ("finetune", "factor-finetune"):
        raise InvalidInputError(f"bag {bag} averages fine-tunings; method {method!r} has none: use finetune or "
                                f"factor-finetune, or bag 1")
    return int(bag)


def _check_train(train: str, method: str) -> str:
    if train not in TRAIN_PARTS:
        raise InvalidInputError(f"train {train!r}: use one of {', '.join(TRAIN_PARTS)} (what fine-tuning trains)")
    if train != "all" and method not in ("finetune", "factor-finetune"):
        raise InvalidInputError(f"train {train!r} chooses what fine-tuning trains; method {method!r} has none: use "
                                f"finetune or factor-finetune, or train all")
    return train


def _pooled_ensemble(tunings: list[PrimitiveEstimator]) -> PrimitiveEstimator:
    """One estimator holding every network of ``tunings`` (fresh fine-tunings of one model, so one standardization;
    the first is extended in place): its prediction averages all of them in log space."""
    pooled = tunings[0]
    if len(tunings) == 1:
        return pooled
    assert isinstance(pooled, NN1Model | NN2Model)
    members = _members(pooled)
    for other in tunings[1:]:
        assert isinstance(other, NN1Model | NN2Model)
        pooled.groups_ = [*pooled.groups_, *other.groups_]
        pooled.nets_ = [*pooled.nets_, *other.nets_]
        pooled.n_epochs_ = (*pooled.n_epochs_, *other.n_epochs_)
        pooled.best_epochs_ = (*pooled.best_epochs_, *other.best_epochs_)
        pooled.stopped_by_ = (*pooled.stopped_by_, *other.stopped_by_)
        pooled.on_validation_ = (*pooled.on_validation_, *other.on_validation_)
        pooled.fit_time_s_ = float(pooled.fit_time_s_ + other.fit_time_s_)
    pooled.n_members = members * len(tunings)
    return pooled


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


def _finetune(est: PrimitiveEstimator, x: FloatArray, y: FloatArray, plan: list[tuple[IntArray, IntArray]],
              seed: int, threads: int | None, refit: bool = False, train: str = "all"
              ) -> tuple[PrimitiveEstimator, int | None]:
    """A copy of a neural ``est`` trained further on the rows of ``x``, ``y`` (y in its columns) that ``plan``
    gives each member (see :func:`stopping_plan`), and the epoch count of the refit (None without one).
    ``train="body"`` trains the hidden layers only (the output layer frozen).

    With ``refit`` and a cross-fitted plan, the members' fold runs only choose the epoch count: the one with the
    lowest validation loss summed over the folds (each fold's mean loss times its defined cells), within the epochs
    every member ran; then every member is trained afresh from ``est`` on all drawn rows for that many epochs."""
    from edgeplan.costmodels._mlp import EpochInfo, TrainConfig, torch_threads, train_masked

    if not isinstance(est, NN1Model | NN2Model):
        raise InvalidInputError(f"method finetune continues training a neural model; the source's primitives model "
                                f"is {est.kind!r}: use method factor or scratch")
    tuned = _copy(est)
    assert isinstance(tuned, NN1Model | NN2Model)
    x_all, y_all = tuned._scale_x(x), tuned._scale_y(y)  # the source's standardization, kept
    lr = float(tuned.lr) * FINETUNE_LR_FACTOR
    per_member = max(1, len(tuned.nets_) // _members(tuned))
    every = np.union1d(*plan[0])  # all drawn rows (the first member's fit and stop rows)
    refit = refit and _cross_fits(len(every), len(plan))

    def config(k: int, epochs: int, patience: int) -> TrainConfig:
        return TrainConfig(lr=lr, weight_decay=tuned.weight_decay, batch_size=tuned.batch_size,
                           max_epochs=epochs, patience=patience, lr_schedule=tuned.lr_schedule,
                           min_lr=min(float(tuned.min_lr), lr), seed=seed + k // per_member,
                           time_limit_s=tuned.time_limit_s,
                           ema_decay=0.0,  # no weight average: a few samples make an epoch one step
                           freeze_output=train == "body")

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


def _scratch(source: PrimitiveEstimator, names: tuple[str, ...],
             parts: tuple[FloatArray, FloatArray, FloatArray, FloatArray], seed: int,
             threads: int | None) -> PrimitiveEstimator:
    """A fresh estimator of ``source``'s family and settings fitted on ``parts`` (columns ``names``)."""
    params = dict(source.get_params())
    if "random_state" in params:
        params["random_state"] = seed
    if threads is not None and "threads" in params:
        params["threads"] = threads
    est = make_estimator(source.kind, **params)
    return est.fit(parts[0], parts[1], feature_names=source.feature_names_in_, output_names=names,
                   X_val=parts[2], Y_val=parts[3])


def _tensor_table(target: PrimitiveDataset, rows: IntArray) -> tuple[FloatArray, FloatArray, tuple[str, ...]]:
    """Distinct ``(c, im)`` of ``rows`` and their transformation times."""
    table = target.subset(rows).transform_table()
    return table.features, table.times_ns, table.names


def _transfer_transforms(source: EstimatorPair, target: PrimitiveDataset, rows: IntArray, method: str
                         ) -> tuple[PrimitiveEstimator | None, PrimitiveEstimator | None, dict[str, float]]:
    """The transformation models of the transferred model (see the module docstring) and their scales.

    A target without transformation columns leaves ``factor`` and ``finetune`` the source's models uncorrected
    (empty scales) and ``scratch`` none.
    """
    trans, paper = source
    if trans is None or method == "direct":
        return trans, paper, {}
    if not target.transforms:
        return (None, None, {}) if method == "scratch" else (trans, paper, {})
    tx, ty, names = _tensor_table(target, rows)
    if method == "scratch":
        fresh = make_transform_estimator(trans.kind, **trans.get_params())
        return fresh.fit(tx, _aligned(ty, names, trans.output_names_), feature_names=TRANSFORM_FEATURES,
                         output_names=trans.output_names_), None, {}
    scales, _ = factor_scales(trans, tx, _aligned(ty, names, trans.output_names_))
    corrected_paper = None
    if paper is not None:
        paper_scales, _ = factor_scales(paper, tx, _aligned(ty, names, paper.output_names_))
        corrected_paper = _scaled(paper, paper_scales)
    return _scaled(trans, scales), corrected_paper, dict(zip(trans.output_names_, map(float, scales), strict=True))


def transfer(source: PerformanceModel, target: PrimitiveDataset, *, fraction: float, seed: int,
             method: str = "finetune", split_seed: int = 0, threads: int | None = None,
             cross_fit: bool = True, design: str = "uniform", refit: bool = False, bag: int = 1,
             train: str = "all", blend: bool = False) -> PerformanceModel:
    """A performance model of the target platform, from ``source`` and ``fraction`` of the target's training part.

    Parameters
    ----------
    source
        A fitted performance model of the source platform (NN2 or NN1 for ``finetune``).
    target
        The target platform's timing table; only the drawn rows of its training part are used.
    fraction
        Share of the target's training part to draw, in ``(0, 1]`` (mulder2020: 0.001 to 0.25); at least one row.
    seed
        Seed of the draw, of the early-stopping hold-out, of the shuffling in fine-tuning and of a fresh model's
        initialisation.
    method
        ``finetune`` (default), ``factor``, ``factor-finetune``, ``scratch`` or ``direct`` (see the module
        docstring).
    split_seed
        Seed of the target's 80/10/10 split; the transferred model records it for its evaluation.
    threads
        Torch threads for training (default: the source's setting).
    cross_fit
        Fine-tune an ensemble cross-fitted (default; see :func:`stopping_plan`); False: every member trains on the
        same rows and early-stops on the same hold-out, as ``scratch`` does.
    design
        How the samples are chosen from the training part: ``uniform`` rows (default, the paper's draw), ``kmeans``
        rows (:func:`design_rows`), or single timings, as many per primitive (``cells``) or uniformly
        (``cells-uniform``) (:func:`draw_samples`; see the module docstring), or ``cells-adaptive``: in two rounds,
        :data:`ADAPTIVE_FIRST` of the timings as ``cells``, then the rest on the close contenders of layers as a
        transfer (this method and these options) from the first round predicts them (:func:`contender_cells`); the
        transfer is then made from both rounds (so it takes twice as long). ``info["transfer"]["adaptive_rounds"]``
        gives the two rounds' timings, ``info["transfer"]["seconds"]`` both rounds' time (``info["fit_primitives_s"]``
        the last round's).
    refit
        After cross-fitting, train every member afresh on all drawn rows for the epoch count the folds chose
        together (see the module docstring); default False: each member keeps the weights its own fold stopped it
        at.
    bag
        Fine-tune this many times (``finetune`` and ``factor-finetune`` only; default 1, the paper's single
        fine-tuning), each with its own folds and shuffling (:func:`bag_seed`), and keep all of them as one ensemble
        (its members' log predictions averaged; see the module docstring).
    train
        What fine-tuning trains: ``all`` (default, the paper) every layer, ``body`` the hidden layers only, the
        output layer kept as the source (or its factor correction) had it (see the module docstring).
    blend
        Blend the fine-tuned model with the source corrected by one boosted model shared by all primitives, fitted
        on the same samples (``finetune`` and ``factor-finetune`` only; :mod:`edgeplan.costmodels.blend`); default
        False.

    Returns
    -------
    PerformanceModel
        A new model (``source`` is not modified) with ``info["transfer"]`` describing the transfer.

    Raises
    ------
    InvalidInputError
        An unknown method or design, ``fraction`` outside ``(0, 1]``, a negative seed, no primitive column shared
        with the source, ``finetune`` from a linear model, ``bag`` below 1 (or above 1 for a method without
        fine-tuning), an unknown ``train`` (or ``body`` for a method without fine-tuning), or ``blend`` for a method
        without fine-tuning.
    """
    _check_transfer(source, target, method)
    options: dict[str, Any] = {"seed": seed, "method": method, "threads": threads, "settings": (fraction, split_seed),
                               "cross_fit": cross_fit, "refit": refit, "bag": bag, "train": train, "blend": blend}
    rounds, started = None, time.monotonic()
    if design == "cells-adaptive":  # the first round as cells; a model of it chooses the second
        full = draw_samples(target, fraction, seed, split_seed, design="cells")
        assert full.cells is not None
        first = draw_samples(target, fraction * ADAPTIVE_FIRST, seed, split_seed, design="cells")
        first = TransferSample(first.fit_rows, first.stop_rows, first.cells, full.tensor_rows)
        sample = contender_cells(transfer_on(source, target, first, **options), target, first, len(full.cells), seed,
                                 split_seed)
        assert first.cells is not None and sample.cells is not None
        rounds = [len(first.cells), len(sample.cells) - len(first.cells)]
    else:
        sample = draw_samples(target, fraction, seed, split_seed, design=design)
    model = transfer_on(source, target, sample, **options)
    model.info["transfer"]["design"] = design
    model.info["transfer"]["adaptive_rounds"] = rounds
    if rounds is not None:  # both rounds' fitting, and the choice between them
        model.info["transfer"]["seconds"] = round(time.monotonic() - started, 3)
    return model


def _check_transfer(source: PerformanceModel, target: PrimitiveDataset, method: str) -> None:
    if method not in METHODS:
        raise InvalidInputError(f"unknown transfer method {method!r}; use one of {', '.join(METHODS)}")
    shared = [p for p in target.primitives if p in source.primitive_names]
    if not shared:
        raise InvalidInputError(f"{target.source or 'the target table'}: no primitive column in common with the source "
                                f"model ({len(source.primitive_names)} primitives such as "
                                f"{', '.join(source.primitive_names[:3])}); is it a table of the same primitives?")


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
    held = np.random.default_rng([_check_seed(seed, "seed"), 1]).permutation(n)[:n_stop]
    stop = np.zeros(n, dtype=bool)
    stop[held] = True
    return TransferSample(np.sort(drawn[~stop]), np.sort(drawn[stop]))


def transfer_on(source: PerformanceModel, target: PrimitiveDataset, sample: TransferSample, *, seed: int,
                method: str = "finetune", threads: int | None = None,
                settings: tuple[float | None, int | None] = (None, None), cross_fit: bool = True,
                refit: bool = False, bag: int = 1, train: str = "all", blend: bool = False) -> PerformanceModel:
    """:func:`transfer` on given target rows (``sample``) instead of a drawn fraction of the training part.

    Parameters
    ----------
    source, target, seed, method, threads, cross_fit, refit, bag, train, blend
        As for :func:`transfer`.
    sample
        The rows to fit on and to early-stop on (e.g. from :func:`hold_out`).
    settings
        ``(fraction, split_seed)`` recorded in the model's ``info``; ``None`` when the rows were not drawn from a
        split (``edgeplan calibrate --primitives``).

    Returns
    -------
    PerformanceModel
    """
    _check_transfer(source, target, method)
    fraction, split_seed = settings
    started = time.monotonic()
    outputs = source.primitive_names
    y_all = _aligned(sample.primitive_times(target), target.primitives, outputs)
    x_all = target.features
    fit, stop = sample.fit_rows, sample.stop_rows
    if len(stop) == 0:  # one sample: train on it and stop on its training loss
        stop = fit
    plan: list[tuple[IntArray, IntArray]] = []
    refit_epochs: int | None = None
    scales: dict[str, float] = {}
    counts: dict[str, int] = {}
    prim: PrimitiveEstimator = source.primitives
    if method in ("factor", "factor-finetune"):
        scaling = factor_scales if method == "factor" else pooled_scales  # the paper's factor is the plain one
        found, n_cells = scaling(source.primitives, x_all[sample.rows], y_all[sample.rows])
        prim = _scaled(source.primitives, found)
        scales = dict(zip(outputs, map(float, found), strict=True))
        counts = dict(zip(outputs, map(int, n_cells), strict=True))
    bag = _check_bag(bag, method)
    train = _check_train(train, method)
    if blend and method not in ("finetune", "factor-finetune"):
        raise InvalidInputError(f"blend mixes a fine-tuned model with a shared correction; method {method!r} has no "
                                f"fine-tuning: use finetune or factor-finetune, or leave out blend")
    refits: list[int | None] = []
    if method in ("finetune", "factor-finetune"):
        start, tunings = prim, []
        for k in range(bag):  # the first fine-tuning is the unbagged one; the others draw other folds and shuffles
            own_seed = bag_seed(seed, k)
            own_plan = stopping_plan(sample, _members(start) if cross_fit else 1, own_seed)
            tuned, epochs = _finetune(start, x_all, y_all, own_plan, own_seed, threads, refit, train)
            tunings.append(tuned)
            refits.append(epochs)
            plan = plan or own_plan
        prim = _pooled_ensemble(tunings)
        refit_epochs = refits[0]
        if blend:  # the source itself, uncorrected, is what the shared correction corrects
            prim = fit_blend(prim, source.primitives, x_all[sample.rows], y_all[sample.rows])
    elif method == "scratch":
        own = sample.primitive_times(target)
        prim = _scratch(source.primitives, target.primitives, (x_all[fit], own[fit], x_all[stop], own[stop]), seed,
                        threads)
    elif method == "direct":
        prim = _copy(source.primitives)
    trans, paper, t_scales = _transfer_transforms((source.transforms, source.transforms_paper), target,
                                                  sample.transform_rows, method)
    info = _info(source, target, method, (fraction, seed, split_seed), sample, time.monotonic() - started)
    cross_fit = bool(plan) and _cross_fits(len(sample), len(plan))
    if cross_fit:  # every drawn row trains most members and stops one
        info.update({"train_rows": len(sample), "val_rows": len(sample)})
    info["transfer"].update({"cross_fit_folds": [len(stop) for _, stop in plan] if cross_fit else None,
                             "stop_rows": 0 if cross_fit else len(sample.stop_rows), "refit_epochs": refit_epochs,
                             "bag": bag, "bag_refit_epochs": refits if bag > 1 else None, "train": train,
                             "blend": {"weight": BLEND_WEIGHT, "correction": CORRECTION_PARAMS} if blend else None,
                             "ignored_columns": [p for p in target.primitives if p not in source.primitive_names],
                             "primitive_scales": scales, "primitive_scale_samples": counts,
                             "transform_scales": t_scales})
    return PerformanceModel(prim.kind, prim, trans, info, paper)


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


CALIBRATION_FOLDS = 5
"""Folds of the cross-validation by which :func:`calibrate_primitives` scores and chooses its method."""


@dataclass(frozen=True)
class PrimitiveCalibration:
    """A performance model moved to a user's machine from the layers measured on it (``calibrate --primitives``).

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
    ``auto`` keeps the best. The returned model is that method fitted on every layer. Why measure rather than fix
    the method: on mulder2021 Intel -> AMD with 1 % of AMD's training part (37 layers), fine-tuning beat the factor
    correction (test MdRAE 16.2 % vs 18.9 %, medians of 3 repeats of ``benchmarks/bench_transfer.py``), while from
    the 1-thread model of this machine to 2 threads (``benchmarks/bench_calibrate_primitives.py``, MdRAE on an
    independent table) the factor was best from 40 layers and fine-tuning from 160. The chosen method's score is
    the lowest of several noisy estimates, so it is optimistic.

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
    _check_transfer(source, target, methods[-1])
    if not neural and any(m.endswith("finetune") for m in methods):
        raise InvalidInputError(f"finetune continues training a neural model; the source is {source.kind!r}: use "
                                f"factor or auto")
    if isinstance(folds, bool) or not isinstance(folds, int | np.integer) or folds < 2:
        raise InvalidInputError(f"folds {folds!r}: cross-validation needs at least 2 folds")
    n = len(target)
    if n == 0:
        raise InvalidInputError(f"{target.source or 'the measurements'}: no layer; measure at least one")
    k = min(int(folds), n) if n >= 2 else 0
    fold_of = np.random.default_rng([_check_seed(seed, "seed"), 2]).permutation(n) % k if k else np.zeros(0)
    total = len(methods) * k + 1
    done = 0
    outputs = source.primitive_names
    y_true = _aligned(target.primitive_ns, target.primitives, outputs)
    scores: dict[str, float] = {}
    transform_scores: dict[str, float] = {}
    for m in methods if k else ():
        pred = np.full_like(y_true, np.nan)
        t_true: list[FloatArray] = []
        t_pred: list[FloatArray] = []
        for fold in range(k):
            train, held = np.flatnonzero(fold_of != fold), np.flatnonzero(fold_of == fold)
            model = transfer_on(source, target, hold_out(train, seed), seed=seed, method=m, threads=threads)
            pred[held] = model.predict_primitives(target.features[held])
            if model.transforms is not None and target.transforms:
                tx, ty, names = _tensor_table(target, held)
                t_true.append(_aligned(ty, names, model.transform_names))
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
    model = transfer_on(source, target, hold_out(np.arange(n), seed), seed=seed, method=chosen, threads=threads)
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
