"""Calibrate a device profile from latencies measured on the device (li2023 §4.3, few-shot adaptation).

A source profile's per-op predictions of each measured model are reduced to a few terms
(:func:`~edgeplan.costmodels.opwise.calibrate.source_terms`); the correction form (and the kernels the device runs)
with the lowest leave-one-out error over the measured models is fitted
(:func:`~edgeplan.costmodels.opwise.calibrate.calibrate`) and saved as a device profile under the edgeplan home,
where :func:`edgeplan.decisions.predict.predict` finds it by name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import EdgeplanError, InvalidInputError

if TYPE_CHECKING:
    from edgeplan.costmodels.opwise.calibrate import CalibratedDevice
    from edgeplan.costmodels.opwise.model import LatencyModel

__all__ = ["Calibration", "calibrate", "measurement_rows", "model_terms"]

#: The source profile a calibration corrects when none is named.
DEFAULT_SOURCE = "torch-fp32-1t"


@dataclass(frozen=True)
class Calibration:
    """A calibrated device profile: the fitted correction, where it was saved, and how well it predicts.

    Attributes
    ----------
    device
        The new profile's name (``predict(..., device=name)``).
    path
        Where it was saved (None when not saved).
    source
        The profile whose predictions it corrects.
    method
        The source's predictor method.
    samples
        Measured models it was fitted on.
    calibrated
        The :class:`~edgeplan.costmodels.opwise.calibrate.CalibratedDevice` itself.
    """

    device: str
    path: Path | None
    source: str
    method: str
    samples: int
    calibrated: CalibratedDevice = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan calibrate --json`` prints it: ``device``, ``path``, ``source``, ``method``,
        ``form``, ``deduction``, ``coef``, ``loo_mape`` (null where undefined), ``per_op_test``, ``samples``."""
        c = self.calibrated
        return {"device": self.device, "path": None if self.path is None else str(self.path), "source": self.source,
                "method": self.method, "form": c.form, "deduction": c.deduction, "coef": dict(c.coef),
                "loo_mape": {k: (None if math.isnan(v) else v) for k, v in c.loo_mape.items()},
                "per_op_test": c.info.get("per_op_test"), "samples": self.samples}


def model_terms(models: Sequence[str], source: LatencyModel, deductions: Sequence[str] = ("as-source",),
                home: str | Path | None = None, progress: bool = False,
                ) -> tuple[dict[str, list[dict[str, float]]], list[str], dict[str, str]]:
    """:func:`~edgeplan.costmodels.opwise.calibrate.source_terms` of zoo models (or ONNX files) under each kernel
    deduction: what a calibration corrects. An ONNX Runtime source runs what ORT's optimizer keeps (``as-source``
    only); ``home`` caches its exports.

    Returns
    -------
    tuple
        The terms by deduction (one per kept model), the kept models, and ``{model: reason}`` for the models left
        out (an operator the frontend refuses, an op the source has no predictor for): named, never scored.
    """
    from edgeplan.costmodels.opwise.calibrate import source_terms
    from edgeplan.costmodels.opwise.graph_ops import ORT_OBSERVED, graph_ops, spec_ops
    from edgeplan.costmodels.opwise.profiles import kernel_profile_of
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.measure.progress import counting_bar

    profile = kernel_profile_of(source)
    if profile in ORT_OBSERVED:
        deductions = [d for d in deductions if d == "as-source"]
    out: dict[str, list[dict[str, float]]] = {d: [] for d in deductions}
    kept: list[str] = []
    left: dict[str, str] = {}
    with counting_bar(progress, "source predictions", total=len(models)) as advance:
        for spec in models:
            try:
                graph = None if profile in ORT_OBSERVED else load_graph(spec)
                row = {}
                for deduction in deductions:
                    ops, skipped = (spec_ops(spec, profile, home) if graph is None
                                    else graph_ops(graph, profile, deduction))
                    if skipped:
                        raise InvalidInputError(f"kernels {', '.join(skipped)} have no IR nodes to predict from")
                    row[deduction] = source_terms(source.predict_ops(ops), ops)
            except EdgeplanError as e:
                left[spec] = str(e)
            else:
                kept.append(spec)
                for deduction, t in row.items():
                    out[deduction].append(t)
            advance(1)
    return out, kept, left


def measurement_rows(measurements: str | Path | Sequence[tuple[str, float]],
                     ) -> tuple[list[tuple[str, float]], dict[str, dict[str, Any]] | None]:
    """The checked ``(model, latency_ms)`` rows of a ``model,latency_ms`` CSV, a ``profile ops --export`` dataset
    (median end-to-end times) or pairs, and for a dataset its records by model (the operations measured too), else None.

    Raises
    ------
    InvalidInputError
        A missing file or column, a latency that is not a positive number, a repeated model (named by its line).
    """
    from edgeplan.costmodels.opwise.calibrate import read_measurements

    if isinstance(measurements, str | Path):
        if str(measurements).endswith((".gz", ".xz")):
            from edgeplan.costmodels.opwise.ops import record_latency
            from edgeplan.measure.op_campaign import load_dataset

            records = load_dataset(measurements).records
            return ([(r["model"], float(record_latency(r))) for r in records], {r["model"]: r for r in records})
        return read_measurements(measurements), None
    rows = []
    for i, row in enumerate(measurements):
        try:
            model, ms = row
            value = float(ms)
        except (TypeError, ValueError):
            raise InvalidInputError(f"measurement {i}: give (model, latency_ms) pairs, got {row!r}") from None
        if not (isinstance(model, str) and math.isfinite(value) and value > 0):
            raise InvalidInputError(f"measurement {i}: a model string and a positive latency_ms, got {row!r}")
        rows.append((model, value))
    if not rows:
        raise InvalidInputError("no measurements given: give a model,latency_ms CSV or (model, latency_ms) pairs")
    return rows, None


def calibrate(measurements: str | Path | Sequence[tuple[str, float]], name: str, *, source: str = DEFAULT_SOURCE,
              method: str | None = None, home: str | Path | None = None, replace: bool = False,
              save: bool = True) -> Calibration:
    """Create device profile ``name`` from latencies measured on the device: a learnt correction of ``source``'s
    predictions.

    Parameters
    ----------
    measurements
        A CSV with columns ``model,latency_ms`` (zoo strings measured on the device), a ``profile ops --export`` dataset
        (``.jsonl.gz`` or ``.xz``: its operations' times add the per-op correction to the candidates), or
        ``(model, latency_ms)`` pairs.
    name
        The new profile's name (not a shipped scenario's).
    source
        The device profile whose per-op predictions are corrected.
    method
        The source's predictor method; None: Lasso where the source has it, else its default.
    home
        The edgeplan home, where the profile is saved.
    replace
        Overwrite an existing profile of that name.
    save
        Save the profile (False: only fit it).

    Returns
    -------
    Calibration

    Raises
    ------
    InvalidInputError
        A bad name, an existing profile without ``replace``, a bad row (named by its line), or a model the
        source cannot predict (named).
    """
    from edgeplan.costmodels.opwise.calibrate import DEDUCTIONS
    from edgeplan.costmodels.opwise.calibrate import calibrate as fit
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.op_correction import measured_ops
    from edgeplan.costmodels.opwise.profiles import home_root, load_device_model, shipped_devices, source_method

    if not isinstance(name, str) or not name or "/" in name or name.startswith(".") or len(name.encode()) > 100:
        raise InvalidInputError(f"name {name!r}: use a short plain name such as my-phone")
    if name in shipped_devices():
        raise InvalidInputError(f"name {name!r} is a measurement scenario's; choose another such as {name}-calibrated")
    method = source_method(source, method, home)
    target = home_root(home) / name / f"{method}.json"
    if save and target.exists() and not replace:
        raise InvalidInputError(f"device {name!r} already has {method} predictors ({target}); choose another name "
                                "or pass replace=True")
    model = load_device_model(source, method, home)
    if not isinstance(model, LatencyModel):  # a calibrated device: correct its source, not the correction
        source, model = model.source_device, model.source
    rows, records = measurement_rows(measurements)
    terms, _, left = model_terms([m for m, _ in rows], model, DEDUCTIONS, home=home)
    if left:
        line, spec = next((i, m) for i, (m, _) in enumerate(rows, start=2) if m in left)
        where = f"{measurements}, line {line}" if isinstance(measurements, str | Path) else f"measurement {line - 2}"
        raise InvalidInputError(f"{where}: model {spec}: {left[spec]}")
    per_op = None
    if records is not None:
        try:
            per_op = [measured_ops(records[m], model) for m, _ in rows]
        except EdgeplanError:
            per_op = None  # the source cannot predict the measured kernels: the end-to-end forms only
    device = fit(name, terms["as-source"], [v for _, v in rows], model, source, [m for m, _ in rows],
                 alternatives={d: t for d, t in terms.items() if d != "as-source"}, measured_ops=per_op)
    path = device.save(home_root(home)) if save else None
    return Calibration(name, path, source, method, len(rows), device)
