"""A primitive performance model fitted on timing tables and saved, or scored on one (``edgeplan primitives fit``
and ``evaluate``), end to end.

Tables of one platform given together are merged (rows appended, columns united: :func:`load_tables`) before the
seeded 80/10/10 split, in fitting and in scoring alike, so the same files give the same split.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgeplan.costmodels.evaluation import Evaluation
    from edgeplan.costmodels.performance_model import PerformanceModel
    from edgeplan.measure.primitive_data import PrimitiveDataset

__all__ = ["FittedPrimitiveModel", "PrimitiveModelScore", "evaluate_primitive_model", "fit_primitive_model",
           "load_tables"]


def load_tables(paths: Sequence[str | Path]) -> PrimitiveDataset:
    """One timing table, or several of one platform merged (:func:`edgeplan.decisions.select.merged_tables`)."""
    from edgeplan.costmodels import load_primitive_csv

    if len(paths) == 1:
        return load_primitive_csv(paths[0])
    from edgeplan.decisions.selection_costs import merged_tables

    return merged_tables(paths)


@dataclass(frozen=True)
class FittedPrimitiveModel:
    """A performance model fitted on timing tables and saved.

    Attributes
    ----------
    path
        The folder it was saved to.
    model
        The fitted model (its ``info``: the split's rows, the recipe, the fitting seconds).
    data
        The tables it was fitted on.
    dropped_columns
        Columns left out because they are empty in every row.
    """

    path: Path
    model: PerformanceModel
    data: tuple[str, ...]
    dropped_columns: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan primitives fit --json`` prints it: ``model`` (the folder), ``kind``, the counts
        of primitives and transformations, ``dropped_columns`` and the model's ``info``."""
        m = self.model
        return {"model": str(self.path), "kind": m.kind, "primitives": len(m.primitive_names),
                "transforms": len(m.transform_names), "dropped_columns": list(self.dropped_columns), **m.info}


def fit_primitive_model(data: Sequence[str | Path], out: str | Path, kind: str = "nn2", *, split_seed: int = 0,
                        threads: int = 2, max_epochs: int | None = None,
                        progress: Callable[[str, Any], None] | None = None) -> FittedPrimitiveModel:
    """Fit a performance model on the training part of the tables ``data`` and save it to the folder ``out``.

    Parameters
    ----------
    data
        Timing tables of one platform in the mulder2021 CSV format, merged before the split.
    out
        The folder to write (JSON and ``.npz``, no pickle).
    kind
        ``nn2``, ``nn1`` or ``lin``.
    split_seed
        Seed of the 80/10/10 split, recorded in the model.
    threads
        Torch threads for training (the neural models).
    max_epochs
        Upper bound on training epochs (None: the model's).
    progress
        Called as ``progress(stage, EpochInfo)`` after every epoch.

    Returns
    -------
    FittedPrimitiveModel

    Raises
    ------
    InvalidInputError
        A bad thread count, kind or table.
    """
    from edgeplan.costmodels import fit_performance_model, save_performance_model
    from edgeplan.measure.harness import check_thread_count

    check_thread_count(threads)
    table = load_tables(data)
    params: dict[str, Any] = {} if kind == "lin" else {"threads": threads, "max_epochs": max_epochs}
    model = fit_performance_model(table, kind, split_seed=split_seed, params=params, callback=progress)
    folder = save_performance_model(model, out)
    return FittedPrimitiveModel(folder, model, tuple(str(p) for p in data), tuple(table.dropped))


@dataclass(frozen=True)
class PrimitiveModelScore:
    """A fitted model's MdRAE on a part of timing tables.

    Attributes
    ----------
    model_dir
        The model's folder.
    model
        The model.
    data
        The tables scored on.
    evaluation
        The scores per primitive and per transformation, and their medians.
    warnings
        What a user must read before trusting the scores (e.g. a split seed that scores training rows).
    """

    model_dir: str
    model: PerformanceModel
    data: tuple[str, ...]
    evaluation: Evaluation
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan primitives evaluate --json`` prints it: ``model``, ``kind``, ``data``,
        ``fitted_split_seed`` and the scores (:meth:`~edgeplan.costmodels.evaluation.Evaluation.to_dict`)."""
        return {"model": self.model_dir, "kind": self.model.kind, "data": " ".join(self.data),
                "fitted_split_seed": self.model.info.get("split_seed"), **self.evaluation.to_dict()}


def evaluate_primitive_model(model_dir: str | Path, data: Sequence[str | Path], part: str = "test",
                             split_seed: int | None = None) -> PrimitiveModelScore:
    """Score the model in ``model_dir`` on ``part`` of the tables ``data`` (merged as :func:`fit_primitive_model`
    merges them).

    Parameters
    ----------
    model_dir
        A folder written by :func:`fit_primitive_model` or a transfer.
    data
        Timing tables (this platform's or another's: the shared columns are scored).
    part
        ``test`` or ``all``.
    split_seed
        Seed of the split (None: the one the model was fitted with).

    Returns
    -------
    PrimitiveModelScore
        With the warnings of the scoring (e.g. another split seed on the model's own data).
    """
    from edgeplan.costmodels import evaluate_performance_model, load_performance_model

    model = load_performance_model(model_dir)
    table = load_tables(data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate_performance_model(model, table, part, split_seed)
    return PrimitiveModelScore(str(model_dir), model, tuple(str(p) for p in data), result,
                               tuple(str(w.message) for w in caught))
