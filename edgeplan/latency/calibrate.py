"""Few-shot device adaptation: a new device from a handful of measured models (li2023 §5.5 meets HELP).

The device is described by ``(model, latency_ms)`` pairs measured on it. A *source* device profile (a scenario of
this machine with trained operation-wise predictors) predicts every operation of those models; the new device is
then a learnt correction of the source's per-op predictions:

``T_new(model) = d + b * kernels(model) + sum over categories c of a_c * P_c(model)``

where ``P_c`` is the source's predicted time of the model's operations of category ``c`` (convolutions, pooling,
element-wise, ...), ``kernels`` the number of kernels it runs (the dispatch cost that dominates small models on
GPUs), and every coefficient is non-negative. The fit minimizes the squared *relative* error (rows divided by the
measured latency, as li2023's predictors do), with non-negative least squares.

Ten samples cannot pin down a dozen coefficients, so the correction is chosen among nested forms by leave-one-out
MAPE on the samples themselves: ``scale`` (one factor on the source's total), ``scale+overhead`` (and a constant),
``scale+kernels`` (and a per-kernel cost), ``per-category`` (a factor per category with a constant), and
``per-category+kernels``. Ties go to the simpler form. Measured on NAS-Bench-201 (``edgeplan reproduce li2023
--nb201``): the form that wins depends on the device (per-kernel costs on GPUs at batch 1, per-category factors on
CPUs), which is why it is chosen per device rather than fixed.

A calibrated device is saved under the edgeplan home as ``devices/{name}/{method}.json`` with its source model
inside, and predicts like any device (``edgeplan predict --device NAME``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.latency.features import CATEGORY_FEATURES
from edgeplan.latency.model import LatencyModel, OpInput, OpPrediction, Prediction, write_json

__all__ = ["CALIBRATED_FORMAT", "FORMS", "CalibratedDevice", "calibrate", "read_measurements", "source_terms"]

#: Format tag of a saved calibrated device.
CALIBRATED_FORMAT = "edgeplan-calibrated-device/1"

#: The correction forms, simplest first.
FORMS: tuple[str, ...] = ("scale", "scale+overhead", "scale+kernels", "per-category", "per-category+kernels")

_CATEGORIES: tuple[str, ...] = tuple(CATEGORY_FEATURES)


def source_terms(pred: Prediction, ops: Sequence[OpInput]) -> dict[str, float]:
    """The source prediction of a model split into the correction's terms.

    Returns
    -------
    dict
        ``total`` (ops' sum + source overhead), ``kernels`` (count), ``overhead`` (the source's), and the summed
        predicted ms of every category.

    Raises
    ------
    InvalidInputError
        When an operation has no source prediction (it is named).
    """
    terms = {c: 0.0 for c in _CATEGORIES}
    for o, p in zip(ops, pred.ops, strict=True):
        if p.ms is None:
            raise InvalidInputError(f"the source device has no predictor for op {p.name} ({p.kind}); calibrate from "
                                    "a device whose predictors cover it")
        terms[o.category] += p.ms
    terms["kernels"] = float(len(ops))
    terms["overhead"] = pred.overhead_ms
    terms["total"] = pred.latency_ms
    return terms


def _design(form: str, t: Mapping[str, float]) -> list[float]:
    if form == "scale":
        return [t["total"]]
    if form == "scale+overhead":
        return [t["total"], 1.0]
    if form == "scale+kernels":
        return [t["total"], 1.0, t["kernels"]]
    cats = [t[c] for c in _CATEGORIES]
    if form == "per-category":
        return [*cats, 1.0]
    if form == "per-category+kernels":
        return [*cats, 1.0, t["kernels"]]
    raise InvalidInputError(f"unknown correction form {form!r}; choose one of {', '.join(FORMS)}")


def _names(form: str) -> list[str]:
    base = {"scale": ["total"], "scale+overhead": ["total", "const"], "scale+kernels": ["total", "const", "kernels"]}
    if form in base:
        return base[form]
    return [*_CATEGORIES, "const"] + (["kernels"] if form.endswith("kernels") else [])


def _fit(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Non-negative least squares on relative errors; unused all-zero columns get 0."""
    from scipy.optimize import nnls

    a = x / y[:, None]
    coef, _ = nnls(a, np.ones(len(y)))
    return np.asarray(coef)


def _loo(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> float:
    errs = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        coef = _fit(x[keep], y[keep])
        errs.append(abs(float(x[i] @ coef) - y[i]) / y[i])
    return float(100 * np.mean(errs))


@dataclass
class CalibratedDevice:
    """A device made by :func:`calibrate`: the source model and the fitted correction."""

    name: str
    source: LatencyModel
    source_device: str
    form: str
    coef: dict[str, float]
    loo_mape: dict[str, float]
    samples: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def method(self) -> str:
        """The source's predictor method."""
        return self.source.method

    def predict_terms(self, terms: Mapping[str, float]) -> float:
        """Latency from a model's :func:`source_terms`."""
        return float(np.dot(_design(self.form, terms), [self.coef[n] for n in _names(self.form)]))

    def predict_ops(self, ops: Sequence[OpInput]) -> Prediction:
        """Predict a model from its operations; the breakdown shows every op's corrected time."""
        src = self.source.predict_ops(ops)
        per_op_scale = (lambda cat: self.coef["total"]) if "total" in self.coef else (lambda cat: self.coef[cat])
        scaled = tuple(OpPrediction(p.name, p.kind, p.key, None if p.ms is None else p.ms * per_op_scale(o.category),
                                    p.by_category) for o, p in zip(ops, src.ops, strict=True))
        overhead = self.coef.get("const", 0.0) + self.coef.get("kernels", 0.0) * len(ops)
        if "total" in self.coef:
            overhead += self.coef["total"] * src.overhead_ms
        total = overhead + sum(p.ms for p in scaled if p.ms is not None)
        return Prediction(total, overhead, scaled)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"format": CALIBRATED_FORMAT, "name": self.name, "source_device": self.source_device,
                "form": self.form, "coef": self.coef, "loo_mape": self.loo_mape, "samples": self.samples,
                "info": self.info, "source": self.source.to_dict()}

    def save(self, home_devices: Path) -> Path:
        """Write ``{home_devices}/{name}/{method}.json``."""
        return write_json(home_devices / self.name / f"{self.method}.json", self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibratedDevice:
        """Inverse of :meth:`to_dict`."""
        source = LatencyModel.from_dict(data["source"])
        return cls(str(data["name"]), source, str(data["source_device"]), str(data["form"]),
                   {k: float(v) for k, v in data["coef"].items()}, dict(data["loo_mape"]), list(data["samples"]),
                   dict(data.get("info", {})))


def calibrate(name: str, terms: Sequence[Mapping[str, float]], latencies: Sequence[float], source: LatencyModel,
              source_device: str, models: Sequence[str] = (), forms: Sequence[str] = FORMS) -> CalibratedDevice:
    """Fit the correction of ``source``'s predictions to a new device's measured latencies.

    Parameters
    ----------
    name
        The new device's name.
    terms
        :func:`source_terms` of each measured model.
    latencies
        Their measured latencies on the new device (ms).
    source
        The source device's latency model.
    source_device
        Its name.
    models
        The measured models' names (provenance).
    forms
        Candidate correction forms; the one with the lowest leave-one-out MAPE wins (with fewer than 4 samples,
        ``scale``).

    Returns
    -------
    CalibratedDevice

    Raises
    ------
    InvalidInputError
        For fewer than 1 sample, mismatched lengths or non-positive latencies.
    """
    y = np.asarray(latencies, dtype=float)
    if len(y) == 0 or len(y) != len(terms):
        raise InvalidInputError(f"calibrate needs one latency per model, got {len(y)} latencies for {len(terms)}")
    if not np.all(y > 0):
        raise InvalidInputError("latencies must be positive")
    candidates = [f for f in forms if len(_names(f)) < len(y)] or ["scale"]
    if len(y) < 4:
        candidates = ["scale"]
    scores = {}
    for form in candidates:
        x = np.array([_design(form, t) for t in terms])
        scores[form] = _loo(x, y) if len(y) >= 4 else math.nan
    best = min(candidates, key=lambda f: (scores[f] if not math.isnan(scores[f]) else 0.0, FORMS.index(f)))
    x = np.array([_design(best, t) for t in terms])
    coef = _fit(x, y)
    samples = [{"model": m, "latency_ms": float(v)} for m, v in zip(models or [""] * len(y), y, strict=True)]
    info = {"calibrated_utc": datetime.now(UTC).isoformat(timespec="seconds"), "n_samples": len(y)}
    return CalibratedDevice(name, source, source_device, best, dict(zip(_names(best), map(float, coef), strict=True)),
                            scores, samples, info)


def read_measurements(path: str | Path) -> list[tuple[str, float]]:
    """Read and check a ``model,latency_ms`` CSV (extra columns are ignored).

    Raises
    ------
    InvalidInputError
        For a missing file or column, an empty file, a latency that is not a positive number, or a repeated model;
        the message names the line.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"measurements file {path} does not exist")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        cols = [c.strip() for c in (reader.fieldnames or [])]
        missing = [c for c in ("model", "latency_ms") if c not in cols]
        if missing:
            raise InvalidInputError(f"{path}: missing column(s) {', '.join(missing)}; the header must have model and "
                                    f"latency_ms (it has {', '.join(cols) or 'nothing'})")
        rows: list[tuple[str, float]] = []
        seen: set[str] = set()
        for line, row in enumerate(reader, start=2):
            row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
            model, text = row.get("model", ""), row.get("latency_ms", "")
            if not model:
                raise InvalidInputError(f"{path}, line {line}: empty model")
            try:
                value = float(text)
            except ValueError:
                raise InvalidInputError(f"{path}, line {line}: latency_ms {text!r} is not a number") from None
            if not math.isfinite(value) or value <= 0:
                raise InvalidInputError(f"{path}, line {line}: latency_ms must be positive, got {text}")
            if model in seen:
                raise InvalidInputError(f"{path}, line {line}: model {model} appears twice")
            seen.add(model)
            rows.append((model, value))
    if not rows:
        raise InvalidInputError(f"{path} has no measurements")
    return rows
