"""Layer-range measurements as files: export from a Store, load the shipped ones; and
:func:`profile_range_tables`, which measures the ranges of several models and thread counts within one time budget
and exports them (the ``edgeplan profile ranges`` command).

The package ships the ranges of the eshratifar2018 models measured on the reference machine
(``edgeplan/data/layer_ranges.json``), so plans and the paper reproduction work offline. The file keeps the
provenance of every table: the device descriptor, package versions, the date and the command that measured it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from edgeplan.errors import InvalidInputError, StoreError
from edgeplan.measure.campaign import CampaignReport
from edgeplan.measure.device import DeviceDescriptor, collect_versions
from edgeplan.measure.range_profile import RANGE_KIND, RangeTable, SweepConfig
from edgeplan.measure.store import Store

__all__ = ["FORMAT", "RangeProfileResult", "RangeSweep", "export_range_tables", "load_range_tables",
           "profile_range_tables", "shipped_range_table"]

FORMAT = "edgeplan-layer-ranges/1"
_SHIPPED = "layer_ranges.json"


def export_range_tables(store: Store, models: Sequence[str], path: Path, command: str) -> int:
    """Write every layer-range row of ``models`` in ``store`` to ``path`` (one table per model and device).

    Returns
    -------
    int
        Number of tables written.

    Raises
    ------
    StoreError
        When the Store holds no layer ranges for one of the models.
    """
    tables: list[dict[str, Any]] = []
    for model in models:
        rows = store.measurements(model=model, kind=RANGE_KIND)
        if not rows:
            raise StoreError(f"the Store at {store.path} has no layer ranges of {model!r}; profile it first")
        by_campaign: dict[tuple[str, str], list[Any]] = {}  # one table per device and campaign (input shape)
        for rec in rows:
            by_campaign.setdefault((rec.device_key, rec.campaign or ""), []).append(rec)
        for (key, _), recs in sorted(by_campaign.items()):
            device = store.device(key)
            if device is None:  # pragma: no cover - the Store writes the device with each row
                raise StoreError(f"device {key} of {model!r} is missing from the Store at {store.path}")
            params = recs[0].extra.get("task_params", {})
            n = int(params.get("n_layers", 0))
            layers = [""] * n
            ranges = []
            for rec in recs:
                p = rec.extra["task_params"]
                layers[p["first"]] = p["first_layer"]
                layers[p["last"]] = p["last_layer"]
                ranges.append([p["first"], p["last"], rec.latency_ms, rec.p25_ms, rec.p75_ms, rec.repeats])
            tables.append({
                "model": model, "device_key": key, "device": device.to_dict(), "layers": layers,
                "campaign": recs[0].campaign, "command": recs[0].command, "measured_at": recs[-1].created_at,
                "versions": dict(recs[0].versions), "method": recs[0].extra.get("method", ""),
                "ranges": ranges,
            })
    doc = {"format": FORMAT, "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "command": command, "versions": collect_versions(),
           "columns": ["first", "last", "median_ms", "p25_ms", "p75_ms", "repeats"], "tables": tables}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return len(tables)


@dataclass(frozen=True)
class RangeSweep:
    """What :func:`profile_range_tables` did for one model at one thread count."""

    model: str
    threads: int
    report: CampaignReport


@dataclass(frozen=True)
class RangeProfileResult:
    """What :func:`profile_range_tables` did.

    Attributes
    ----------
    store
        The Store the rows went to.
    sweeps
        One per model and thread count measured, models first.
    not_started
        ``(model, threads)`` the time budget left no time for (run again to measure them).
    exported_tables
        Tables written by the export, or ``None`` without one.
    """

    store: str
    sweeps: tuple[RangeSweep, ...]
    not_started: tuple[tuple[str, int], ...] = ()
    exported_tables: int | None = None

    @property
    def failed(self) -> int:
        """Ranges that could not be measured, over every sweep."""
        return sum(len(s.report.failed) for s in self.sweeps)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-serialisable dict."""
        return {"store": self.store, "campaigns": [s.report.to_dict() for s in self.sweeps],
                "not_started": [{"model": m, "threads": t} for m, t in self.not_started],
                "exported_tables": self.exported_tables}


def profile_range_tables(models: Sequence[str], threads: Sequence[int] = (1,), *, config: SweepConfig | None = None,
                         budget_s: float | None = None, export: Path | None = None, progress: bool = False,
                         command: str = "", home: str | Path | None = None) -> RangeProfileResult:
    """Measure every layer range of each model at each thread count into the edgeplan home's Store, then export
    them (``profile ranges``).

    One :func:`~edgeplan.measure.range_profile.profile_ranges` per model and thread count, all within one time
    budget: those the budget leaves no time for are not started, and running the same call again resumes where
    this one stopped.

    Parameters
    ----------
    models
        Zoo strings.
    threads
        Intra-op thread counts.
    config
        Sweep repeats and warm-up (:func:`~edgeplan.measure.range_profile.profile_ranges`).
    budget_s
        Time budget of the whole call, every model and thread count together; ``None`` for none.
    export
        A JSON file to write the models' tables to afterwards, with provenance (:func:`export_range_tables`).
    progress
        Show progress bars.
    command
        Command line stored as provenance.
    home
        The edgeplan home whose Store holds the rows.

    Returns
    -------
    RangeProfileResult

    Raises
    ------
    InvalidInputError
        For an invalid thread count, a non-positive budget, a sweep of the Store begun with other settings, or an
        export file that cannot be written.
    """
    from edgeplan.measure.harness import check_thread_count
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.range_profile import profile_ranges

    for t in threads:
        check_thread_count(t)
    if budget_s is not None and not budget_s > 0:
        raise InvalidInputError(f"the time budget must be positive or None, got {budget_s}")
    started = time.monotonic()
    sweeps, not_started = [], []
    with Store.open(default_store_path(home)) as store:
        for model in models:
            for t in threads:
                left = None if budget_s is None else budget_s - (time.monotonic() - started)
                if left is not None and left <= 0:
                    not_started.append((model, t))
                    continue
                report = profile_ranges(store, model, threads=t, config=config, budget_s=left, progress=progress,
                                        command=command)
                sweeps.append(RangeSweep(model, t, report))
        exported = None
        if export is not None:
            try:
                exported = export_range_tables(store, list(models), Path(export), command)
            except OSError as e:
                raise InvalidInputError(f"cannot write {export}: {e.strerror}; the measurements are safe in "
                                        f"{store.path}, export again to a writable path") from e
    return RangeProfileResult(str(store.path), tuple(sweeps), tuple(not_started), exported)


def load_range_tables(path: Path | None = None) -> list[RangeTable]:
    """Read a file written by :func:`export_range_tables` (default: the shipped one).

    Raises
    ------
    InvalidInputError
        When the file is not a layer-range file.
    """
    if path is None:
        text = resources.files("edgeplan.data").joinpath(_SHIPPED).read_text()
        source = f"shipped {_SHIPPED}"
    else:
        text, source = Path(path).read_text(), str(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{source} is not JSON ({e}); pass a file written by `profile ranges --export`") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInputError(f"{source} is not a {FORMAT} file; pass a file written by `profile ranges --export`")
    out = []
    for t in doc["tables"]:
        n = len(t["layers"])
        median, iqr = np.full((n, n), np.nan), np.full((n, n), np.nan)
        for i, j, med, p25, p75, _ in t["ranges"]:
            median[i, j], iqr[i, j] = med, p75 - p25
        device = DeviceDescriptor.from_dict(t["device"])
        where = f"{source}: measured {t['measured_at'][:10]} on {device.cpu_model}"
        out.append(RangeTable(t["model"], tuple(t["layers"]), median, iqr, device, where))
    return out


def shipped_range_table(model: str, threads: int) -> RangeTable | None:
    """The shipped table of ``model`` measured with torch at ``threads`` threads, if there is one."""
    if not resources.files("edgeplan.data").joinpath(_SHIPPED).is_file():
        return None
    for table in load_range_tables():
        if table.model == model and table.device.threads == threads and table.device.runtime == "torch":
            return table
    return None
