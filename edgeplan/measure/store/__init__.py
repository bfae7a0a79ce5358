"""The Store: every measurement edgeplan makes, with its provenance, in one SQLite file.

The Store is a SQLite database (standard library :mod:`sqlite3`) in WAL mode with ``synchronous=NORMAL``: each
committed transaction survives the process being killed (only a power loss or OS crash can lose the last
commits), readers never block the writer, and a second process waits up to ``busy_timeout_s`` for a lock instead
of failing. Opening never overwrites, truncates or deletes an existing file: a file that is not an edgeplan Store
is reported and left byte-for-byte unchanged.

Modules: :mod:`.schema` (the tables, the records and the schema version), :mod:`.database` (the :class:`Store`) and
:mod:`.export` (CSV and Parquet files).
"""

from __future__ import annotations

from edgeplan.measure.store.database import Store
from edgeplan.measure.store.schema import (
    CAMPAIGN_STATUSES,
    SCHEMA_STATEMENTS,
    SCHEMA_VERSION,
    Campaign,
    MeasurementRecord,
    Provenance,
)

__all__ = [
    "CAMPAIGN_STATUSES",
    "SCHEMA_STATEMENTS",
    "SCHEMA_VERSION",
    "Campaign",
    "MeasurementRecord",
    "Provenance",
    "Store",
]
