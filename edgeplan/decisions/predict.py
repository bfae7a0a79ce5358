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
from typing import Any, NamedTuple, overload

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
    "MeasuredLatency",
    "ModelPrediction",
    "measure_as_profiled",
    "measured_keeping_memory",
    "predict",
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


class MeasuredLatency(NamedTuple):
    """A model measured here beside its prediction: end to end (``ms``), per op by name, and the reference model
    the runs were paired with (None when they were not: the profile's data had no reference, or its timing
    failed)."""

    ms: float
    per_op: dict[str, float]
    reference: str | None


def measured_keeping_memory(device: str, method: str | None = None, home: str | Path | None = None) -> bool:
    """Whether ``device``'s profile learnt times measured with glibc's allocator keeping freed memory (its data's
    device records the :data:`~edgeplan.measure.allocator.KEEP_MEMORY` tunables): a measurement to compare with its
    predictions must be taken under the same settings, which glibc reads when a process starts."""
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.measure.allocator import KEEP_MEMORY, allocator_settings

    model = load_device_model(device, resolve_method(device, method, home), home)
    return (isinstance(model, LatencyModel)
            and model.info.get("device", {}).get("allocator") == allocator_settings(KEEP_MEMORY))


def measure_as_profiled(specs: Sequence[str], device: str, runs: int, method: str | None = None,
                   home: str | Path | None = None) -> dict[str, MeasuredLatency]:
    """Measure each model here in the scenario of ``device``'s profile, end to end and per op, in the statistic
    the profile learnt, to set beside its predictions.

    When the profile learnt times measured beside a reference model (its ``info["reference"]``), the reference is
    timed beside these runs too and the times are converted the same way, so that measurement and prediction are at
    the scenario's typical speed; :attr:`MeasuredLatency.reference` names it then.

    Parameters
    ----------
    specs
        Zoo strings or ONNX paths.
    device
        A profile fitted in a measurement scenario of this machine (not a calibrated device: another machine).
    runs
        Profiled runs per model.
    method
        The profile's predictor method (None: its default).
    home
        The edgeplan home.

    Returns
    -------
    dict
        :class:`MeasuredLatency` by model.

    Raises
    ------
    InvalidInputError
        ``device`` is not a profile of a scenario this machine can run.
    """
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.measure.op_profile import profile_model, reference_runner
    from edgeplan.measure.scenarios import SCENARIOS

    model = load_device_model(device, resolve_method(device, method, home), home)
    # a fitted profile (a scenario's, or one fitted on another machine's data) is timed in its model's scenario; a
    # calibrated device is another machine, which this one cannot time
    name = model.source_scenario if isinstance(model, LatencyModel) else None
    if not isinstance(model, LatencyModel) or name not in SCENARIOS:
        raise InvalidInputError(f"--measure runs the model here, so --device must be a profile fitted in a scenario of "
                                f"this machine ({', '.join(SCENARIOS)}), not {device!r}")
    use_min = model.statistic == "min"
    scale = model.info.get("reference")
    scenario = SCENARIOS[name]
    home_arg = None if home is None else str(home)
    reference = (scale["model"], reference_runner(scale["model"], scenario, home_arg)) if scale else None

    def ms(measured: float, ratio: float | None, unit: float | None) -> float:
        """Paired: the ratio at the scenario's reference latency ``unit``; else the time as measured."""
        return measured if unit is None or ratio is None else unit * ratio

    out = {}
    for spec in specs:
        prof = profile_model(spec, scenario, runs=runs, home=home_arg, reference=reference)
        unit = (scale["min_ms"] if use_min else scale["ms"]) if scale and prof.reference else None
        ref = prof.reference or {}
        e2e = (ms(prof.end_to_end.min_ms, ref.get("min_ratio"), unit) if use_min
               else ms(prof.end_to_end.median_ms, ref.get("ratio"), unit))
        per_op = {f"{o.kernel}@{o.nodes[0]}": ms(o.min_ms, o.min_ratio, unit) if use_min
                  else ms(o.median_ms, o.ratio, unit) for o in prof.ops if o.nodes}
        paired = unit is not None and (ref.get("min_ratio") if use_min else ref.get("ratio")) is not None
        out[spec] = MeasuredLatency(e2e, per_op, str(ref["model"]) if paired else None)
    return out
