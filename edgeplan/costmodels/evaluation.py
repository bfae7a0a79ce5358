"""MdRAE of a performance model on a part of a timing table, per primitive and per layout transformation.

The table may come from another platform than the model's: only the columns both have are scored (the others
are listed), so a model fitted on Intel can be tested on AMD's shared primitives (mulder2020 Fig. 8a).

The part is drawn with the split seed the model was fitted with (recorded in ``model.info``) unless another is
given. Another seed on the very file the model was fitted on would score layers it was trained on: that gives a
:class:`SplitSeedWarning`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.metrics import mdrae_per_column
from edgeplan.costmodels.performance_model import PerformanceModel
from edgeplan.costmodels.primitive_data import PrimitiveDataset, is_identity_transform, split_indices
from edgeplan.errors import InvalidInputError

__all__ = ["Evaluation", "SplitSeedWarning", "evaluate_performance_model", "fitted_split_seed"]


class SplitSeedWarning(UserWarning):
    """The evaluation's split seed differs from the fitting's on the same data file: training rows are scored."""


@dataclass(frozen=True)
class Evaluation:
    """Accuracy of a performance model on one part of a timing table.

    Attributes
    ----------
    part
        ``test``, ``val``, ``train`` or ``all``.
    rows, transform_tensors
        How many layers and distinct ``(c, im)`` were scored.
    primitive_mdrae, transform_mdrae
        MdRAE (a fraction) per shared column; NaN for a column with no measured value in the part, inf when the
        model gave no prediction for at least half of its measured cells (see :mod:`~edgeplan.costmodels.metrics`).
    only_in_model, only_in_data
        Columns that one side lacks (not scored).
    split_seed
        The seed the part was drawn with (None: not recorded).
    primitive_cells, transform_cells
        Per shared column, how many measured cells of the part were scored (its MdRAE is their median).
    primitive_unpredicted, transform_unpredicted
        Per shared column, how many of those cells the model gave no prediction for (NaN; each counts as an
        infinite error).
    """

    part: str
    rows: int
    transform_tensors: int
    primitive_mdrae: dict[str, float]
    transform_mdrae: dict[str, float]
    only_in_model: tuple[str, ...] = field(default=())
    only_in_data: tuple[str, ...] = field(default=())
    split_seed: int | None = None
    primitive_cells: dict[str, int] = field(default_factory=dict)
    transform_cells: dict[str, int] = field(default_factory=dict)
    primitive_unpredicted: dict[str, int] = field(default_factory=dict)
    transform_unpredicted: dict[str, int] = field(default_factory=dict)

    @property
    def median_primitive_mdrae(self) -> float:
        """Median over primitives of their MdRAE (NaN when none was scored)."""
        return _median(self.primitive_mdrae.values())

    @property
    def median_transform_mdrae(self) -> float:
        """Median over the non-identity transformations (``X-to-X`` is skipped at run time; Fig. 6 omits it)."""
        return _median(v for k, v in self.transform_mdrae.items() if not is_identity_transform(k))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: every non-finite MdRAE (NaN: nothing scored; inf: mostly unpredicted) becomes None.

        ``primitive_cells`` / ``primitive_unpredicted`` (and the transform ones) tell the two apart: None with 0
        cells means nothing was measured, None with cells means the model declined most of them.
        """
        def clean(d: dict[str, float]) -> dict[str, float | None]:
            return {k: _finite_or_none(v) for k, v in d.items()}

        return {"part": self.part, "split_seed": self.split_seed, "rows": self.rows,
                "transform_tensors": self.transform_tensors,
                "primitive_mdrae": clean(self.primitive_mdrae), "transform_mdrae": clean(self.transform_mdrae),
                "primitive_cells": dict(self.primitive_cells), "transform_cells": dict(self.transform_cells),
                "primitive_unpredicted": dict(self.primitive_unpredicted),
                "transform_unpredicted": dict(self.transform_unpredicted),
                "median_primitive_mdrae": _finite_or_none(self.median_primitive_mdrae),
                "median_transform_mdrae": _finite_or_none(self.median_transform_mdrae),
                "only_in_model": list(self.only_in_model), "only_in_data": list(self.only_in_data)}


def _finite_or_none(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _median(values: Any) -> float:
    v = [x for x in values if not math.isnan(x)]
    return float(np.median(v)) if v else math.nan


def fitted_split_seed(model: PerformanceModel) -> int | None:
    """The split seed recorded when ``model`` was fitted (None if its ``info`` has none)."""
    seed = model.info.get("split_seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else None


def _same_file(a: str, b: str) -> bool:
    if not a or not b:
        return False
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def _score(truth: npt.NDArray[np.float64], pred: npt.NDArray[np.float64], names: list[str]
           ) -> tuple[dict[str, float], dict[str, int], dict[str, int]]:
    """MdRAE, measured-cell count and unpredicted-cell count per column."""
    measured = ~np.isnan(truth)
    cells = {n: int(measured[:, j].sum()) for j, n in enumerate(names)}
    unpredicted = {n: int((measured[:, j] & np.isnan(pred[:, j])).sum()) for j, n in enumerate(names)}
    return mdrae_per_column(truth, pred, names), cells, unpredicted


def _resolve_seed(model: PerformanceModel, dataset: PrimitiveDataset, part: str, split_seed: int | None) -> int:
    """The seed to split with: the given one (warning if it scores training rows) or the model's recorded one."""
    recorded = fitted_split_seed(model)
    if split_seed is None:
        if recorded is None:
            raise InvalidInputError("the model records no split seed (model.info['split_seed']); pass split_seed "
                                    "(CLI: --split-seed) explicitly")
        return recorded
    if (part != "all" and recorded is not None and split_seed != recorded
            and _same_file(str(model.info.get("data", "")), dataset.source)):
        warnings.warn(f"split seed {split_seed} differs from the seed {recorded} the model was fitted with on this "
                      f"same file {dataset.source}: the {part} part includes layers the model was trained on, so "
                      f"the score is optimistic; leave the seed out to use {recorded}", SplitSeedWarning,
                      stacklevel=3)
    return split_seed


def evaluate_performance_model(model: PerformanceModel, dataset: PrimitiveDataset, part: str = "test",
                               split_seed: int | None = None) -> Evaluation:
    """Score ``model`` on ``part`` of ``dataset`` (split as in fitting) by MdRAE per column.

    Parameters
    ----------
    model
        A fitted performance model.
    dataset
        A timing table (the model's platform or another).
    part
        ``test`` (default), ``val``, ``train`` or ``all``.
    split_seed
        The split seed. None (default): the one the model was fitted with (``model.info["split_seed"]``), which
        is what an honest test score needs. Another seed on the same data file as the fitting (compared by
        resolved path) emits a :class:`SplitSeedWarning`: that part holds training layers.

    Returns
    -------
    Evaluation
        MdRAE and scored-cell counts per shared primitive and transformation column.

    Raises
    ------
    InvalidInputError
        No column in common, an unknown part, a negative seed, or no seed given and none recorded in the model.
    """
    split_seed = _resolve_seed(model, dataset, part, split_seed)
    rows = split_indices(dataset.features, split_seed).part(part)
    shared = [p for p in model.primitive_names if p in dataset.primitives]
    if not shared and not set(model.transform_names) & set(dataset.transforms):
        raise InvalidInputError(f"{dataset.source}: no primitive or transformation column in common with the model "
                                f"({len(model.primitive_names)} primitives such as {model.primitive_names[:2]})")
    sub = dataset.subset(rows)
    pred = model.predict_primitives(sub.features) if len(sub) else np.zeros((0, len(model.primitive_names)))
    mcol = {n: j for j, n in enumerate(model.primitive_names)}
    dcol = {n: j for j, n in enumerate(dataset.primitives)}
    prim, prim_cells, prim_unpred = _score(
        sub.primitive_ns[:, [dcol[p] for p in shared]].reshape(len(sub), len(shared)),
        pred[:, [mcol[p] for p in shared]].reshape(len(sub), len(shared)), shared)
    trans: dict[str, float] = {}
    trans_cells: dict[str, int] = {}
    trans_unpred: dict[str, int] = {}
    n_tensors = 0
    t_shared = [t for t in model.transform_names if t in dataset.transforms]
    if t_shared:
        table = dataset.transform_table()
        t_rows = split_indices(table.features, split_seed).part(part)
        tsub = table.subset(t_rows)
        n_tensors = len(tsub)
        tpred = model.predict_transforms(tsub.features) if n_tensors else np.zeros((0, len(model.transform_names)))
        tm = {n: j for j, n in enumerate(model.transform_names)}
        td = {n: j for j, n in enumerate(table.names)}
        trans, trans_cells, trans_unpred = _score(
            tsub.times_ns[:, [td[t] for t in t_shared]].reshape(n_tensors, len(t_shared)),
            tpred[:, [tm[t] for t in t_shared]].reshape(n_tensors, len(t_shared)), t_shared)
    only_model = tuple(p for p in (*model.primitive_names, *model.transform_names)
                       if p not in dataset.primitives and p not in dataset.transforms)
    only_data = tuple(p for p in (*dataset.primitives, *dataset.transforms)
                      if p not in model.primitive_names and p not in model.transform_names)
    return Evaluation(part, len(sub), n_tensors, prim, trans, only_model, only_data, split_seed,
                      prim_cells, trans_cells, prim_unpred, trans_unpred)
