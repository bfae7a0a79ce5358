"""Writing measurement records to CSV or Parquet, and the checks that keep an export from overwriting a file."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from edgeplan.errors import StoreError
from edgeplan.measure.store.schema import _HOME_HINT, _JSON_COLUMNS, _RECORD_COLUMNS, _SQLITE_HEADER, MeasurementRecord


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # the temporary file could not be created in the first place


def _check_existing(path: Path) -> None:
    """Refuse, without touching it, anything at ``path`` that is not an empty file or a SQLite database."""
    if path.is_dir():
        raise StoreError(f"the Store path {path} is a folder; give a file path such as {path / 'store.sqlite'}")
    if not path.is_file():
        return
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_HEADER))
    except OSError as e:
        raise StoreError(f"cannot read the Store at {path}: {e}; {_HOME_HINT}") from e
    if header and header != _SQLITE_HEADER:
        raise StoreError(
            f"{path} is not an edgeplan Store (not a SQLite database); it was left unchanged: move it away or "
            "choose another Store path"
        )


def _flat_row(record: MeasurementRecord) -> dict[str, Any]:
    row = {name: getattr(record, name) for name in _RECORD_COLUMNS}
    for column in _JSON_COLUMNS:
        row[column] = json.dumps(dict(row[column]), sort_keys=True)
    return row


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=_RECORD_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise StoreError("exporting to parquet needs pyarrow; install it with `pip install pyarrow`") from e
    integer_columns = {"id", "campaign_id", "repeats", "threads"}
    float_columns = {"ci_rel", *(name for name in _RECORD_COLUMNS if name.endswith("_ms"))}

    def arrow_type(name: str) -> Any:
        return pa.int64() if name in integer_columns else pa.float64() if name in float_columns else pa.string()

    schema = pa.schema([(name, arrow_type(name)) for name in _RECORD_COLUMNS])
    try:
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    except pa.ArrowException as e:
        raise OSError(f"pyarrow could not write {path}: {e}") from e
