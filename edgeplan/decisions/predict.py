"""Predict a model's latency on a device profile from its graph alone (li2023 §4): no execution.

The model's IR is imported, the kernels the scenario's runtime runs are deduced from it
(:func:`edgeplan.ir.kernels.deduce_kernels`; for ONNX Runtime scenarios, read from ORT's optimized graph of the
exported model, :func:`onnxruntime_ops`), each kernel is featurized like the training data, and the device's
:class:`~edgeplan.costmodels.opwise.model.LatencyModel` sums the kernels' predictions and its overhead.

Device profiles are the folders of shipped models (``edgeplan/data/latency/models/{device}/{method}.json.xz``,
xz-compressed JSON) and the ones ``edgeplan calibrate`` creates under the edgeplan home
(``devices/{name}/{method}.json``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from edgeplan.costmodels.opwise.graph_ops import spec_ops, with_skipped
from edgeplan.costmodels.opwise.ops import OpInput, Prediction
from edgeplan.costmodels.opwise.profiles import (
    DEFAULT_DEVICE,
    deduction_of,
    kernel_profile_of,
    load_device_model,
    resolve_method,
)
from edgeplan.errors import InvalidInputError

__all__ = [
    "ModelPrediction",
    "predict",
    "predict_latency",
    "predict_models",
]


@dataclass(frozen=True)
class ModelPrediction:
    """A zoo model's prediction on a device."""

    model: str
    device: str
    method: str
    prediction: Prediction

    def to_dict(self, breakdown: bool = False) -> dict[str, Any]:
        """JSON form: ``model``, ``device``, ``method``, ``latency_ms``, ``overhead_ms``, ``overhead_clamped``,
        ``unpredicted_ops``, ``stand_in_ops`` (:meth:`stand_ins`) and ``ops`` with ``breakdown``.

        ``overhead_ms`` is the overhead as it counts in ``latency_ms`` (``latency_ms`` minus the ops' sum);
        ``overhead_clamped`` says that the learnt overhead would have taken the total below half the ops' sum
        (:attr:`~edgeplan.costmodels.opwise.ops.Prediction.overhead_clamped`). Each op of ``ops`` has ``op``,
        ``kernel``, ``key`` (its own predictor key), ``ms``, ``by_category``, ``predictor`` (which predictor made it, as
        :attr:`~edgeplan.costmodels.opwise.ops.OpPrediction.predictor` shows it), ``predicted_by`` (that predictor's
        key) and ``fallback_for`` (the op's own category when another category's predictor stood in, else None).
        """
        p = self.prediction
        out: dict[str, Any] = {"model": self.model, "device": self.device, "method": self.method,
                               "latency_ms": p.latency_ms, "overhead_ms": p.overhead_ms,
                               "overhead_clamped": p.overhead_clamped, "unpredicted_ops": p.unpredicted,
                               "stand_in_ops": self.stand_ins()}
        if breakdown:
            out["ops"] = [{"op": o.name, "kernel": o.kind, "key": o.key, "ms": o.ms, "by_category": o.by_category,
                           "predictor": o.predictor, "predicted_by": o.predicted_by, "fallback_for": o.fallback_for}
                          for o in p.ops]
        return out

    def stand_ins(self) -> list[dict[str, Any]]:
        """The ops priced by a stand-in: runtime kernels without a predictor of their own, predicted by their
        category's (or op family's) predictor, grouped by kernel and stand-in, most time first.

        Each entry has ``kernel``, ``predictor`` (as :attr:`~edgeplan.costmodels.opwise.ops.OpPrediction.predictor`
        shows it), ``count`` and ``ms`` (their predicted sum). A stand-in was not trained on that kernel, so its error
        is unknown; a kernel far off its category's cost per byte (nearest upsampling, say) can be mispriced."""
        groups: dict[tuple[str, str], list[float]] = {}
        for o in self.prediction.ops:
            if o.by_category and o.ms is not None:
                groups.setdefault((o.kind, o.predictor), []).append(o.ms)
        entries = [{"kernel": kernel, "predictor": predictor, "count": len(ms), "ms": sum(ms)}
                   for (kernel, predictor), ms in groups.items()]
        return sorted(entries, key=lambda e: -e["ms"])


def predict_models(specs: Sequence[str], device: str = DEFAULT_DEVICE, method: str | None = None,
                   home: str | Path | None = None, progress: bool = False,
                   opaque: bool = False) -> list[ModelPrediction]:
    """Predict every zoo model of ``specs`` on ``device`` with ``method``'s predictors.

    Parameters
    ----------
    specs
        Zoo strings or ONNX paths.
    device
        A device profile (:func:`available_devices`).
    method
        ``gbdt``, ``lasso``, ``rf`` or ``mlp``; None: the device's default (:func:`resolve_method`).
    home
        The edgeplan home (calibrated devices).
    progress
        Show a progress bar.
    opaque
        Keep operators edgeplan does not know as opaque nodes: their kernels are listed among the unpredicted ops
        (never counted as 0 ms) and ``latency_ms`` is that of the rest, instead of the model being refused.

    Returns
    -------
    list[ModelPrediction]
        One per model, in order.
    """
    from edgeplan.measure.progress import counting_bar

    method = resolve_method(device, method, home)
    model = load_device_model(device, method, home)
    profile = kernel_profile_of(model)
    featurized: list[tuple[list[OpInput], list[str]]] = []
    with counting_bar(progress and len(specs) > 1, "importing", total=len(specs)) as advance:
        for spec in specs:
            featurized.append(spec_ops(spec, profile, home, deduction_of(model), opaque=opaque))
            advance(1)
    preds = model.predict_batch([ops for ops, _ in featurized])
    out = []
    for spec, pred, (_, skipped) in zip(specs, preds, featurized, strict=True):
        out.append(ModelPrediction(spec, device, method, with_skipped(pred, skipped)))
    return out


@overload
def predict(models: str | os.PathLike[str], device: str = DEFAULT_DEVICE, *,  # type: ignore[overload-overlap]
            method: str | None = None, opaque: bool = False, home: str | Path | None = None) -> ModelPrediction: ...


@overload
def predict(models: Sequence[str | os.PathLike[str]], device: str = DEFAULT_DEVICE, *, method: str | None = None,
            opaque: bool = False, home: str | Path | None = None) -> list[ModelPrediction]: ...


def predict(models: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], device: str = DEFAULT_DEVICE, *,
            method: str | None = None, opaque: bool = False,
            home: str | Path | None = None) -> ModelPrediction | list[ModelPrediction]:
    """Predict latency on a device profile without running the models (what ``edgeplan predict`` prints).

    Parameters
    ----------
    models
        A zoo string (or ONNX path), or a list of them.
    device
        A device profile: a scenario with shipped predictors (``torch-fp32-1t``, ...) or a device made by
        :func:`edgeplan.calibrate`.
    method
        ``gbdt``, ``lasso``, ``rf`` or ``mlp``; None: the device's default (``gbdt``, or a calibrated device's
        only method).
    opaque
        Predict models with operators edgeplan does not know: those become opaque nodes listed in
        ``.prediction.unpredicted`` (never counted as 0 ms), and the latency is that of the rest.
    home
        The edgeplan home (calibrated devices).

    Returns
    -------
    ModelPrediction or list of ModelPrediction
        ``.prediction.latency_ms``, ``.prediction.ops`` (per-op breakdown), ``.prediction.unpredicted``; one per
        model, or a single one when ``models`` is a string.
    """
    from edgeplan.frontends.zoo import model_spec

    if isinstance(models, str | os.PathLike):
        return predict_models([model_spec(models)], device=device, method=method, home=home, opaque=opaque)[0]
    if not isinstance(models, Iterable):
        raise InvalidInputError(f"models: give a zoo string, an .onnx path or a list of them, got {models!r}")
    return predict_models([model_spec(m) for m in models], device=device, method=method, home=home, opaque=opaque)


def predict_latency(models: str | list[str], device: str = DEFAULT_DEVICE, method: str | None = None,
                    home: str | Path | None = None, opaque: bool = False) -> Any:
    """:func:`predict` with positional ``method`` and ``home`` (the form earlier scripts call)."""
    return predict(models, device, method=method, opaque=opaque, home=home)
