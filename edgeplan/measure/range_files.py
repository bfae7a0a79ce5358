"""Layer-range measurements as files: export from a Store, load the shipped ones; and
:func:`profile_range_tables`, which measures the ranges of several models and thread counts within one time budget
and exports them (the ``edgeplan profile ranges`` command).

The package ships the ranges of the eshratifar2018 models measured on the reference machine
(``edgeplan/data/layer_ranges.json``), so plans and the paper reproduction work offline. The file keeps the
provenance of every table: the device descriptor, package versions, the date and the command that measured it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from edgeplan.errors import InvalidInputError, StoreError
from edgeplan.measure.device import DeviceDescriptor, collect_versions
from edgeplan.measure.range_profile import RANGE_KIND, RangeTable
from edgeplan.measure.store import Store

__all__ = ["FORMAT", "export_range_tables", "load_range_tables", "shipped_range_table"]

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
