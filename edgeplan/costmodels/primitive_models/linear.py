"""Lin (mulder2020 Table 3): least squares per output on the standardized inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.primitive_models.base import FloatArray, PrimitiveEstimator, ProgressCallback
from edgeplan.measure.primitive_data import LAYER_FEATURES

__all__ = ["LinearModel"]

class LinearModel(PrimitiveEstimator):
    """Lin: per-output least squares of the standardized log-time on the standardized inputs (a baseline).

    Parameters
    ----------
    log_inputs
        Take the log of the inputs before standardizing (edgeplan option; the paper's recipe is False).
    pow2_features
        Add the power-of-two factors of ``c, k, im`` as inputs (edgeplan option; see :func:`pow2_valuation`).
    applicability_by
        Features whose training pattern decides where an output applies (see the module docstring).
    """

    kind: ClassVar[str] = "lin"
    _param_names: ClassVar[tuple[str, ...]] = ("log_inputs", "pow2_features", "applicability_by")

    def __init__(self, *, log_inputs: bool = False, pow2_features: bool = False,
                 applicability_by: tuple[str, ...] = ("f", "s")) -> None:
        self.log_inputs = log_inputs
        self.pow2_features = pow2_features
        self.applicability_by = applicability_by

    def fit(self, X: npt.ArrayLike, Y: npt.ArrayLike, *, feature_names: Sequence[str] = LAYER_FEATURES,
            output_names: Sequence[str] | None = None, X_val: npt.ArrayLike | None = None,
            Y_val: npt.ArrayLike | None = None, callback: ProgressCallback | None = None) -> LinearModel:
        """Fit by least squares (``X_val``, ``Y_val`` and ``callback`` are accepted and not needed)."""
        x, y = self._check_xy(X, Y, "training")
        # Lin has nothing to early-stop: fit on every training row.
        super().fit(x, y, feature_names=feature_names, output_names=output_names, X_val=x, Y_val=y)
        return self

    def _fit_normalized(self, x: FloatArray, y: FloatArray, xv: FloatArray, yv: FloatArray,
                        callback: ProgressCallback | None) -> None:
        design = np.hstack([x, np.ones((x.shape[0], 1))])
        coef = np.zeros((design.shape[1], y.shape[1]))
        for j in range(y.shape[1]):
            rows = ~np.isnan(y[:, j])
            if rows.any():
                coef[:, j] = np.linalg.lstsq(design[rows], y[rows, j], rcond=None)[0]
        self.coef_ = coef

    def _predict_normalized(self, x: FloatArray) -> FloatArray:
        return np.asarray(x @ self.coef_[:-1] + self.coef_[-1], dtype=np.float64)

    def _model_state(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        return {}, {"coef": self.coef_}

    def _load_model_state(self, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> None:
        self.coef_ = np.asarray(arrays["coef"], dtype=np.float64)

    coef_: FloatArray
