"""Device profiles: the shipped latency models and the ones ``edgeplan calibrate`` creates, found by name.

Shipped profiles are folders of models under ``edgeplan/data/latency/models/{device}/{method}.json.xz``
(xz-compressed JSON); calibrated ones live under the edgeplan home (``devices/{name}/{method}.json``).
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.model_files import MODEL_FORMAT, MODEL_SUFFIXES, model_file, read_json
from edgeplan.errors import InvalidInputError

if TYPE_CHECKING:
    from edgeplan.costmodels.opwise.calibrate import CalibratedDevice
    from edgeplan.measure.op_dataset import OpDataset

__all__ = [
    "DEFAULT_DEVICE",
    "DEFAULT_METHOD",
    "available_devices",
    "deduction_of",
    "extendable_model",
    "home_root",
    "kernel_profile_of",
    "load_device_model",
    "resolve_method",
    "shipped_devices",
    "source_method",
]


DEFAULT_DEVICE = "torch-fp32-1t"


DEFAULT_METHOD = "gbdt"


def _shipped_root() -> Path:
    return Path(str(resources.files("edgeplan.data").joinpath("latency/models")))


def shipped_devices() -> set[str]:
    """Names a latency calibration may not take: every measurement scenario's, shipped profile or not (a calibrated
    device is looked up before a shipped one and would hide it)."""
    from edgeplan.measure.scenarios import SCENARIOS

    root = _shipped_root()
    return set(SCENARIOS) | ({p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set())


def home_root(home: str | Path | None) -> Path:
    """Where calibrated devices live: ``{edgeplan home}/devices``."""
    from edgeplan.measure.paths import edgeplan_home

    return edgeplan_home(home) / "devices"


def available_devices(home: str | Path | None = None) -> dict[str, list[str]]:
    """Device profiles with a model, and the methods each has: shipped scenarios and calibrated devices."""
    out: dict[str, list[str]] = {}
    for root in (_shipped_root(), home_root(home)):
        if root.is_dir():
            for d in sorted(p for p in root.iterdir() if p.is_dir()):
                methods = {f.name.removesuffix(suffix) for suffix in MODEL_SUFFIXES for f in d.glob(f"*{suffix}")}
                if methods:
                    out[d.name] = sorted(methods | set(out.get(d.name, ())))
    return out


def load_device_model(device: str, method: str, home: str | Path | None = None) -> LatencyModel | CalibratedDevice:
    """The latency model of ``device`` (a calibrated device first, then a shipped scenario) for ``method``.

    Raises
    ------
    InvalidInputError
        When no such device or method exists; the message lists what does.
    """
    if not isinstance(device, str) or not device or "/" in device or "\\" in device or device.startswith("."):
        known = ", ".join(sorted(available_devices(home))) or "none"
        raise InvalidInputError(f"device {device!r}: give a device name (one of {known}), not a path")
    for root in (home_root(home), _shipped_root()):
        path = model_file(root / device, method)
        if path is None:
            continue
        data = read_json(path, what="a latency model")
        fmt = data.get("format") if isinstance(data, dict) else None
        if fmt == MODEL_FORMAT:
            return LatencyModel.from_dict(data)
        from edgeplan.costmodels.opwise.calibrate import CALIBRATED_FORMAT, CalibratedDevice

        if fmt == CALIBRATED_FORMAT:
            return CalibratedDevice.from_dict(data)
        raise InvalidInputError(f"{path} is neither a latency model nor a calibrated device")
    have = available_devices(home)
    if device in have:
        raise InvalidInputError(f"device {device!r} has no {method!r} predictors; it has {', '.join(have[device])}")
    listed = ", ".join(sorted(have)) or "none"
    raise InvalidInputError(f"unknown device {device!r}; devices with predictors: {listed} (create one with "
                            "`edgeplan calibrate`)")


def kernel_profile_of(device_model: LatencyModel | CalibratedDevice) -> str:
    """The kernel rules whose kernels ``device_model`` predicts (a calibrated device: its source's)."""
    if not isinstance(device_model, LatencyModel):
        device_model = device_model.source
    profile = device_model.info.get("kernel_profile")
    if profile:
        return str(profile)
    from edgeplan.measure.scenarios import SCENARIOS

    if device_model.source_scenario in SCENARIOS:
        return SCENARIOS[device_model.source_scenario].kernel_profile
    raise InvalidInputError(f"latency model of {device_model.scenario!r} does not say which runtime's kernels it "
                            "predicts; refit it")


def deduction_of(device_model: LatencyModel | CalibratedDevice) -> str:
    """The kernel deduction ``device_model`` predicts under: a calibrated device's, else ``as-source``."""
    return "as-source" if isinstance(device_model, LatencyModel) else device_model.deduction


def resolve_method(device: str, method: str | None, home: str | Path | None = None) -> str:
    """``method``, or when None the device's default: ``gbdt`` where it has it, else its first of gbdt, rf, lasso
    and mlp (a device calibrated from a Lasso source has only ``lasso``).

    Parameters
    ----------
    device
        A device profile name (:func:`available_devices`); an unknown one gets ``gbdt``, and
        :func:`load_device_model` then names the devices there are.
    method
        The method asked for, or None.
    home
        The edgeplan home (calibrated devices).

    Returns
    -------
    str
        The method to load.
    """
    if method is not None:
        return method
    have = available_devices(home).get(device, [])
    return next((m for m in (DEFAULT_METHOD, "rf", "lasso", "mlp") if m in have), DEFAULT_METHOD)


def source_method(device: str, method: str | None, home: str | Path | None = None) -> str:
    """The predictor method a few-shot calibration corrects: ``method``, or when None Lasso where ``device`` has it
    (the calibration default), else the device's default (:func:`resolve_method`: ``gbdt`` for a GBDT-only
    profile)."""
    if method is not None:
        return method
    return "lasso" if "lasso" in available_devices(home).get(device, []) else resolve_method(device, None, home)


def extendable_model(device: str, method: str, data: OpDataset, home: str | Path | None = None) -> LatencyModel:
    """The ``method`` model of ``device`` that ``ops fit --extend DEVICE`` adds predictors to, checked against the
    dataset ``data`` whose op kinds it gains.

    The model must be a fitted one (a calibrated device only corrects another's predictions), of the dataset's
    scenario, and on its scale: both measured without a reference model, or both times as ratios to the same
    reference model at the same latency (a dataset exported with ``--scale-from`` a file shares that file's
    reference latency).

    Raises
    ------
    InvalidInputError
        An unknown device or method, a calibrated device, another scenario or another scale; the message says how
        to measure data that fits.
    """
    model = load_device_model(device, method, home)
    if not isinstance(model, LatencyModel):
        raise InvalidInputError(f"--extend {device}: it is a calibrated device (a correction of another device's "
                                "predictions), not a fitted model; extend the device it was calibrated from")
    if model.scenario != data.scenario:
        raise InvalidInputError(f"--extend {device}: its model is of scenario {model.scenario!r}, --data of "
                                f"{data.scenario!r}; extend it with data of its own scenario")
    ours, theirs = model.info.get("reference"), data.provenance.get("reference")
    # a campaign matched onto a file's scale (its reference timed otherwise) shares that file's scale
    shared = float(theirs.get("scale_from", {}).get("file_reference_ms", theirs["ms"])) if theirs else math.nan
    same = (ours is None and theirs is None) or (
        ours is not None and theirs is not None and ours.get("model") == theirs.get("model")
        and abs(float(ours["ms"]) - shared) <= 1e-9 * float(ours["ms"]))
    if not same:
        def scale(ref: dict[str, Any] | None) -> str:
            return f"{ref['model']} at {float(ref['ms']):.4g} ms" if ref else "no reference model"

        if ours is None:
            todo = "extend it with data measured without a reference, or refit it on paired data"
        elif theirs is None or theirs.get("model") != ours.get("model"):
            todo = (f"measure the models beside {ours['model']} (`profile ops --reference {ours['model']}`), then "
                    "export them with `--scale-from` the dataset the model was fitted on")
        else:
            todo = "export the data with `profile ops --export FILE --scale-from` the dataset the model was fitted on"
        raise InvalidInputError(f"--extend {device}: its model's times are ratios to {scale(ours)}, --data's to "
                                f"{scale(theirs)}; {todo}")
    return model
