"""MdRAE of a performance model on a part of a timing table, per primitive and per layout transformation.

The table may come from another platform than the model's: only the columns both have are scored (the others
are listed), so a model fitted on Intel can be tested on AMD's shared primitives (mulder2020 Fig. 8a).

The part is drawn with the split seed the model was fitted with (recorded in ``model.info``) unless another is
given. Another seed on the very file the model was fitted on would score layers it was trained on: that gives a
:class:`SplitSeedWarning`.

The layout transformations are scored under two protocols (see :mod:`~edgeplan.costmodels.performance_model`):
``transform_mdrae`` on the part's held-out ``(c, im)`` tensors with the model's ``transforms`` (strict), and
``paper_transform_mdrae``, **the paper's protocol**, over the part's layer rows (one cell per row and
transformation, as the table lists them) with ``transforms_paper``, fitted on the tensors of the training rows.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeplan.costmodels.performance_model import TRANSFORM_PROTOCOLS, PerformanceModel
from edgeplan.errors import InvalidInputError
from edgeplan.measure.metrics import mdrae_per_column
from edgeplan.measure.primitive_data import PrimitiveDataset, Split, is_identity_transform, split_indices

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
        model gave no prediction for at least half of its measured cells (see :mod:`~edgeplan.measure.metrics`).
    only_in_model, only_in_data
        Columns that one side lacks (not scored).
    split_seed
        The seed the part was drawn with (None: not recorded).
    primitive_cells, transform_cells
        Per shared column, how many measured cells of the part were scored (its MdRAE is their median).
    primitive_unpredicted, transform_unpredicted
        Per shared column, how many of those cells the model gave no prediction for (NaN; each counts as an
        infinite error).
    paper_transform_mdrae, paper_transform_cells, paper_transform_unpredicted
        The same for the transformations under **the paper's protocol**: scored over the part's layer rows with
        the model fitted on the tensors of the training rows (empty when the model has no such model, e.g. a
        folder saved before it existed).
    paper_transform_unseen_rows
        How many of the part's rows have a tensor that no training row has (0 on the mulder2021 tables).
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
    paper_transform_mdrae: dict[str, float] = field(default_factory=dict)
    paper_transform_cells: dict[str, int] = field(default_factory=dict)
    paper_transform_unpredicted: dict[str, int] = field(default_factory=dict)
    paper_transform_unseen_rows: int = 0

    @property
    def median_primitive_mdrae(self) -> float:
        """Median over primitives of their MdRAE (NaN when none was scored)."""
        return _median(self.primitive_mdrae.values())

    @property
    def median_transform_mdrae(self) -> float:
        """Median over the non-identity transformations (``X-to-X`` is skipped at run time; Fig. 6 omits it)."""
        return _median(v for k, v in self.transform_mdrae.items() if not is_identity_transform(k))

    @property
    def median_paper_transform_mdrae(self) -> float:
        """:attr:`median_transform_mdrae` under the paper's protocol (NaN when it was not scored)."""
        return _median(v for k, v in self.paper_transform_mdrae.items() if not is_identity_transform(k))

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
                "transform_protocol": "held-out tensors: " + TRANSFORM_PROTOCOLS["held_out_tensors"],
                "paper_protocol": {
                    "description": TRANSFORM_PROTOCOLS["paper"],
                    "transform_mdrae": clean(self.paper_transform_mdrae),
                    "transform_cells": dict(self.paper_transform_cells),
                    "transform_unpredicted": dict(self.paper_transform_unpredicted),
                    "rows_with_unseen_tensor": self.paper_transform_unseen_rows,
                    "median_transform_mdrae": _finite_or_none(self.median_paper_transform_mdrae)},
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
        if recorded is None and part == "all":
            return 0  # every row is scored: the split does not matter (a calibrated model records none)
        if recorded is None:
            raise InvalidInputError("the model records no split seed (model.info['split_seed']); pass split_seed "
                                    "explicitly (Python API), or fit the model again with `edgeplan primitives fit`")
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
        MdRAE and scored-cell counts per shared primitive and transformation column; the transformations under
        both protocols (held-out tensors, and the paper's over the part's layer rows).

    Raises
    ------
    InvalidInputError
        No column in common, an unknown part, a negative seed, or no seed given and none recorded in the model.
    """
    split_seed = _resolve_seed(model, dataset, part, split_seed)
    split = split_indices(dataset.features, split_seed)
    rows = split.part(part)
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
    paper, paper_cells, paper_unpred, unseen = _score_paper_protocol(model, dataset, split, part)
    return Evaluation(part, len(sub), n_tensors, prim, trans, only_model, only_data, split_seed,
                      prim_cells, trans_cells, prim_unpred, trans_unpred, paper, paper_cells, paper_unpred, unseen)


def _score_paper_protocol(model: PerformanceModel, dataset: PrimitiveDataset, split: Split, part: str
                          ) -> tuple[dict[str, float], dict[str, int], dict[str, int], int]:
    """The paper's protocol: ``transforms_paper`` scored over the transformation cells of the part's layer rows.

    Returns the MdRAE, scored cells and unpredicted cells per shared transformation, and how many of the part's
    rows have a ``(c, im)`` that no training row has.
    """
    est = model.transforms_paper
    if est is None:
        return {}, {}, {}, 0
    shared = [t for t in est.output_names_ if t in dataset.transforms]
    if not shared:
        return {}, {}, {}, 0
    rows = split.part(part)
    tensors = dataset.features[rows][:, [0, 2]]
    pred = est.predict(tensors) if len(rows) else np.zeros((0, len(est.output_names_)))
    mcol = {n: j for j, n in enumerate(est.output_names_)}
    dcol = {n: j for j, n in enumerate(dataset.transforms)}
    truth = dataset.transform_ns[rows][:, [dcol[t] for t in shared]].reshape(len(rows), len(shared))
    scores, cells, unpred = _score(truth, pred[:, [mcol[t] for t in shared]].reshape(len(rows), len(shared)), shared)
    seen = {(float(c), float(im)) for c, im in dataset.features[split.train][:, [0, 2]]}
    unseen = sum((float(c), float(im)) not in seen for c, im in tensors)
    return scores, cells, unpred, unseen
