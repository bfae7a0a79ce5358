"""The estimator base class every primitive model shares: validation, scaling, applicability, predict and
the JSON + arrays state; and the power-of-two input features.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.params import EstimatorParams
from edgeplan.errors import InvalidInputError, NotFittedError
from edgeplan.measure.primitive_data import LAYER_FEATURES

__all__ = ["POW2_FEATURES", "PrimitiveEstimator", "ProgressCallback", "TARGET_SCALES", "pow2_valuation"]

FloatArray = npt.NDArray[np.float64]
ProgressCallback = Callable[[str, Any], None]
"""Called as ``callback(stage, info)`` after every training epoch (``info``: an ``EpochInfo``)."""


POW2_FEATURES: tuple[str, ...] = ("c", "k", "im")
"""The sizes whose power-of-two factor ``pow2_features`` adds as an input."""

POW2_CAP = 10

TARGET_SCALES: tuple[str, ...] = ("per-output", "shared")
"""How the log-times are standardized: by each output's own deviation (the paper), or by one deviation pooled
over every output's centred log-times (``shared``), which makes the training loss the mean squared error of the
log-times themselves, so every primitive's relative error weighs the same (see :class:`NN2Model`)."""


def pow2_valuation(x: FloatArray, cap: int = POW2_CAP) -> FloatArray:
    """``log2`` of the largest power of two dividing each (integer) value, capped at ``cap``.

    A layout transformation or a primitive slows down several-fold when a stride is a multiple of a large power of
    two (cache-set aliasing, e.g. ``chw-to-hwc`` in the mulder2021 Intel data when ``c`` is a multiple of 64). A
    smooth function of ``(c, im)`` cannot express that; this feature lets the model see it.

    Parameters
    ----------
    x
        Values, any shape.
    cap
        Largest exponent returned.

    Returns
    -------
    FloatArray
        Same shape as ``x``: the exponent of each value's largest power-of-two factor; 0 for non-integers and
        values below 1.
    """
    xi = np.rint(x).astype(np.int64)
    integer = np.isclose(x, xi) & (xi > 0)
    low = np.where(integer, xi & -xi, 1)
    return np.minimum(np.log2(low.astype(np.float64)), float(cap))


class PrimitiveEstimator(EstimatorParams):
    """Shared preprocessing, applicability, prediction and state of the primitive models (not used directly).

    ``get_params``, ``set_params`` and the ``repr`` come from :class:`~edgeplan.costmodels.params.EstimatorParams`.
    """

    kind: ClassVar[str] = ""

    @property
    def is_fitted(self) -> bool:
        """True once :meth:`fit` (or loading) has set the learned state."""
        return hasattr(self, "output_names_")

    def get_feature_names_out(self) -> tuple[str, ...]:
        """The output (primitive or transformation) names, in prediction column order."""
        self._check_fitted()
        return self.output_names_

    # -- fit ------------------------------------------------------------------------------------------------------

    def fit(self, X: npt.ArrayLike, Y: npt.ArrayLike, *, feature_names: Sequence[str] = LAYER_FEATURES,
            output_names: Sequence[str] | None = None, X_val: npt.ArrayLike | None = None,
            Y_val: npt.ArrayLike | None = None, callback: ProgressCallback | None = None) -> PrimitiveEstimator:
        """Fit on layer shapes ``X`` and times ``Y`` (ns, NaN where undefined); early-stop on ``X_val, Y_val``.

        Parameters
        ----------
        X
            ``(n, d)`` positive layer shapes, columns named by ``feature_names``.
        Y
            ``(n, p)`` positive times in ns; NaN where the output does not apply.
        feature_names
            Names of ``X``'s columns (must include those of ``applicability_by``).
        output_names
            Names of ``Y``'s columns (default ``y0, y1, ...``).
        X_val, Y_val
            The validation part for early stopping. Without it, ``validation_fraction`` of the training rows
            (drawn by ``random_state``) is held out. Lin does not use it.
        callback
            Progress callback, called after every training epoch.

        Returns
        -------
        PrimitiveEstimator
            ``self``, fitted.
        """
        x, y = self._check_xy(X, Y, "training")
        names = tuple(feature_names)
        if len(names) != x.shape[1]:
            raise InvalidInputError(f"X has {x.shape[1]} columns but {len(names)} feature names {names}")
        outs = tuple(output_names) if output_names is not None else tuple(f"y{j}" for j in range(y.shape[1]))
        if len(outs) != y.shape[1]:
            raise InvalidInputError(f"Y has {y.shape[1]} columns but {len(outs)} output names")
        missing = [f for f in self._applicability_by() if f not in names]
        if missing:
            raise InvalidInputError(f"applicability_by names {missing} that are not among the features {names}")
        if X_val is None or Y_val is None:
            x, y, xv, yv = self._hold_out(x, y)
        else:
            xv, yv = self._check_xy(X_val, Y_val, "validation")
            if xv.shape[1] != x.shape[1] or yv.shape[1] != y.shape[1]:
                raise InvalidInputError("the validation part must have the training part's columns")
        self.feature_names_in_ = names
        self.n_features_in_ = len(names)
        self.output_names_ = outs
        self._fit_scalers(x, y)
        self.applicability_ = self._learn_applicability(x, y)
        self._fit_normalized(self._scale_x(x), self._scale_y(y), self._scale_x(xv), self._scale_y(yv), callback)
        return self

    def _applicability_by(self) -> tuple[str, ...]:
        return tuple(getattr(self, "applicability_by", ()))

    def _check_xy(self, X: npt.ArrayLike, Y: npt.ArrayLike, what: str) -> tuple[FloatArray, FloatArray]:
        x = np.asarray(X, dtype=np.float64)
        y = np.asarray(Y, dtype=np.float64)
        if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
            raise InvalidInputError(f"{what} data: X must be (n, d) and Y (n, p) with the same n; got {x.shape} and "
                                    f"{y.shape}")
        if x.shape[0] == 0:
            raise InvalidInputError(f"{what} data has no rows")
        if not np.isfinite(x).all() or (x <= 0).any():
            raise InvalidInputError(f"{what} data: layer shapes must be finite positive numbers")
        defined = y[~np.isnan(y)]
        if not np.isfinite(defined).all() or (defined <= 0).any():
            raise InvalidInputError(f"{what} data: times must be positive (NaN where undefined)")
        return x, y

    def _hold_out(self, x: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        frac = float(getattr(self, "validation_fraction", 0.1))
        n = x.shape[0]
        n_val = max(1, round(frac * n)) if n > 1 else 0
        perm = np.random.default_rng(int(getattr(self, "random_state", 0))).permutation(n)
        val, train = perm[:n_val], perm[n_val:]
        if n_val == 0:
            return x, y, x, y
        return x[train], y[train], x[val], y[val]

    def _fit_scalers(self, x: FloatArray, y: FloatArray) -> None:
        xs = self._input_features(x)
        self.x_mean_ = xs.mean(axis=0)
        std = xs.std(axis=0)
        self.x_std_ = np.where(std > 0, std, 1.0)
        z = np.log(y)
        scale = str(getattr(self, "target_scale", "per-output"))
        if scale not in TARGET_SCALES:
            raise InvalidInputError(f"target_scale {scale!r}: use {' or '.join(TARGET_SCALES)}")
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an output with no defined training cell
            mean = np.nanmean(z, axis=0)
            std_y = np.nanstd(z, axis=0)
            if scale == "shared":  # one deviation over every output's centred cells (NaN, then 1, when none)
                std_y = np.full(z.shape[1], np.sqrt(np.nanmean((z - mean) ** 2)))
        self.y_mean_ = np.where(np.isfinite(mean), mean, 0.0)
        self.y_std_ = np.where(np.isfinite(std_y) & (std_y > 0), std_y, 1.0)

    def _log_inputs(self) -> bool:
        return bool(getattr(self, "log_inputs", False))

    def _input_features(self, x: FloatArray) -> FloatArray:
        """The network's inputs before standardization: the shapes (or their logs), then any pow2 features."""
        xs = np.log(x) if self._log_inputs() else x
        if not getattr(self, "pow2_features", False):
            return xs
        cols = [j for j, f in enumerate(self.feature_names_in_) if f in POW2_FEATURES]
        return np.hstack([xs, pow2_valuation(x[:, cols])])

    def _scale_x(self, x: FloatArray) -> FloatArray:
        xs = self._input_features(x)
        return np.asarray((xs - self.x_mean_) / self.x_std_, dtype=np.float64)

    def _scale_y(self, y: FloatArray) -> FloatArray:
        return np.asarray((np.log(y) - self.y_mean_) / self.y_std_, dtype=np.float64)

    def _learn_applicability(self, x: FloatArray, y: FloatArray) -> dict[tuple[float, ...], npt.NDArray[np.bool_]]:
        cols = [self.feature_names_in_.index(f) for f in self._applicability_by()]
        keys = x[:, cols]
        defined = ~np.isnan(y)
        table: dict[tuple[float, ...], npt.NDArray[np.bool_]] = {}
        for key in np.unique(keys, axis=0):
            rows = (keys == key).all(axis=1)
            table[tuple(float(v) for v in key)] = defined[rows].any(axis=0)
        return table

    # -- predict --------------------------------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(X, Y) or load a saved "
                                 f"model first")

    def predict(self, X: npt.ArrayLike) -> FloatArray:
        """Times in ns of every output for each row of ``X``, in one batched pass; NaN where it does not apply.

        Parameters
        ----------
        X
            ``(n, d)`` layer shapes with the columns of ``feature_names_in_`` (a single row may be 1-D).

        Returns
        -------
        numpy.ndarray
            ``(n, len(output_names_))`` predicted times in ns.
        """
        self._check_fitted()
        x = np.asarray(X, dtype=np.float64)
        if x.ndim == 1:
            x = x.reshape(1, -1)
        if x.ndim != 2 or x.shape[1] != self.n_features_in_:
            raise InvalidInputError(f"X must have {self.n_features_in_} columns "
                                    f"({', '.join(self.feature_names_in_)}); got shape {x.shape}")
        if not np.isfinite(x).all() or (x <= 0).any():
            raise InvalidInputError("layer shapes must be finite positive numbers")
        z = self._predict_normalized(self._scale_x(x))
        out = np.exp(z * self.y_std_ + self.y_mean_)
        out[~self._applies(x)] = np.nan
        return np.asarray(out, dtype=np.float64)

    def _applies(self, x: FloatArray) -> npt.NDArray[np.bool_]:
        cols = [self.feature_names_in_.index(f) for f in self._applicability_by()]
        keys = x[:, cols]
        mask = np.zeros((x.shape[0], len(self.output_names_)), dtype=bool)
        for key, outputs in self.applicability_.items():
            rows = (keys == np.asarray(key)).all(axis=1) if cols else np.ones(x.shape[0], dtype=bool)
            mask[rows] = outputs
        return mask

    # -- to be provided by each model -----------------------------------------------------------------------------

    def _fit_normalized(self, x: FloatArray, y: FloatArray, xv: FloatArray, yv: FloatArray,
                        callback: ProgressCallback | None) -> None:
        raise NotImplementedError

    def _predict_normalized(self, x: FloatArray) -> FloatArray:
        raise NotImplementedError

    # -- state without pickle -------------------------------------------------------------------------------------

    def to_state(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        """JSON-able description and named arrays that :meth:`from_state` rebuilds the fitted model from."""
        self._check_fitted()
        meta: dict[str, Any] = {
            "kind": self.kind,
            "params": _jsonable(self.get_params()),
            "feature_names": list(self.feature_names_in_),
            "output_names": list(self.output_names_),
            "x_mean": self.x_mean_.tolist(), "x_std": self.x_std_.tolist(),
            "y_mean": self.y_mean_.tolist(), "y_std": self.y_std_.tolist(),
            "applicability": [{"key": list(k), "outputs": [self.output_names_[j] for j in np.flatnonzero(v)]}
                              for k, v in self.applicability_.items()],
        }
        extra_meta, arrays = self._model_state()
        meta["model"] = extra_meta
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> PrimitiveEstimator:
        """Rebuild a fitted model from :meth:`to_state`'s output."""
        params = {k: (tuple(v) if isinstance(v, list) else v) for k, v in meta["params"].items()
                  if k in cls._param_names}
        est = cls(**params)
        est.feature_names_in_ = tuple(meta["feature_names"])
        est.n_features_in_ = len(est.feature_names_in_)
        est.output_names_ = tuple(meta["output_names"])
        est.x_mean_, est.x_std_ = np.asarray(meta["x_mean"]), np.asarray(meta["x_std"])
        est.y_mean_, est.y_std_ = np.asarray(meta["y_mean"]), np.asarray(meta["y_std"])
        index = {name: j for j, name in enumerate(est.output_names_)}
        table: dict[tuple[float, ...], npt.NDArray[np.bool_]] = {}
        for entry in meta["applicability"]:
            v = np.zeros(len(est.output_names_), dtype=bool)
            v[[index[o] for o in entry["outputs"]]] = True
            table[tuple(float(k) for k in entry["key"])] = v
        est.applicability_ = table
        est._load_model_state(meta.get("model", {}), arrays)
        return est

    def _model_state(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        raise NotImplementedError

    def _load_model_state(self, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> None:
        raise NotImplementedError

    # learned state, declared for type checkers
    feature_names_in_: tuple[str, ...]
    n_features_in_: int
    output_names_: tuple[str, ...]
    x_mean_: FloatArray
    x_std_: FloatArray
    y_mean_: FloatArray
    y_std_: FloatArray
    applicability_: dict[tuple[float, ...], npt.NDArray[np.bool_]]


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with every tuple, nested ones too, as a list (as JSON reads them back)."""
    return {k: _listed(v) for k, v in params.items()}


def _listed(value: Any) -> Any:
    return [_listed(v) for v in value] if isinstance(value, tuple) else value
