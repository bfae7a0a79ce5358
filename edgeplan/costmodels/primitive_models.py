"""Multi-output performance models of convolution primitives (mulder2020 §3.3, Table 3): Lin, NN1 and NN2.

Each model maps layer shapes (rows of ``c, k, im, f, s``; or ``c, im`` for the layout transformations) to the time
of every primitive at once, in one batched pass. They follow the scikit-learn contract: ``__init__`` only stores
its keyword arguments, ``fit`` validates and returns ``self``, learned state ends in ``_``, ``predict`` refuses an
unfitted model (:class:`~edgeplan.errors.NotFittedError`), ``get_params``/``set_params`` expose the settings.

Preprocessing, the same for all three (mulder2020 §3.3): inputs standardized; targets ``z = log(t_ns)``
standardized per output over its defined cells. Undefined cells (NaN) are masked out of the loss and of its
gradient. Two edgeplan options, off in the estimators' defaults (which are the paper's Table 3) and on in the
``edgeplan`` recipe of :mod:`edgeplan.costmodels.performance_model`: ``log_inputs`` (log before standardizing) and
``pow2_features`` (the power-of-two factors of ``c, k, im`` as three more inputs). NN1 and NN2 also take
``n_members`` (an ensemble of that many networks from different seeds, averaged in log space; the ``edgeplan``
recipe uses 4 for NN2), ``target_scale`` (``shared``: one pooled deviation instead of one per output) and
``ema_decay`` (a moving average of the weights is what is kept); the ``edgeplan`` recipe sets both for NN2.

- :class:`LinearModel` (Lin): least squares of each standardized log-time on the standardized inputs, per output,
  over its defined rows.
- :class:`NN1Model`: one ``5 x 16 x 64 x 64 x 16 x 1`` ReLU network per output, each trained on its defined rows
  (Adam, lr 0.003, no weight decay, batch 1024, early stopping).
- :class:`NN2Model`: one ``5 x 128 x 512 x 512 x 128 x n`` network for all outputs, masked MSE (Adam, lr 0.001,
  weight decay 1e-5, batch 1024, early stopping).

**Early stopping: epochs, not the paper's iterations.** Table 3 stops "when the validation performance did not
improve for 250 iterations". edgeplan's ``patience=250`` counts *epochs* (full passes over the training rows). If
the paper's iterations are mini-batch steps, edgeplan waits longer: with about 3 700 Intel training layers and
batches of 1024 an epoch is 4 steps, so 250 epochs are about 1 000 steps. ``max_epochs=3000`` is an edgeplan bound
on the run time, not in the paper. A net with no defined validation cell early-stops on its training loss (see
:func:`edgeplan.costmodels._mlp.train_masked`).

**Applicability.** ``predict`` returns NaN where an output does not apply. Which outputs apply is learnt from the
training data's pattern of defined cells, keyed by the features named in ``applicability_by`` (default ``("f",
"s")``): an output applies to a layer when some training row with the same ``(f, s)`` had it defined. That is the
rule of the mulder2021 data (Winograd-3 only for ``f = 3, s = 1``, conv-1x1 only for ``f = 1``, kn2 and some im2
only for ``s = 1``), learnt rather than typed in. A layer whose ``(f, s)`` never occurred in training gets NaN for
every output: the model does not extrapolate applicability. With ``applicability_by=()`` an output applies
everywhere once it had any defined training value (used for the layout transformations). The few Intel Winograd
vec-8 columns that are defined on only part of the ``f = 3`` or ``f = 5`` layers (no shape rule explains which)
are predicted for all of them.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from edgeplan.errors import InvalidInputError, NotFittedError
from edgeplan.measure.primitive_data import LAYER_FEATURES

__all__ = ["ESTIMATORS", "POW2_FEATURES", "TARGET_SCALES", "LinearModel", "NN1Model", "NN2Model", "PrimitiveEstimator",
           "ProgressCallback", "make_estimator", "pow2_valuation"]

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
    two (cache-set aliasing: in the Intel data, ``chw-to-hwc`` costs 5-8x more per element when ``c`` is a
    multiple of 64). A smooth function of ``(c, im)`` cannot express that; this feature lets the model see it.
    Non-integers get 0.
    """
    xi = np.rint(x).astype(np.int64)
    integer = np.isclose(x, xi) & (xi > 0)
    low = np.where(integer, xi & -xi, 1)
    return np.minimum(np.log2(low.astype(np.float64)), float(cap))


class PrimitiveEstimator:
    """Shared preprocessing, applicability, prediction and state of the primitive models (not used directly)."""

    kind: ClassVar[str] = ""
    _param_names: ClassVar[tuple[str, ...]] = ()

    # -- scikit-learn contract ------------------------------------------------------------------------------------

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's keyword arguments and their current values."""
        return {name: getattr(self, name) for name in self._param_names}

    def set_params(self, **params: Any) -> PrimitiveEstimator:
        """Set constructor arguments (unknown names raise :class:`InvalidInputError`); returns ``self``."""
        for name, value in params.items():
            if name not in self._param_names:
                raise InvalidInputError(f"{type(self).__name__} has no parameter {name!r}; "
                                        f"valid: {', '.join(self._param_names)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

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
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}


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


class _TorchModel(PrimitiveEstimator):
    """Shared settings and training of NN1 and NN2 (torch is imported only in fit and predict)."""

    _param_names: ClassVar[tuple[str, ...]] = (
        "hidden", "lr", "weight_decay", "batch_size", "max_epochs", "patience", "lr_schedule", "min_lr",
        "log_inputs", "pow2_features", "validation_fraction", "threads", "random_state", "time_limit_s",
        "applicability_by", "n_members", "target_scale", "ema_decay")

    def __init__(self, *, hidden: tuple[int, ...], lr: float, weight_decay: float, batch_size: int = 1024,
                 max_epochs: int = 3000, patience: int = 250, lr_schedule: str = "constant", min_lr: float = 1e-5,
                 log_inputs: bool = False, pow2_features: bool = False, validation_fraction: float = 0.1,
                 threads: int = 2, random_state: int = 0, time_limit_s: float | None = None,
                 applicability_by: tuple[str, ...] = ("f", "s"), n_members: int = 1,
                 target_scale: str = "per-output", ema_decay: float = 0.0) -> None:
        self.hidden = hidden
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.lr_schedule = lr_schedule
        self.min_lr = min_lr
        self.log_inputs = log_inputs
        self.pow2_features = pow2_features
        self.validation_fraction = validation_fraction
        self.threads = threads
        self.random_state = random_state
        self.time_limit_s = time_limit_s
        self.applicability_by = applicability_by
        self.n_members = n_members
        self.target_scale = target_scale
        self.ema_decay = ema_decay

    def _config(self, member: int = 0) -> Any:
        from edgeplan.costmodels._mlp import TrainConfig

        if self.lr_schedule not in ("constant", "plateau", "cosine"):
            raise InvalidInputError(f"lr_schedule {self.lr_schedule!r}: use constant, plateau or cosine")
        if min(self.threads, self.batch_size, self.max_epochs, self.patience, self.n_members) < 1:
            raise InvalidInputError("threads, batch_size, max_epochs, patience and n_members must be at least 1")
        if not 0.0 <= float(self.ema_decay) < 1.0:
            raise InvalidInputError(f"ema_decay {self.ema_decay}: use a value in [0, 1) (0 turns the weight "
                                    f"average off)")
        return TrainConfig(lr=self.lr, weight_decay=self.weight_decay, batch_size=self.batch_size,
                           max_epochs=self.max_epochs, patience=self.patience, lr_schedule=self.lr_schedule,
                           min_lr=self.min_lr, seed=self.random_state + member, time_limit_s=self.time_limit_s,
                           ema_decay=float(self.ema_decay))

    def _groups(self, y: FloatArray) -> list[list[int]]:
        raise NotImplementedError

    def _out_per_net(self) -> bool:
        """True when each net of a group has one output (NN1), False for one net with all outputs (NN2)."""
        raise NotImplementedError

    def _fit_normalized(self, x: FloatArray, y: FloatArray, xv: FloatArray, yv: FloatArray,
                        callback: ProgressCallback | None) -> None:
        import threading
        from concurrent.futures import CancelledError, ThreadPoolExecutor

        import torch

        from edgeplan.costmodels._mlp import StackedMLP, TrainLog, torch_threads, train_masked

        configs = [self._config(m) for m in range(max(self.n_members, 1))]  # _config checks n_members >= 1
        groups = self._groups(y)
        one_each = self._out_per_net()

        workers = max(1, min(int(self.threads), int(self.n_members)))
        per_job = max(1, int(self.threads) // workers)

        def train(member: int, gi: int) -> tuple[list[int], Any, TrainLog | None]:
            torch.set_num_threads(per_job)  # OpenMP's thread count is per thread: a worker thread sets its own
            cols = groups[gi]
            n_nets = len(cols) if one_each else 1
            widths = (x.shape[1], *self.hidden, 1 if one_each else len(cols))
            net = StackedMLP(n_nets, widths, seed=self.random_state + gi + member)
            rows = ~np.isnan(y[:, cols]).all(axis=1)
            stage = f"{self.kind} {gi + 1}/{len(groups)}" if len(groups) > 1 else self.kind
            if self.n_members > 1:
                stage += f" member {member + 1}/{self.n_members}"

            def report(info: Any) -> None:
                if callback is not None:
                    callback(stage, info)

            if not rows.any():  # an output with no defined training row keeps its initial net and never applies
                return cols, net, None
            return cols, net, train_masked(net, x[rows], y[rows][:, cols], xv, yv[:, cols], configs[member], report)

        jobs = list(itertools.product(range(self.n_members), range(len(groups))))
        # Ensemble members are independent: with several threads they train side by side, one thread each (two
        # one-thread matrix products run faster on two cores than one two-thread product), in Python threads
        # (torch releases the GIL inside its kernels). Each member's arithmetic is then single-threaded and its
        # result does not depend on the scheduling.
        started = time.monotonic()
        with torch_threads(per_job):
            if workers > 1:
                stop = threading.Event()  # set by the first failure: a worker starts no further member

                def guarded(job: tuple[int, int]) -> tuple[list[int], Any, TrainLog | None]:
                    if stop.is_set():
                        raise CancelledError("another ensemble member failed")
                    try:
                        return train(*job)
                    except BaseException:
                        stop.set()
                        raise

                pool = ThreadPoolExecutor(max_workers=workers)
                try:
                    done = list(pool.map(guarded, jobs))
                except BaseException:  # a member failed or the fit was interrupted: start no queued member
                    stop.set()
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
                pool.shutdown(wait=True)
            else:
                done = [train(*job) for job in jobs]
        net_groups = [cols for cols, _, _ in done]
        nets = [net for _, net, _ in done]
        logs = [log for _, _, log in done if log is not None]
        self.groups_ = net_groups
        self.nets_ = nets
        self.n_epochs_ = tuple(log.epochs for log in logs)
        self.best_epochs_ = tuple(e for log in logs for e in log.best_epochs)
        self.stopped_by_ = tuple(log.stopped_by for log in logs)
        self.on_validation_ = tuple(v for log in logs for v in log.on_validation)
        self.fit_time_s_ = time.monotonic() - started  # wall time: members may have trained side by side

    def _predict_normalized(self, x: FloatArray) -> FloatArray:
        from edgeplan.costmodels._mlp import predict_numpy, torch_threads

        total = np.zeros((x.shape[0], len(self.output_names_)))
        count = np.zeros(len(self.output_names_))
        with torch_threads(self.threads):
            for cols, net in zip(self.groups_, self.nets_, strict=True):
                total[:, cols] += predict_numpy(net, x)
                count[cols] += 1
        return np.asarray(total / np.maximum(count, 1), dtype=np.float64)

    def _model_state(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        arrays: dict[str, npt.NDArray[Any]] = {}
        nets = []
        for gi, (cols, net) in enumerate(zip(self.groups_, self.nets_, strict=True)):
            for name, a in net.to_arrays().items():
                arrays[f"net{gi}.{name}"] = a
            nets.append({"outputs": cols, "n_nets": net.n_nets, "widths": list(net.widths)})
        meta = {"nets": nets, "n_epochs": list(self.n_epochs_), "best_epochs": list(self.best_epochs_),
                "stopped_by": list(self.stopped_by_), "on_validation": list(self.on_validation_),
                "fit_time_s": self.fit_time_s_}
        return meta, arrays

    def _load_model_state(self, meta: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> None:
        from edgeplan.costmodels._mlp import StackedMLP

        self.groups_ = [list(map(int, n["outputs"])) for n in meta["nets"]]
        self.nets_ = []
        for gi, n in enumerate(meta["nets"]):
            prefix = f"net{gi}."
            own = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            self.nets_.append(StackedMLP.from_arrays(int(n["n_nets"]), tuple(int(w) for w in n["widths"]), own))
        self.n_epochs_ = tuple(meta.get("n_epochs", ()))
        self.best_epochs_ = tuple(meta.get("best_epochs", ()))
        self.stopped_by_ = tuple(meta.get("stopped_by", ()))
        self.on_validation_ = tuple(bool(v) for v in meta.get("on_validation", ()))
        self.fit_time_s_ = float(meta.get("fit_time_s", 0.0))

    groups_: list[list[int]]
    nets_: list[Any]
    n_epochs_: tuple[int, ...]
    best_epochs_: tuple[int, ...]
    stopped_by_: tuple[str, ...]
    on_validation_: tuple[bool, ...]
    fit_time_s_: float


class NN1Model(_TorchModel):
    """NN1: one ``d x 16 x 64 x 64 x 16 x 1`` ReLU network per output, each on its own defined rows.

    Outputs defined on exactly the same training rows are trained side by side as one stacked network, each with
    its own early stopping and best weights. With ``lr_schedule="constant"`` (the paper's) that is the same
    procedure as training them one by one; with ``"plateau"`` (the ``edgeplan`` recipe) it is not: the nets of a
    group share one learning rate, halved when their summed validation loss stalls (see
    :mod:`edgeplan.costmodels._mlp`).

    Parameters
    ----------
    hidden
        Hidden widths (mulder2020 Table 3: 16, 64, 64, 16).
    lr, weight_decay, batch_size
        Adam settings (Table 3: 0.003, 0, 1024).
    max_epochs, patience
        Upper bound on epochs (3000; an edgeplan bound, not in the paper); early stopping after ``patience``
        **epochs** without a better validation loss (250; Table 3 says 250 iterations, see the module docstring).
    lr_schedule, min_lr
        ``"constant"`` (the paper), ``"plateau"`` or ``"cosine"`` (see :class:`edgeplan.costmodels._mlp.TrainConfig`).
    log_inputs
        Log the inputs before standardizing them (edgeplan option).
    pow2_features
        Add the power-of-two factors of ``c, k, im`` as inputs (edgeplan option; see :func:`pow2_valuation`).
    validation_fraction
        Held out of the training rows when ``fit`` gets no validation part.
    threads
        Torch threads for fit and predict; in fit, shared out among ensemble members trained side by side (see
        ``n_members``).
    random_state
        Seed of initialisation, shuffling and the hold-out.
    time_limit_s
        Stop training after this many seconds per network group and member (None: no limit).
    applicability_by
        Features whose training pattern decides where an output applies.
    n_members, target_scale, ema_decay
        As for :class:`NN2Model` (edgeplan options; the paper's are 1, ``"per-output"`` and 0); every network group
        is trained ``n_members`` times.
    """

    kind: ClassVar[str] = "nn1"

    def __init__(self, *, hidden: tuple[int, ...] = (16, 64, 64, 16), lr: float = 3e-3, weight_decay: float = 0.0,
                 batch_size: int = 1024, max_epochs: int = 3000, patience: int = 250,
                 lr_schedule: str = "constant", min_lr: float = 1e-5, log_inputs: bool = False,
                 pow2_features: bool = False, validation_fraction: float = 0.1, threads: int = 2,
                 random_state: int = 0,
                 time_limit_s: float | None = None, applicability_by: tuple[str, ...] = ("f", "s"),
                 n_members: int = 1, target_scale: str = "per-output", ema_decay: float = 0.0) -> None:
        super().__init__(hidden=hidden, lr=lr, weight_decay=weight_decay, batch_size=batch_size,
                         max_epochs=max_epochs, patience=patience, lr_schedule=lr_schedule, min_lr=min_lr,
                         log_inputs=log_inputs, pow2_features=pow2_features,
                         validation_fraction=validation_fraction, threads=threads,
                         random_state=random_state, time_limit_s=time_limit_s, applicability_by=applicability_by,
                         n_members=n_members, target_scale=target_scale, ema_decay=ema_decay)

    def _out_per_net(self) -> bool:
        return True

    def _groups(self, y: FloatArray) -> list[list[int]]:
        by_pattern: dict[bytes, list[int]] = {}
        for j in range(y.shape[1]):
            by_pattern.setdefault((~np.isnan(y[:, j])).tobytes(), []).append(j)
        return [cols for cols in by_pattern.values() if not np.isnan(y[:, cols[0]]).all()] + [
            cols for cols in by_pattern.values() if np.isnan(y[:, cols[0]]).all()]


class NN2Model(_TorchModel):
    """NN2: one ``d x 128 x 512 x 512 x 128 x n`` ReLU network for all outputs, masked MSE.

    Parameters
    ----------
    hidden
        Hidden widths (mulder2020 Table 3: 128, 512, 512, 128).
    lr, weight_decay, batch_size
        Adam settings (Table 3: 0.001, 1e-5, 1024).
    max_epochs, patience
        Upper bound on epochs (3000; an edgeplan bound, not in the paper); early stopping after ``patience``
        **epochs** without a better validation loss (250; Table 3 says 250 iterations, see the module docstring).
    lr_schedule, min_lr
        ``"constant"`` (the paper), ``"plateau"`` or ``"cosine"``.
    log_inputs
        Log the inputs before standardizing them (edgeplan option).
    pow2_features
        Add the power-of-two factors of ``c, k, im`` as inputs (edgeplan option; see :func:`pow2_valuation`).
    validation_fraction
        Held out of the training rows when ``fit`` gets no validation part.
    threads
        Torch threads for fit and predict; in fit, shared out among ensemble members trained side by side (see
        ``n_members``).
    random_state
        Seed of initialisation, shuffling and the hold-out.
    time_limit_s
        Stop training a member after this many seconds (None: no limit); members training side by side each have
        their own.
    applicability_by
        Features whose training pattern decides where an output applies.
    n_members
        Ensemble size (edgeplan option; the paper's is 1): that many networks are trained the same way but from
        other seeds (member ``m`` of network group ``g`` starts from seed ``random_state + g + m`` and shuffles with
        seed ``random_state + m``), each early-stopping on its own; the prediction is the mean of their
        standardized log-times (a geometric mean of times). Up to ``threads`` members train side by side, each on
        ``threads // min(threads, n_members)`` torch threads; the rest wait their turn. Prediction time grows
        ``n_members``-fold, fit time about ``ceil(n_members / min(threads, n_members))``-fold.
    target_scale
        ``"per-output"`` (the paper: each output's log-times standardized by their own deviation) or
        ``"shared"`` (centred per output, divided by one deviation pooled over all outputs; edgeplan option). The
        loss is then the squared error of log-times, the same weight for a relative error on every output; per
        output it would weigh an output with widely spread times less.
    ema_decay
        0 (the paper) or the decay of an exponential moving average of the weights, updated after every step; the
        average is what is early-stopped on and kept (edgeplan option; see
        :class:`edgeplan.costmodels._mlp.TrainConfig`). Fine-tuning (:mod:`edgeplan.costmodels.transfer_learning`)
        trains the raw weights without it: its few samples make an epoch one step.
    """

    kind: ClassVar[str] = "nn2"

    def __init__(self, *, hidden: tuple[int, ...] = (128, 512, 512, 128), lr: float = 1e-3,
                 weight_decay: float = 1e-5, batch_size: int = 1024, max_epochs: int = 3000, patience: int = 250,
                 lr_schedule: str = "constant", min_lr: float = 1e-5, log_inputs: bool = False,
                 pow2_features: bool = False, validation_fraction: float = 0.1, threads: int = 2,
                 random_state: int = 0,
                 time_limit_s: float | None = None, applicability_by: tuple[str, ...] = ("f", "s"),
                 n_members: int = 1, target_scale: str = "per-output", ema_decay: float = 0.0) -> None:
        super().__init__(hidden=hidden, lr=lr, weight_decay=weight_decay, batch_size=batch_size,
                         max_epochs=max_epochs, patience=patience, lr_schedule=lr_schedule, min_lr=min_lr,
                         log_inputs=log_inputs, pow2_features=pow2_features,
                         validation_fraction=validation_fraction, threads=threads,
                         random_state=random_state, time_limit_s=time_limit_s, applicability_by=applicability_by,
                         n_members=n_members, target_scale=target_scale, ema_decay=ema_decay)

    def _out_per_net(self) -> bool:
        return False

    def _groups(self, y: FloatArray) -> list[list[int]]:
        return [list(range(y.shape[1]))]


ESTIMATORS: dict[str, type[PrimitiveEstimator]] = {"lin": LinearModel, "nn1": NN1Model, "nn2": NN2Model}


def make_estimator(kind: str, **params: Any) -> PrimitiveEstimator:
    """A new unfitted estimator of ``kind`` (``lin``, ``nn1`` or ``nn2``) with ``params`` set.

    Parameters
    ----------
    kind
        The model family.
    **params
        Constructor keyword arguments; those the family does not take are ignored only if None.
    """
    try:
        cls = ESTIMATORS[kind]
    except KeyError:
        raise InvalidInputError(f"unknown model kind {kind!r}; use one of {', '.join(ESTIMATORS)}") from None
    given = {k: v for k, v in params.items() if v is not None}
    unknown = sorted(set(given) - set(cls._param_names))
    if unknown:
        raise InvalidInputError(f"{cls.__name__} takes no parameter(s) {', '.join(unknown)}")
    return cls(**given)
