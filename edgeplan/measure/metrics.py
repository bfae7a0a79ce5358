"""Accuracy of a latency prediction: the median relative absolute error (MdRAE) of mulder2020 §3.3.

``RAE = |y_hat - y| / y`` for a measured ``y``. Cells where ``y`` is undefined (NaN) are not counted. A cell where
``y`` is measured but the model gives no prediction (NaN) counts as an infinite error, never as a hit: a model that
declines a layer it should cover is worse, not better (nothing is silently left out).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

__all__ = ["mape", "mdrae", "mdrae_per_column", "relative_abs_error"]

FloatArray = npt.NDArray[np.float64]


def relative_abs_error(y_true: npt.ArrayLike, y_pred: npt.ArrayLike) -> FloatArray:
    """Element-wise ``|y_pred - y_true| / y_true``; NaN where ``y_true`` is NaN, inf where only ``y_pred`` is.

    Parameters
    ----------
    y_true, y_pred
        Arrays of the same shape (measured and predicted times, any unit, the same for both).
    """
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape:
        raise ValueError(f"y_true has shape {t.shape}, y_pred {p.shape}; they must match")
    with np.errstate(invalid="ignore", divide="ignore"):
        rae = np.abs(p - t) / t
    rae[np.isnan(p) & ~np.isnan(t)] = np.inf
    return rae


def mdrae(y_true: npt.ArrayLike, y_pred: npt.ArrayLike) -> float:
    """Median relative absolute error over the defined cells (NaN when no cell is defined).

    Parameters
    ----------
    y_true, y_pred
        Arrays of the same shape.

    Returns
    -------
    float
        The median of :func:`relative_abs_error` over cells where ``y_true`` is defined (a fraction: 0.02 is 2 %).
    """
    rae = relative_abs_error(y_true, y_pred)
    defined = rae[~np.isnan(rae)]
    return float(np.median(defined)) if defined.size else math.nan


def mdrae_per_column(y_true: npt.ArrayLike, y_pred: npt.ArrayLike, names: tuple[str, ...] | list[str]
                     ) -> dict[str, float]:
    """:func:`mdrae` of each column of 2-D arrays, keyed by the column names.

    Parameters
    ----------
    y_true, y_pred
        ``(n, len(names))`` arrays.
    names
        The column names.
    """
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.ndim != 2 or t.shape[1] != len(names):
        raise ValueError(f"y_true has shape {t.shape}; expected (n, {len(names)})")
    return {name: mdrae(t[:, j], p[:, j]) for j, name in enumerate(names)}


def mape(pred: Iterable[float], true: Iterable[float]) -> float:
    """Mean absolute percentage error, in percent."""
    p, t = np.asarray(list(pred), dtype=float), np.asarray(list(true), dtype=float)
    return float(100.0 * np.mean(np.abs(p - t) / t))
