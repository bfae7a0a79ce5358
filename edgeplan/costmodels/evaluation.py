"""MdRAE of a performance model on a part of a timing table, per primitive and per layout transformation.

The table may come from another platform than the model's: only the columns both have are scored (the others
are listed), so a model fitted on Intel can be tested on AMD's shared primitives (mulder2020 Fig. 8a).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgeplan.costmodels.metrics import mdrae_per_column
from edgeplan.costmodels.performance_model import PerformanceModel
from edgeplan.costmodels.primitive_data import PrimitiveDataset, is_identity_transform, split_indices
from edgeplan.errors import InvalidInputError

__all__ = ["Evaluation", "evaluate_performance_model"]


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
        MdRAE (a fraction) per shared column; NaN for a column with no measured value in the part.
    only_in_model, only_in_data
        Columns that one side lacks (not scored).
    """

    part: str
    rows: int
    transform_tensors: int
    primitive_mdrae: dict[str, float]
    transform_mdrae: dict[str, float]
    only_in_model: tuple[str, ...] = field(default=())
    only_in_data: tuple[str, ...] = field(default=())

    @property
    def median_primitive_mdrae(self) -> float:
        """Median over primitives of their MdRAE (NaN when none was scored)."""
        return _median(self.primitive_mdrae.values())

    @property
    def median_transform_mdrae(self) -> float:
        """Median over the non-identity transformations (``X-to-X`` is skipped at run time; Fig. 6 omits it)."""
        return _median(v for k, v in self.transform_mdrae.items() if not is_identity_transform(k))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (NaN as None)."""
        def clean(d: dict[str, float]) -> dict[str, float | None]:
            return {k: (None if math.isnan(v) else v) for k, v in d.items()}

        med_p, med_t = self.median_primitive_mdrae, self.median_transform_mdrae
        return {"part": self.part, "rows": self.rows, "transform_tensors": self.transform_tensors,
                "primitive_mdrae": clean(self.primitive_mdrae), "transform_mdrae": clean(self.transform_mdrae),
                "median_primitive_mdrae": None if math.isnan(med_p) else med_p,
                "median_transform_mdrae": None if math.isnan(med_t) else med_t,
                "only_in_model": list(self.only_in_model), "only_in_data": list(self.only_in_data)}


def _median(values: Any) -> float:
    v = [x for x in values if not math.isnan(x)]
    return float(np.median(v)) if v else math.nan


def evaluate_performance_model(model: PerformanceModel, dataset: PrimitiveDataset, part: str = "test",
                               split_seed: int = 0) -> Evaluation:
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
        The split seed; use the one the model was fitted with for an honest test score.

    Returns
    -------
    Evaluation
        MdRAE per shared primitive and transformation column.
    """
    rows = split_indices(dataset.features, split_seed).part(part)
    shared = [p for p in model.primitive_names if p in dataset.primitives]
    if not shared and not set(model.transform_names) & set(dataset.transforms):
        raise InvalidInputError(f"{dataset.source}: no primitive or transformation column in common with the model "
                                f"({len(model.primitive_names)} primitives such as {model.primitive_names[:2]})")
    sub = dataset.subset(rows)
    pred = model.predict_primitives(sub.features) if len(sub) else np.zeros((0, len(model.primitive_names)))
    mcol = {n: j for j, n in enumerate(model.primitive_names)}
    dcol = {n: j for j, n in enumerate(dataset.primitives)}
    prim = mdrae_per_column(sub.primitive_ns[:, [dcol[p] for p in shared]].reshape(len(sub), len(shared)),
                            pred[:, [mcol[p] for p in shared]].reshape(len(sub), len(shared)), shared)
    trans: dict[str, float] = {}
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
        trans = mdrae_per_column(tsub.times_ns[:, [td[t] for t in t_shared]].reshape(n_tensors, len(t_shared)),
                                 tpred[:, [tm[t] for t in t_shared]].reshape(n_tensors, len(t_shared)), t_shared)
    only_model = tuple(p for p in (*model.primitive_names, *model.transform_names)
                       if p not in dataset.primitives and p not in dataset.transforms)
    only_data = tuple(p for p in (*dataset.primitives, *dataset.transforms)
                      if p not in model.primitive_names and p not in model.transform_names)
    return Evaluation(part, len(sub), n_tensors, prim, trans, only_model, only_data)
