"""The primitive performance models of the devices of the edgeplan home.

A device of the edgeplan home (``{home}/devices/NAME/``) may hold a primitive performance model in its
``primitives/`` folder: ``edgeplan primitives transfer --name NAME`` writes it, ``edgeplan select --costs predicted
--device NAME`` reads it. The model's ``info["calibration"]`` records where its data was measured (the table, the
threads and the torch device, from the provenance file ``profile primitives --export`` writes beside the table).

* :func:`primitive_model_folder` and :func:`resolve_primitive_model` find a device's model;
* :func:`new_device_folder` checks a name before a device is made;
* :func:`record_calibration` and :func:`save_primitive_device` store a model as a device, replaced whole;
* :func:`device_calibration` reads where a stored device was calibrated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeplan.costmodels.performance_model import PerformanceModel, save_performance_model
from edgeplan.errors import InvalidInputError

__all__ = ["SHIPPED_PRIMITIVES", "SHIPPED_MODEL", "DeviceCalibration", "device_calibration", "measured_on",
           "new_device_folder", "primitive_model_folder", "record_calibration", "resolve_primitive_model",
           "save_primitive_device"]

SHIPPED_PRIMITIVES = Path(__file__).resolve().parents[1] / "data" / "primitives"
"""The folder of the shipped primitive tables and performance model (the reference machine's)."""
SHIPPED_MODEL = "nn2_cpu_1t"
"""The NN2 model fitted on the shipped tables, a folder of :data:`SHIPPED_PRIMITIVES`."""


def primitive_model_folder(home: str | Path | None, name: str) -> Path:
    """The folder of device ``name``'s primitive performance model: ``{home}/devices/NAME/primitives``."""
    from edgeplan.costmodels.opwise.profiles import home_root

    return home_root(home) / name / "primitives"


def resolve_primitive_model(home: str | Path | None, source: str | Path | None) -> Path:
    """The performance model folder named by ``source``: a folder with ``model.json``, a device of the edgeplan
    home with a primitive performance model, or None for the shipped one.

    Raises
    ------
    InvalidInputError
        When ``source`` is neither a folder with a model nor such a device.
    """
    if source is None:
        return SHIPPED_PRIMITIVES / SHIPPED_MODEL
    for folder in (Path(source), primitive_model_folder(home, str(source))):
        if (folder / "model.json").is_file():
            return folder
    raise InvalidInputError(f"{str(source)!r} is neither a performance model folder (with model.json, from `edgeplan "
                            f"primitives fit`) nor a device made by `edgeplan primitives transfer --name`")


def measured_on(data_path: str | Path) -> tuple[int | None, str | None]:
    """The threads and torch device a table was measured at, from the provenance file ``profile primitives
    --export`` writes beside it (``NAME.provenance.json``); ``(None, None)`` without one."""
    path = Path(data_path)
    prov = path.with_name(path.stem + ".provenance.json")
    if not prov.is_file():
        return None, None
    try:
        params = json.loads(prov.read_text()).get("campaign", {}).get("params", {})
    except (OSError, ValueError, AttributeError) as e:
        raise InvalidInputError(f"{prov}: not a provenance file of `edgeplan profile primitives --export` ({e}); "
                                "remove it or export the table again") from e
    threads = params.get("threads")
    return (int(threads) if threads is not None else None), params.get("device")


def new_device_folder(home: str | Path | None, name: str, replace: bool) -> Path:
    """The folder device ``name``'s model will be saved to, checked before anything is computed.

    Raises
    ------
    InvalidInputError
        A name that is not a short plain folder name, or a device that already has a model without ``replace``.
    """
    if not name or "/" in name or name.startswith(".") or len(name.encode()) > 100:
        raise InvalidInputError(f"--name {name!r}: use a short plain name such as my-phone")
    folder = primitive_model_folder(home, name)
    if (folder / "model.json").exists() and not replace:
        raise InvalidInputError(f"device {name!r} already has a primitive performance model ({folder}); choose "
                                "another --name or pass --replace")
    return folder


@dataclass(frozen=True)
class DeviceCalibration:
    """Where a device's primitive performance model was calibrated (its ``info["calibration"]``).

    Attributes
    ----------
    device
        The device name (None for a model written to a folder of its own).
    source
        The performance model folder it was moved from.
    data
        The table of measured layers.
    threads
        The threads the table was measured at (None where no provenance file says).
    torch_device
        The torch device the table was measured on (None where no provenance file says).
    """

    device: str | None
    source: str
    data: str
    threads: int | None = None
    torch_device: str | None = None

    @property
    def processor(self) -> str | None:
        """Where it was measured: its torch device, else ``cpu`` when the threads are known (a CPU table), else
        None."""
        return self.torch_device or ("cpu" if self.threads is not None else None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as stored in ``model.json``: ``device``, ``source``, ``threads``, ``torch_device``, ``data``."""
        return {"device": self.device, "source": self.source, "threads": self.threads,
                "torch_device": self.torch_device, "data": self.data}


def record_calibration(model: PerformanceModel, device: str | None, source: str | Path,
                       data_path: str | Path) -> DeviceCalibration:
    """Record in ``model.info["calibration"]`` that it was moved from ``source`` with the table ``data_path``, and
    where that table was measured (:func:`measured_on`)."""
    threads, torch_device = measured_on(data_path)
    calibration = DeviceCalibration(device, str(source), str(data_path), threads, torch_device)
    model.info["calibration"] = calibration.to_dict()
    return calibration


def device_calibration(folder: str | Path) -> DeviceCalibration | None:
    """Where the model in ``folder`` was calibrated, or None for a model that was not (e.g. one fitted)."""
    path = Path(folder) / "model.json"
    try:
        found = json.loads(path.read_text()).get("info", {}).get("calibration")
    except (OSError, ValueError, AttributeError) as e:
        raise InvalidInputError(f"{path}: not a performance model ({e}); make it again with `edgeplan primitives "
                                "transfer --name` or `edgeplan primitives fit`") from e
    if not isinstance(found, dict):
        return None
    threads = found.get("threads")
    return DeviceCalibration(found.get("device"), str(found.get("source", "")), str(found.get("data", "")),
                             int(threads) if threads is not None else None, found.get("torch_device"))


def save_primitive_device(model: PerformanceModel, folder: Path) -> Path:
    """Write ``model`` to a fresh folder beside ``folder``, then put it in place of ``folder`` at once (a device is
    never left half written, and a failed write leaves the old model)."""
    import shutil
    import tempfile

    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        save_performance_model(model, staging)
        old = folder.with_name(f".{folder.name}-old")
        if folder.exists():
            shutil.rmtree(old, ignore_errors=True)
            folder.rename(old)
        staging.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder
