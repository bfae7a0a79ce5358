"""A platform's primitive performance model: one estimator for the primitives and one for the layout transformations.

This is what ``edgeplan primitives fit`` trains and saves and what primitive selection asks: for conv layers
``(c, k, im, f, s)``, the time of every primitive (NaN where it does not apply) and of every data-layout
transformation of the layer's input ``(c, im)``, each in one batched pass.

Saved as a folder, without pickle, loadable across library versions:

- ``model.json``: format version, kind, provenance (data file, split seed, sizes, fit times, library versions);
- ``primitives.json`` / ``primitives.npz``, ``transforms.json`` / ``transforms.npz`` and
  ``transforms_paper.json`` / ``transforms_paper.npz``: each estimator's settings, scalers, column names and
  applicability (JSON) and its weights (plain ``.npz`` arrays, read with ``allow_pickle=False``). A folder without
  the ``transforms_paper`` files still loads (without the paper-protocol transformation model).

**Two protocols for the layout transformations.** A transformation's time depends on ``(c, im)`` only, and every
layer row of the table carries the times of its input tensor, so most ``(c, im)`` occur in several rows. Two
transformation models are fitted:

- ``transforms`` (the one :meth:`PerformanceModel.predict_transforms` uses; the **held-out-tensor** protocol):
  fitted on the distinct ``(c, im)`` split 80/10/10 by the same seed, so its test tensors were never seen in
  training. This is the stricter figure: how well it predicts a tensor shape it has not profiled.
- ``transforms_paper`` (**the paper's protocol**, mulder2020 §3.3 as we read it): fitted on the distinct ``(c, im)``
  of the *training layer rows* of the primitives' 80/10/10 row split (validation: those of the validation rows)
  and scored over the *test layer rows*. On the mulder2021 tables every test row's tensor also occurs in a
  training row (0 of 467 test rows on seed 0), so this figure measures how closely the model reproduces tensors it
  was trained on, not how it generalises. It is reported beside the strict one, never instead of it.
"""

from __future__ import annotations

import json
import platform
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.blend import BlendedModel
from edgeplan.costmodels.primitive_models import ESTIMATORS, PrimitiveEstimator, ProgressCallback, make_estimator
from edgeplan.costmodels.transform_models import TRANSFORM_ESTIMATORS, make_transform_estimator
from edgeplan.errors import InvalidInputError
from edgeplan.measure.primitive_data import LAYER_FEATURES, TRANSFORM_FEATURES, PrimitiveDataset, Split, split_indices

__all__ = [
    "FORMAT_VERSION",
    "RECIPES",
    "RECIPE_TRANSFORM_MODELS",
    "TRANSFORM_PROTOCOLS",
    "PerformanceModel",
    "fit_performance_model",
    "load_performance_model",
    "recipe_params",
    "recipe_transform_model",
    "save_performance_model",
]

FORMAT_VERSION = 1
FloatArray = npt.NDArray[np.float64]

RECIPES: dict[str, dict[str, Any]] = {
    "paper": {},
    "edgeplan": {"log_inputs": True, "pow2_features": True},
    "edgeplan-nn": {"log_inputs": True, "pow2_features": True, "lr_schedule": "plateau"},
    "edgeplan-nn2": {"log_inputs": True, "pow2_features": True, "lr_schedule": "plateau", "n_members": 4,
                     "max_epochs": 1500, "batch_size": 512, "target_scale": "shared", "ema_decay": 0.99},
}
"""Training recipes on top of each estimator's defaults (which are mulder2020 Table 3).

``paper``: Table 3 as published (inputs standardized, constant learning rate). ``edgeplan`` (the default; not
the paper's recipe): the inputs are log-transformed before standardizing (c, k, im span three orders of magnitude
and times follow power laws in them) and the power-of-two factors of ``c, k, im`` are added as inputs (cache-set
aliasing; see :func:`~edgeplan.costmodels.primitive_models.pow2_valuation`); NN1 and NN2 also halve the learning
rate after 60 epochs without a better validation loss (``edgeplan-nn`` is what ``edgeplan`` means for them; NN1's
nets of one stacked group share those halvings). NN2 (``edgeplan-nn2``) also: standardizes the log-times by one
deviation pooled over all primitives, so its loss is the squared error of log-times and every primitive's relative
error weighs the same (``target_scale="shared"``); keeps an exponential moving average of its weights, decay 0.99
per step, which is what it early-stops on and returns (``ema_decay``); and is an ensemble of four networks from four
seeds, each trained for at most 1500 epochs in batches of 512, two side by side on two threads (``n_members``,
``max_epochs``, ``batch_size``; see :class:`~edgeplan.costmodels.primitive_models.NN2Model`). Each choice was made
on the validation part of the mulder2021 AMD table (seed-0 split, median MdRAE over primitives): a single
network's error moves by several tenths of a point with its seed alone, so averaging networks helps most. The
recipes also differ in the layout-transformation model: see :data:`RECIPE_TRANSFORM_MODELS`.
"""

RECIPE_TRANSFORM_MODELS: dict[str, str | None] = {"paper": None, "edgeplan": "krr"}
"""The layout-transformation model of each recipe: None is the primitives' family (the paper: NN2 for NN2);
``krr`` is :class:`~edgeplan.costmodels.transform_models.KernelTransformModel`, whatever the primitives' family."""

TRANSFORM_PROTOCOLS: dict[str, str] = {
    "held_out_tensors": "transforms fitted on 80% of the distinct (c, im) tensors, scored on held-out tensors "
                        "never seen in training (strict)",
    "paper": "the paper's protocol: transforms fitted on the tensors of the training layer rows of the 80/10/10 "
             "row split, scored over the test layer rows (their tensors also occur in training rows)",
}
"""What each transformation figure measures (also written into ``model.info`` and the CLI's JSON)."""


def recipe_params(recipe: str, kind: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The estimator settings of ``recipe`` for a model ``kind`` (see :data:`RECIPES`), then ``overrides``.

    An override of None is no override (a CLI option left out keeps the recipe's value, not the estimator's
    default).
    """
    if recipe not in ("paper", "edgeplan"):
        raise InvalidInputError(f"unknown recipe {recipe!r}; use paper or edgeplan")
    if recipe == "edgeplan" and kind in ("nn1", "nn2"):
        base = dict(RECIPES[f"edgeplan-{'nn2' if kind == 'nn2' else 'nn'}"])
    else:
        base = dict(RECIPES[recipe])
    return {**base, **{k: v for k, v in (overrides or {}).items() if v is not None}}


def recipe_transform_model(recipe: str, kind: str) -> str:
    """The layout-transformation model family of ``recipe`` for primitives of family ``kind``."""
    if recipe not in RECIPE_TRANSFORM_MODELS:
        raise InvalidInputError(f"unknown recipe {recipe!r}; use paper or edgeplan")
    return RECIPE_TRANSFORM_MODELS[recipe] or kind


@dataclass
class PerformanceModel:
    """The primitive and the layout-transformation estimators of one platform, fitted together.

    Attributes
    ----------
    kind
        ``lin``, ``nn1`` or ``nn2``: the primitives' family.
    primitives
        Fitted on ``c, k, im, f, s``; outputs the primitive columns.
    transforms
        Fitted on ``c, im`` under the held-out-tensor protocol (see the module docstring); outputs the ``X-to-Y``
        columns (None when the data had none). Its family is :attr:`transform_kind`.
    info
        Provenance: data file, split seed, row counts, fit seconds, transformation protocols.
    transforms_paper
        The same family fitted under the paper's protocol (tensors of the training layer rows), used only to
        score that protocol; None when the data had no transformations or the folder predates it.
    """

    kind: str
    primitives: PrimitiveEstimator
    transforms: PrimitiveEstimator | None
    info: dict[str, Any] = field(default_factory=dict)
    transforms_paper: PrimitiveEstimator | None = None

    @property
    def transform_kind(self) -> str | None:
        """The family of the transformation model (``krr``, ``lin``, ``nn1``, ``nn2``; None without one)."""
        return self.transforms.kind if self.transforms is not None else None

    @property
    def primitive_names(self) -> tuple[str, ...]:
        """The primitive columns the model predicts."""
        return self.primitives.output_names_

    @property
    def transform_names(self) -> tuple[str, ...]:
        """The transformation columns the model predicts (empty without a transformation model)."""
        return self.transforms.output_names_ if self.transforms is not None else ()

    def predict_primitives(self, layers: npt.ArrayLike) -> FloatArray:
        """Times in ns of every primitive for rows ``(c, k, im, f, s)``; NaN where a primitive does not apply."""
        return self.primitives.predict(layers)

    def predict_transforms(self, tensors: npt.ArrayLike) -> FloatArray:
        """Times in ns of every layout transformation for rows ``(c, im)``."""
        if self.transforms is None:
            raise InvalidInputError("this performance model was fitted on data without X-to-Y transformation "
                                    "columns; it cannot predict transformations")
        return self.transforms.predict(tensors)

    def predict_layers(self, layers: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Primitive times and the transformation times of each layer's input, for rows ``(c, k, im, f, s)``."""
        x = np.asarray(layers, dtype=np.float64).reshape(-1, len(LAYER_FEATURES))
        prims = self.predict_primitives(x)
        trans = self.predict_transforms(x[:, [0, 2]]) if self.transforms is not None else np.zeros((len(x), 0))
        return prims, trans


def _fit_one(kind: str, names: tuple[str, ...], features: tuple[str, ...],
             parts: tuple[FloatArray, FloatArray, FloatArray, FloatArray], params: dict[str, Any],
             callback: ProgressCallback | None, stage: str) -> PrimitiveEstimator:
    x_tr, y_tr, x_va, y_va = parts
    if features == TRANSFORM_FEATURES:
        est = make_transform_estimator(kind, **params)
        est.set_params(applicability_by=())
    else:
        est = make_estimator(kind, **params)

    def report(sub: str, info: Any) -> None:
        if callback is not None:
            callback(f"{stage} {sub}", info)

    return est.fit(x_tr, y_tr, feature_names=features, output_names=names, X_val=x_va, Y_val=y_va,
                   callback=report)


def _check_enough_for_early_stopping(dataset: PrimitiveDataset, kind: str, split_seed: int, n_val: int) -> None:
    """Refuse, before any training, a table whose split leaves NN1/NN2 no validation layer or tensor.

    The layout transformations are split over the distinct ``(c, im)``: fewer than 10 leave no validation tensor
    (the validation part is 10 %, rounded down). This is an error, not a skipped transformation model, because
    primitive selection needs the transformation times.
    """
    if kind == "lin":  # least squares: no early stopping, no validation part needed
        return
    if n_val == 0:
        raise InvalidInputError(f"{dataset.source}: {len(dataset)} layer(s) leave no validation layer in the 80/10/10 "
                                f"split, and {kind} early-stops on it; profile at least 10 layers, or fit "
                                f"--model lin")
    if dataset.transforms:
        table = dataset.transform_table()
        if len(split_indices(table.features, split_seed).val) == 0:
            raise InvalidInputError(f"{dataset.source}: only {len(table)} distinct (c, im) tensor(s); the 80/10/10 "
                                    f"split of the layout transformations (over distinct (c, im)) leaves no "
                                    f"validation tensor for the {kind} transformation model's early stopping; "
                                    f"profile at least 10 distinct (c, im), or fit --model lin")


def _transform_params(recipe: str, kind: str, tkind: str, params: dict[str, Any],
                      transform_params: dict[str, Any] | None) -> dict[str, Any]:
    """Settings of the transformation estimator: its recipe's, the caller's that it takes, then ``transform_params``.

    ``params`` (meant for the primitives, e.g. ``threads``) apply to a transformation estimator of the primitives'
    own family, as they always did; a ``krr`` model takes none of them.
    """
    if tkind in TRANSFORM_ESTIMATORS:
        return dict(transform_params or {})
    return {**recipe_params(recipe, tkind), **(params if tkind == kind else {}), **(transform_params or {})}


def _held_out_tensor_parts(dataset: PrimitiveDataset, split_seed: int
                           ) -> tuple[tuple[FloatArray, FloatArray, FloatArray, FloatArray], int]:
    """Training and validation tensors of the held-out-tensor protocol (80/10/10 over the distinct ``(c, im)``)."""
    table = dataset.transform_table()
    ts = split_indices(table.features, split_seed)
    tx, ty = table.features, table.times_ns
    return (tx[ts.train], ty[ts.train], tx[ts.val], ty[ts.val]), len(ts.train)


def _paper_parts(dataset: PrimitiveDataset, split: Split) -> tuple[tuple[FloatArray, FloatArray, FloatArray,
                                                                         FloatArray], int]:
    """Training and validation tensors of the paper's protocol: the distinct ``(c, im)`` of the layer rows."""
    table = dataset.transform_table()
    ci = dataset.features[:, [0, 2]]
    train = np.unique(table.rows_of(ci[split.train]))
    val = np.unique(table.rows_of(ci[split.val]))
    tx, ty = table.features, table.times_ns
    return (tx[train], ty[train], tx[val], ty[val]), len(train)


def fit_performance_model(dataset: PrimitiveDataset, kind: str = "nn2", *, split_seed: int = 0,
                          recipe: str = "edgeplan", params: dict[str, Any] | None = None,
                          transform_model: str | None = None, transform_params: dict[str, Any] | None = None,
                          callback: ProgressCallback | None = None) -> PerformanceModel:
    """Fit a platform's performance model on the training part of ``dataset``, early-stopping on its validation part.

    Parameters
    ----------
    dataset
        A loaded timing table (:func:`~edgeplan.measure.primitive_data.load_primitive_csv`).
    kind
        ``nn2`` (default), ``nn1`` or ``lin``: the primitives' model.
    split_seed
        Seed of the 80/10/10 split (:func:`~edgeplan.measure.primitive_data.split_indices`) of the layer rows.
        Two transformation models are fitted (see the module docstring): ``transforms`` on the same seeded split
        of the distinct ``(c, im)`` (no test tensor seen in training: the strict protocol), and
        ``transforms_paper`` on the tensors of the training layer rows (the paper's protocol).
    recipe
        ``edgeplan`` (default) or ``paper`` (mulder2020 Table 3 as published); see :data:`RECIPES` and
        :data:`RECIPE_TRANSFORM_MODELS`.
    params
        Primitive estimator settings on top of the recipe (e.g. ``{"threads": 2}``); also applied to a
        transformation model of the same family.
    transform_model
        The transformation model's family: ``krr``, ``lin``, ``nn1`` or ``nn2`` (default: the recipe's).
    transform_params
        Transformation estimator settings on top of those.
    callback
        Progress callback ``callback(stage, EpochInfo)``.

    Returns
    -------
    PerformanceModel
        All estimators fitted, with provenance in ``info``.

    Raises
    ------
    InvalidInputError
        Before any training: an unknown kind, recipe or transformation model, no primitive column, a negative
        seed, or (NN1, NN2) fewer than 10 layers or 10 distinct ``(c, im)``, which leaves no validation part to
        early-stop on.
    """
    if kind not in ESTIMATORS:
        raise InvalidInputError(f"unknown model kind {kind!r}; use one of {', '.join(ESTIMATORS)}")
    tkind = transform_model or recipe_transform_model(recipe, kind)
    if tkind not in ESTIMATORS and tkind not in TRANSFORM_ESTIMATORS:
        raise InvalidInputError(f"unknown transformation model {tkind!r}; use one of "
                                f"{', '.join([*TRANSFORM_ESTIMATORS, *ESTIMATORS])}")
    if not dataset.primitives:
        raise InvalidInputError(f"{dataset.source}: no primitive column with any value; nothing to fit")
    params = recipe_params(recipe, kind, params)
    t_params = _transform_params(recipe, kind, tkind, params, transform_params)
    split = split_indices(dataset.features, split_seed)
    _check_enough_for_early_stopping(dataset, kind, split_seed, len(split.val))
    if tkind != kind:
        _check_enough_for_early_stopping(dataset, tkind if tkind in ESTIMATORS else "lin", split_seed,
                                         len(split.val))
    x, y = dataset.features, dataset.primitive_ns
    started = time.monotonic()
    prim = _fit_one(kind, dataset.primitives, LAYER_FEATURES,
                    (x[split.train], y[split.train], x[split.val], y[split.val]), params, callback, "primitives")
    prim_s = time.monotonic() - started
    trans = trans_paper = None
    trans_s = paper_s = 0.0
    n_tensors = n_train_tensors = n_paper_tensors = 0
    if dataset.transforms:
        names = dataset.transform_table().names
        n_tensors = len(dataset.transform_table())
        parts, n_train_tensors = _held_out_tensor_parts(dataset, split_seed)
        started = time.monotonic()
        trans = _fit_one(tkind, names, TRANSFORM_FEATURES, parts, t_params, callback, "transforms")
        trans_s = time.monotonic() - started
        parts, n_paper_tensors = _paper_parts(dataset, split)
        started = time.monotonic()
        trans_paper = _fit_one(tkind, names, TRANSFORM_FEATURES, parts, t_params, callback,
                               "transforms (paper protocol)")
        paper_s = time.monotonic() - started
    info = {"data": dataset.source, "split_seed": split_seed, "recipe": recipe, "rows": len(dataset),
            "train_rows": len(split.train), "val_rows": len(split.val), "test_rows": len(split.test),
            "transform_model": tkind if dataset.transforms else None,
            "transform_tensors": n_tensors, "transform_train_tensors": n_train_tensors,
            "paper_transform_train_tensors": n_paper_tensors,
            "transform_protocols": dict(TRANSFORM_PROTOCOLS) if dataset.transforms else {},
            "fit_primitives_s": round(prim_s, 3), "fit_transforms_s": round(trans_s, 3),
            "fit_transforms_paper_s": round(paper_s, 3)}
    return PerformanceModel(kind, prim, trans, info, trans_paper)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        from importlib.metadata import version

        out["torch"] = version("torch")
        out["edgeplan"] = version("edgeplan")
    except Exception:  # noqa: BLE001 - provenance only; a missing distribution is not an error
        pass
    return out


def _save_estimator(est: PrimitiveEstimator, folder: Path, stem: str) -> None:
    meta, arrays = est.to_state()
    (folder / f"{stem}.json").write_text(json.dumps(meta, indent=1))
    contiguous: dict[str, Any] = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    np.savez(folder / f"{stem}.npz", **contiguous)


def save_performance_model(model: PerformanceModel, directory: str | Path) -> Path:
    """Write ``model`` to the folder ``directory`` (created if needed) as JSON and ``.npz`` files, no pickle.

    Parameters
    ----------
    model
        A fitted performance model.
    directory
        The folder to write.

    Returns
    -------
    pathlib.Path
        The folder.
    """
    folder = Path(directory)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _save_estimator(model.primitives, folder, "primitives")
        if model.transforms is not None:
            _save_estimator(model.transforms, folder, "transforms")
        if model.transforms_paper is not None:
            _save_estimator(model.transforms_paper, folder, "transforms_paper")
        top = {"format": "edgeplan-primitive-performance-model", "format_version": FORMAT_VERSION,
               "kind": model.kind, "transform_kind": model.transform_kind,
               "has_transforms": model.transforms is not None,
               "has_transforms_paper": model.transforms_paper is not None, "info": model.info,
               "versions": _versions()}
        (folder / "model.json").write_text(json.dumps(top, indent=1))
    except OSError as e:
        raise InvalidInputError(f"cannot write the model to {folder}: {e.strerror or e}") from e
    return folder


def _read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; a missing, unreadable or non-object file is an :class:`InvalidInputError`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:  # ValueError: bad JSON or bad UTF-8
        raise InvalidInputError(f"{path}: cannot read it as JSON ({e}); the model folder is damaged, fit the model "
                                f"again") from e
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path}: holds a JSON {type(data).__name__}, not an object; the model folder is "
                                f"damaged, fit the model again")
    return data


_SAVED_KINDS: dict[str, type[PrimitiveEstimator]] = {**ESTIMATORS, BlendedModel.kind: BlendedModel}
"""Primitive estimators a saved model may hold: those :func:`fit_performance_model` fits, and a transfer's blend."""


def _load_estimator(folder: Path, stem: str) -> PrimitiveEstimator:
    meta = _read_json_object(folder / f"{stem}.json")
    npz_path = folder / f"{stem}.npz"
    try:
        loaded = np.load(npz_path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a plain .npy gives an array, not an archive
            raise ValueError("a single array, not an .npz archive")
        with loaded as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise InvalidInputError(f"{npz_path}: cannot read the saved weights ({type(e).__name__}: {e}); the model "
                                f"folder is damaged, fit the model again") from e
    cls = _SAVED_KINDS.get(str(meta.get("kind"))) or TRANSFORM_ESTIMATORS.get(str(meta.get("kind")))
    if cls is None:
        raise InvalidInputError(f"{folder / (stem + '.json')}: unknown model kind {meta.get('kind')!r}; fit the "
                                f"model again")
    try:
        return cls.from_state(meta, arrays)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise InvalidInputError(f"{folder / stem}.json/.npz: malformed saved model ({type(e).__name__}: {e}); fit "
                                f"the model again") from e


def load_performance_model(directory: str | Path) -> PerformanceModel:
    """Read a model folder written by :func:`save_performance_model`.

    Parameters
    ----------
    directory
        The model folder.

    Raises
    ------
    InvalidInputError
        The folder is missing, is not a saved performance model, has a newer format version, or one of its files
        is damaged (not JSON, not an object, not an ``.npz`` archive, missing entries); the message names the file.
    """
    folder = Path(directory)
    top_path = folder / "model.json"
    if not top_path.is_file():
        raise InvalidInputError(f"{folder}: no saved performance model there (no model.json); fit one with "
                                f"`edgeplan primitives fit --data FILE.csv --out {folder}`")
    top = _read_json_object(top_path)
    if top.get("format") != "edgeplan-primitive-performance-model":
        raise InvalidInputError(f"{top_path}: not an edgeplan primitive performance model")
    version = top.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidInputError(f"{top_path}: format_version {version!r} is not an integer; the model folder is "
                                f"damaged, fit the model again")
    if version > FORMAT_VERSION:
        raise InvalidInputError(f"{top_path}: format version {version} is newer than this edgeplan reads "
                                f"({FORMAT_VERSION}); upgrade edgeplan")
    kind, info = top.get("kind"), top.get("info", {})
    if kind not in _SAVED_KINDS or not isinstance(info, dict):
        raise InvalidInputError(f"{top_path}: kind {kind!r} or info is not what `edgeplan primitives fit` writes; "
                                f"the model folder is damaged, fit the model again")
    prim = _load_estimator(folder, "primitives")
    trans = _load_estimator(folder, "transforms") if top.get("has_transforms") else None
    paper = _load_estimator(folder, "transforms_paper") if top.get("has_transforms_paper") else None
    return PerformanceModel(str(kind), prim, trans, dict(info), paper)
