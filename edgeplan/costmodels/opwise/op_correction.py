"""Per-operation correction of a source device's predictions, learnt from operations timed on the new device.

When the few models of a calibration are measured with the runtime's profiler on the new device (``edgeplan
calibrate --measure``, or a ``profile ops --export`` dataset given to ``calibrate --measurements``), each of them brings
dozens to hundreds of operation timings, not one end-to-end latency. The correction then learns how the new device
differs from the source *per operation*:

1. a factor per operation key (``aten::conv2d|conv``, ...): the ratio of the measured to the source-predicted time
   summed over the key's sampled operations, in log space, shrunk towards its category's factor with
   :data:`OP_PRIOR` pseudo-operations, the category's towards the common factor the same way;
2. per category with at least :data:`MIN_RESIDUAL_OPS` sampled operations, a small gradient-boosted model of what
   is left of the log ratio, from the operation's features (log scale) and the source's log prediction: how much
   faster the new device runs a convolution depends on its shape, not only on its kind;
3. the end-to-end latency is ``ops x (sum of corrected ops) + const``, fitted to the models' measured latencies by
   non-negative least squares on relative error (the new device's overhead between operations).

Ten end-to-end numbers cannot separate categories whose times move together from model to model; their operations
can, so this correction predicts a new device better than one factor on the source's total. Corrections learnt on
synthetic networks' operations carry poorly to real CNNs: calibrate from models like the ones to predict.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.ops import OpInput, record_ops
from edgeplan.costmodels.opwise.predictors import _export_tree, _Forest
from edgeplan.errors import InvalidInputError

__all__ = ["MIN_RESIDUAL_OPS", "OP_PRIOR", "RESIDUAL_PARAMS", "MeasuredOps", "OpCorrection", "fit_op_correction",
           "measured_ops"]

#: Pseudo-operations with which a key's log factor is pulled towards its category's (and a category's towards the
#: common one): a key seen in 5 operations sits halfway.
OP_PRIOR = 5.0

#: The residual model of a category: shallow boosted trees on log ratios (scikit-learn's names).
RESIDUAL_PARAMS: dict[str, Any] = {"max_depth": 2, "n_estimators": 200, "learning_rate": 0.05, "min_samples_leaf": 10,
                                   "subsample": 0.8}

#: Fewest sampled operations of a category for a residual model of its own.
MIN_RESIDUAL_OPS = 2 * int(RESIDUAL_PARAMS["min_samples_leaf"])


@dataclass(frozen=True)
class MeasuredOps:
    """A sample model's operations with their times measured on the new device (``measured_ms``) and the source's
    prediction of each (``source_ms``, in the same order)."""

    ops: tuple[OpInput, ...]
    source_ms: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.ops) != len(self.source_ms):
            raise InvalidInputError(f"{len(self.ops)} operations but {len(self.source_ms)} source predictions")


def measured_ops(record: Mapping[str, Any], source: LatencyModel, statistic: str = "median") -> MeasuredOps:
    """A dataset record's operations (``profile ops --export``; times in ``statistic``) with ``source``'s prediction
    of each.

    Raises
    ------
    InvalidInputError
        When an operation cannot be featurized, or the source has no predictor for one (named).
    """
    ops = record_ops(record, statistic)
    pred = source.predict_ops(ops)
    if pred.unpredicted:
        raise InvalidInputError(f"{record['model']}: the source has no predictor for its measured operation(s) "
                                f"{', '.join(pred.unpredicted[:3])}")
    return MeasuredOps(tuple(ops), tuple(p.ms or 0.0 for p in pred.ops))


def _residual_matrix(x: Sequence[Sequence[float]], source_ms: Sequence[float]) -> np.ndarray[Any, Any]:
    """The residual models' inputs: the operations' features ``x`` (one row each, same length) on a log scale, and
    the log of the source's prediction."""
    return np.column_stack([np.log1p(np.abs(np.asarray(x, dtype=float))),
                            np.log(np.maximum(np.asarray(source_ms, dtype=float), 1e-6))])


@dataclass
class OpCorrection:
    """Log factors per key, category and overall, and per-category residual trees (see the module docstring)."""

    common: float
    categories: dict[str, float] = field(default_factory=dict)
    keys: dict[str, float] = field(default_factory=dict)
    residuals: dict[str, dict[str, Any]] = field(default_factory=dict)
    _forests: dict[str, _Forest] = field(default_factory=dict, init=False, repr=False, compare=False)

    def log_factors(self, ops: Sequence[OpInput], source_ms: Sequence[float]) -> np.ndarray[Any, Any]:
        """The log of each operation's factor (its source prediction times ``exp`` of it is the corrected time)."""
        out = np.array([self.keys.get(o.key, self.categories.get(o.category, self.common)) for o in ops], dtype=float)
        by_cat: dict[str, list[int]] = defaultdict(list)
        for i, o in enumerate(ops):
            res = self.residuals.get(o.category)
            if res is not None and len(o.x) + 1 == int(res["features"]):
                by_cat[o.category].append(i)
        for cat, idx in by_cat.items():
            res = self.residuals[cat]
            forest = self._forests.get(cat)
            if forest is None:  # the trees stacked once, evaluated together (fast for many operations)
                forest = self._forests[cat] = _Forest(res["trees"])
            z = _residual_matrix([ops[i].x for i in idx], [source_ms[i] for i in idx])
            out[idx] += float(res["rate"]) * forest.values(z).sum(axis=1)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (trees as arrays, no pickle)."""
        return {"common": self.common, "categories": self.categories, "keys": self.keys, "residuals": self.residuals}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpCorrection:
        """Inverse of :meth:`to_dict`."""
        return cls(float(data["common"]), {k: float(v) for k, v in data["categories"].items()},
                   {k: float(v) for k, v in data["keys"].items()}, {k: dict(v) for k, v in data["residuals"].items()})


def fit_op_correction(samples: Sequence[MeasuredOps], seed: int = 0) -> OpCorrection:
    """Learn the per-operation correction from the sample models' measured operations.

    Parameters
    ----------
    samples
        The sample models' operations, measured on the new device, with the source's predictions.
    seed
        Seed of the residual trees' subsampling.

    Returns
    -------
    OpCorrection

    Raises
    ------
    InvalidInputError
        When no operation has both a positive measured time and a positive source prediction.
    """
    from sklearn.ensemble import GradientBoostingRegressor

    measured: dict[str, float] = defaultdict(float)
    predicted: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    category_of: dict[str, str] = {}
    used: list[tuple[OpInput, float]] = []
    for s in samples:
        for o, p in zip(s.ops, s.source_ms, strict=True):
            if o.measured_ms is None or not o.measured_ms > 0 or not p > 0:
                continue
            measured[o.key] += o.measured_ms
            predicted[o.key] += p
            count[o.key] += 1
            category_of[o.key] = o.category
            used.append((o, p))
    if not used:
        raise InvalidInputError("no operation of the samples has a measured time and a source prediction to learn "
                                "a per-operation correction from")
    common = math.log(sum(measured.values()) / sum(predicted.values()))
    cat_m: dict[str, float] = defaultdict(float)
    cat_p: dict[str, float] = defaultdict(float)
    cat_n: dict[str, int] = defaultdict(int)
    for k, c in category_of.items():
        cat_m[c] += measured[k]
        cat_p[c] += predicted[k]
        cat_n[c] += count[k]
    categories = {c: (cat_n[c] * math.log(cat_m[c] / cat_p[c]) + OP_PRIOR * common) / (cat_n[c] + OP_PRIOR)
                  for c in cat_m}
    keys = {k: (count[k] * math.log(measured[k] / predicted[k]) + OP_PRIOR * categories[category_of[k]])
            / (count[k] + OP_PRIOR) for k in measured}
    correction = OpCorrection(common, categories, keys)
    by_cat: dict[str, list[tuple[OpInput, float]]] = defaultdict(list)
    for o, p in used:
        by_cat[o.category].append((o, p))
    for cat, items in sorted(by_cat.items()):
        width = len(items[0][0].x)
        items = [(o, p) for o, p in items if len(o.x) == width]
        if len(items) < MIN_RESIDUAL_OPS:
            continue
        ops = [o for o, _ in items]
        src = [p for _, p in items]
        left = np.log([o.measured_ms or 1.0 for o in ops]) - np.log(src) - correction.log_factors(ops, src)
        model = GradientBoostingRegressor(init="zero", random_state=seed, **RESIDUAL_PARAMS)
        model.fit(_residual_matrix([o.x for o in ops], src), left)
        correction.residuals[cat] = {"features": width + 1, "rate": float(model.learning_rate),
                                     "trees": [_export_tree(t) for t in model.estimators_[:, 0]]}
    return correction
