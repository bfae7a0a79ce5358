"""The Store's schema: its tables, the records read from them, and the helpers that check and encode values.

Schema (version 1)
------------------
``meta``
    Key-value facts about the file. ``key`` (TEXT, primary key), ``value`` (TEXT). The row
    ``('schema_version', '1')`` says which schema the file follows; a newer version is refused.
``devices``
    One row per distinct device (see :class:`~edgeplan.measure.device.DeviceDescriptor`). ``key`` (TEXT, primary
    key): ``DeviceDescriptor.key``, the hash of the fields that change latency; ``descriptor`` (TEXT): the
    descriptor as JSON (``DeviceDescriptor.to_dict()``), as first seen with that key.
``campaigns``
    Named, resumable batches of measurements. ``id`` (INTEGER, primary key); ``name`` (TEXT, unique): the name a
    user resumes by; ``created_at`` (TEXT): UTC ISO-8601 time of creation; ``command``: the command line that
    created it; ``params`` (TEXT): the campaign's parameters as JSON (resuming with different ones is refused);
    ``status``: ``created``, ``running`` (in progress, or killed while running), ``complete`` (every task has a
    row) or ``partial`` (stopped by its time budget, or tasks failed).
``measurements``
    One row per measured latency. ``id`` (INTEGER, primary key); ``campaign_id`` (INTEGER, nullable, references
    ``campaigns.id``): the campaign that made it, ``NULL`` for a one-off measurement; ``task_key`` (TEXT): the
    task's unique key inside its campaign; ``device_key`` (TEXT, references ``devices.key``); ``model`` (TEXT): the
    model as a user types it (``torchvision:resnet18``, ``model.onnx``, ...); ``kind`` (TEXT): ``end_to_end``,
    ``op``, ...; ``subject`` (TEXT): the operation or node measured, ``''`` for a whole model; ``latency_ms``
    (REAL): the median; ``p25_ms``, ``p75_ms``, ``min_ms``, ``max_ms``, ``std_ms`` (REAL): the spread of the
    timed runs; ``ci_rel`` (REAL): relative half-width of the 95% confidence interval of the median (``Inf`` with
    fewer than 6 runs); ``repeats`` (INTEGER): timed runs; ``stopped_by`` (TEXT): ``confidence``, ``time_cap`` or
    ``max_repeats``; ``threads`` (INTEGER), ``runtime`` (TEXT), ``runtime_version`` (TEXT), ``dtype`` (TEXT): copied
    from the device for direct querying; ``versions`` (TEXT): JSON of package versions (python, edgeplan, torch,
    onnxruntime, numpy, ...); ``command`` (TEXT): the command line that made it; ``created_at`` (TEXT): UTC
    ISO-8601 time of the commit; ``extra`` (TEXT): JSON of anything else (input shapes, batch size, ...).
    ``UNIQUE (campaign_id, task_key)``: a campaign never measures a task twice (SQLite treats ``NULL``
    campaign ids as distinct, so one-off measurements may repeat a task key).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from edgeplan.errors import InvalidInputError

__all__ = ["CAMPAIGN_STATUSES", "Campaign", "MeasurementRecord", "Provenance", "SCHEMA_STATEMENTS", "SCHEMA_VERSION"]

#: Version of the schema this module writes (stored in ``meta``).
SCHEMA_VERSION = 1
#: Values of ``campaigns.status``.
CAMPAIGN_STATUSES: tuple[str, ...] = ("created", "running", "complete", "partial")

#: The ``CREATE`` statements of the schema, in order.
SCHEMA_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS devices (
    key        TEXT PRIMARY KEY,
    descriptor TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS campaigns (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    command    TEXT NOT NULL,
    params     TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('created', 'running', 'complete', 'partial'))
)""",
    """CREATE TABLE IF NOT EXISTS measurements (
    id              INTEGER PRIMARY KEY,
    campaign_id     INTEGER REFERENCES campaigns (id),
    task_key        TEXT NOT NULL,
    device_key      TEXT NOT NULL REFERENCES devices (key),
    model           TEXT NOT NULL,
    kind            TEXT NOT NULL,
    subject         TEXT NOT NULL DEFAULT '',
    latency_ms      REAL NOT NULL,
    p25_ms          REAL NOT NULL,
    p75_ms          REAL NOT NULL,
    min_ms          REAL NOT NULL,
    max_ms          REAL NOT NULL,
    std_ms          REAL NOT NULL,
    ci_rel          REAL NOT NULL,
    repeats         INTEGER NOT NULL,
    stopped_by      TEXT NOT NULL,
    threads         INTEGER NOT NULL,
    runtime         TEXT NOT NULL,
    runtime_version TEXT NOT NULL,
    dtype           TEXT NOT NULL,
    versions        TEXT NOT NULL,
    command         TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    extra           TEXT NOT NULL DEFAULT '{}',
    UNIQUE (campaign_id, task_key)
)""",
    "CREATE INDEX IF NOT EXISTS measurements_model ON measurements (model)",
    "CREATE INDEX IF NOT EXISTS measurements_device ON measurements (device_key)",
)

_SQLITE_HEADER = b"SQLite format 3\x00"
_HOME_HINT = "set EDGEPLAN_HOME or --home to a writable folder"


@dataclass(frozen=True)
class Campaign:
    """A named, resumable batch of measurements (a row of ``campaigns``)."""

    id: int
    name: str
    created_at: str
    command: str
    params: Mapping[str, Any]
    status: str


@dataclass(frozen=True)
class Provenance:
    """Where a measurement comes from, as :meth:`~edgeplan.measure.store.Store.add_measurement` records it.

    Attributes
    ----------
    campaign
        The campaign it belongs to, or ``None`` for a one-off measurement.
    command
        The command line that made it.
    versions
        Package versions; ``None``: :func:`~edgeplan.measure.device.collect_versions` at the time of the commit.
    """

    campaign: Campaign | None = None
    command: str = ""
    versions: Mapping[str, str] | None = None


@dataclass(frozen=True)
class MeasurementRecord:
    """One row of ``measurements``; ``campaign`` is the campaign's name (``None`` for a one-off measurement).

    See the module docstring for the meaning of each field.
    """

    id: int
    campaign_id: int | None
    campaign: str | None
    task_key: str
    device_key: str
    model: str
    kind: str
    subject: str
    latency_ms: float
    p25_ms: float
    p75_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    ci_rel: float
    repeats: int
    stopped_by: str
    threads: int
    runtime: str
    runtime_version: str
    dtype: str
    versions: Mapping[str, str]
    command: str
    created_at: str
    extra: Mapping[str, Any]


_RECORD_COLUMNS = tuple(f.name for f in fields(MeasurementRecord))
_JSON_COLUMNS = ("versions", "extra")
_SELECT_MEASUREMENTS = (
    "SELECT "
    + ", ".join("c.name" if name == "campaign" else f"m.{name}" for name in _RECORD_COLUMNS)
    + " FROM measurements AS m LEFT JOIN campaigns AS c ON c.id = m.campaign_id"
)


def _differences(was: Any, now: Any, key: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, stored value, given value) of every leaf where two parameter dicts differ."""
    if isinstance(was, dict) and isinstance(now, dict):
        return [d for k in sorted(set(was) | set(now), key=str)
                for d in _differences(was.get(k, "(none)"), now.get(k, "(none)"), f"{key}.{k}" if key else str(k))]
    return [] if was == now else [(key or "parameters", was, now)]


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _to_json(what: str, value: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(value), sort_keys=True)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"{what} must be JSON-serialisable: {e}; pass strings, numbers, lists, dicts") from e


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{what} must be a non-empty string, got {value!r}")
    return value
