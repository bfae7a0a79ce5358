"""A primitive performance model moved to another platform (``edgeplan primitives transfer``), end to end.

:func:`transfer_primitives` reads the source model (a folder, a device of the edgeplan home or the shipped one) and
the target's timing table, moves the model, records where the table was measured and saves it, to a folder or as a
device of the edgeplan home (:mod:`edgeplan.costmodels.primitive_devices`):

* with a ``fraction``, from that share of the target's training part, scored on its test part
  (:func:`edgeplan.costmodels.transfer_learning.transfer`): a :class:`ScoredTransfer`;
* without one, from every layer of the table, the method chosen by cross-validation
  (:func:`edgeplan.costmodels.primitive_calibration.calibrate_primitives`): a :class:`CalibratedTransfer`, the way a
  user's machine is calibrated for ``edgeplan select --device NAME``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError

if TYPE_CHECKING:
    from edgeplan.costmodels.evaluation import Evaluation
    from edgeplan.costmodels.performance_model import PerformanceModel

__all__ = ["CalibratedTransfer", "ScoredTransfer", "TransferOptions", "TransferTarget", "transfer_primitives"]


@dataclass(frozen=True)
class TransferTarget:
    """Where a moved model is saved: a model folder (``out``) or a device of the edgeplan home (``name``).

    Attributes
    ----------
    out
        A folder to write the model to.
    name
        A device name: the model is saved in ``{home}/devices/NAME/primitives`` for ``select --device NAME``.
    replace
        With ``name``: replace the model of an existing device.
    """

    out: str | Path | None = None
    name: str | None = None
    replace: bool = False


@dataclass(frozen=True)
class TransferOptions:
    """How a model is moved.

    Attributes
    ----------
    fraction
        Share of the target's training part to draw, in ``(0, 1]``, the result scored on its test part; None: every
        layer of the table, the method chosen by cross-validation.
    seed
        Seed of the samples drawn, the folds and the training.
    split_seed
        With ``fraction``: seed of the target's 80/10/10 split.
    threads
        Torch intra-op threads for training (None: the source's).
    """

    fraction: float | None = None
    seed: int = 0
    split_seed: int = 0
    threads: int | None = None


@dataclass(frozen=True)
class ScoredTransfer:
    """A model moved with a fraction of the target's training part, and its score on the target's test part.

    Attributes
    ----------
    path
        Where it was saved.
    source
        The source model's folder.
    source_kind
        The source model's kind (``nn2``, ``nn1``, ...).
    data
        The target's table.
    options
        The settings it was moved with.
    transfer
        The model's ``info["transfer"]``: the method, the rows and cells drawn, the early stopping, the seconds.
    test
        Its scores on the target's test part.
    """

    path: Path
    source: Path
    source_kind: str
    data: str
    options: TransferOptions
    transfer: Mapping[str, Any]
    test: Evaluation

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan primitives transfer --fraction F --json`` prints it."""
        info, o = self.transfer, self.options
        return {"model": str(self.path), "source": str(self.source), "data": self.data, "method": info["method"],
                "fraction": o.fraction, "seed": o.seed, "split_seed": o.split_seed,
                "drawn_rows": info["drawn_rows"], "drawn_cells": info.get("drawn_cells"),
                "adaptive_rounds": info.get("adaptive_rounds"), "stop_rows": info["stop_rows"],
                "cross_fit_folds": info.get("cross_fit_folds"), "refit_epochs": info.get("refit_epochs"),
                "blend": info.get("blend"), "target_train_rows": info["target_train_rows"],
                "ignored_columns": info["ignored_columns"], "seconds": info["seconds"],
                "test": self.test.to_dict()}


def _finite(scores: Mapping[str, float]) -> dict[str, float | None]:
    return {m: v if math.isfinite(v) else None for m, v in scores.items()}


@dataclass(frozen=True)
class CalibratedTransfer:
    """A model moved with every measured layer of a machine, the method chosen by cross-validation.

    Attributes
    ----------
    device
        The device it was saved as (None when saved to a folder).
    path
        Where it was saved.
    source
        The source model's folder.
    method
        The method chosen (``direct``, ``factor``, ``finetune`` or ``factor-finetune``).
    layers
        Measured layers used.
    folds
        Folds of the cross-validation (0: one layer, nothing to cross-validate).
    measured_primitives
        Source primitives the table has timings of.
    scores
        Per method tried, the cross-validated median MdRAE over the primitives (a fraction).
    transform_scores
        The same for the layout transformations (NaN without such columns).
    threads
        The threads the table was measured at (None where no provenance file says).
    torch_device
        The torch device the table was measured on (None where no provenance file says).
    notes
        What a user should read about the inputs (e.g. primitives the table does not cover).
    """

    device: str | None
    path: Path
    source: Path
    method: str
    layers: int
    folds: int
    measured_primitives: int
    scores: Mapping[str, float]
    transform_scores: Mapping[str, float]
    threads: int | None = None
    torch_device: str | None = None
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan primitives transfer --json`` prints it without ``--fraction`` (scores that
        cannot be given are null)."""
        return {"device": self.device, "complete": True, "path": str(self.path), "source": str(self.source),
                "method": self.method, "layers": self.layers, "folds": self.folds,
                "measured_primitives": self.measured_primitives,
                "cv_mdrae": _finite(self.scores), "cv_transform_mdrae": _finite(self.transform_scores),
                "threads": self.threads, "torch_device": self.torch_device}


def _check(target: TransferTarget, options: TransferOptions) -> None:
    """Refuse settings that do not go together, before anything is read."""
    from edgeplan.measure.harness import check_thread_count

    if options.fraction is not None and not 0.0 < options.fraction <= 1.0:
        raise InvalidInputError(f"--fraction {options.fraction:g} is outside (0, 1]; give the share of the target's "
                                "training part to use, e.g. 0.01 for 1 %")
    if (target.out is None) == (target.name is None):
        raise InvalidInputError("give one of --out DIR (a model folder) and --name NAME (a device for `select`)")
    if target.replace and target.name is None:
        raise InvalidInputError("--replace overwrites a device; it goes with --name")
    if options.threads is not None:
        check_thread_count(options.threads)


def _save(model: PerformanceModel, target: TransferTarget, folder: Path | None) -> Path:
    from edgeplan.costmodels.performance_model import save_performance_model
    from edgeplan.costmodels.primitive_devices import save_primitive_device

    if folder is not None:
        return save_primitive_device(model, folder)
    return save_performance_model(model, str(target.out))


def transfer_primitives(data: str | Path, target: TransferTarget, options: TransferOptions | None = None, *,
                        source: str | Path | None = None, home: str | Path | None = None,
                        progress: Callable[[int, int], None] | None = None) -> ScoredTransfer | CalibratedTransfer:
    """Move a primitive performance model to the platform that measured ``data``, and save it.

    Parameters
    ----------
    data
        The target platform's timing table (mulder2021 CSV format, e.g. from ``edgeplan profile primitives
        --export``; the provenance file beside it says where it was measured).
    target
        A model folder or a device of the edgeplan home to save it to.
    options
        The fraction (None: every layer, as a machine is calibrated), the seeds and the threads.
    source
        The source model: a folder written by ``primitives fit``, a device made by ``primitives transfer --name``,
        or None for the shipped NN2 of the reference machine.
    home
        The edgeplan home (its devices).
    progress
        Without a fraction: called as ``progress(done, total)`` after every fit of the cross-validation.

    Returns
    -------
    ScoredTransfer | CalibratedTransfer
        A :class:`ScoredTransfer` with a fraction, else a :class:`CalibratedTransfer`.

    Raises
    ------
    InvalidInputError
        A fraction outside ``(0, 1]``; neither or both of ``out`` and ``name``; ``replace`` without ``name``; a bad
        device name, an existing device without ``replace``, or the device being replaced as its own source; an
        unknown source; a table the source cannot be moved to.
    """
    from edgeplan.costmodels import load_performance_model, load_primitive_csv
    from edgeplan.costmodels.primitive_devices import new_device_folder, record_calibration, resolve_primitive_model

    options = options or TransferOptions()
    _check(target, options)
    folder = new_device_folder(home, target.name, target.replace) if target.name is not None else None
    source_dir = resolve_primitive_model(home, source)
    if folder is not None and source_dir.resolve() == folder.resolve():
        raise InvalidInputError(f"--model {source} is the device being replaced; transfer from its source "
                                "(a model folder, or the shipped model without --model)")
    model = load_performance_model(source_dir)
    table = load_primitive_csv(data)
    if options.fraction is not None:
        from edgeplan.costmodels import evaluate_performance_model
        from edgeplan.costmodels.transfer_learning import transfer

        moved = transfer(model, table, fraction=options.fraction, seed=options.seed, split_seed=options.split_seed,
                         threads=options.threads)
        if target.name is not None:
            record_calibration(moved, target.name, source_dir, data)
        path = _save(moved, target, folder)
        test = evaluate_performance_model(moved, table, "test", options.split_seed)
        return ScoredTransfer(path, source_dir, model.kind, str(data), options, moved.info["transfer"], test)
    from edgeplan.costmodels.primitive_calibration import calibrate_primitives

    shared = [p for p in model.primitive_names if p in table.primitives]
    notes: tuple[str, ...] = ()
    if 0 < len(shared) < len(model.primitive_names):
        notes = (f"the measurements cover {len(shared)} of the source's {len(model.primitive_names)} primitives; the "
                 "others are moved by what the measured ones teach (with the factor: their median scale)",)
    result = calibrate_primitives(model, table, seed=options.seed, threads=options.threads, progress=progress)
    calibration = record_calibration(result.model, target.name, source_dir, data)
    path = _save(result.model, target, folder)
    return CalibratedTransfer(target.name, path, source_dir, result.method, result.rows, result.folds, len(shared),
                              result.scores, result.transform_scores, calibration.threads, calibration.torch_device,
                              notes)
