"""Devices of the edgeplan home with a primitive performance model, at the library level: made by
:func:`edgeplan.decisions.transfer.transfer_primitives`, read by :func:`edgeplan.select` with ``device=NAME``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from repo_data import data_file

import edgeplan
from edgeplan.costmodels import PrimitiveDataset, fit_performance_model, load_primitive_csv, save_performance_model
from edgeplan.costmodels.primitive_devices import device_calibration, primitive_model_folder, resolve_primitive_model
from edgeplan.decisions.select import SelectOptions
from edgeplan.decisions.transfer import CalibratedTransfer, TransferOptions, TransferTarget, transfer_primitives
from edgeplan.errors import InvalidInputError

#: What ``edgeplan primitives transfer --name NAME --json`` prints.
CALIBRATION_KEYS = {"device", "complete", "path", "source", "method", "layers", "folds", "measured_primitives",
                    "cv_mdrae", "cv_transform_mdrae", "threads", "torch_device"}


def write_table(path: Path, data: PrimitiveDataset) -> Path:
    """``data`` in the mulder2021 CSV format."""
    header = ["c", "k", "im", "f", "s", *data.transforms, *data.primitives]
    lines = [",".join(header)]
    for x, t, p in zip(data.features, data.transform_ns, data.primitive_ns, strict=True):
        lines.append(",".join([f"{int(v)}" for v in x] + ["" if np.isnan(v) else f"{v:.9g}" for v in (*t, *p)]))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def table() -> PrimitiveDataset:
    return load_primitive_csv(data_file("primitives", "networks_cpu_2t.csv"))


@pytest.fixture(scope="module")
def source(table: PrimitiveDataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A linear model of edgeplan's own primitives, saved."""
    return save_performance_model(fit_performance_model(table, "lin"), tmp_path_factory.mktemp("src") / "lin")


@pytest.fixture()
def box(tmp_path: Path, table: PrimitiveDataset, source: Path) -> tuple[Path, CalibratedTransfer]:
    """The edgeplan home with device ``box``, moved from ``source`` with 12 layers."""
    home = tmp_path / "home"
    csv = write_table(tmp_path / "mine.csv", table.subset(np.arange(12)))
    made = transfer_primitives(csv, TransferTarget(name="box"), source=source, home=home)
    assert isinstance(made, CalibratedTransfer)
    return home, made


def _recalibrate(home: Path, **calibration: object) -> None:
    """Rewrite where device ``box`` says it was calibrated."""
    path = primitive_model_folder(home, "box") / "model.json"
    meta = json.loads(path.read_text())
    meta["info"]["calibration"].update(calibration)
    path.write_text(json.dumps(meta))


def test_transfer_saves_a_device_and_records_its_calibration(box: tuple[Path, CalibratedTransfer],
                                                             source: Path) -> None:
    home, made = box
    folder = primitive_model_folder(home, "box")
    assert made.path == folder and made.device == "box" and made.layers == 12
    data = made.to_dict()
    assert set(data) == CALIBRATION_KEYS and data["complete"] and data["path"] == str(folder)
    json.dumps(data, allow_nan=False)
    calibration = device_calibration(folder)
    assert calibration is not None and calibration.device == "box" and calibration.source == str(source)
    assert calibration.threads is None and calibration.processor is None  # no provenance file beside the table
    assert resolve_primitive_model(home, "box") == folder


def test_transfer_notes_the_primitives_a_table_lacks(tmp_path: Path, table: PrimitiveDataset, source: Path) -> None:
    few = table.subset(np.arange(12))
    few = PrimitiveDataset(few.features, few.primitives[:3], few.primitive_ns[:, :3], few.transforms,
                           few.transform_ns, "few.csv")
    csv = write_table(tmp_path / "few.csv", few)
    (tmp_path / "few.provenance.json").write_text(json.dumps({"campaign": {"params": {"threads": 2}}}))
    made = transfer_primitives(csv, TransferTarget(out=tmp_path / "moved"), source=source)
    assert isinstance(made, CalibratedTransfer) and made.device is None and 0 < made.measured_primitives <= 3
    cover = f"the measurements cover {made.measured_primitives} of the source's"
    assert len(made.notes) == 1 and cover in made.notes[0]
    assert made.threads == 2 and device_calibration(made.path).processor == "cpu"  # type: ignore[union-attr]


def test_transfer_refuses_settings_before_reading_anything(tmp_path: Path, box: tuple[Path, CalibratedTransfer],
                                                           source: Path) -> None:
    home, _ = box
    nowhere = tmp_path / "nowhere.csv"
    for target, options, message in [
        (TransferTarget(), None, "give one of --out DIR"),
        (TransferTarget(out=tmp_path / "o", name="x"), None, "give one of --out DIR"),
        (TransferTarget(out=tmp_path / "o", replace=True), None, "it goes with --name"),
        (TransferTarget(name="a/b"), None, "use a short plain name"),
        (TransferTarget(name="box"), None, "already has a primitive performance model"),
        (TransferTarget(out=tmp_path / "o"), TransferOptions(fraction=0.0), "outside (0, 1]"),
    ]:
        with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            transfer_primitives(nowhere, target, options, source=source, home=home)
    with pytest.raises(InvalidInputError, match="is the device being replaced"):
        transfer_primitives(nowhere, TransferTarget(name="box", replace=True), source="box", home=home)


def test_select_prices_with_a_device(box: tuple[Path, CalibratedTransfer]) -> None:
    home, made = box
    s = edgeplan.select("torchvision:squeezenet1_0", costs="predicted", device="box", home=home)
    data = s.to_dict()
    assert s.torch_device == "cpu" and data["torch_device"] == "cpu" and data["predicted_ms"] > 0
    assert str(made.path) in data["costs_from"]["label"] and data["notes"] == []
    assert all(layer["primitive"] for layer in data["layers"] if layer["kind"] == "conv")


def test_select_refuses_a_device_it_cannot_use(box: tuple[Path, CalibratedTransfer], source: Path) -> None:
    home, _ = box
    spec = "torchvision:squeezenet1_0"
    with pytest.raises(InvalidInputError, match="has no primitive performance model"):
        edgeplan.select(spec, costs="predicted", device="nobody", home=home)
    with pytest.raises(InvalidInputError, match="with --costs predicted and without --model"):
        edgeplan.select(spec, device="box", home=home)
    with pytest.raises(InvalidInputError, match="with --costs predicted and without --model"):
        edgeplan.select(spec, costs="predicted", model_dir=source, device="box", home=home)


def test_select_follows_where_the_device_was_calibrated(box: tuple[Path, CalibratedTransfer]) -> None:
    """A device calibrated on a GPU selects for that GPU, refuses the CPU, and warns of another thread count."""
    home, _ = box
    spec = "torchvision:squeezenet1_0"
    _recalibrate(home, threads=2, torch_device="cuda")
    with pytest.raises(InvalidInputError, match="was calibrated on cuda, and --torch-device cpu is another kind"):
        edgeplan.select(spec, costs="predicted", device="box", torch_device="cpu", home=home)
    s = edgeplan.select(spec, costs="predicted", device="box", home=home)
    assert s.torch_device == "cuda" and s.notes == () and not any("thread" in w for w in s.warnings)
    if __import__("torch").cuda.is_available():
        return  # the layout-transparent layers would be measured on the GPU here
    s = edgeplan.select(spec, costs="predicted", device="box", options=SelectOptions(flow_threads=1), home=home)
    assert "was calibrated at 2 thread(s); --threads 1" in s.warnings[0]
    assert len(s.notes) == 1 and "cuda is not available here" in s.notes[0]
    assert s.to_dict()["warnings"][0] == s.warnings[0]
