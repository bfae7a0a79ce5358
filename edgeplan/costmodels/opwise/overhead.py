"""The overhead of a model's end-to-end latency over the sum of its operations (li2023's ``T_overhead``), learnt from
training models (:func:`fit_overhead`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["MIN_LINEAR_OVERHEAD_MODELS", "OVERHEAD_FORMS", "fit_overhead"]


#: How :class:`~edgeplan.costmodels.opwise.estimator.OpLatencyEstimator` learns the overhead (:func:`fit_overhead`):
#: ``linear`` over the training networks' measured op sums, ``stacked`` the same form over the sums its own
#: predictors give them (which also corrects their bias on networks like those), ``mean`` li2023's.
OVERHEAD_FORMS: tuple[str, ...] = ("linear", "stacked", "mean")


#: Fewest training models the ``linear`` overhead is fitted on; with fewer, four parameters would follow their
#: noise, and the overhead is li2023's mean difference.
MIN_LINEAR_OVERHEAD_MODELS = 10


def fit_overhead(latencies: Sequence[float], op_sums: Sequence[float], op_counts: Sequence[int],
                 form: str = "linear", mparams: Sequence[float] | None = None) -> tuple[float, float, float, float]:
    """The overhead of end-to-end latency over the sum of its operations, learnt from training models.

    ``mean`` is li2023's (§4.2): the mean of ``latency - op_sum``. ``linear`` fits ``latency = a + b * op_count +
    (1 + s) * op_sum + w * mparams`` by least *relative* absolute error (a median regression weighted by
    ``1 / latency``, so it minimizes the training models' MAPE, as the op predictors minimize theirs; a few models
    measured while the machine was busy move it little, where they pull a mean). Eager PyTorch spends a few
    microseconds dispatching each op, and a model's end-to-end time runs a few percent over the sum its profiler
    reports: the linear form follows both, where a constant is too small for a large model and too large for a small
    one. ``w * mparams`` is the time to read the model's weights from memory once: where each operation is timed
    alone and warm (LiteRT's per-op models, run twice back to back), its weights are in cache, while a whole model
    reads them from memory on every run, as they do not all fit (``docs/predict.md`` gives the figures).

    Parameters
    ----------
    latencies, op_sums, op_counts
        Per training model: its measured end-to-end latency (ms), the sum of its measured ops (ms) and how many
        ops it has.
    form
        ``mean``, or ``linear`` (also for ``stacked``, whose sums are the predicted ones: :data:`OVERHEAD_FORMS`);
        ``linear`` with fewer than :data:`MIN_LINEAR_OVERHEAD_MODELS` models is ``mean``.
    mparams
        Per training model, the millions of parameters its ops read; without them (or with all zero) ``w`` is 0.

    Returns
    -------
    tuple of float
        ``(a, b, s, w)``: the constant (ms), the cost per op (ms), the share of the ops' sum and the cost per
        million parameters (ms); ``b``, ``s`` and ``w`` are 0 for ``mean``.
    """
    y, total, n = (np.asarray(v, dtype=float) for v in (latencies, op_sums, op_counts))
    if form == "mean" or len(y) < MIN_LINEAR_OVERHEAD_MODELS:
        return float(np.mean(y - total)), 0.0, 0.0, 0.0
    from sklearn.linear_model import QuantileRegressor

    w = np.zeros_like(y) if mparams is None else np.asarray(mparams, dtype=float)
    columns = {"a": np.ones_like(y), "b": n, "s": total, "w": w}
    if np.ptp(n) == 0:  # every model has as many ops: the cost per op is the constant's
        del columns["b"]
    if not w.any():
        del columns["w"]
    fit = QuantileRegressor(quantile=0.5, alpha=0.0, fit_intercept=False, solver="highs")
    coef = dict(zip(columns, fit.fit(np.column_stack(list(columns.values())), y, sample_weight=1.0 / y).coef_,
                    strict=True))
    return float(coef["a"]), float(coef.get("b", 0.0)), float(coef["s"] - 1.0), float(coef.get("w", 0.0))
