"""The primitive campaign's measurements as a dataset, and the noise floor between two runs of it.

Export (:func:`export_dataset`): the mulder2021 CSV format (``c,k,im,f,s``, the nine ``X-to-Y`` columns, one column
per primitive; nanoseconds; empty = not applicable) plus a provenance JSON beside it. Only configurations whose every
cell is measured are written by default; a configuration with a cell over the per-call cap counts as done for the
campaign (it is not measured again) but is *measured and not exportable*. With ``include_incomplete`` those rows are
written too, their missing and over-cap cells empty as the format demands, and every such cell is listed with its
reason (``over_cap`` or ``missing``) in ``OUT.not_measured.csv``, so that an empty cell that applies is never mistaken
for "not applicable".

Noise floor (:func:`noise_floor`): the between-run MdRAE of two exports (or campaigns) on their shared
configurations, per column, with the same MdRAE as the cost models (:mod:`edgeplan.measure.metrics`).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError, StoreError
from edgeplan.measure.primitive_space import (
    CAMPAIGN_PREFIX,
    DATASET_FORMAT,
    PRIMITIVE_KIND,
    SHAPE_COLUMNS,
    TRANSFORM_COLUMNS,
    TRANSFORM_KIND,
    applies,
    now_utc,
)
from edgeplan.measure.store import Campaign, MeasurementRecord, Store
from edgeplan.primitives.spec import ConvSpec

if TYPE_CHECKING:
    from edgeplan.measure.primitive_data import PrimitiveDataset


__all__ = [
    "ColumnNoise",
    "DatasetTable",
    "ExportSummary",
    "MISSING",
    "NOT_MEASURED_COLUMNS",
    "NoiseFloor",
    "NotMeasured",
    "OVER_CAP",
    "campaign_dataset",
    "dataset_table",
    "export_dataset",
    "find_campaign",
    "find_remeasure",
    "noise_floor",
]


#: Why an exported cell is empty although its column applies (the ``reason`` column of ``OUT.not_measured.csv``).
OVER_CAP = "over_cap"


MISSING = "missing"


NOT_MEASURED_COLUMNS: tuple[str, ...] = (*SHAPE_COLUMNS, "column", "reason")


@dataclass(frozen=True)
class NotMeasured:
    """An empty cell of an exported row whose column applies: ``reason`` is :data:`OVER_CAP` or :data:`MISSING`."""

    shape: tuple[int, ...]
    column: str
    reason: str


@dataclass(frozen=True)
class DatasetTable:
    """A campaign's measurements as mulder2021 rows (times in ns; ``None`` = not applicable or not measured).

    Attributes
    ----------
    columns
        ``c, k, im, f, s``, the nine transformations, then the primitives.
    rows
        One tuple per configuration, sorted by shape.
    complete_configs
        Shapes whose every applicable primitive and every transformation is measured (not over cap).
    incomplete
        Configurations with something missing or over cap (left out of ``rows`` unless asked for).
    over_cap_cells
        Cells (primitives and transformations) over the per-call cap in the rows written.
    not_measured
        Every applicable cell left empty in the rows written, with its reason (empty unless incomplete rows are
        written).
    not_exportable
        Configurations with every cell measured but at least one over cap: done for the campaign, not exportable.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[int | None, ...], ...]
    complete_configs: frozenset[tuple[int, ...]]
    incomplete: int
    over_cap_cells: int
    not_measured: tuple[NotMeasured, ...] = ()
    not_exportable: int = 0

    @property
    def missing_cells(self) -> int:
        """Applicable cells with no measurement in the rows written."""
        return sum(1 for cell in self.not_measured if cell.reason == MISSING)


def dataset_table(records: Sequence[MeasurementRecord], primitives: Sequence[str],
                  include_incomplete: bool = False) -> DatasetTable:
    """Assemble a campaign's rows into a :class:`DatasetTable`.

    Parameters
    ----------
    records
        The campaign's Store rows.
    primitives
        The campaign's primitives (the primitive columns, in order).
    include_incomplete
        Also write configurations (with at least one primitive row) that have missing or over-cap cells; those
        cells are empty and listed in :attr:`DatasetTable.not_measured`.
    """
    from edgeplan.primitives.registry import primitive_names

    known = set(primitive_names())
    prim: dict[tuple[int, ...], dict[str, int | None]] = {}
    trans: dict[tuple[int, ...], dict[str, int | None]] = {}  # None = over cap
    for rec in records:
        config = rec.extra["config"]
        names = SHAPE_COLUMNS if rec.kind == PRIMITIVE_KIND else ("c", "im")
        shape = tuple(int(config[n]) for n in names)
        value = None if rec.extra.get("status") == OVER_CAP else max(1, round(rec.latency_ms * 1e6))
        if rec.kind == PRIMITIVE_KIND:
            prim.setdefault(shape, {})[rec.subject] = value
        elif rec.kind == TRANSFORM_KIND:
            trans.setdefault(shape, {})[rec.subject] = value
    rows, complete, gaps = [], set(), []
    incomplete = not_exportable = 0
    for shape in sorted(prim):
        spec = ConvSpec(*shape)
        cells = prim[shape]
        needed = [p for p in primitives if (applies(p, spec) if p in known else p in cells)]
        moves = trans.get((spec.c, spec.im), {})
        empty = [NotMeasured(shape, name, OVER_CAP if name in measured else MISSING)
                 for measured, columns in ((moves, TRANSFORM_COLUMNS), (cells, needed))
                 for name in columns if measured.get(name) is None]
        if not empty:
            complete.add(shape)
        else:
            incomplete += 1
            not_exportable += all(cell.reason == OVER_CAP for cell in empty)
            if not include_incomplete:
                continue
            gaps += empty
        rows.append((*shape, *(moves.get(t) for t in TRANSFORM_COLUMNS), *(cells.get(p) for p in primitives)))
    over = sum(1 for cell in gaps if cell.reason == OVER_CAP)
    return DatasetTable((*SHAPE_COLUMNS, *TRANSFORM_COLUMNS, *primitives), tuple(rows), frozenset(complete),
                        incomplete, over, tuple(gaps), not_exportable)


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_dataset` wrote.

    Attributes
    ----------
    csv_path, provenance_path, not_measured_path
        The files written (``None`` where not written).
    rows
        Configurations written.
    incomplete
        Configurations with a cell missing or over cap (written only with ``include_incomplete``).
    over_cap_cells, missing_cells
        Applicable cells left empty in the rows written, by reason (listed in ``not_measured_path``).
    not_exportable
        Configurations measured to the end but with a cell over cap (a part of ``incomplete``).
    """

    csv_path: Path
    provenance_path: Path | None
    rows: int
    incomplete: int
    over_cap_cells: int
    missing_cells: int = 0
    not_exportable: int = 0
    not_measured_path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-serialisable dict."""
        return {"csv": str(self.csv_path), "provenance": str(self.provenance_path) if self.provenance_path else None,
                "not_measured": str(self.not_measured_path) if self.not_measured_path else None,
                "rows": self.rows, "incomplete": self.incomplete, "not_exportable": self.not_exportable,
                "over_cap_cells": self.over_cap_cells, "missing_cells": self.missing_cells}


def find_campaign(store: Store, name: str | None = None) -> Campaign:
    """The primitive campaign called ``name``, or the only main one in ``store``.

    Raises
    ------
    InvalidInputError
        If it is missing, or ``name`` is ``None`` and the Store holds no or several main campaigns.
    """
    ours = [c for c in store.campaigns() if c.name.startswith(CAMPAIGN_PREFIX)]
    if name is not None:
        for campaign in ours:
            if campaign.name == name:
                return campaign
    else:
        others = (f"{CAMPAIGN_PREFIX}remeasure-", f"{CAMPAIGN_PREFIX}abovecap-")
        main = [c for c in ours if not c.name.startswith(others)]
        if len(main) == 1:
            return main[0]
    listed = "; ".join(c.name for c in ours) or "none"
    what = f"no primitive campaign {name!r}" if name is not None else f"{len(ours)} primitive campaigns, not one"
    raise InvalidInputError(f"the Store at {store.path} has {what} (it has: {listed}); run `edgeplan primitives "
                            "profile` first or pass --campaign NAME")


def export_dataset(store: Store, campaign: Campaign, out: str | os.PathLike[str], *, command: str = "",
                   include_incomplete: bool = False, provenance: bool = True) -> ExportSummary:
    """Write ``campaign``'s measurements as a mulder2021 CSV, and its provenance as ``OUT.provenance.json``.

    With ``include_incomplete``, configurations with missing or over-cap cells are written too (those cells
    empty, as the format has no other mark) and every such cell is listed, with its reason, in
    ``OUT.not_measured.csv`` (columns :data:`NOT_MEASURED_COLUMNS`); without it, a stale ``OUT.not_measured.csv``
    of an earlier export is removed.

    Raises
    ------
    StoreError
        If the files cannot be written.
    """
    records = store.measurements(campaign=campaign)
    primitives = tuple(campaign.params.get("primitives", ()))
    table = dataset_table(records, primitives, include_incomplete)
    target = Path(out).expanduser()
    lines = [",".join(table.columns)]
    lines += [",".join("" if v is None else str(v) for v in row) for row in table.rows]
    _write_atomic(target, "\n".join(lines) + "\n")
    gaps_path = target.with_name(target.stem + ".not_measured.csv")
    if include_incomplete:
        gaps = [",".join(NOT_MEASURED_COLUMNS)]
        gaps += [",".join((*(str(v) for v in cell.shape), cell.column, cell.reason)) for cell in table.not_measured]
        _write_atomic(gaps_path, "\n".join(gaps) + "\n")
    else:
        _remove(gaps_path)
    prov_path = None
    if provenance:
        prov_path = target.with_name(target.stem + ".provenance.json")
        data = _provenance(store, campaign, records, table, target, command, include_incomplete)
        _write_atomic(prov_path, json.dumps(data, indent=1, default=str) + "\n")
    return ExportSummary(target, prov_path, len(table.rows), table.incomplete, table.over_cap_cells,
                         table.missing_cells, table.not_exportable, gaps_path if include_incomplete else None)


def _provenance(store: Store, campaign: Campaign, records: Sequence[MeasurementRecord], table: DatasetTable,
                target: Path, command: str, include_incomplete: bool) -> dict[str, Any]:
    devices = sorted({r.device_key for r in records})
    versions = sorted({json.dumps(dict(r.versions), sort_keys=True) for r in records})
    times = sorted(r.created_at for r in records)
    gaps = target.stem + ".not_measured.csv"
    cell = "median of the timed runs after warm-up (see timing); empty = the primitive does not apply to the layer"
    if include_incomplete and table.incomplete:
        cell += f", or applies but was not measured or was over the per-call cap: those cells are listed in {gaps}"
    return {
        "format": DATASET_FORMAT, "csv": target.name, "rows": len(table.rows), "columns": list(table.columns),
        "units": "ns", "cell": cell,
        "incomplete_configs": table.incomplete, "incomplete_included": include_incomplete,
        "not_exportable_configs": table.not_exportable, "over_cap_cells": table.over_cap_cells,
        "not_measured": {"csv": gaps if include_incomplete else None, "over_cap_cells": table.over_cap_cells,
                         "missing_cells": table.missing_cells,
                         "rule": "an applicable cell left empty in a row written: over_cap = its first run was "
                                 "longer than call_cap_ms; missing = no measurement (not reached or failed)"},
        "coverage": "configurations above the campaign's work cap are not in the dataset (none sampled above it); "
                    "see edgeplan.measure.primitive_space.cap_coverage",
        "timing": "per (config, primitive): prepare untimed; one untimed run t1 (over call_cap_ms: recorded over "
                  "cap, not repeated); one more untimed run if t1 < target_ms; then clamp(ceil(target_ms / t1), "
                  "min_repeats, max_repeats) timed runs; median. One intra-op thread; random seeded inputs.",
        "config_space": "edgeplan.measure.primitive_campaign module docstring (triplets of mulder2020 Table 7 crossed "
                        "with f and s, f > im dropped, work cap, seeded order)",
        "campaign": {"name": campaign.name, "params": dict(campaign.params), "command": campaign.command,
                     "created_at": campaign.created_at, "status": campaign.status},
        "devices": [{"key": k, "descriptor": d.to_dict() if (d := store.device(k)) else None} for k in devices],
        "versions": [json.loads(v) for v in versions],
        "measured_from": times[0] if times else None, "measured_to": times[-1] if times else None,
        "exported_at": now_utc(), "export_command": command, "store": str(store.path),
    }


@dataclass(frozen=True)
class ColumnNoise:
    """Between-run MdRAE of one column (a fraction) over the cells both runs measured.

    Attributes
    ----------
    column
        A primitive or an ``X-to-Y`` transformation.
    cells
        Cells measured in both runs (configurations for a primitive, distinct ``(c, im)`` for a transformation).
    unpaired
        Cells measured in one run only: not scored, reported so that nothing is dropped silently.
    mdrae
        Median of ``|b - a| / a`` (``a`` the reference run); NaN when ``cells`` is 0.
    """

    column: str
    cells: int
    unpaired: int
    mdrae: float

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-serialisable dict (NaN as ``None``)."""
        return {"column": self.column, "cells": self.cells, "unpaired": self.unpaired,
                "mdrae": None if math.isnan(self.mdrae) else self.mdrae}


@dataclass(frozen=True)
class NoiseFloor:
    """How much two independent measurements of the same configurations differ (:func:`noise_floor`).

    Attributes
    ----------
    reference, again
        Where the two runs come from (``a`` and ``b`` of ``|b - a| / a``).
    shared_configs, reference_configs, again_configs
        Configurations in both runs, in the reference, in the other run.
    transform_tensors
        Distinct ``(c, im)`` of the shared configurations (the transformations' cells).
    primitives, transforms
        Per shared column, in the reference's order.
    only_in_reference, only_in_again
        Columns one run lacks (not scored).
    """

    reference: str
    again: str
    shared_configs: int
    reference_configs: int
    again_configs: int
    transform_tensors: int
    primitives: tuple[ColumnNoise, ...]
    transforms: tuple[ColumnNoise, ...]
    only_in_reference: tuple[str, ...] = ()
    only_in_again: tuple[str, ...] = ()

    @property
    def median_primitive_mdrae(self) -> float:
        """Median over the primitives of their between-run MdRAE: the noise floor of the primitive models."""
        return _median_of(c.mdrae for c in self.primitives)

    @property
    def median_transform_mdrae(self) -> float:
        """The same over the non-identity transformations (``X-to-X`` left out, as in the cost models)."""
        from edgeplan.measure.primitive_data import is_identity_transform

        return _median_of(c.mdrae for c in self.transforms if not is_identity_transform(c.column))

    def to_dict(self) -> dict[str, Any]:
        """The comparison as a JSON-serialisable dict (NaN as ``None``)."""
        med_p, med_t = self.median_primitive_mdrae, self.median_transform_mdrae
        return {"reference": self.reference, "again": self.again, "shared_configs": self.shared_configs,
                "reference_configs": self.reference_configs, "again_configs": self.again_configs,
                "transform_tensors": self.transform_tensors,
                "median_primitive_mdrae": None if math.isnan(med_p) else med_p,
                "median_transform_mdrae": None if math.isnan(med_t) else med_t,
                "primitives": [c.to_dict() for c in self.primitives],
                "transforms": [c.to_dict() for c in self.transforms],
                "only_in_reference": list(self.only_in_reference), "only_in_again": list(self.only_in_again)}


def noise_floor(reference: PrimitiveDataset, again: PrimitiveDataset) -> NoiseFloor:
    """Compare two measurements of the same configurations, column by column, by the cost models' MdRAE.

    Per shared column, the MdRAE (:func:`edgeplan.measure.metrics.mdrae`) of ``again`` against
    ``reference`` over the shared configurations (the layers both have) where both runs measured the cell;
    the transformations are compared per distinct ``(c, im)``, as the cost models score them.

    Parameters
    ----------
    reference, again
        Two timing tables (:func:`edgeplan.measure.primitive_data.load_primitive_csv` of two exports, or
        :func:`campaign_dataset`): typically the main campaign and its re-measured subset.

    Returns
    -------
    NoiseFloor

    Raises
    ------
    InvalidInputError
        If a table repeats a layer or the two share no layer.
    """
    import numpy as np

    rows_a, rows_b = _rows_by_shape(reference), _rows_by_shape(again)
    shared = sorted(set(rows_a) & set(rows_b))
    if not shared:
        raise InvalidInputError(f"{reference.source} and {again.source} have no configuration (c, k, im, f, s) in "
                                "common; compare a re-measured subset with the run it was drawn from")
    a = reference.subset(np.array([rows_a[k] for k in shared], dtype=np.int64))
    b = again.subset(np.array([rows_b[k] for k in shared], dtype=np.int64))
    prims = tuple(_column_noise(p, a.primitive_ns[:, i], b.primitive_ns[:, b.primitives.index(p)])
                  for i, p in enumerate(a.primitives) if p in b.primitives)
    ta, tb = a.transform_table(), b.transform_table()
    moves = tuple(_column_noise(t, ta.times_ns[:, i], tb.times_ns[:, tb.names.index(t)])
                  for i, t in enumerate(ta.names) if t in tb.names)
    columns_a, columns_b = (*a.transforms, *a.primitives), (*b.transforms, *b.primitives)
    return NoiseFloor(reference.source, again.source, len(shared), len(reference), len(again), len(ta), prims,
                      moves, tuple(c for c in columns_a if c not in columns_b),
                      tuple(c for c in columns_b if c not in columns_a))


def campaign_dataset(store: Store, campaign: Campaign) -> PrimitiveDataset:
    """The complete configurations of ``campaign`` as a timing table (what :func:`export_dataset` writes).

    Raises
    ------
    InvalidInputError
        If the campaign has no complete configuration.
    """
    import numpy as np

    from edgeplan.measure.primitive_data import PrimitiveDataset

    primitives = tuple(campaign.params.get("primitives", ()))
    table = dataset_table(store.measurements(campaign=campaign), primitives)
    if not table.rows:
        raise InvalidInputError(f"campaign {campaign.name!r} in the Store at {store.path} has no complete "
                                "configuration; measure it first")
    values = np.array([[math.nan if v is None else float(v) for v in row] for row in table.rows])
    first, last = len(SHAPE_COLUMNS), len(SHAPE_COLUMNS) + len(TRANSFORM_COLUMNS)
    return PrimitiveDataset(features=values[:, :first], primitives=primitives, primitive_ns=values[:, last:],
                            transforms=TRANSFORM_COLUMNS, transform_ns=values[:, first:last],
                            source=f"{store.path}:{campaign.name}")


def find_remeasure(store: Store, main: Campaign) -> Campaign:
    """The one re-measured subset of ``main`` in ``store`` (:func:`remeasure_campaign`).

    Raises
    ------
    InvalidInputError
        If there is none, or several (name one).
    """
    found = [c for c in store.campaigns() if c.params.get("remeasure_of") == main.name]
    if len(found) == 1:
        return found[0]
    listed = "; ".join(c.name for c in found) or "none"
    raise InvalidInputError(f"the Store at {store.path} has {len(found)} re-measured subsets of {main.name!r}, not "
                            f"one ({listed}); measure one with remeasure_campaign or name one")


def _rows_by_shape(table: PrimitiveDataset) -> dict[tuple[int, ...], int]:
    found: dict[tuple[int, ...], int] = {}
    for i, row in enumerate(table.features):
        shape = tuple(int(v) for v in row)
        if shape in found:
            raise InvalidInputError(f"{table.source} lists the layer {shape} twice (rows {found[shape] + 2} and "
                                    f"{i + 2}); the noise floor needs one row per layer")
        found[shape] = i
    return found


def _column_noise(column: str, a: Any, b: Any) -> ColumnNoise:
    import numpy as np

    from edgeplan.measure.metrics import mdrae

    ok_a, ok_b = ~np.isnan(a), ~np.isnan(b)
    both = ok_a & ok_b
    cells = int(both.sum())
    return ColumnNoise(column, cells, int((ok_a ^ ok_b).sum()), mdrae(a[both], b[both]) if cells else math.nan)


def _median_of(values: Iterable[float]) -> float:
    defined = [v for v in values if not math.isnan(v)]
    return statistics.median(defined) if defined else math.nan


def _remove(target: Path) -> None:
    try:
        target.unlink(missing_ok=True)
    except OSError as e:
        raise StoreError(f"cannot remove the stale {target}: {e.strerror or e}; delete it by hand") from e


def _write_atomic(target: Path, text: str) -> None:
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)
    except OSError as e:
        temporary.unlink(missing_ok=True)
        raise StoreError(f"cannot write {target}: {e.strerror or e}; choose a writable path") from e
