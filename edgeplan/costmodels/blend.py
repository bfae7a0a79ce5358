"""A fine-tuned model blended with one boosted correction of the source shared by all primitives (not in the paper).

Fine-tuning the source network on a few target samples (mulder2020 §4.4) moves each primitive's output from the
samples of that primitive; with 1 % of a table the Winograd variants that differ only in tile or vector width get a
dozen timings each, on different layers, and the order of such close competitors on one layer is what the PBQP
selection rests on. :func:`fit_blend` adds a second view of the same samples: **one** gradient-boosted model of
``log(target time / source prediction)`` shared by all primitives, whose inputs are the layer's sizes, the source's
log prediction and a description of the primitive (its family, its name's tokens such as ``winograd``, ``4x4``,
``vec``, ``8``, its output tile and its vector width, and the column itself). Every drawn timing of any Winograd
variant then informs the correction of all of them, along the attributes they share. The transferred model predicts
the geometric mean of the fine-tuned model and the corrected source, with weight :data:`BLEND_WEIGHT` on the latter.

From a few hundred timings the blend lowers both the MdRAE and the cost of the selections made with the model;
from many more the fine-tuned model alone is better (``docs/figures.md``).

:class:`BlendedModel` is an ordinary primitive estimator: it predicts, saves and loads (no pickle; the boosted trees
are kept as arrays) like the others, and a factor correction of it (``y_mean_``) scales its outputs. It cannot be
fine-tuned again: fine-tune its parts instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.primitive_models import ESTIMATORS, PrimitiveEstimator
from edgeplan.errors import InvalidInputError
from edgeplan.measure.primitive_data import LAYER_FEATURES

__all__ = ["BLEND_WEIGHT", "CORRECTION_PARAMS", "MIN_TIMINGS", "BlendedModel", "correction_inputs", "family",
           "fit_blend", "primitive_descriptors"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BLEND_WEIGHT = 0.5
"""Weight of the corrected source in the blend's log prediction (the fine-tuned model has the rest). Chosen among
0.4-0.7 on Intel -> AMD seeds 0-5 at 1 % (cells), in an ad hoc run not kept in the repository."""

CORRECTION_PARAMS: dict[str, Any] = {"loss": "absolute_error", "max_iter": 300, "learning_rate": 0.05,
                                     "max_leaf_nodes": 15, "min_samples_leaf": 20, "l2_regularization": 1.0,
                                     "early_stopping": False}
"""Settings of the shared correction (scikit-learn's ``HistGradientBoostingRegressor``): the absolute error of the
log ratio (the MdRAE's loss), strongly regularized for a few hundred timings; no early stopping, so that the same
settings hold whatever the number of samples."""

MIN_TIMINGS = 2 * int(CORRECTION_PARAMS["min_samples_leaf"])
"""Fewest timings (that the source also predicts) the shared correction is fitted on."""


def family(name: str) -> str:
    """mulder2020 Table 6 family of a primitive column name (``wino3``, ``im2``, ...; ``fft`` / ``runtime`` for
    edgeplan's own primitives); ``other`` for a name of none of them."""
    for prefix, fam in (("direct", "direct"), ("im2", "im2"), ("kn2", "kn2"), ("conv-1x1", "c1x1"), ("mec", "mec"),
                        ("torch-", "runtime")):
        if name.startswith(prefix):
            return fam
    if name == "fft":
        return "fft"
    if name.startswith("winograd-") and len(name.split("-")) > 2:
        return f"wino{name.split('-')[2][0]}"  # winograd-2-3, winograd-2x2-5x5-vec-4: the kernel is the third token
    return "other"


def primitive_descriptors(names: Sequence[str]) -> tuple[tuple[str, ...], FloatArray]:
    """What the shared correction knows of each primitive: one row per name.

    Columns: the family one-hot (:func:`family`), one per token of the names split at ``-`` (``winograd``, ``2x2``,
    ``vec``, ``16``, ``ab``, ``ik``, ...), the Winograd output tile (0 for others), the vector width (0 without
    ``vec-N``), and the column itself one-hot.

    Returns
    -------
    tuple
        The column names and the ``(len(names), d)`` matrix.
    """
    families = sorted({family(n) for n in names})
    tokens = sorted({t for n in names for t in n.split("-")})
    columns = ([f"family={f}" for f in families] + [f"token={t}" for t in tokens] + ["tile", "vector_width"]
               + [f"column={n}" for n in names])
    out = np.zeros((len(names), len(columns)))
    for i, name in enumerate(names):
        out[i, families.index(family(name))] = 1
        for t in name.split("-"):
            out[i, len(families) + tokens.index(t)] = 1
        tile = re.match(r"winograd-(\d+)", name)
        vec = re.search(r"vec-(\d+)", name)
        out[i, len(families) + len(tokens)] = int(tile.group(1)) if tile else 0
        out[i, len(families) + len(tokens) + 1] = int(vec.group(1)) if vec else 0
        out[i, len(families) + len(tokens) + 2 + i] = 1
    return tuple(columns), out


def correction_inputs(features: npt.ArrayLike, log_source: FloatArray, descriptors: FloatArray | None
                      ) -> tuple[FloatArray, IntArray, IntArray]:
    """The shared correction's inputs for every cell where ``log_source`` is finite.

    Parameters
    ----------
    features
        ``(n, 5)`` layers ``(c, k, im, f, s)``.
    log_source
        ``(n, m)`` log predictions of the source, NaN where there is no cell.
    descriptors
        ``(m, d)`` rows of :func:`primitive_descriptors`, or None for none (then the family and column one-hots
        are not there either: only the layer and the source's prediction).

    Returns
    -------
    tuple
        ``(X, rows, columns)``: one input row per cell: log2 of c, k and im, f, s, log2 of the multiply-adds, the
        input, the weights and the output, the source's log prediction, then the primitive's descriptor row.
    """
    x = np.asarray(features, dtype=np.float64).reshape(-1, len(LAYER_FEATURES))
    c, k, im, f, s = (x[:, j] for j in range(5))
    out = im / s
    layer = np.column_stack([np.log2(c), np.log2(k), np.log2(im), f, s, np.log2(c * k * f * f * out * out),
                             np.log2(c * im * im), np.log2(c * k * f * f), np.log2(k * out * out)])
    rows, cols = np.nonzero(np.isfinite(log_source))
    parts = [layer[rows], log_source[rows, cols][:, None]]
    if descriptors is not None:
        parts.append(descriptors[cols])
    return np.hstack(parts), rows.astype(np.int64), cols.astype(np.int64)


class _Trees:
    """Boosted regression trees kept as padded arrays (no pickle), evaluated all at once."""

    def __init__(self, left: IntArray, right: IntArray, feature: IntArray, threshold: FloatArray, value: FloatArray,
                 baseline: float) -> None:
        self.left, self.right, self.feature = left, right, feature
        self.threshold, self.value, self.baseline = threshold, value, float(baseline)

    @classmethod
    def from_sklearn(cls, est: Any) -> _Trees:
        """From a fitted ``HistGradientBoostingRegressor`` (its numeric splits; leaf values carry the shrinkage).

        Reads the estimator's private ``_predictors`` and ``_baseline_prediction`` (scikit-learn is pinned in
        constraints.txt; ``tests/test_costmodels_blend.py`` checks the export against ``predict``)."""
        nodes = [p[0].nodes for p in est._predictors]
        width = max(len(n) for n in nodes)
        shape = (len(nodes), width)
        left, right = np.full(shape, -1, dtype=np.int64), np.full(shape, -1, dtype=np.int64)
        feature, threshold, value = np.zeros(shape, dtype=np.int64), np.zeros(shape), np.zeros(shape)
        for i, n in enumerate(nodes):
            split = ~n["is_leaf"].astype(bool)
            m = len(n)
            left[i, :m] = np.where(split, n["left"].astype(np.int64), -1)
            right[i, :m] = np.where(split, n["right"].astype(np.int64), -1)
            feature[i, :m] = n["feature_idx"]
            threshold[i, :m] = n["num_threshold"]
            value[i, :m] = n["value"]
        return cls(left, right, feature, threshold, value, float(np.ravel(est._baseline_prediction)[0]))

    def predict(self, x: FloatArray) -> FloatArray:
        """The boosted sum for every row of ``x``."""
        from edgeplan.costmodels.opwise.predictors import _Forest

        forest = _Forest.from_arrays(self.left, self.right, self.feature, self.threshold, self.value)
        return np.asarray(self.baseline + forest.values(x).sum(axis=1), dtype=np.float64)

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        return {"trees.left": self.left, "trees.right": self.right, "trees.feature": self.feature,
                "trees.threshold": self.threshold, "trees.value": self.value,
                "trees.baseline": np.array([self.baseline])}

    @classmethod
    def from_arrays(cls, arrays: dict[str, npt.NDArray[Any]]) -> _Trees:
        return cls(np.asarray(arrays["trees.left"], dtype=np.int64), np.asarray(arrays["trees.right"], dtype=np.int64),
                   np.asarray(arrays["trees.feature"], dtype=np.int64),
                   np.asarray(arrays["trees.threshold"], dtype=np.float64),
                   np.asarray(arrays["trees.value"], dtype=np.float64), float(arrays["trees.baseline"][0]))


class BlendedModel(PrimitiveEstimator):
    """The geometric mean of a fine-tuned model and the source corrected by one shared boosted model.

    Made by :func:`fit_blend`, not fitted directly. ``predict`` gives, for every output,
    ``exp(w * (log source + correction) + (1 - w) * log tuned + y_mean_)``; where the source predicts nothing but
    the fine-tuned model does, the fine-tuned model alone. Where each primitive applies is the fine-tuned model's.
    ``y_mean_`` starts at zero: a factor correction of the blend adds to it (as it does for the other estimators).
    """

    kind: ClassVar[str] = "blend"
    _param_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tuned: PrimitiveEstimator | None = None, source: PrimitiveEstimator | None = None,
                 trees: _Trees | None = None, descriptors: FloatArray | None = None,
                 descriptor_names: tuple[str, ...] = (), weight: float = BLEND_WEIGHT) -> None:
        self.weight = float(weight)
        if tuned is None or source is None or trees is None or descriptors is None:
            return  # unfitted (from_state fills it)
        self._set(tuned, source, trees, descriptors, descriptor_names)

    def _set(self, tuned: PrimitiveEstimator, source: PrimitiveEstimator, trees: _Trees, descriptors: FloatArray,
             descriptor_names: tuple[str, ...]) -> None:
        if tuple(source.output_names_) != tuple(tuned.output_names_):
            raise InvalidInputError("the blend's source and fine-tuned model must have the same outputs")
        self.tuned_, self.source_, self.trees_ = tuned, source, trees
        self.descriptors_, self.descriptor_names_ = np.asarray(descriptors, dtype=np.float64), tuple(descriptor_names)
        self.feature_names_in_ = tuple(tuned.feature_names_in_)
        self.n_features_in_ = len(self.feature_names_in_)
        self.output_names_ = tuple(tuned.output_names_)
        self.applicability_ = dict(tuned.applicability_)
        self.y_mean_ = np.zeros(len(self.output_names_))

    def fit(self, X: npt.ArrayLike, Y: npt.ArrayLike, **kwargs: Any) -> PrimitiveEstimator:
        raise InvalidInputError("a blended model is made by a transfer (edgeplan primitives transfer --blend), not "
                                "fitted directly")

    def predict(self, X: npt.ArrayLike) -> FloatArray:
        """Times in ns of every output for each row of ``X`` (see the class docstring); NaN where it does not
        apply."""
        self._check_fitted()
        x = np.asarray(X, dtype=np.float64)
        if x.ndim == 1:
            x = x.reshape(1, -1)
        tuned = np.log(self.tuned_.predict(x))
        with np.errstate(divide="ignore", invalid="ignore"):
            log_source = np.log(self.source_.predict(x))
        log_source[~np.isfinite(tuned)] = np.nan
        inputs, rows, cols = correction_inputs(x, log_source, self.descriptors_)
        blended = tuned.copy()
        if len(rows):
            corrected = log_source[rows, cols] + self.trees_.predict(inputs)
            blended[rows, cols] = self.weight * corrected + (1 - self.weight) * tuned[rows, cols]
        return np.asarray(np.exp(blended + self.y_mean_), dtype=np.float64)

    def to_state(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        """JSON-able description and named arrays (the parts' states nested, their arrays prefixed)."""
        self._check_fitted()
        arrays: dict[str, npt.NDArray[Any]] = dict(self.trees_.arrays())
        parts = {}
        for name, est in (("tuned", self.tuned_), ("source", self.source_)):
            meta, own = est.to_state()
            parts[name] = meta
            arrays.update({f"{name}.{k}": v for k, v in own.items()})
        arrays["descriptors"] = self.descriptors_
        meta_out = {"kind": self.kind, "params": {}, "weight": self.weight,
                    "feature_names": list(self.feature_names_in_), "output_names": list(self.output_names_),
                    "y_mean": self.y_mean_.tolist(), "descriptor_names": list(self.descriptor_names_), "parts": parts}
        return meta_out, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> PrimitiveEstimator:
        """Rebuild from :meth:`to_state`'s output."""
        parts = {}
        for name in ("tuned", "source"):
            part = meta["parts"][name]
            own = {k.removeprefix(f"{name}."): v for k, v in arrays.items() if k.startswith(f"{name}.")}
            parts[name] = ESTIMATORS[str(part["kind"])].from_state(part, own)
        est = cls(weight=float(meta["weight"]))
        est._set(parts["tuned"], parts["source"], _Trees.from_arrays(arrays), np.asarray(arrays["descriptors"]),
                 tuple(meta["descriptor_names"]))
        est.y_mean_ = np.asarray(meta["y_mean"], dtype=np.float64)
        if tuple(meta["output_names"]) != est.output_names_:
            raise ValueError("the blend's output names differ from its parts'")
        return est


def fit_blend(tuned: PrimitiveEstimator, source: PrimitiveEstimator, x: npt.ArrayLike, y: npt.ArrayLike,
              weight: float = BLEND_WEIGHT) -> BlendedModel:
    """The blend of ``tuned`` with ``source`` corrected by one boosted model fitted on the cells of ``y``.

    Parameters
    ----------
    tuned
        The fine-tuned model.
    source
        The source model it was fine-tuned from (uncorrected), with the same outputs.
    x
        ``(n, 5)`` drawn target layers.
    y
        ``(n, m)`` their target times in ``tuned``'s output columns, NaN where not drawn or undefined.
    weight
        Weight of the corrected source in the log blend, in ``[0, 1]``.

    Returns
    -------
    BlendedModel

    Raises
    ------
    InvalidInputError
        A weight outside ``[0, 1]``, or fewer cells than the correction's leaves need (2 x ``min_samples_leaf``).
    """
    from sklearn.ensemble import HistGradientBoostingRegressor

    if not 0.0 <= weight <= 1.0:
        raise InvalidInputError(f"blend weight {weight}: use a number from 0 to 1")
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    names, descriptors = primitive_descriptors(tuned.output_names_)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_source = np.log(source.predict(x))
        log_source[~(np.isfinite(y) & (y > 0))] = np.nan
    inputs, rows, cols = correction_inputs(x, log_source, descriptors)
    need = MIN_TIMINGS
    if len(rows) < need:
        raise InvalidInputError(f"the shared correction needs at least {need} timings the source also predicts; "
                                f"the samples hold {len(rows)}: draw more, or leave out the blend")
    target = np.log(y[rows, cols]) - log_source[rows, cols]
    est = HistGradientBoostingRegressor(random_state=0, **CORRECTION_PARAMS).fit(inputs, target)
    return BlendedModel(tuned, source, _Trees.from_sklearn(est), descriptors, names, weight)
