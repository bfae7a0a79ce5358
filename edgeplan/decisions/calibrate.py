"""Calibrate a device profile from latencies measured on the device (li2023 §4.3, few-shot adaptation).

A source profile's per-op predictions of each measured model are reduced to a few terms
(:func:`~edgeplan.costmodels.opwise.calibrate.source_terms`); the correction form (and the kernels the device runs)
with the lowest leave-one-out error over the measured models is fitted
(:func:`~edgeplan.costmodels.opwise.calibrate.calibrate`) and saved as a device profile under the edgeplan home,
where :func:`edgeplan.decisions.predict.predict` finds it by name.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import EdgeplanError, InvalidInputError

if TYPE_CHECKING:
    from edgeplan.costmodels.opwise.calibrate import CalibratedDevice
    from edgeplan.costmodels.opwise.model import LatencyModel

__all__ = ["Calibration", "MeasureHere", "calibrate", "measure_for_calibration", "measurement_rows", "model_terms",
           "read_measurements"]

#: The source profile a calibration corrects when none is named.
DEFAULT_SOURCE = "torch-fp32-1t"


@dataclass(frozen=True)
class MeasureHere:
    """Models to time on this machine for a calibration (this machine becomes the device): each is profiled in the
    source's scenario beside the reference model ``synthetic:0``, end to end and per op, in a resumable campaign of
    the edgeplan home's Store (``calibrate-{name}``).

    Attributes
    ----------
    models
        Zoo strings (ranges and ``set:NAME`` too) or ONNX paths.
    runs
        Profiled runs per model.
    plain_per_run
        Unprofiled end-to-end runs per profiled run.
    command
        The command line recorded with the measurements (provenance).
    """

    models: tuple[str, ...]
    runs: int = 3
    plain_per_run: int = 3
    command: str = ""


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
    notes
        What a user should know about how it was fitted: a calibrated source replaced by its own source, a dataset
        measured in another scenario than the source's, a per-op correction that could not be offered.
    """

    device: str
    path: Path | None
    source: str
    method: str
    samples: int
    calibrated: CalibratedDevice = field(repr=False)
    notes: tuple[str, ...] = ()

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


def _measurement_rows(path: Path, reader: csv.DictReader[str]) -> list[tuple[str, float]]:
    """The checked ``(model, latency_ms)`` rows of ``reader`` (see :func:`read_measurements`)."""
    cols = [c.strip() for c in (reader.fieldnames or [])]
    missing = [c for c in ("model", "latency_ms") if c not in cols]
    if missing:
        raise InvalidInputError(f"{path}: missing column(s) {', '.join(missing)}; the header must have model and "
                                f"latency_ms (it has {', '.join(cols) or 'nothing'})")
    rows: list[tuple[str, float]] = []
    seen: set[str] = set()
    for line, row in enumerate(reader, start=2):
        beyond = row.pop(None, None)  # DictReader's key for the cells beyond the header's
        if beyond is not None and any(str(c).strip() for c in beyond):
            raise InvalidInputError(f"{path}, line {line}: more cells than the header has columns (a decimal "
                                    f"comma? write decimals with '.', or quote a cell that holds a comma)")
        row = {k.strip(): (v or "").strip() for k, v in row.items()}
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
    return rows


def read_measurements(path: str | Path) -> list[tuple[str, float]]:
    """Read and check a ``model,latency_ms`` CSV (extra columns are ignored; a byte-order mark is skipped).

    Raises
    ------
    InvalidInputError
        For a missing file or column, an empty file, a row with more cells than the header (a decimal comma), a
        latency that is not a positive number, or a repeated model; the message names the line.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"measurements file {path} does not exist")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:  # -sig: a spreadsheet's byte-order mark
            rows = _measurement_rows(path, csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error) as e:
        raise InvalidInputError(f"{path}: cannot read it as a UTF-8 CSV ({e})") from e
    if not rows:
        raise InvalidInputError(f"{path} has no measurements")
    return rows


def measurement_rows(measurements: str | Path | Sequence[tuple[str, float]],
                     ) -> tuple[list[tuple[str, float]], dict[str, dict[str, Any]] | None]:
    """The checked ``(model, latency_ms)`` rows of a ``model,latency_ms`` CSV, a ``profile ops --export`` dataset
    (median end-to-end times), a calibration kit's ``results.txt`` (:mod:`edgeplan.measure.litert_kit`) or pairs,
    and for a dataset its records by model (the operations measured too), else None.

    Raises
    ------
    InvalidInputError
        A missing file or column, a latency that is not a positive number, a repeated model (named by its line).
    """
    if isinstance(measurements, str | Path):
        from edgeplan.measure.litert_kit import is_kit_results, read_kit_results

        if is_kit_results(measurements):  # a calibration kit's results.txt (benchmark_model's output per model)
            return [(model, run.latency_ms) for model, run in read_kit_results(measurements)], None
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


def measure_for_calibration(what: MeasureHere, name: str, scenario_name: str, home: str | Path | None = None,
                 progress: bool = False) -> tuple[list[tuple[str, float]], dict[str, dict[str, Any]]]:
    """Time ``what.models`` on this machine in the scenario ``scenario_name`` beside the reference model
    ``synthetic:0`` (resumable: the campaign ``calibrate-{name}`` of the home's Store).

    Returns
    -------
    tuple
        The ``(model, latency_ms)`` rows in order, at the campaign's typical reference speed, and the models'
        dataset records by model (their operations' times on the same scale).

    Raises
    ------
    InvalidInputError
        ``scenario_name`` is no measurement scenario of this machine, or a model could not be measured here (the
        others stay in the Store for the next run).
    """
    import tempfile
    import warnings

    from edgeplan.measure import Store, default_store_path
    from edgeplan.measure.model_sets import expand_models
    from edgeplan.measure.op_campaign import OpCampaignOptions, ReferenceScaleWarning, export_dataset, run_op_campaign
    from edgeplan.measure.scenarios import SCENARIOS

    scenario = SCENARIOS.get(scenario_name)
    if scenario is None:
        raise InvalidInputError(f"measuring here times the models in the measurement scenario of the source's model, "
                                f"and its scenario {scenario_name!r} is none; calibrate from a profile of one of "
                                f"{', '.join(SCENARIOS)}, or measure the models yourself and give their latencies")
    names = expand_models(what.models)
    tag = f"calibrate-{name}"
    home_arg = None if home is None else str(home)
    with Store.open(default_store_path(home_arg)) as store:
        options = OpCampaignOptions(runs=what.runs, plain_per_run=what.plain_per_run, repeat=tag,
                                    reference="synthetic:0")
        report = run_op_campaign(store, scenario, names, options=options, progress=progress, command=what.command,
                                 home=home_arg)
        if report.failed:
            first = report.failed[0]
            raise InvalidInputError(f"{len(report.failed)} model(s) could not be measured here, e.g. {first.key}: "
                                    f"{first.reason}; drop them (nothing was calibrated; the others are kept in the "
                                    "Store for the next run)")
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            # its own scale: the reference's typical time in this campaign, not a main campaign's
            warnings.simplefilter("ignore", ReferenceScaleWarning)
            out = Path(tmp) / "measured.jsonl.gz"
            export_dataset(store, scenario, out, command=what.command, repeat=tag)
            rows, records = measurement_rows(out)
    measured = dict(rows)
    return [(m, measured[m]) for m in names], records or {}


def _other_scenario(dataset: str | Path, source: str, model: LatencyModel) -> str | None:
    """A note when a ``profile ops --export`` dataset was measured in another scenario than the source's: its
    end-to-end latencies are calibrated as given, but its operations are another runtime's kernels, which the source
    predicts by their category at best."""
    import json

    from edgeplan.measure.op_dataset import open_dataset_file
    from edgeplan.measure.scenarios import SCENARIOS

    with open_dataset_file(Path(dataset)) as f:
        measured = json.loads(f.readline()).get("scenario")
    expected = source if source in SCENARIOS else model.info.get("source_scenario")
    if not (measured and expected and measured != expected):
        return None
    of = source if source == expected else f"{source} ({expected})"
    return (f"{dataset} was measured in {measured}, not in the scenario of the source {of}: its latencies are "
            f"calibrated as given, its operations predicted by category at best; to predict {measured}'s own "
            f"kernels, calibrate from {measured}")


def check_name(name: object) -> str:
    """``name`` if it can name a new device profile (a short plain name, not a shipped scenario's).

    Raises
    ------
    InvalidInputError
        A path, a hidden name, an over-long one, or a shipped profile's.
    """
    from edgeplan.costmodels.opwise.profiles import shipped_devices

    if not isinstance(name, str) or not name or "/" in name or name.startswith(".") or len(name.encode()) > 100:
        raise InvalidInputError(f"name {name!r}: use a short plain name such as my-phone")
    if name in shipped_devices():  # a calibrated device is looked up first: it would hide the shipped profile
        raise InvalidInputError(f"name {name!r} is a shipped profile's, which `predict --device {name}` uses; "
                                f"choose another such as {name}-calibrated")
    return name


def calibrate(measurements: str | Path | Sequence[tuple[str, float]] | MeasureHere, name: str, *,
              source: str = DEFAULT_SOURCE, method: str | None = None, home: str | Path | None = None,
              replace: bool = False, save: bool = True, progress: bool = False) -> Calibration:
    """Create device profile ``name`` from latencies measured on the device: a learnt correction of ``source``'s
    predictions.

    Parameters
    ----------
    measurements
        A CSV with columns ``model,latency_ms`` (zoo strings measured on the device), a ``profile ops --export`` dataset
        (``.jsonl.gz`` or ``.xz``: its operations' times add the per-op correction to the candidates),
        ``(model, latency_ms)`` pairs, or :class:`MeasureHere` models to time on this machine (their operations too;
        the latencies are saved beside the profile as ``measurements.csv``).
    name
        The new profile's name (not a shipped scenario's).
    source
        The device profile whose per-op predictions are corrected (a calibrated device: its own source).
    method
        The source's predictor method; None: Lasso where the source has it, else its default.
    home
        The edgeplan home, where the profile is saved.
    replace
        Overwrite an existing profile of that name.
    save
        Save the profile (False: only fit it).
    progress
        Show progress bars while measuring.

    Returns
    -------
    Calibration

    Raises
    ------
    InvalidInputError
        A bad name, an existing profile without ``replace``, a bad row (named by its line), or a model the
        source cannot predict (named).
    """
    from edgeplan.costmodels.opwise.calibrate import DEDUCTIONS, CalibrationSamples
    from edgeplan.costmodels.opwise.calibrate import calibrate as fit
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.op_correction import measured_ops
    from edgeplan.costmodels.opwise.profiles import home_root, load_device_model, source_method

    check_name(name)
    method = source_method(source, method, home)
    target = home_root(home) / name / f"{method}.json"
    if save and target.exists() and not replace:
        raise InvalidInputError(f"device {name!r} already has {method} predictors ({target}); choose another name "
                                "or replace it (--replace, replace=True)")
    model = load_device_model(source, method, home)
    notes: list[str] = []
    if not isinstance(model, LatencyModel):  # a calibrated device: correct its source, not the correction
        notes.append(f"{source} is a calibrated device; calibrating against its source {model.source_device}")
        source, model = model.source_device, model.source
    if isinstance(measurements, MeasureHere):
        rows, records_by = measure_for_calibration(measurements, name, model.source_scenario, home, progress)
        records: dict[str, dict[str, Any]] | None = records_by
    else:
        rows, records = measurement_rows(measurements)
        if records is not None and isinstance(measurements, str | Path):
            notes.extend(n for n in [_other_scenario(measurements, source, model)] if n)
    terms, _, left = model_terms([m for m, _ in rows], model, DEDUCTIONS, home=home)
    if left:  # the first row refused, by its line
        line, spec = next((i, m) for i, (m, _) in enumerate(rows, start=2) if m in left)
        where = (f"{measurements}, line {line}" if isinstance(measurements, str | Path)
                 else "measured here" if isinstance(measurements, MeasureHere) else f"measurement {line - 2}")
        raise InvalidInputError(f"{where}: model {spec}: {left[spec]}")
    per_op = None
    if records is not None:  # the operations were timed too: the per-op correction is a candidate
        try:
            per_op = [measured_ops(records[m], model) for m, _ in rows]
        except EdgeplanError as e:
            notes.append(f"the per-op correction is not offered: {e}")
    samples = CalibrationSamples(terms["as-source"], [v for _, v in rows], models=[m for m, _ in rows],
                                 alternatives={d: t for d, t in terms.items() if d != "as-source"}, measured_ops=per_op)
    device = fit(name, samples, model, source)
    path = device.save(home_root(home)) if save else None
    if path is not None and isinstance(measurements, MeasureHere):  # what was measured, as a CSV reads it back
        import csv

        with (path.parent / "measurements.csv").open("w", newline="") as f:
            csv.writer(f).writerows([("model", "latency_ms"), *rows])
    return Calibration(name, path, source, method, len(rows), device, tuple(notes))
