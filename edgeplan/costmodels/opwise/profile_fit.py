"""Fit a device profile's op-wise latency models on a ``profile ops --export`` dataset, or extend a profile's models
with predictors for the operation kinds they lack (what ``edgeplan ops fit`` does).

A profile is a folder of ``{method}.json`` models; one in the edgeplan home's ``devices/`` is the device of that name
for :func:`edgeplan.predict`. Each model records where its data came from (the dataset, the scenario and its kernel
profile, the measuring device, the reference model its times are ratios to, the command), which prediction and
``predict --measure`` read back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError

__all__ = ["FittedProfile", "ProfileFitOptions", "fit_profile"]


@dataclass(frozen=True)
class ProfileFitOptions:
    """What :func:`fit_profile` fits.

    Attributes
    ----------
    methods
        Predictor methods, one model each (``gbdt``, ``lasso``, ``rf``, ``mlp``).
    train
        Train only on these models (zoo strings, ranges, sets); empty: every model of the dataset.
    min_samples
        Fewest training ops an op kind needs for a predictor of its own (others are priced by their category's).
    extend
        Instead of fitting new models, add to this device profile's models predictors for the op kinds they lack.
    """

    methods: tuple[str, ...] = ("gbdt",)
    train: tuple[str, ...] = ()
    min_samples: int = 8
    extend: str | None = None


@dataclass(frozen=True)
class FittedProfile:
    """One fitted (or extended) model of a profile, as saved.

    Attributes
    ----------
    method
        Its predictor method.
    path
        The saved file.
    models
        Training models (dataset records).
    predictors
        Its predictors (operation keys and category fallbacks).
    overhead_ms, overhead_per_op_ms, overhead_share, overhead_per_mparam_ms
        The end-to-end overhead: a constant, a cost per op, a share of the ops' sum and a cost per million
        parameters.
    added
        With ``extend``: the operation keys that gained a predictor; else None.
    """

    method: str
    path: Path
    models: int
    predictors: int
    overhead_ms: float
    overhead_per_op_ms: float
    overhead_share: float
    overhead_per_mparam_ms: float = 0.0
    added: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan ops fit --json`` prints each entry (``added`` only for an extension)."""
        out: dict[str, Any] = {"method": self.method, "path": str(self.path), "models": self.models,
                               "predictors": self.predictors, "overhead_ms": self.overhead_ms,
                               "overhead_per_op_ms": self.overhead_per_op_ms, "overhead_share": self.overhead_share,
                               "overhead_per_mparam_ms": self.overhead_per_mparam_ms}
        if self.added is not None:
            out["added"] = list(self.added)
        return out


def fit_profile(data_path: str | Path, out: str | Path, options: ProfileFitOptions | None = None, *,
                home: str | Path | None = None, command: str = "", progress: bool = False) -> list[FittedProfile]:
    """Fit one model per method on a dataset and save them in ``out`` (or extend ``options.extend``'s models).

    Every predictor is keyed by the implementation the runtime selects for the op's shapes at the scenario's threads,
    takes the op's place in its network, and, fitted on 900 networks or more, the network's largest output as
    features (:class:`~edgeplan.costmodels.opwise.estimator.OpLatencyEstimator` with ``network="auto"``).

    Parameters
    ----------
    data_path
        A ``profile ops --export`` dataset.
    out
        The folder the models are saved in (created; left absent when the fit is refused and it did not exist).
    options
        Methods, training models, fewest samples per predictor, the profile to extend.
    home
        The edgeplan home (the profile to extend may be one of its devices).
    command
        The command line recorded with the models (provenance).
    progress
        Show a progress bar over the fitted predictors.

    Returns
    -------
    list[FittedProfile]
        One per method, in order.

    Raises
    ------
    InvalidInputError
        No training model in the dataset, a profile that cannot be extended with these data (another scenario or
        scale), too few operations.
    """
    from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.profiles import extendable_model
    from edgeplan.measure.model_sets import expand_models
    from edgeplan.measure.op_dataset import load_dataset
    from edgeplan.measure.scenarios import get_scenario

    options = options or ProfileFitOptions()
    data_path, out = Path(data_path), Path(out)
    data = load_dataset(data_path)
    records = data.records
    if options.train:
        keep = set(expand_models(options.train))
        records = [r for r in records if r["model"] in keep]
        if not records:
            raise InvalidInputError(f"none of the training models (--train) is in {data_path}")
    bases = ({m: extendable_model(options.extend, m, data, home) for m in options.methods}
             if options.extend is not None else {})
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)  # a folder that cannot be made is named now, not after the fitting
    scenario = get_scenario(data.scenario)
    reference = data.provenance.get("reference")  # the times are ratios to this model at the scenario's speed
    info: dict[str, Any] = {"kernel_profile": scenario.kernel_profile, "dataset": data_path.name,
                            "source_scenario": scenario.name, "device": data.provenance.get("device", {}),
                            "train_models": [r["model"] for r in records], **({"reference": reference} if reference
                                                                              else {}), "command": command}
    extension = {"dataset": data_path.name, "device": info["device"], "extended": options.extend,
                 "reference": reference, "command": command}
    models: list[LatencyModel] = []
    try:
        for m in options.methods:
            if options.extend is not None:
                models.append(bases[m].extended(records, min_samples=options.min_samples, info=extension))
            else:
                est = OpLatencyEstimator(method=m, scenario=scenario.name, min_samples=options.min_samples,
                                         threads=scenario.threads, network="auto")
                models.append(est.fit(records, info=info, progress=progress).model_)
    except InvalidInputError:
        if created and not any(out.iterdir()):  # refused: no empty device folder left behind
            out.rmdir()
        raise
    return [_saved(m, model, out, len(records), options.extend is not None)
            for m, model in zip(options.methods, models, strict=True)]


def _saved(method: str, model: Any, out: Path, n: int, extended: bool) -> FittedProfile:
    """Save ``model`` in ``out`` and describe it."""
    added: Sequence[str] | None = sorted(model.info["extensions"][-1]["added_ops_per_key"]) if extended else None
    return FittedProfile(method, model.save(out), n, len(model.predictors), model.overhead_ms,
                         model.overhead_per_op_ms, model.overhead_share, model.overhead_per_mparam_ms,
                         None if added is None else tuple(added))
