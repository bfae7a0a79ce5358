"""Operation-wise latency predictors of li2023 §4.2: non-negative Lasso, random forest, GBDT and MLP.

Every method predicts one operation's latency (ms) from its standardized features
(:mod:`edgeplan.costmodels.opwise.features`) and is fitted to *relative* error, as li2023 does, with 5-fold
cross-validation over its hyperparameters scored by MAPE:

- ``lasso``: ``w >= 0`` minimizing ``mean(((w.x + b - y) / y)^2) + alpha |w|_1`` (li2023 Eq. 1; the intercept ``b``,
  also non-negative, is ours: standardized features are centred, so without it the model cannot be positive).
  Solved as an ordinary positive Lasso on rows divided by ``y``; ``alpha`` on a log grid over ``[1e-5, 1e2]``.
- ``rf``: random forest, 1-10 trees, minimum split 2-50 (li2023's ranges).
- ``gbdt``: gradient-boosted trees, 1-200 stages, minimum split 2-7.
- ``mlp``: ReLU MLP, 1-6 layers of 64-512 units, Adam with li2023's learning rates and weight decays, a fifth of
  the training data for early stopping with a patience of 50 epochs (at most 200). The full grid (216 settings x 5
  folds per op kind) is too slow to fit on a CPU: 3 settings drawn from it, seeded, are compared on the
  validation split, and an op kind with more than 2000 samples trains on a seeded subsample of 2000. Like the
  forests (below), it learns the ratio to a linear baseline, its log clipped to the training range.

The tree and MLP methods fit ``log(y)``: the squared error of a log is the squared relative error to first order,
and trees cannot minimize a relative loss directly (a leaf's weighted mean under weights ``1/y^2`` is biased low).
Ours (a deviation from li2023): the forests fit ``log(y) - log(base(x))``, the ratio to a non-negative linear
model of the same features, because a tree predicts a constant beyond its training range and real networks have
larger operations than the synthetic space (VGG's fully connected layers, RegNet-128GF's convolutions): the
linear part extrapolates, the trees correct it where it is wrong (``TREES_ON_BASELINE = False`` gives li2023's
plain forests). The MLP does the same, with its log-ratio clipped to the range it was trained on: a ReLU network's
log output is linear in the features far from them, so alone it prices a large operation exponentially (up to an
infinite latency for networks larger than its training space); an MLP saved without ``base`` and ``log_range``
predicts without them.

Fitted predictors are plain data (:meth:`OpPredictor.to_dict`): weights, tree arrays and layer matrices evaluated by
NumPy code here, so a saved model loads with any scikit-learn or torch version, and without pickle.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgeplan.errors import InvalidInputError

__all__ = ["METHODS", "OpPredictor", "fit_predictor"]

#: The methods :func:`fit_predictor` knows.
METHODS: tuple[str, ...] = ("lasso", "rf", "gbdt", "mlp")

Array = np.ndarray[Any, Any]


@dataclass
class OpPredictor:
    """A fitted predictor of one operation kind.

    Attributes
    ----------
    method
        One of :data:`METHODS`.
    mean, std
        Feature standardization (training-set mean and population standard deviation; 1 where constant).
    params
        The fitted model as plain data (see the module docstring).
    hyper
        The chosen hyperparameters.
    cv_mape
        Cross-validated (or validation) MAPE of the chosen setting.
    n_train
        Training samples.
    """

    method: str
    mean: list[float]
    std: list[float]
    params: dict[str, Any]
    hyper: dict[str, Any]
    cv_mape: float
    n_train: int
    _forest: _Forest | None = field(default=None, repr=False, compare=False)

    def predict(self, x: Array) -> Array:
        """Latency (ms) of each row of raw features ``x``."""
        z = (np.asarray(x, dtype=float) - np.asarray(self.mean)) / np.asarray(self.std)
        if self.method in ("rf", "gbdt"):
            if self._forest is None:
                self._forest = _Forest(self.params["trees"])
            return _forest_output(self.method, self.params, self._forest.values(z), z)
        return _predict(self.method, self.params, z)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"method": self.method, "mean": self.mean, "std": self.std, "params": self.params,
                "hyper": self.hyper, "cv_mape": self.cv_mape, "n_train": self.n_train}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpPredictor:
        """Inverse of :meth:`to_dict`."""
        if data.get("method") not in METHODS:
            raise InvalidInputError(f"unknown predictor method {data.get('method')!r}; the file may be newer")
        return cls(str(data["method"]), list(data["mean"]), list(data["std"]), dict(data["params"]),
                   dict(data["hyper"]), float(data["cv_mape"]), int(data["n_train"]))


def _predict(method: str, p: Mapping[str, Any], z: Array) -> Array:
    if method == "lasso":
        return np.asarray(z @ np.asarray(p["w"]) + float(p["b"]), dtype=float)
    if method in ("rf", "gbdt"):  # tree by tree; OpPredictor.predict evaluates them stacked
        return _forest_output(method, p, np.stack([_tree(t, z) for t in p["trees"]], axis=1), z)
    if method == "mlp":
        h = z
        layers = p["layers"]
        for i, (w, b) in enumerate(layers):
            h = h @ np.asarray(w) + np.asarray(b)
            if i < len(layers) - 1:
                h = np.maximum(h, 0.0)
        log_out = h[:, 0] * float(p["y_std"]) + float(p["y_mean"])
        if p.get("log_range") is not None:  # the ratio to the baseline stays within what training saw
            lo, hi = (float(v) for v in p["log_range"])
            log_out = np.clip(log_out, lo, hi)
        return np.asarray(_base(p.get("base"), z) * np.exp(log_out))
    raise InvalidInputError(f"unknown predictor method {method!r}")


def _forest_output(method: str, p: Mapping[str, Any], raw: Array, z: Array) -> Array:
    """Latency from every tree's leaf value ``raw`` (rows, trees): the baseline times exp(mean) for a random forest,
    times exp(init + rate x sum) for boosting."""
    log_ratio = raw.mean(axis=1) if method == "rf" else float(p["init"]) + float(p["rate"]) * raw.sum(axis=1)
    return np.asarray(_base(p.get("base"), z) * np.exp(log_ratio))


def _base(b: Mapping[str, Any] | None, z: Array) -> Array:
    """The linear baseline a forest's output multiplies (1 for forests fitted without one)."""
    if not b:
        return np.ones(len(z))
    return np.maximum(z @ np.asarray(b["w"]) + float(b["b"]), float(b["floor"]))


class _Forest:
    """Exported trees stacked into padded arrays, evaluated together: one pass per tree level for all trees."""

    def __init__(self, trees: Sequence[Mapping[str, Any]]) -> None:
        width = max(len(t["left"]) for t in trees)
        self.left = np.full((len(trees), width), -1, dtype=np.int64)
        self.right = np.full((len(trees), width), -1, dtype=np.int64)
        self.feature = np.zeros((len(trees), width), dtype=np.int64)
        self.threshold = np.zeros((len(trees), width))
        self.value = np.zeros((len(trees), width))
        for i, t in enumerate(trees):
            n = len(t["left"])
            self.left[i, :n], self.right[i, :n] = t["left"], t["right"]
            self.feature[i, :n] = np.maximum(np.asarray(t["feature"]), 0)
            self.threshold[i, :n], self.value[i, :n] = t["threshold"], t["value"]
        self.depth = max(int(t["depth"]) for t in trees)

    @classmethod
    def from_arrays(cls, left: Array, right: Array, feature: Array, threshold: Array, value: Array) -> _Forest:
        """From padded ``(trees, nodes)`` arrays (a leaf's ``left`` is -1); the depth bound is the node count."""
        forest = cls.__new__(cls)
        forest.left, forest.right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
        forest.feature = np.maximum(np.asarray(feature, dtype=np.int64), 0)
        forest.threshold, forest.value = np.asarray(threshold, dtype=float), np.asarray(value, dtype=float)
        forest.depth = int(forest.left.shape[1])
        return forest

    def values(self, z: Array) -> Array:
        """The leaf value of every tree for every row of ``z``: shape (rows, trees)."""
        trees = np.arange(self.left.shape[0])[None, :]
        rows = np.arange(len(z))[:, None]
        node = np.zeros((len(z), self.left.shape[0]), dtype=np.int64)
        for _ in range(self.depth + 1):
            left = self.left[trees, node]
            leaf = left < 0
            if leaf.all():
                break
            go_left = z[rows, self.feature[trees, node]] <= self.threshold[trees, node]
            node = np.where(leaf, node, np.where(go_left, left, self.right[trees, node]))
        return np.asarray(self.value[trees, node])


def _tree(t: Mapping[str, Any], z: Array) -> Array:
    """Evaluate an exported decision tree on every row of ``z`` at once."""
    left, right = np.asarray(t["left"]), np.asarray(t["right"])
    feature, threshold, value = np.asarray(t["feature"]), np.asarray(t["threshold"]), np.asarray(t["value"])
    node = np.zeros(len(z), dtype=np.int64)
    rows = np.arange(len(z))
    for _ in range(int(t["depth"]) + 1):
        leaf = left[node] < 0
        if leaf.all():
            break
        go_left = z[rows, np.maximum(feature[node], 0)] <= threshold[node]
        node = np.where(leaf, node, np.where(go_left, left[node], right[node]))
    return np.asarray(value[node], dtype=float)


def _export_tree(estimator: Any) -> dict[str, Any]:
    t = estimator.tree_
    return {"left": t.children_left.tolist(), "right": t.children_right.tolist(), "feature": t.feature.tolist(),
            "threshold": t.threshold.tolist(), "value": t.value[:, 0, 0].tolist(), "depth": int(t.max_depth)}


def _mape(pred: Array, y: Array) -> float:
    return float(np.mean(np.abs(pred - y) / y))


def _folds(n: int, k: int, seed: int, groups: Array | None = None) -> list[tuple[Array, Array]]:
    """``k`` seeded (train, validation) index splits of ``n`` rows; with ``groups``, whole groups go to one fold
    (the groups in a seeded order, split as the rows are without them), so that no group is on both sides."""
    if groups is None:
        order = np.random.default_rng(seed).permutation(n)
        parts = np.array_split(order, k)
        return [(np.concatenate([parts[j] for j in range(k) if j != i]), parts[i]) for i in range(k)]
    chunks = np.array_split(np.random.default_rng(seed).permutation(np.unique(groups)), k)
    held = [np.isin(groups, c) for c in chunks]
    return [(np.flatnonzero(~h), np.flatnonzero(h)) for h in held]


@dataclass(frozen=True)
class _Columns:
    """What the linear parts may do with each feature (:func:`fit_predictor`'s ``prefer`` and ``linear``)."""

    prefer: tuple[bool, ...] | None = None
    linear: tuple[bool, ...] | None = None


def _standardize(x: Array) -> tuple[Array, Array]:
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std[std == 0] = 1.0
    return mean, std


def fit_predictor(x: Array, y: Array, method: str, seed: int = 0,
                  prefer: Sequence[bool] | None = None, linear: Sequence[bool] | None = None,
                  groups: Sequence[int] | None = None) -> OpPredictor:
    """Fit one operation kind's predictor, with hyperparameters chosen by 5-fold CV on MAPE.

    Parameters
    ----------
    x
        Raw features, one row per operation measured.
    y
        Latencies (ms), positive.
    method
        One of :data:`METHODS`.
    seed
        Seed of the folds, the forests and the MLP.
    prefer
        Per feature, whether it carries the weight of features tied with it in the training data
        (:func:`_lasso_train`); None: the first of each tied group does.
    linear
        Per feature, whether the linear parts (Lasso, and the baseline of the forests: :func:`_baseline`) may
        weigh it; None: all. A feature left out reaches the trees and the MLP only: the context features
        (:data:`~edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`) discount an op's time, which a non-negative
        linear weight cannot express, and a linear term in a repeat count extrapolates badly to the longer runs of
        repeats of real-world CNNs.
    groups
        Per row, the group it belongs to (the index of its network, say): the CV folds then hold out whole groups,
        so that the hyperparameters are chosen for rows of groups the fit has not seen (operations of new networks,
        whose repeated identical operations random folds put on both sides). None: rows are drawn into folds one by
        one, as li2023 does. With fewer than 5 groups, rows one by one.

    Returns
    -------
    OpPredictor

    Raises
    ------
    InvalidInputError
        For an unknown method, mismatched shapes, or non-positive latencies.
    """
    if method not in METHODS:
        raise InvalidInputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 2 or len(x) != len(y) or len(y) == 0:
        raise InvalidInputError(f"fit_predictor needs an (n, d) feature matrix and n latencies, got {x.shape}, "
                                f"{y.shape}")
    if not np.all(y > 0):
        raise InvalidInputError("latencies must be positive to fit a relative-error predictor")
    mean, std = _standardize(x)
    z = (x - mean) / std
    k = min(5, len(y))
    g = None
    if groups is not None:
        g = np.asarray(groups)
        if g.shape != y.shape:
            raise InvalidInputError(f"groups has {g.size} entries for {len(y)} rows; give one per row")
        if len(np.unique(g)) < k:
            g = None
    folds = _folds(len(y), k, seed, g) if k >= 2 else []
    fit = {"lasso": _fit_lasso, "rf": _fit_rf, "gbdt": _fit_gbdt, "mlp": _fit_mlp}[method]
    if linear is not None and len(linear) != x.shape[1]:
        raise InvalidInputError(f"linear marks {len(linear)} features, the matrix has {x.shape[1]}")
    cols = _Columns(tuple(bool(v) for v in prefer) if prefer is not None else None,
                    None if linear is None or all(linear) else tuple(bool(v) for v in linear))
    params, hyper, score = fit(z, y, folds, seed, cols)
    return OpPredictor(method, mean.tolist(), std.tolist(), params, hyper, score, len(y))


def _search(z: Array, y: Array, folds: Sequence[tuple[Array, Array]], grid: Sequence[dict[str, Any]],
            train: Any, predict: Any) -> tuple[dict[str, Any], float]:
    """The grid point with the lowest mean CV MAPE (the first on ties); with no folds, the first point."""
    if not folds or len(grid) == 1:
        return dict(grid[0]), math.nan
    best, best_score = dict(grid[0]), math.inf
    for h in grid:
        scores = [_mape(predict(train(z[a], y[a], h), z[b]), y[b]) for a, b in folds]
        score = float(np.mean(scores))
        if score < best_score:
            best, best_score = dict(h), score
    return best, best_score


# --- Lasso ---------------------------------------------------------------------------------------------------------


def _tied_columns(z: Array) -> list[list[int]]:
    """The columns of standardized features ``z`` grouped where they are equal on every row (first-seen order).

    Features that are affine functions of each other over the training data (a classifier head's ``in_c``,
    ``param_size`` and ``flops`` when every head has 1000 outputs) standardize to the same column.
    """
    groups: list[list[int]] = []
    for j in range(z.shape[1]):
        for g in groups:
            if np.allclose(z[:, g[0]], z[:, j], rtol=1e-9, atol=1e-9):
                g.append(j)
                break
        else:
            groups.append([j])
    return groups


def _lasso_train(z: Array, y: Array, h: Mapping[str, Any], cols: _Columns | None = None
                 ) -> tuple[Array, float]:
    """Non-negative Lasso on relative error (module docstring), one weight per group of tied columns
    (:func:`_tied_columns`), carried by the group's ``prefer``-red columns in equal parts, or by its first; the
    columns ``cols.linear`` leaves out get no weight.

    The data cannot tell tied features apart. For a fully connected layer in li2023's space, every head has 1000
    outputs, so ``in_c``, ``param_size`` and ``flops`` tie, and with the weight on ``in_c`` (the first) a
    4096-output layer (AlexNet's, VGG's) is priced as a 1000-output one, at a fraction of its time. A product's time
    follows its work where the data cannot say otherwise, so the operation-wise models prefer ``param_size`` and
    ``flops`` (:data:`edgeplan.costmodels.opwise.model.WORK_FEATURES`).
    Element-wise ops are left to their first column: li2023's in-place ReLUs all act on squeeze-and-excite vectors,
    whose time is the call's, not the elements'; carried by the element counts, the weight would price in-place
    ReLUs over whole feature maps many times too slow.
    """
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso

    use = [j for j in range(z.shape[1]) if cols is None or cols.linear is None or cols.linear[j]]
    prefer = [cols.prefer[j] for j in use] if cols is not None and cols.prefer is not None else None
    sub = z[:, use]
    groups = _tied_columns(sub)
    carriers = [[j for j in g if prefer[j]] or g[:1] for g in groups] if prefer is not None else [g[:1] for g in groups]
    kept = sub[:, [g[0] for g in groups]]
    design = np.hstack([kept, np.ones((len(z), 1))]) / y[:, None]
    model = Lasso(alpha=float(h["alpha"]), positive=True, fit_intercept=False, max_iter=20000, tol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(design, np.ones(len(y)))
    coef = np.asarray(model.coef_, dtype=float)
    w = np.zeros(z.shape[1])
    for g, c in zip(carriers, coef[:-1], strict=True):
        w[[use[j] for j in g]] = c / len(g)
    return w, float(coef[-1])


def _lasso_predict(m: tuple[Array, float], z: Array) -> Array:
    return np.asarray(z @ m[0] + m[1], dtype=float)


def _fit_lasso(z: Array, y: Array, folds: Sequence[tuple[Array, Array]], seed: int,
               cols: _Columns | None = None) -> tuple[dict[str, Any], dict[str, Any], float]:
    grid = [{"alpha": float(a)} for a in np.logspace(-5, 2, 15)]
    hyper, score = _search(z, y, folds, grid, functools.partial(_lasso_train, cols=cols), _lasso_predict)
    w, b = _lasso_train(z, y, hyper, cols)
    return {"w": w.tolist(), "b": b}, hyper, score


# --- trees ---------------------------------------------------------------------------------------------------------
# One fit per (min_split, fold) scores every tree count of the grid: a forest's first t trees are the forest of t
# trees with the same seed, and boosting's staged predictions are the models with fewer stages.

#: The tree counts a random forest's CV compares (li2023's range, 1-10; one fit of the largest scores them all).
RF_TREES: tuple[int, ...] = (1, 2, 5, 10)
_RF_SPLITS = (2, 5, 10, 20, 50)
_GBDT_STAGES = (25, 50, 100, 200)
_GBDT_SPLITS = (2, 4, 7)

#: The depth of a boosted tree (scikit-learn's default, which li2023 does not change). Deeper trees fit li2023's
#: synthetic test networks a little closer and real-world CNNs no better, at a longer fitting time; a diagnostic may
#: set it (and :data:`RF_TREES`) before fitting.
GBDT_DEPTH = 3


#: Whether forests learn a correction of a non-negative linear baseline (see :func:`_baseline`).
TREES_ON_BASELINE = True

#: The baseline's Lasso penalty (small: it only has to extrapolate, the trees do the rest).
_BASE_ALPHA = 1e-4


def _baseline(z: Array, y: Array, cols: _Columns | None = None) -> dict[str, Any] | None:
    """A non-negative linear latency model whose ratio to ``y`` the trees then learn, or None when switched off.

    Trees predict a constant beyond the range of their training features: an operation larger than any in
    training (VGG's fully connected layers, RegNet-128GF's convolutions against li2023's synthetic space) gets the
    latency of the largest one seen. A linear model of the features extrapolates; the trees learn the
    non-linear correction of its output (``log y - log base``), which is bounded where the linear part is right.
    The floor keeps the ratio defined where the linear model reaches zero.
    """
    if not TREES_ON_BASELINE:
        return None
    w, b = _lasso_train(z, y, {"alpha": _BASE_ALPHA}, cols)
    return {"w": w.tolist(), "b": b, "floor": float(np.min(y)) / 10.0}


def _rf_train(z: Array, y: Array, trees: int, min_split: int, seed: int, cols: _Columns | None = None
              ) -> tuple[Any, dict[str, Any] | None]:
    from sklearn.ensemble import RandomForestRegressor

    base = _baseline(z, y, cols)
    model = RandomForestRegressor(n_estimators=trees, min_samples_split=min_split, random_state=seed, n_jobs=1)
    return model.fit(z, np.log(y) - np.log(_base(base, z))), base


def _rf_staged(m: tuple[Any, dict[str, Any] | None], z: Array) -> dict[int, Array]:
    per_tree = np.array([e.predict(z) for e in m[0].estimators_])
    base = _base(m[1], z)
    return {t: base * np.exp(per_tree[:t].mean(axis=0)) for t in RF_TREES}


def _fit_rf(z: Array, y: Array, folds: Sequence[tuple[Array, Array]], seed: int,
            cols: _Columns | None = None) -> tuple[dict[str, Any], dict[str, Any], float]:
    hyper, score = _staged_search(z, y, folds, _RF_SPLITS, lambda zz, yy, s: _rf_train(zz, yy, max(RF_TREES), s,
                                                                                        seed, cols), _rf_staged)
    model, base = _rf_train(z, y, hyper["count"], hyper["min_split"], seed, cols)
    return {"trees": [_export_tree(e) for e in model.estimators_], "base": base}, {
        "trees": hyper["count"], "min_split": hyper["min_split"]}, score


def _gbdt_train(z: Array, y: Array, stages: int, min_split: int, seed: int, cols: _Columns | None = None
                ) -> tuple[Any, float, dict[str, Any] | None]:
    from sklearn.ensemble import GradientBoostingRegressor

    base = _baseline(z, y, cols)
    target = np.log(y) - np.log(_base(base, z))
    init = float(target.mean())
    model = GradientBoostingRegressor(n_estimators=stages, min_samples_split=min_split, learning_rate=0.1,
                                      max_depth=GBDT_DEPTH, init="zero", random_state=seed)
    return model.fit(z, target - init), init, base


def _gbdt_staged(m: tuple[Any, float, dict[str, Any] | None], z: Array) -> dict[int, Array]:
    out = {}
    base = _base(m[2], z)
    for i, pred in enumerate(m[0].staged_predict(z), start=1):
        if i in _GBDT_STAGES:
            out[i] = base * np.exp(pred + m[1])
    return out


def _fit_gbdt(z: Array, y: Array, folds: Sequence[tuple[Array, Array]], seed: int,
              cols: _Columns | None = None) -> tuple[dict[str, Any], dict[str, Any], float]:
    hyper, score = _staged_search(z, y, folds, _GBDT_SPLITS,
                                  lambda zz, yy, s: _gbdt_train(zz, yy, max(_GBDT_STAGES), s, seed, cols),
                                  _gbdt_staged)
    model, init, base = _gbdt_train(z, y, hyper["count"], hyper["min_split"], seed, cols)
    trees = [_export_tree(e) for e in model.estimators_[:, 0]]
    return ({"init": init, "rate": float(model.learning_rate), "trees": trees, "base": base},
            {"stages": hyper["count"], "min_split": hyper["min_split"]}, score)


def _staged_search(z: Array, y: Array, folds: Sequence[tuple[Array, Array]], splits: Sequence[int], train: Any,
                   staged: Any) -> tuple[dict[str, int], float]:
    """Best (tree count, min_split) by mean CV MAPE; with no folds, the largest count and the smallest split."""
    if not folds:
        return {"count": _largest(staged), "min_split": splits[0]}, math.nan
    scores: dict[tuple[int, int], list[float]] = {}
    for s in splits:
        for a, b in folds:
            for count, pred in staged(train(z[a], y[a], s), z[b]).items():
                scores.setdefault((count, s), []).append(_mape(pred, y[b]))
    (count, s), best = min(((k, float(np.mean(v))) for k, v in scores.items()), key=lambda kv: kv[1])
    return {"count": count, "min_split": s}, best


def _largest(staged: Any) -> int:
    return max(RF_TREES) if staged is _rf_staged else max(_GBDT_STAGES)


# --- MLP -----------------------------------------------------------------------------------------------------------

_MLP_SETTINGS = 3
_MLP_MAX_ROWS = 2000
_MLP_MAX_EPOCHS = 200
_MLP_GRID = [{"layers": n, "width": w, "lr": lr, "wd": wd} for n in range(1, 7) for w in (64, 128, 256, 512)
             for lr in (5e-3, 5e-4, 5e-5) for wd in (1e-3, 1e-4, 1e-5)]


def _mlp_train(z: Array, y: Array, h: Mapping[str, Any], seed: int, max_epochs: int = _MLP_MAX_EPOCHS
               ) -> dict[str, Any]:
    import torch

    from edgeplan.costmodels._mlp import flushed_subnormals  # subnormal floats slow x86 training many-fold

    g = torch.Generator().manual_seed(seed)
    target = np.log(y)
    y_mean, y_std = float(target.mean()), float(target.std() or 1.0)
    log_range = [float(target.min()), float(target.max())]
    t = torch.tensor((target - y_mean) / y_std, dtype=torch.float32)
    xs = torch.tensor(z, dtype=torch.float32)
    order = torch.randperm(len(xs), generator=g)
    n_val = max(1, len(xs) // 5) if len(xs) >= 5 else 0
    val, tr = order[:n_val], order[n_val:]
    torch.manual_seed(seed)
    dims = [z.shape[1]] + [int(h["width"])] * int(h["layers"]) + [1]
    mods: list[torch.nn.Module] = []
    for i in range(len(dims) - 1):
        mods.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            mods.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*mods)
    opt = torch.optim.Adam(net.parameters(), lr=float(h["lr"]), weight_decay=float(h["wd"]))
    best, best_state, stale = math.inf, None, 0
    batch = 256
    with torch.enable_grad(), flushed_subnormals():
        for _ in range(max_epochs):
            net.train()
            perm = tr[torch.randperm(len(tr), generator=g)]
            for i in range(0, len(perm), batch):
                idx = perm[i:i + batch]
                opt.zero_grad()
                loss = torch.mean((net(xs[idx])[:, 0] - t[idx]) ** 2)
                loss.backward()
                opt.step()
            if n_val == 0:
                continue
            net.eval()
            with torch.no_grad():
                pred = torch.exp(net(xs[val])[:, 0] * y_std + y_mean)
                score = float(torch.mean(torch.abs(pred - torch.tensor(y[val.numpy()])) / torch.tensor(
                    y[val.numpy()])))
            if score < best - 1e-6:
                best, stale = score, 0
                best_state = {k: v.clone() for k, v in net.state_dict().items()}
            else:
                stale += 1
                if stale >= 50:
                    break
    if best_state is not None:
        net.load_state_dict(best_state)
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    layers = [[m.weight.detach().numpy().T.tolist(), m.bias.detach().numpy().tolist()] for m in linears]
    return {"layers": layers, "y_mean": y_mean, "y_std": y_std, "log_range": log_range, "val_mape": best}


def _fit_mlp(z: Array, y: Array, folds: Sequence[tuple[Array, Array]], seed: int,
             cols: _Columns | None = None) -> tuple[dict[str, Any], dict[str, Any], float]:
    rng = np.random.default_rng(seed)
    if len(y) > _MLP_MAX_ROWS:  # a seeded subsample keeps the fit within minutes on 2 cores
        keep = rng.choice(len(y), size=_MLP_MAX_ROWS, replace=False)
        z, y = z[keep], y[keep]
    # as the forests: the network learns the ratio to a linear baseline (tied columns weigh only on the baseline's
    # preferred one), and that ratio is clipped to its training range, so an op larger than any in training is
    # priced by the baseline's extrapolation; a log-target MLP alone extrapolates exponentially (a zoo network's
    # large convolutions once overflowed to an infinite latency)
    base = _baseline(z, y, cols)
    ratio = y / _base(base, z)
    picks = [_MLP_GRID[i] for i in rng.choice(len(_MLP_GRID), size=_MLP_SETTINGS, replace=False)]
    fitted = [(_mlp_train(z, ratio, h, seed), h) for h in picks]
    params, hyper = min(fitted, key=lambda ph: ph[0]["val_mape"])
    score = float(params.pop("val_mape"))
    return {**params, "base": base}, dict(hyper), score
