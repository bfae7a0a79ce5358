"""Fitting a device profile from a dataset (what ``edgeplan ops fit`` runs): the library function itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgeplan.costmodels.opwise.profile_fit import ProfileFitOptions, fit_profile
from edgeplan.costmodels.opwise.profiles import load_device_model
from edgeplan.errors import InvalidInputError


def _dataset(tmp_path: Path) -> Path:
    """A dataset of 12 NAS-Bench-201 cells measured here (tiny: 1 run each)."""
    from edgeplan.measure import Store
    from edgeplan.measure.op_campaign import OpCampaignOptions, export_dataset, run_op_campaign
    from edgeplan.measure.scenarios import SCENARIOS

    scenario = SCENARIOS["torch-fp32-1t"]
    models = [f"synthetic:{i}" for i in range(12)]
    out = tmp_path / "ops.jsonl.gz"
    with Store.open(tmp_path / "store.sqlite") as store:
        run_op_campaign(store, scenario, models, options=OpCampaignOptions(runs=1, plain_per_run=1))
        export_dataset(store, scenario, out)
    return out


@pytest.mark.slow
def test_fit_profile_saves_one_model_per_method_with_its_provenance(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    home = tmp_path / "home"
    out = home / "devices" / "mine"
    fitted = fit_profile(data, out, ProfileFitOptions(methods=("lasso",), min_samples=2), home=home,
                         command="edgeplan ops fit")
    (f,) = fitted
    assert f.method == "lasso" and f.path.parent == out and f.models == 12 and f.predictors > 0 and f.added is None
    assert json.loads(json.dumps(f.to_dict()))["path"] == str(f.path) and "added" not in f.to_dict()
    model = load_device_model("mine", "lasso", home)
    assert model.info["source_scenario"] == "torch-fp32-1t" and model.info["command"] == "edgeplan ops fit"
    assert len(model.info["train_models"]) == 12
    with pytest.raises(InvalidInputError, match="none of the training models"):
        fit_profile(data, tmp_path / "never", ProfileFitOptions(train=("synthetic:500",)))
    assert not (tmp_path / "never").exists()
