"""A kernel model of the data-layout transformation times: per transformation, a smooth function of ``(c, im)``.

A layout transformation moves every element of a ``(c, im, im)`` tensor once, so its time is ``n = c * im**2``
elements times a cost per element. That cost is what varies: it steps up when the tensor leaves a cache level and
when a stride is a multiple of a large power of two (cache-set aliasing: on the mulder2021 Intel table
``chw-to-hwc`` costs several times more per element for multiples of 64 channels than for odd multiples of 16).
:class:`KernelTransformModel` predicts ``log(t / n)`` from four named features,

- ``log2_c``, ``log2_im``: the size (the cache regime is a smooth function of them);
- ``pow2_c``: the power-of-two factor of ``c`` (``log2`` of the largest power of two dividing it, capped);
- ``pow2_im``: the same for ``im``,

by kernel ridge regression with a Gaussian (RBF) kernel, one per transformation, each with its own length scale per
feature and its own ridge, chosen on the validation part from a small grid (the median absolute log error on the
validation tensors). It predicts tensors never seen in training more closely than NN2 does: a table holds a few
hundred distinct training tensors, too few for a 5x128x512x512x128 network, and the power-of-two structure is a
step function that a smooth network of ``(c, im)`` cannot express.

Same contract as the primitive estimators (:class:`~edgeplan.costmodels.primitive_models.PrimitiveEstimator`):
``fit`` returns ``self``, learned state ends in ``_``, ``predict`` refuses an unfitted model, state saves to JSON and
``.npz`` without pickle. No torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.primitive_models import PrimitiveEstimator, ProgressCallback, pow2_valuation
from edgeplan.errors import InvalidInputError
from edgeplan.measure.primitive_data import TRANSFORM_FEATURES

__all__ = ["KERNEL_FEATURES", "TRANSFORM_ESTIMATORS", "KernelTransformModel", "make_transform_estimator"]

FloatArray = npt.NDArray[np.float64]

KERNEL_FEATURES: tuple[str, ...] = ("log2_c", "log2_im", "pow2_c", "pow2_im")
"""The kernel model's inputs, computed from ``(c, im)``; see the module docstring."""


def _rbf(a: FloatArray, b: FloatArray, lengthscales: FloatArray) -> FloatArray:
    """Gaussian kernel matrix ``exp(-|a_i - b_j|^2 / 2)`` of feature rows scaled by ``lengthscales``."""
    sa, sb = a / lengthscales, b / lengthscales
    d2 = (sa * sa).sum(1)[:, None] + (sb * sb).sum(1)[None, :] - 2.0 * sa @ sb.T
    return np.asarray(np.exp(-0.5 * np.maximum(d2, 0.0)), dtype=np.float64)


def _log_elements(features: FloatArray) -> FloatArray:
    """``log(c * im**2)`` (natural log) from rows of :data:`KERNEL_FEATURES`."""
    return np.asarray((features[:, 0] + 2.0 * features[:, 1]) * np.log(2.0), dtype=np.float64)


class KernelTransformModel(PrimitiveEstimator):
    """Per-output RBF kernel ridge regression of ``log(time / (c * im**2))`` on :data:`KERNEL_FEATURES`.

    For each output, every combination of the grids (one length scale per feature, one ridge) is fitted on the
    training rows where it is defined, and the one with the lowest median absolute log error on the validation
    rows is kept. Predictions are ``exp`` of the kernel regression plus ``log(c * im**2)``.

    Parameters
    ----------
    lengthscale_grid
        Candidate length scales per feature of :data:`KERNEL_FEATURES`, in its order (units: ``log2`` of a size,
        or a power-of-two exponent). A large value (100) makes the kernel ignore that feature.
    ridge_grid
        Candidate ridge penalties (added to the kernel's diagonal, whose entries are 1; the targets are centered
        log times per element, not scaled).
    pow2_cap
        Cap of the ``pow2_c`` and ``pow2_im`` features (a power-of-two factor above ``2**pow2_cap`` counts as it).
    validation_fraction
        Held out of the training rows when ``fit`` gets no validation part (or an empty one).
    random_state
        Seed of that hold-out.
    applicability_by
        Kept for the shared estimator contract; a transformation applies wherever it had a training value.
    """

    kind: ClassVar[str] = "krr"
    _param_names: ClassVar[tuple[str, ...]] = ("lengthscale_grid", "ridge_grid", "pow2_cap", "validation_fraction",
                                               "random_state", "applicability_by")

    def __init__(self, *, lengthscale_grid: tuple[tuple[float, ...], ...] = (
                     (0.5, 1.0, 2.0, 4.0), (0.5, 1.0, 2.0, 4.0), (0.5, 1.0, 2.0, 4.0), (1.0, 3.0, 100.0)),
                 ridge_grid: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1), pow2_cap: int = 10,
                 validation_fraction: float = 0.1, random_state: int = 0,
                 applicability_by: tuple[str, ...] = ()) -> None:
        self.lengthscale_grid = lengthscale_grid
        self.ridge_grid = ridge_grid
        self.pow2_cap = pow2_cap
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.applicability_by = applicability_by

    # -- features ---------------------------------------------------------------------------------------------------

    def _size_columns(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        names = self.feature_names_in_
        return x[:, names.index("c")], x[:, names.index("im")]

    def _input_features(self, x: FloatArray) -> FloatArray:
        c, im = self._size_columns(x)
        cap = int(self.pow2_cap)
        return np.column_stack([np.log2(c), np.log2(im), pow2_valuation(c, cap), pow2_valuation(im, cap)])

    # -- fit ----------------------------------------------------------------------------------------------------------

    def fit(self, X: npt.ArrayLike, Y: npt.ArrayLike, *, feature_names: Sequence[str] = TRANSFORM_FEATURES,
            output_names: Sequence[str] | None = None, X_val: npt.ArrayLike | None = None,
            Y_val: npt.ArrayLike | None = None, callback: ProgressCallback | None = None) -> KernelTransformModel:
        """Fit on tensors ``X`` (columns ``c`` and ``im`` among ``feature_names``) and times ``Y`` (ns, NaN: undefined).

        Parameters
        ----------
        X, Y, feature_names, output_names
            As for :meth:`PrimitiveEstimator.fit`; ``feature_names`` must name ``c`` and ``im``.
        X_val, Y_val
            The validation part the hyperparameters are chosen on. None or empty: ``validation_fraction`` of the
            training rows is held out for it (and not trained on).
        callback
            Not used (there are no epochs).

        Returns
        -------
        KernelTransformModel
            ``self``, fitted.
        """
        self._check_grids()
        names = tuple(feature_names)
        missing = [f for f in TRANSFORM_FEATURES if f not in names]
        if missing:
            raise InvalidInputError(f"the kernel transformation model needs the features c and im; {missing} are not "
                                    f"among {names}")
        no_val = X_val is None or Y_val is None or np.asarray(X_val).size == 0
        super().fit(X, Y, feature_names=names, output_names=output_names,
                    X_val=None if no_val else X_val, Y_val=None if no_val else Y_val)
        return self

    def _check_grids(self) -> None:
        grid = tuple(tuple(float(v) for v in g) for g in self.lengthscale_grid)
        if len(grid) != len(KERNEL_FEATURES) or any(not g or min(g) <= 0 for g in grid):
            raise InvalidInputError(f"lengthscale_grid needs {len(KERNEL_FEATURES)} non-empty tuples of positive "
                                    f"length scales, one per feature {KERNEL_FEATURES}; got {self.lengthscale_grid}")
        if not self.ridge_grid or min(self.ridge_grid) <= 0:
            raise InvalidInputError(f"ridge_grid needs positive values; got {self.ridge_grid}")

    def _fit_scalers(self, x: FloatArray, y: FloatArray) -> None:
        # The kernel works on raw features (its length scales carry the units) and raw log times.
        d = len(KERNEL_FEATURES)
        self.x_mean_, self.x_std_ = np.zeros(d), np.ones(d)
        self.y_mean_, self.y_std_ = np.zeros(y.shape[1]), np.ones(y.shape[1])

    def _fit_normalized(self, x: FloatArray, y: FloatArray, xv: FloatArray, yv: FloatArray,
                        callback: ProgressCallback | None) -> None:
        # x: kernel features; y: log times. The regression target is the log time per element.
        r = y - _log_elements(x)[:, None]
        rv = yv - _log_elements(xv)[:, None]
        n_out = y.shape[1]
        self.x_train_ = x
        self.alpha_ = np.zeros((x.shape[0], n_out))
        self.offset_ = np.zeros(n_out)
        self.lengthscales_ = np.ones((n_out, len(KERNEL_FEATURES)))
        self.ridge_ = np.ones(n_out)
        self.val_abs_log_error_ = np.full(n_out, np.nan)
        by_rows: dict[bytes, list[int]] = {}
        for j in range(n_out):
            by_rows.setdefault((~np.isnan(r[:, j])).tobytes(), []).append(j)
        for outputs in by_rows.values():
            rows = ~np.isnan(r[:, outputs[0]])
            if rows.any():  # never defined in training: never applies (see _learn_applicability)
                self._fit_outputs(outputs, x[rows], r[rows][:, outputs], xv, rv[:, outputs], rows)

    def _fit_outputs(self, outputs: list[int], xs: FloatArray, target: FloatArray, xv: FloatArray, rv: FloatArray,
                     rows: npt.NDArray[np.bool_]) -> None:
        """Choose each output's length scales and ridge on the validation rows; outputs share training rows."""
        offset = target.mean(axis=0)
        best: list[tuple[float, FloatArray, float, FloatArray] | None] = [None] * len(outputs)
        for scales in itertools.product(*self.lengthscale_grid):
            ls = np.asarray(scales, dtype=np.float64)
            evals, evecs = np.linalg.eigh(_rbf(xs, xs, ls))
            proj = evecs.T @ (target - offset)
            k_val = _rbf(xv, xs, ls)
            for ridge in self.ridge_grid:
                alpha = evecs @ (proj / (np.maximum(evals, 0.0) + float(ridge))[:, None])
                err = np.abs(k_val @ alpha + offset - rv)
                for i in range(len(outputs)):
                    defined = ~np.isnan(err[:, i])
                    # no validation value: the most regularised candidate wins
                    score = float(np.median(err[defined, i])) if defined.any() else -float(ridge)
                    current = best[i]
                    if current is None or score < current[0]:
                        best[i] = (score, ls, float(ridge), alpha[:, i].copy())
        for i, j in enumerate(outputs):
            chosen = best[i]
            assert chosen is not None  # the grids are checked non-empty
            score, ls, ridge, alpha = chosen
            self.alpha_[rows, j] = alpha
            self.offset_[j] = offset[i]
            self.lengthscales_[j] = ls
            self.ridge_[j] = ridge
            self.val_abs_log_error_[j] = score if score >= 0 else np.nan

    # -- predict ------------------------------------------------------------------------------------------------------

    def _predict_normalized(self, x: FloatArray) -> FloatArray:
        log_n = _log_elements(x)
        out = np.empty((x.shape[0], len(self.output_names_)))
        for j in range(out.shape[1]):
            out[:, j] = _rbf(x, self.x_train_, self.lengthscales_[j]) @ self.alpha_[:, j] + self.offset_[j] + log_n
        return out

    # -- state without pickle -----------------------------------------------------------------------------------------

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> PrimitiveEstimator:
        """Rebuild a fitted model from :meth:`to_state`'s output."""
        est = super().from_state(meta, arrays)
        assert isinstance(est, KernelTransformModel)
        est.lengthscale_grid = tuple(tuple(float(v) for v in g) for g in est.lengthscale_grid)
        return est

    def _model_state(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        meta = {"kernel_features": list(KERNEL_FEATURES), "lengthscales": self.lengthscales_.tolist(),
                "ridge": self.ridge_.tolist(), "offset": self.offset_.tolist(),
                "val_abs_log_error": [None if np.isnan(v) else float(v) for v in self.val_abs_log_error_]}
        return meta, {"x_train": self.x_train_, "alpha": self.alpha_}

    def _load_model_state(self, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> None:
        self.x_train_ = np.asarray(arrays["x_train"], dtype=np.float64)
        self.alpha_ = np.asarray(arrays["alpha"], dtype=np.float64)
        self.lengthscales_ = np.asarray(meta["lengthscales"], dtype=np.float64)
        self.ridge_ = np.asarray(meta["ridge"], dtype=np.float64)
        self.offset_ = np.asarray(meta["offset"], dtype=np.float64)
        self.val_abs_log_error_ = np.asarray([np.nan if v is None else v for v in meta["val_abs_log_error"]])
        n_out = len(self.output_names_)
        if self.alpha_.shape != (self.x_train_.shape[0], n_out) or self.lengthscales_.shape != (
                n_out, len(KERNEL_FEATURES)):
            raise ValueError(f"saved kernel model arrays have shapes {self.alpha_.shape} and "
                             f"{self.lengthscales_.shape}; expected ({self.x_train_.shape[0]}, {n_out}) and "
                             f"({n_out}, {len(KERNEL_FEATURES)})")

    x_train_: FloatArray
    alpha_: FloatArray
    offset_: FloatArray
    lengthscales_: FloatArray
    ridge_: FloatArray
    val_abs_log_error_: FloatArray


TRANSFORM_ESTIMATORS: dict[str, type[PrimitiveEstimator]] = {"krr": KernelTransformModel}
"""Estimators for the layout transformations only (besides Lin, NN1 and NN2, which model both)."""


def make_transform_estimator(kind: str, **params: Any) -> PrimitiveEstimator:
    """A new unfitted transformation estimator: ``krr``, or ``lin``/``nn1``/``nn2`` (see ``make_estimator``).

    Parameters
    ----------
    kind
        The model family.
    **params
        Constructor keyword arguments; None values are ignored, unknown names raise :class:`InvalidInputError`.
    """
    from edgeplan.costmodels.primitive_models import make_estimator

    if kind not in TRANSFORM_ESTIMATORS:
        return make_estimator(kind, **params)
    cls = TRANSFORM_ESTIMATORS[kind]
    given = {k: v for k, v in params.items() if v is not None}
    unknown = sorted(set(given) - set(cls._param_names))
    if unknown:
        raise InvalidInputError(f"{cls.__name__} takes no parameter(s) {', '.join(unknown)}")
    return cls(**given)
