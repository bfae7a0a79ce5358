"""Few-shot device adaptation: a new device from a handful of measured models (li2023 §5.5 meets HELP).

The device is described by ``(model, latency_ms)`` pairs measured on it. A *source* device profile (a scenario of
this machine with trained operation-wise predictors) predicts every operation of those models; the new device is
then a learnt, non-negative correction of the source's per-op predictions, fitted to squared *relative* error (as
li2023's predictors are) by non-negative least squares. The candidate forms, simplest first:

- ``scale``: one factor on the source's total; ``scale+overhead``: and a constant; ``scale+kernels``: and a cost
  per kernel (the dispatch cost that dominates small models on GPUs);
- ``per-category`` (``+kernels``): a factor per op category present in the samples (convolutions, pooling,
  element-wise, ...) and a constant;
- ``per-key(l)``: a factor per operation key (``aten::conv2d|conv``, ``aten::batch_norm|elementwise``, ...), a
  constant and a per-kernel cost, each factor shrunk towards the common scale with weight ``l`` (penalty rows
  ``sqrt(l) (a_k / s - 1)``): ten samples cannot pin down a dozen factors on their own;
- ``per-op``: when the samples' operations were timed on the new device too (``calibrate --measure``), a factor
  per operation key and a residual model per category learnt from those timings, then a scale and a constant
  end to end (:mod:`edgeplan.costmodels.opwise.op_correction`).

The form is chosen per device by leave-one-out MAPE on the samples themselves (ties to the simpler form), except
that ``per-op``, when offered, is kept unless another form beats it by more than :data:`PER_OP_EVIDENCE_SE` (two)
standard errors of the paired leave-one-out differences: its score rests on hundreds of op timings, the others' on
ten end-to-end numbers (``info["per_op_test"]`` holds the test). Devices differ in what separates them from the
source (per-kernel costs on GPUs at batch 1, per-category speed ratios on CPUs), so the chosen form differs from
device to device (on NAS-Bench-201: ``python -m experiments.li2023 --nb201``, the ``forms`` column).

The kernels the new device runs are chosen the same way, from :data:`DEDUCTIONS`: ``as-source`` (the source
runtime's kernels) or ``fold-zeros`` (a graph runtime that simplifies multiplications by zero and removes dead
code, :mod:`edgeplan.ir.fold`). When the samples' terms differ between the two, the best form is found under
each, and ``fold-zeros`` is kept only when its leave-one-out errors beat ``as-source``'s by more than one standard
error of their paired differences (the one-standard-error rule of cross-validated model choice: with ten samples,
the lowest of twenty scores is often lowest by chance). A network a device folds into a constant runs no kernel
and is predicted 0 ms.

**Networks that fold into a constant** (NAS-Bench-201 cells whose output no path reaches: 341 of the 15,625) are
where the choice costs most, and the two ways of being wrong are not alike under relative error: predicting the
source's kernels (about 10 ms) for a network a graph runtime runs in microseconds (as HELP's Pixel 3 does) is off
by a factor of a thousand, while predicting 0 ms for a network that does run is off by exactly its whole latency.
Ten samples rarely hold such a network (one in fifty of the space), so they say little about it directly. Unless
the source's kernels win the leave-one-out comparison by more than :data:`CONSTANT_EVIDENCE_SE` standard errors
(with a loss ratio near 1000, the normal tail beyond 3.1 standard errors), a device that keeps the source's kernels
is given the ``fold-constants`` deduction: the source's kernels, except that a network folding into a constant runs
nothing. Offered only when ``fold-zeros`` is (graph profiles; ONNX Runtime runs what its optimizer keeps).

A calibrated device is saved under the edgeplan home as ``devices/{name}/{method}.json`` with its source model
inside, and predicts like any device (``edgeplan predict --device NAME``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from edgeplan.costmodels.opwise.features import CATEGORY_FEATURES
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.model_files import write_json
from edgeplan.costmodels.opwise.op_correction import MeasuredOps, OpCorrection, fit_op_correction
from edgeplan.costmodels.opwise.ops import OpInput, Prediction
from edgeplan.errors import InvalidInputError

__all__ = ["CALIBRATED_FORMAT", "CONSTANT_EVIDENCE_SE", "DEDUCTIONS", "FORMS", "KNOWN_DEDUCTIONS", "PER_OP",
           "PER_OP_EVIDENCE_SE", "CalibratedDevice", "CalibrationSamples", "calibrate", "fold_constant_terms",
           "source_terms"]

#: Format tag of a saved calibrated device.
CALIBRATED_FORMAT = "edgeplan-calibrated-device/1"

#: The form learnt from the samples' measured operations (:mod:`edgeplan.costmodels.opwise.op_correction`); a
# candidate only  when :func:`calibrate` is given them.
PER_OP = "per-op"

#: The correction forms, simplest first (``per-key(l)``: a factor per operation key, shrunk towards the common
#: scale with weight ``l``).
FORMS: tuple[str, ...] = ("scale", "scale+overhead", "scale+kernels", "per-category", "per-category+kernels",
                          "per-key(1)", "per-key(0.3)", "per-key(0.1)", "per-key(0.03)", "per-key(0.01)", PER_OP)

#: The kernel deductions a calibrated device can run under (see the module docstring), the default first.
DEDUCTIONS: tuple[str, ...] = ("as-source", "fold-zeros")

#: Every deduction a calibrated device can hold: the tested ones and ``fold-constants`` (see the module docstring).
KNOWN_DEDUCTIONS: tuple[str, ...] = (*DEDUCTIONS, "fold-constants")

#: Standard errors by which ``as-source`` must beat ``fold-zeros`` (leave-one-out, paired) for a device to keep the
#: source's kernels on networks that fold into a constant (see the module docstring).
CONSTANT_EVIDENCE_SE = 3.0

#: Standard errors by which another form must beat :data:`PER_OP` (leave-one-out, paired) to replace it. Two, not
#: the one of the deduction test: the ten end-to-end leave-one-out errors are heavy-tailed, so a rival often leads
#: by one standard error by chance, while per-op's own fit rests on hundreds of op timings.
PER_OP_EVIDENCE_SE = 2.0

_CATEGORIES: tuple[str, ...] = tuple(CATEGORY_FEATURES)

_Terms = TypeVar("_Terms", bound=Mapping[str, float])


def fold_constant_terms(as_source: Sequence[_Terms], folded: Sequence[_Terms]) -> list[_Terms]:
    """The ``fold-constants`` terms: ``as_source``'s, except a model ``folded`` (its ``fold-zeros`` terms) runs nothing.

    Parameters
    ----------
    as_source, folded
        :func:`source_terms` of the same models under ``as-source`` and under ``fold-zeros``.

    Returns
    -------
    list
        One per model.
    """
    return [f if f["kernels"] == 0 else a for a, f in zip(as_source, folded, strict=True)]


def source_terms(pred: Prediction, ops: Sequence[OpInput]) -> dict[str, float]:
    """The source prediction of a model split into the correction's terms.

    Returns
    -------
    dict
        ``total`` (ops' sum + source overhead), ``kernels`` (count), the summed predicted ms of every category
        and, under ``key|{op key}``, of every operation key.

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
        terms["key|" + o.key] = terms.get("key|" + o.key, 0.0) + p.ms
    terms["kernels"] = float(len(ops))
    terms["total"] = pred.latency_ms
    return terms


def _value(name: str, t: Mapping[str, float]) -> float:
    return 1.0 if name == "const" else float(t.get(name, 0.0))


def _nnls_relative(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], extra_a: np.ndarray[Any, Any] | None = None,
                   extra_b: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
    """Non-negative least squares on relative errors ``(x.c - y) / y``, with optional penalty rows appended."""
    from scipy.optimize import nnls

    a = x / y[:, None]
    b = np.ones(len(y))
    if extra_a is not None and extra_b is not None:
        a, b = np.vstack([a, extra_a]), np.concatenate([b, extra_b])
    coef, _ = nnls(a, b)
    return np.asarray(coef)


def _present(terms: Sequence[Mapping[str, float]], names: Sequence[str]) -> list[str]:
    return [n for n in names if any(t.get(n, 0.0) > 0 for t in terms)]


def _shrinkage(form: str) -> float | None:
    """The lambda of a ``per-key(lambda)`` form, else None."""
    if form.startswith("per-key(") and form.endswith(")"):
        return float(form[len("per-key("):-1])
    return None


def _fit_form(form: str, terms: Sequence[Mapping[str, float]], y: np.ndarray[Any, Any]) -> dict[str, float]:
    """Coefficients of ``form`` fitted to ``terms`` and latencies ``y`` (see the module docstring)."""
    simple = {"scale": ["total"], "scale+overhead": ["total", "const"],
              "scale+kernels": ["total", "const", "kernels"]}
    if form in simple:
        names = simple[form]
    elif form in ("per-category", "per-category+kernels"):
        names = [*_present(terms, _CATEGORIES), "const"] + (["kernels"] if form.endswith("kernels") else [])
        x = np.array([[_value(n, t) for n in names] for t in terms])
        base = _fit_form("scale+kernels", terms, y)  # categories absent from the samples get the common scale
        return {**dict(zip(names, map(float, _nnls_relative(x, y)), strict=True)), "scale": base["total"]}
    else:
        lam = _shrinkage(form)
        if lam is None:
            raise InvalidInputError(f"unknown correction form {form!r}; choose one of {', '.join(FORMS)}")
        base = _fit_form("scale+kernels", terms, y)
        scale = base["total"] if base["total"] > 0 else 1.0
        keys = _present(terms, sorted({k for t in terms for k in t if k.startswith("key|")}))
        names = [*keys, "const", "kernels"]
        x = np.array([[_value(n, t) for n in names] for t in terms])
        penalty = np.zeros((len(keys), len(names)))
        penalty[np.arange(len(keys)), np.arange(len(keys))] = math.sqrt(lam) / scale
        coef = _nnls_relative(x, y, penalty, np.full(len(keys), math.sqrt(lam)))
        return {**dict(zip(names, map(float, coef), strict=True)), "scale": scale}
    x = np.array([[_value(n, t) for n in names] for t in terms])
    return dict(zip(names, map(float, _nnls_relative(x, y)), strict=True))


def _predict_form(form: str, coef: Mapping[str, float], t: Mapping[str, float]) -> float:
    """A model's latency from its :func:`source_terms` under a fitted form (0 for a model that runs no kernel)."""
    if t["kernels"] == 0:
        return 0.0
    fixed = coef.get("const", 0.0) + coef.get("kernels", 0.0) * t["kernels"]
    if _shrinkage(form) is not None:
        scale = coef["scale"]
        return fixed + sum(coef.get(k, scale) * v for k, v in t.items() if k.startswith("key|"))
    if form.startswith("per-category"):
        return fixed + sum(coef.get(c, coef["scale"]) * t.get(c, 0.0) for c in _CATEGORIES)
    return sum(c * _value(n, t) for n, c in coef.items())


def _fit_running(form: str, terms: Sequence[Mapping[str, float]], y: np.ndarray[Any, Any]) -> dict[str, float]:
    """:func:`_fit_form` on the models that run kernels (a folded one is 0 ms whatever the coefficients)."""
    keep = [j for j, t in enumerate(terms) if t["kernels"] > 0]
    if not keep:
        raise InvalidInputError("every measured model folds into a constant under this deduction: nothing to fit")
    return _fit_form(form, [terms[j] for j in keep], y[keep])


def _loo_errors(form: str, terms: Sequence[Mapping[str, float]],
                y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """Leave-one-out relative errors of ``form``, one per sample (None when a fold would have nothing to fit)."""
    errs = []
    for i in range(len(y)):
        keep = [j for j in range(len(y)) if j != i and terms[j]["kernels"] > 0]
        if not keep:
            return None
        coef = _fit_form(form, [terms[j] for j in keep], y[keep])
        errs.append(abs(_predict_form(form, coef, terms[i]) - y[i]) / y[i])
    return np.array(errs)


def _parameters(form: str, terms: Sequence[Mapping[str, float]]) -> int:
    if form in ("scale", "scale+overhead", "scale+kernels"):
        return FORMS.index(form) + 1
    if form.startswith("per-category"):
        return len(_present(terms, _CATEGORIES)) + 1 + form.endswith("kernels")
    return 2  # shrunk per-key factors, per-op: what the data cannot pin down stays at the common scale


def _per_op_sums(correction: OpCorrection, measured: Sequence[MeasuredOps]) -> np.ndarray[Any, Any]:
    """Each model's corrected operations summed (before the end-to-end scale and constant)."""
    return np.array([float(np.sum(np.asarray(m.source_ms) * np.exp(correction.log_factors(m.ops, m.source_ms))))
                     for m in measured])


def _fit_per_op(measured: Sequence[MeasuredOps], y: np.ndarray[Any, Any]) -> tuple[OpCorrection, dict[str, float]]:
    """The ``per-op`` form fitted to the samples: the correction and its end-to-end ``ops`` scale and ``const``."""
    correction = fit_op_correction(measured)
    x = np.column_stack([_per_op_sums(correction, measured), np.ones(len(y))])
    ops, const = _nnls_relative(x, y)
    return correction, {"ops": float(ops), "const": float(const)}


def _loo_per_op(measured: Sequence[MeasuredOps], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Leave-one-out relative errors of ``per-op``, one per sample (each left-out model's operations unseen)."""
    errs = []
    for i in range(len(y)):
        keep = [j for j in range(len(y)) if j != i]
        correction, coef = _fit_per_op([measured[j] for j in keep], y[keep])
        pred = coef["ops"] * _per_op_sums(correction, [measured[i]])[0] + coef["const"]
        errs.append(abs(pred - y[i]) / y[i])
    return np.array(errs)


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
    deduction: str = "as-source"
    op_correction: OpCorrection | None = None

    @property
    def method(self) -> str:
        """The source's predictor method."""
        return self.source.method

    def predict_terms(self, terms: Mapping[str, float]) -> float:
        """Latency from a model's :func:`source_terms`.

        Raises
        ------
        InvalidInputError
            For the ``per-op`` form, which corrects each operation: use :meth:`predict_ops`.
        """
        if self.form == PER_OP:
            raise InvalidInputError(f"device {self.name!r} corrects each operation ({PER_OP}): predict it from the "
                                    "model's operations, not its summed terms")
        return _predict_form(self.form, self.coef, terms)

    def _op_scale(self, key: str, cat: str) -> float:
        if "total" in self.coef:
            return self.coef["total"]
        if _shrinkage(self.form) is not None:
            return self.coef.get("key|" + key, self.coef["scale"])
        return self.coef.get(cat, self.coef["scale"])

    def predict_ops(self, ops: Sequence[OpInput]) -> Prediction:
        """Predict a model from its operations; the breakdown shows every op's corrected time."""
        return self._correct(self.source.predict_ops(ops), ops)

    def corrected(self, src: Prediction, ops: Sequence[OpInput]) -> Prediction:
        """The prediction of ``ops`` from the source's prediction ``src`` of the same ops (a part of a model priced
        from the source's op predictions of the whole, without predicting them again)."""
        return self._correct(src, ops)

    def predict_batch(self, models: Sequence[Sequence[OpInput]]) -> list[Prediction]:
        """Predict many models at once (the source's predictors, and a per-op correction, batched over all their
        operations)."""
        sources = self.source.predict_batch(models)
        if self.op_correction is None:
            return [self._correct(p, ops) for p, ops in zip(sources, models, strict=True)]
        flat = [o for ops in models for o in ops]
        logs = self.op_correction.log_factors(flat, [p.ms or 0.0 for s in sources for p in s.ops])
        out, start = [], 0
        for p, ops in zip(sources, models, strict=True):
            out.append(self._correct_per_op(p, ops, logs[start:start + len(ops)]))
            start += len(ops)
        return out

    def _correct(self, src: Prediction, ops: Sequence[OpInput]) -> Prediction:
        if self.op_correction is not None:
            return self._correct_per_op(src, ops)
        scaled = tuple(replace(p, ms=None if p.ms is None else p.ms * self._op_scale(o.key, o.category))
                       for o, p in zip(ops, src.ops, strict=True))
        if not ops and self.deduction in ("fold-zeros", "fold-constants"):  # folded into a constant: nothing runs
            return Prediction(0.0, 0.0, scaled, False)
        overhead = self.coef.get("const", 0.0) + self.coef.get("kernels", 0.0) * len(ops)
        if "total" in self.coef:  # the source's overhead as in its total (which never falls below half its ops)
            overhead += self.coef["total"] * src.overhead_ms
        total = overhead + sum(p.ms for p in scaled if p.ms is not None)
        return Prediction(total, overhead, scaled, "total" in self.coef and src.overhead_clamped)

    def _correct_per_op(self, src: Prediction, ops: Sequence[OpInput],
                        logs: np.ndarray[Any, Any] | None = None) -> Prediction:
        """The ``per-op`` form: each operation's own factor (``logs``, computed when not given) times the end-to-end
        ``ops`` scale, plus ``const``."""
        assert self.op_correction is not None
        if not ops and self.deduction in ("fold-zeros", "fold-constants"):
            return Prediction(0.0, 0.0, src.ops, False)
        if logs is None:
            logs = self.op_correction.log_factors(ops, [p.ms or 0.0 for p in src.ops])
        factors = self.coef["ops"] * np.exp(logs)
        scaled = tuple(replace(p, ms=None if p.ms is None else p.ms * float(f))
                       for p, f in zip(src.ops, factors, strict=True))
        overhead = self.coef["const"]
        return Prediction(overhead + sum(p.ms for p in scaled if p.ms is not None), overhead, scaled, False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = {"format": CALIBRATED_FORMAT, "name": self.name, "source_device": self.source_device,
               "form": self.form, "deduction": self.deduction, "coef": self.coef,
               "loo_mape": {k: (None if math.isnan(v) else v) for k, v in self.loo_mape.items()},
               "samples": self.samples, "info": self.info, "source": self.source.to_dict()}
        if self.op_correction is not None:
            out["op_correction"] = self.op_correction.to_dict()
        return out

    def save(self, home_devices: Path) -> Path:
        """Write ``{home_devices}/{name}/{method}.json``."""
        return write_json(home_devices / self.name / f"{self.method}.json", self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibratedDevice:
        """Inverse of :meth:`to_dict`."""
        source = LatencyModel.from_dict(data["source"])
        deduction = str(data.get("deduction", "as-source"))  # files from before deductions ran the source's kernels
        if deduction not in KNOWN_DEDUCTIONS:
            raise InvalidInputError(f"calibrated device {data.get('name')!r} has unknown kernel deduction "
                                    f"{deduction!r} (known: {', '.join(KNOWN_DEDUCTIONS)}); calibrate it again")
        loo = {k: (math.nan if v is None else float(v)) for k, v in data["loo_mape"].items()}
        form = str(data["form"])
        correction = data.get("op_correction")
        if form == PER_OP and correction is None:
            raise InvalidInputError(f"calibrated device {data.get('name')!r} has the {PER_OP} form but no "
                                    "op_correction; calibrate it again")
        return cls(str(data["name"]), source, str(data["source_device"]), form,
                   {k: float(v) for k, v in data["coef"].items()}, loo, list(data["samples"]),
                   dict(data.get("info", {})), deduction,
                   OpCorrection.from_dict(correction) if form == PER_OP and correction is not None else None)


@dataclass(frozen=True)
class CalibrationSamples:
    """What a calibration learns from: the measured models, reduced to the source's terms, and their latencies.

    Attributes
    ----------
    terms
        :func:`source_terms` of each measured model.
    latencies
        Their measured latencies on the new device (ms).
    models
        The measured models' names (provenance).
    alternatives
        The samples' terms under other kernel deductions (``{"fold-zeros": [...]}``); ``terms`` are the
        ``as-source`` ones.
    measured_ops
        Each sample's operations as timed on the new device, with the source's predictions (the kernels the source
        runs): makes :data:`PER_OP` a candidate form.
    """

    terms: Sequence[Mapping[str, float]]
    latencies: Sequence[float]
    models: Sequence[str] = ()
    alternatives: Mapping[str, Sequence[Mapping[str, float]]] | None = None
    measured_ops: Sequence[MeasuredOps] | None = None


def calibrate(name: str, samples: CalibrationSamples, source: LatencyModel, source_device: str,
              forms: Sequence[str] = FORMS) -> CalibratedDevice:
    """Fit the correction of ``source``'s predictions to a new device's measured latencies.

    Parameters
    ----------
    name
        The new device's name.
    samples
        The measured models: their terms, latencies and names, their terms under other kernel deductions and,
        optionally, their operations as timed on the device (see below).
    source
        The source device's latency model.
    source_device
        Its name.
    forms
        Candidate correction forms; the one with the lowest leave-one-out MAPE wins (with fewer than 4 samples,
        ``scale``), except that :data:`PER_OP` loses only to a form that beats it by more than
        :data:`PER_OP_EVIDENCE_SE` standard errors of the paired leave-one-out differences (``info["per_op_test"]``).
    samples.alternatives
        The samples' terms under other kernel deductions (``{"fold-zeros": [...]}``); ``terms`` are the
        ``as-source`` ones. A deduction whose terms equal ``as-source``'s is not tried; otherwise each deduction's
        best form is found as above, and another deduction replaces ``as-source`` only when its leave-one-out
        errors are lower by more than one standard error of the paired differences (``info["deduction_test"]``).
        A device left with ``as-source`` while ``fold-zeros`` was offered becomes ``fold-constants`` unless
        ``as-source`` leads by more than :data:`CONSTANT_EVIDENCE_SE` standard errors (``info["constant_networks"]``).
    samples.measured_ops
        Each sample's operations as timed on the new device, with the source's predictions (the kernels the source
        runs): makes :data:`PER_OP` a candidate form (under ``as-source``), its leave-one-out errors those of
        models whose operations it has not seen.

    Returns
    -------
    CalibratedDevice

    Raises
    ------
    InvalidInputError
        For fewer than 1 sample, mismatched lengths, non-positive latencies, an unknown deduction, or only the
        :data:`PER_OP` form without ``measured_ops``.
    """
    terms, latencies, models = samples.terms, samples.latencies, samples.models
    alternatives, measured_ops = samples.alternatives, samples.measured_ops
    y = np.asarray(latencies, dtype=float)
    if len(y) == 0 or len(y) != len(terms):
        raise InvalidInputError(f"calibrate needs one latency per model, got {len(y)} latencies for {len(terms)}")
    if not np.all(y > 0):
        raise InvalidInputError("latencies must be positive")
    if measured_ops is not None and len(measured_ops) != len(y):
        raise InvalidInputError(f"calibrate got measured operations of {len(measured_ops)} models for {len(y)} "
                                "samples")
    if measured_ops is None and list(forms) == [PER_OP]:
        raise InvalidInputError(f"the {PER_OP} form learns from the samples' operations timed on the device: give "
                                "them (measure the models with `edgeplan calibrate --measure`)")
    variants: dict[str, Sequence[Mapping[str, float]]] = {"as-source": terms}
    per_op_test: dict[str, Any] | None = None
    for deduction, alt in (alternatives or {}).items():
        if deduction not in DEDUCTIONS or deduction == "as-source":
            raise InvalidInputError(f"unknown alternative kernel deduction {deduction!r} (the as-source terms are "
                                    f"`terms`); use one of {', '.join(DEDUCTIONS[1:])}")
        if len(alt) != len(terms):
            raise InvalidInputError(f"{deduction}: {len(alt)} terms for {len(terms)} samples")
        if list(alt) != list(terms) and any(t["kernels"] > 0 for t in alt):
            variants[deduction] = alt
    order = [*forms, *(() if "scale" in forms else ("scale",))]  # scale: the fallback of too few samples
    scores: dict[str, dict[str, float]] = {}
    best_errors: dict[str, tuple[str, np.ndarray[Any, Any] | None]] = {}
    for deduction, t in variants.items():
        running = sum(1 for x in t if x["kernels"] > 0)  # a folded sample fits nothing
        offered = [f for f in forms if f != PER_OP or (deduction == "as-source" and measured_ops is not None)]
        candidates = [f for f in offered if _parameters(f, t) < running] or ["scale"]
        if len(y) < 4:
            candidates = ["scale"]
        errors = {f: (None if len(y) < 4 else _loo_per_op(measured_ops, y) if f == PER_OP and measured_ops else
                      _loo_errors(f, t, y)) for f in candidates}
        if deduction != "as-source" and all(e is None for e in errors.values()):
            continue
        scores[deduction] = {f: (math.nan if e is None else float(100 * e.mean())) for f, e in errors.items()}
        form = min(candidates, key=lambda f: (0.0 if math.isnan(scores[deduction][f]) else scores[deduction][f],
                                              order.index(f)))
        if PER_OP in candidates and errors[PER_OP] is not None and form != PER_OP:
            form, per_op_test = _keep_per_op(form, errors)
        best_errors[deduction] = (form, errors[form])
    # Another deduction replaces the source's kernels only when its best form beats the source's best by more than
    # one standard error of the paired leave-one-out differences: with ten samples, the lower of twenty scores is
    # often lower by chance alone.
    deduction, test = "as-source", {}
    base = best_errors["as-source"][1]
    for other, (_, errs) in best_errors.items():
        if other == "as-source" or errs is None or base is None:
            continue
        diff = base - errs
        gain, se = float(100 * diff.mean()), float(100 * diff.std(ddof=1) / math.sqrt(len(diff)))
        test[other] = {"loo_gain": gain, "standard_error": se}
        if gain > se and gain > test.get(deduction, {}).get("loo_gain", 0.0):
            deduction = other
    best = best_errors[deduction][0]
    fitted_on = variants[deduction]
    loo = scores[deduction]
    folded = (alternatives or {}).get("fold-zeros")
    if deduction == "as-source" and folded is not None:
        lead = test.get("fold-zeros")  # absent when no sample's kernels differ: no evidence either way
        sure = lead is not None and -lead["loo_gain"] > CONSTANT_EVIDENCE_SE * lead["standard_error"]
        info_constants = {"rule": f"as-source only when it leads fold-zeros by > {CONSTANT_EVIDENCE_SE:g} SE",
                          "as_source_lead_se": None if lead is None or lead["standard_error"] == 0 else
                          -lead["loo_gain"] / lead["standard_error"]}
        if not sure:
            deduction = "fold-constants"
            fitted_on = fold_constant_terms(terms, folded)
    else:
        info_constants = None
    correction = None
    if best == PER_OP and measured_ops is not None:
        correction, coef = _fit_per_op(measured_ops, y)
    else:
        coef = _fit_running(best, fitted_on, y)
    rows = [{"model": m, "latency_ms": float(v)} for m, v in zip(models or [""] * len(y), y, strict=True)]
    info: dict[str, Any] = {"calibrated_utc": datetime.now(UTC).isoformat(timespec="seconds"), "n_samples": len(y)}
    if len(scores) > 1:
        info["loo_mape_by_deduction"] = scores
        info["deduction_test"] = test
    if info_constants is not None:
        info["constant_networks"] = {**info_constants, "folded": deduction == "fold-constants"}
    if per_op_test is not None:
        info["per_op_test"] = per_op_test
    return CalibratedDevice(name, source, source_device, best, coef, loo, rows, info, deduction, correction)


def _keep_per_op(lowest: str, errors: Mapping[str, np.ndarray[Any, Any] | None]) -> tuple[str, dict[str, Any]]:
    """The form kept when :data:`PER_OP` is offered but ``lowest`` (another form) has the lowest leave-one-out MAPE.

    ``per-op`` stays unless ``lowest`` beats it by more than :data:`PER_OP_EVIDENCE_SE` standard errors of the
    paired leave-one-out differences: its score rests on hundreds of operation timings, the others' on the samples'
    end-to-end numbers alone, and the lowest of a dozen scores over ten samples is often lowest by chance.

    Returns
    -------
    tuple
        The kept form and the test (``{"rival", "loo_gain", "standard_error", "bar_se", "kept"}``, gains in MAPE
        points; ``bar_se`` is :data:`PER_OP_EVIDENCE_SE`).
    """
    per_op, rival = errors[PER_OP], errors[lowest]
    assert per_op is not None and rival is not None
    diff = per_op - rival
    gain = float(100 * diff.mean())
    se = float(100 * diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else 0.0
    kept = lowest if gain > PER_OP_EVIDENCE_SE * se else PER_OP
    return kept, {"rival": lowest, "loo_gain": gain, "standard_error": se, "bar_se": PER_OP_EVIDENCE_SE, "kept": kept}


