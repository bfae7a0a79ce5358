"""Whether a dataset can extend a device's fitted models (``ops fit --extend DEVICE``), at the library level:
:func:`edgeplan.costmodels.opwise.profiles.extendable_model`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import edgeplan
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.profiles import extendable_model, load_device_model
from edgeplan.errors import InvalidInputError
from edgeplan.measure.op_dataset import OpDataset

DEVICE = "torch-fp32-1t"


def dataset(scenario: str = DEVICE, reference: dict[str, Any] | None = None) -> OpDataset:
    """An empty dataset of ``scenario``, its times ratios to ``reference`` (None: measured as such)."""
    provenance: dict[str, Any] = {"scenario": scenario}
    if reference is not None:
        provenance["reference"] = reference
    return OpDataset(provenance, [])


@pytest.fixture(scope="module")
def shipped_reference() -> dict[str, Any]:
    reference = load_device_model(DEVICE, "lasso").info["reference"]
    assert reference["model"] == "synthetic:0"
    return dict(reference)


def test_data_on_the_models_scale_extends_it(shipped_reference: dict[str, Any]) -> None:
    model = extendable_model(DEVICE, "lasso", dataset(reference=shipped_reference))
    assert isinstance(model, LatencyModel) and model.scenario == DEVICE
    # a campaign matched onto the file's scale: its own reference timed otherwise, the file's latency recorded
    matched = {**shipped_reference, "ms": 2 * shipped_reference["ms"],
               "scale_from": {"file_reference_ms": shipped_reference["ms"]}}
    assert extendable_model(DEVICE, "lasso", dataset(reference=matched)) == model


@pytest.mark.parametrize(("data", "message"), [
    (dataset("torch-fp32-2t"), "its model is of scenario 'torch-fp32-1t', --data of 'torch-fp32-2t'"),
    (dataset(), "--data's to no reference model; measure the models beside synthetic:0"),
    (dataset(reference={"model": "synthetic:1", "ms": 3.0}), "measure the models beside synthetic:0"),
    (dataset(reference={"model": "synthetic:0", "ms": 3.0}), "export the data with `profile ops --export FILE "
                                                              "--scale-from`"),
])
def test_data_off_the_models_scale_is_refused(data: OpDataset, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace("`", ".")):
        extendable_model(DEVICE, "lasso", data)


def test_a_calibrated_device_or_an_unknown_one_is_refused(tmp_path: Path,
                                                          shipped_reference: dict[str, Any]) -> None:
    rows = [(p.model, 2.0 * p.prediction.latency_ms)
            for p in edgeplan.predict(["synthetic:1", "synthetic:2", "synthetic:3"], method="lasso")]
    edgeplan.calibrate(rows, "twice", home=tmp_path)
    with pytest.raises(InvalidInputError, match="--extend twice: it is a calibrated device"):
        extendable_model("twice", "lasso", dataset(reference=shipped_reference), tmp_path)
    with pytest.raises(InvalidInputError, match="unknown device 'nowhere'"):
        extendable_model("nowhere", "lasso", dataset(), tmp_path)
