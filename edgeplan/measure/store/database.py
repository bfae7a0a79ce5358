"""The :class:`Store` class: opening a Store file, its campaigns, and recording, querying and exporting
measurements.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from edgeplan.errors import InvalidInputError, StoreError
from edgeplan.measure.device import DeviceDescriptor, collect_versions
from edgeplan.measure.harness import Timing
from edgeplan.measure.store.export import _check_existing, _flat_row, _remove_quietly, _write_csv, _write_parquet
from edgeplan.measure.store.schema import (
    _HOME_HINT,
    _JSON_COLUMNS,
    _RECORD_COLUMNS,
    _SELECT_MEASUREMENTS,
    CAMPAIGN_STATUSES,
    SCHEMA_STATEMENTS,
    SCHEMA_VERSION,
    Campaign,
    MeasurementRecord,
    Provenance,
    _check_name,
    _differences,
    _to_json,
    _utc_now,
)

__all__ = ["Store"]

class Store:
    """A measurement Store backed by one SQLite file; open it with :meth:`Store.open`.

    Use it as a context manager, or call :meth:`close`. One ``Store`` object belongs to one thread; several
    processes may open the same file at once.
    """

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._connection = connection
        self._path = path

    # ------------------------------------------------------------------ opening and closing

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> Store:
        """Open the Store at ``path``, creating the file and its parent folders if needed.

        Parameters
        ----------
        path
            The SQLite file.
        busy_timeout_s
            How long to wait for a lock held by another process before failing.

        Returns
        -------
        Store

        Raises
        ------
        StoreError
            If the path cannot be created or written, or holds something that is not an edgeplan Store (the
            file is then left untouched), or a Store written by a newer edgeplan.
        """
        if not isinstance(path, str | os.PathLike):
            raise InvalidInputError(f"Store path {path!r}: give the path of its SQLite file")
        if isinstance(busy_timeout_s, bool) or not isinstance(busy_timeout_s, int | float) or \
                not (math.isfinite(busy_timeout_s) and busy_timeout_s >= 0):
            raise InvalidInputError(f"busy_timeout_s {busy_timeout_s!r}: give a finite number of seconds >= 0")
        store_path = Path(path).expanduser()
        _check_existing(store_path)
        try:
            store_path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(store_path, timeout=busy_timeout_s, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot write the Store at {store_path}: {e}; {_HOME_HINT}") from e
        store = cls(connection, store_path)
        try:
            store._initialise(busy_timeout_s)
        except BaseException:
            connection.close()
            raise
        return store

    def _initialise(self, busy_timeout_s: float) -> None:
        db = self._connection
        try:
            db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.OperationalError as e:
            raise StoreError(f"cannot write the Store at {self._path}: {e}; {_HOME_HINT}") from e
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"{self._path} is not a readable edgeplan Store ({e}); it was left unchanged: move it away or "
                "choose another Store path"
            ) from e
        if tables and "meta" not in tables:
            raise StoreError(
                f"{self._path} is a SQLite database but not an edgeplan Store (no 'meta' table); it was left "
                "unchanged: choose another Store path"
            )
        if tables:
            self._check_version()
        with self._errors("set up"):
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            if not tables:
                self._create_schema()

    def _check_version(self) -> None:
        with self._errors("read"):
            row = self._connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = row[0] if row else None
        if version is None or not str(version).isdigit():
            raise StoreError(f"{self._path} has no valid schema_version in its meta table; choose another Store path")
        if int(version) > SCHEMA_VERSION:
            raise StoreError(
                f"the Store at {self._path} has schema version {version}, newer than this edgeplan's "
                f"{SCHEMA_VERSION}; upgrade edgeplan"
            )

    def _create_schema(self) -> None:
        with self._transaction():
            for statement in SCHEMA_STATEMENTS:
                self._connection.execute(statement)
            self._connection.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    def close(self) -> None:
        """Close the connection; every committed measurement is already on disk."""
        self._connection.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as e:
            raise StoreError(f"cannot {action} the Store at {self._path}: {e}; {_HOME_HINT}") from e

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed on success, rolled back on any exception."""
        db = self._connection
        with self._errors("write"):
            db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        with self._errors("write"):
            db.execute("COMMIT")

    # ------------------------------------------------------------------ campaigns

    def campaign(self, name: str, command: str = "", params: Mapping[str, Any] | None = None) -> Campaign:
        """Get the campaign called ``name``, creating it if it does not exist.

        Parameters
        ----------
        name
            Unique campaign name.
        command
            Command line that creates it (kept from the first call).
        params
            JSON-serialisable parameters; a resumed campaign must be given the same ones.

        Returns
        -------
        Campaign

        Raises
        ------
        InvalidInputError
            If the campaign exists with other parameters, or ``params`` is not JSON-serialisable.
        """
        _check_name("campaign name", name)
        params_json = _to_json(f"parameters of campaign {name!r}", params or {})
        with self._transaction() as db:
            existing = self._campaign_row(name)
            if existing is None:
                db.execute(
                    "INSERT INTO campaigns (name, created_at, command, params, status) VALUES (?, ?, ?, ?, 'created')",
                    (name, _utc_now(), command, params_json),
                )
        campaign = self._campaign_row(name)
        if campaign is None:  # pragma: no cover - the row was just committed
            raise StoreError(f"campaign {name!r} vanished from the Store at {self._path}")
        if _to_json("params", campaign.params) != params_json:
            differ = "; ".join(f"{key}: {was} stored, {now} given"
                               for key, was, now in _differences(dict(campaign.params), json.loads(params_json)))
            differ = differ or f"{_to_json('params', campaign.params)} stored, {params_json} given"  # 1 == 1.0
            raise InvalidInputError(
                f"campaign {name!r} already exists in the Store at {self._path} with other parameters ({differ}); "
                "resume it with the parameters it was begun with, or measure into another Store (CLI: --store or "
                "--home)"
            )
        return campaign

    def find_campaign(self, name: str) -> Campaign | None:
        """The campaign called ``name``, or None when the Store has none (nothing is created)."""
        return self._campaign_row(name)

    def _campaign_row(self, name: str) -> Campaign | None:
        with self._errors("read"):
            row = self._connection.execute(
                "SELECT id, name, created_at, command, params, status FROM campaigns WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            return None
        return Campaign(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5])

    def campaigns(self) -> list[Campaign]:
        """All campaigns, oldest first."""
        with self._errors("read"):
            names = [row[0] for row in self._connection.execute("SELECT name FROM campaigns ORDER BY id")]
        return [c for c in map(self._campaign_row, names) if c is not None]

    def set_campaign_status(self, campaign: Campaign, status: str) -> Campaign:
        """Record a campaign's status (one of :data:`CAMPAIGN_STATUSES`) and return the updated campaign."""
        if status not in CAMPAIGN_STATUSES:
            raise InvalidInputError(f"unknown campaign status {status!r}; choose one of {CAMPAIGN_STATUSES}")
        with self._transaction() as db:
            db.execute("UPDATE campaigns SET status = ? WHERE id = ?", (status, campaign.id))
        updated = self._campaign_row(campaign.name)
        if updated is None:
            raise InvalidInputError(f"campaign {campaign.name!r} is not in the Store at {self._path}")
        return updated

    def completed_task_keys(self, campaign: Campaign) -> frozenset[str]:
        """Keys of the tasks that have a committed measurement in ``campaign``."""
        with self._errors("read"):
            rows = self._connection.execute(
                "SELECT task_key FROM measurements WHERE campaign_id = ?", (campaign.id,)
            ).fetchall()
        return frozenset(row[0] for row in rows)

    # ------------------------------------------------------------------ measurements

    def add_measurement(
        self,
        timing: Timing,
        device: DeviceDescriptor,
        *,
        model: str,
        task_key: str,
        kind: str = "end_to_end",
        subject: str = "",
        extra: Mapping[str, Any] | None = None,
        provenance: Provenance | None = None,
    ) -> int:
        """Commit one measurement (and its device, if new) in its own transaction.

        Parameters
        ----------
        timing
            The harness result; its median becomes ``latency_ms``.
        device
            What it ran on; ``threads``, ``runtime``, ``runtime_version`` and ``dtype`` are copied from it.
        model
            The model as a user types it.
        task_key
            Unique key of the task inside its campaign.
        kind
            ``"end_to_end"``, ``"op"``, ...
        subject
            The operation or node measured; ``""`` for a whole model.
        extra
            Anything else, JSON-serialisable.
        provenance
            Its campaign, command line and package versions; default :class:`Provenance` (a one-off measurement,
            no command, the versions of this process).

        Returns
        -------
        int
            The new row's ``id``.

        Raises
        ------
        StoreError
            If the campaign already has a measurement for ``task_key``, or the write fails.
        InvalidInputError
            On empty names or values that are not JSON-serialisable.
        """
        provenance = provenance or Provenance()
        campaign, versions = provenance.campaign, provenance.versions
        row = {
            "campaign_id": campaign.id if campaign is not None else None,
            "task_key": _check_name("task key", task_key),
            "device_key": device.key,
            "model": _check_name("model", model),
            "kind": _check_name("measurement kind", kind),
            "subject": subject,
            "latency_ms": timing.median_ms,
            "p25_ms": timing.p25_ms,
            "p75_ms": timing.p75_ms,
            "min_ms": timing.min_ms,
            "max_ms": timing.max_ms,
            "std_ms": timing.std_ms,
            "ci_rel": timing.ci_rel,
            "repeats": timing.repeats,
            "stopped_by": timing.stopped_by,
            "threads": device.threads,
            "runtime": device.runtime,
            "runtime_version": device.runtime_version,
            "dtype": device.dtype,
            "versions": _to_json("versions", versions if versions is not None else collect_versions()),
            "command": provenance.command,
            "created_at": _utc_now(),
            "extra": _to_json(f"extra of task {task_key!r}", extra or {}),
        }
        sql = f"INSERT INTO measurements ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT OR IGNORE INTO devices (key, descriptor) VALUES (?, ?)",
                    (device.key, json.dumps(device.to_dict(), sort_keys=True)),
                )
                cursor = db.execute(sql, tuple(row.values()))
        except sqlite3.IntegrityError as e:
            where = f"campaign {campaign.name!r}" if campaign is not None else "the Store"
            raise StoreError(
                f"task {task_key!r} cannot be added to {where} at {self._path}: {e}; a campaign measures each task "
                "once, so use a new campaign to measure it again"
            ) from e
        if cursor.lastrowid is None:  # pragma: no cover - sqlite3 always sets it after an INSERT
            raise StoreError(f"the Store at {self._path} returned no id for task {task_key!r}")
        return cursor.lastrowid

    def measurements(
        self,
        model: str | None = None,
        device_key: str | None = None,
        kind: str | None = None,
        campaign: str | Campaign | None = None,
    ) -> list[MeasurementRecord]:
        """Measurements matching every filter given, in the order they were committed.

        Parameters
        ----------
        model, device_key, kind
            Exact values to match; ``None`` matches anything.
        campaign
            A campaign or its name; ``None`` matches anything (one-off measurements included).

        Returns
        -------
        list of MeasurementRecord
        """
        campaign_name = campaign.name if isinstance(campaign, Campaign) else campaign
        filters = {"m.model": model, "m.device_key": device_key, "m.kind": kind, "c.name": campaign_name}
        given = {column: value for column, value in filters.items() if value is not None}
        where = " WHERE " + " AND ".join(f"{column} = ?" for column in given) if given else ""
        with self._errors("read"):
            rows = self._connection.execute(_SELECT_MEASUREMENTS + where + " ORDER BY m.id", tuple(given.values()))
            return [self._record(row) for row in rows]

    @staticmethod
    def _record(row: Sequence[Any]) -> MeasurementRecord:
        values = dict(zip(_RECORD_COLUMNS, row, strict=True))
        for column in _JSON_COLUMNS:
            values[column] = json.loads(values[column])
        return MeasurementRecord(**values)

    def device(self, key: str) -> DeviceDescriptor | None:
        """The descriptor stored under ``key``, or ``None`` if no measurement used that device."""
        with self._errors("read"):
            row = self._connection.execute("SELECT descriptor FROM devices WHERE key = ?", (key,)).fetchone()
        return DeviceDescriptor.from_dict(json.loads(row[0])) if row else None

    # ------------------------------------------------------------------ export

    def export(
        self,
        path: str | os.PathLike[str],
        *,
        model: str | None = None,
        device_key: str | None = None,
        kind: str | None = None,
        campaign: str | Campaign | None = None,
    ) -> int:
        """Write measurements to a ``.csv`` or ``.parquet`` file, chosen by the suffix of ``path``.

        The columns are the fields of :class:`MeasurementRecord`; ``versions`` and ``extra`` stay JSON text. The
        file is written to a temporary name next to ``path`` and renamed, so a failed export leaves no half file.

        Parameters
        ----------
        path
            Output file; an existing file is replaced.
        model, device_key, kind, campaign
            Filters, as in :meth:`measurements`.

        Returns
        -------
        int
            Number of rows written.

        Raises
        ------
        InvalidInputError
            If the suffix is neither ``.csv`` nor ``.parquet``, or ``path`` is the Store's own file.
        StoreError
            If the file cannot be written, or pyarrow is missing for parquet.
        """
        target = Path(path).expanduser()
        suffix = target.suffix.lower()
        if suffix not in (".csv", ".parquet"):
            raise InvalidInputError(
                f"cannot export to {target}: unknown format {target.suffix!r}; use a .csv or .parquet file name"
            )
        if target.resolve() == self._path.resolve():
            raise InvalidInputError(f"cannot export to {target}: it is this Store's own database file, which the "
                                    "export would replace; choose another file name")
        records = self.measurements(model=model, device_key=device_key, kind=kind, campaign=campaign)
        rows = [_flat_row(record) for record in records]
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if suffix == ".csv":
                _write_csv(temporary, rows)
            else:
                _write_parquet(temporary, rows)
            os.replace(temporary, target)
        except OSError as e:
            _remove_quietly(temporary)
            raise StoreError(f"cannot export measurements to {target}: {e}; choose a writable path") from e
        except BaseException:
            _remove_quietly(temporary)
            raise
        return len(rows)
