"""Tests of the Store: schema, round trips, uniqueness, export, refusal of bad paths and files, EDGEPLAN_HOME."""

from __future__ import annotations

import csv
import json
import math
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from edgeplan.errors import InvalidInputError, StoreError
from edgeplan.measure import (
    SCHEMA_VERSION,
    DeviceDescriptor,
    MeasurementRecord,
    Provenance,
    Store,
    Timing,
    default_store_path,
    describe_device,
    edgeplan_home,
)
from edgeplan.measure.store import SCHEMA_STATEMENTS

REPO_ROOT = Path(__file__).resolve().parents[1]


def _device(threads: int = 1) -> DeviceDescriptor:
    return DeviceDescriptor(
        cpu_model="Test CPU @ 1 GHz",
        logical_cores=2,
        physical_cores=1,
        threads=threads,
        runtime="torch",
        runtime_version="0.0-test",
        dtype="float32",
        accelerator=None,
        hostname="testhost",
        os="TestOS",
        python="3.11.0",
    )


def _timing(scale: float = 1.0, samples: int = 8) -> Timing:
    return Timing.from_samples([scale * (1.0 + 0.01 * i) for i in range(samples)], "confidence")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "store.sqlite") as opened:
        yield opened


# ---------------------------------------------------------------- schema


def test_schema_tables_columns_and_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dirs" / "store.sqlite"
    Store.open(path).close()
    assert path.is_file()
    db = sqlite3.connect(path)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"meta", "devices", "campaigns", "measurements"}
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        columns = [row[1] for row in db.execute("PRAGMA table_info(measurements)")]
        expected = [f for f in MeasurementRecord.__dataclass_fields__ if f != "campaign"]
        assert columns == expected
        campaign_columns = [row[1] for row in db.execute("PRAGMA table_info(campaigns)")]
        assert campaign_columns == ["id", "name", "created_at", "command", "params", "status"]
    finally:
        db.close()
    assert len(SCHEMA_STATEMENTS) >= 4


def test_reopening_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with Store.open(path) as first:
        row_id = first.add_measurement(_timing(), _device(), model="m", task_key="t")
    with Store.open(path) as second:
        assert [r.id for r in second.measurements()] == [row_id]


# ---------------------------------------------------------------- round trip


def test_measurement_round_trip(store: Store) -> None:
    campaign = store.campaign("c1", command="edgeplan measure", params={"threads": [1, 2]})
    timing, device = _timing(2.0), _device()
    row_id = store.add_measurement(
        timing,
        device,
        model="torchvision:resnet18",
        task_key="resnet18|1",
        kind="op",
        subject="conv1",
        extra={"shape": [1, 3, 224, 224]},
        provenance=Provenance(campaign, "edgeplan measure", {"python": "3.11.0", "torch": "0.0-test"}),
    )
    (record,) = store.measurements()
    assert record.id == row_id
    assert record.campaign_id == campaign.id
    assert record.campaign == "c1"
    assert (record.task_key, record.model, record.kind, record.subject) == (
        "resnet18|1",
        "torchvision:resnet18",
        "op",
        "conv1",
    )
    assert record.device_key == device.key
    assert record.latency_ms == timing.median_ms
    assert (record.p25_ms, record.p75_ms, record.min_ms, record.max_ms, record.std_ms) == (
        timing.p25_ms,
        timing.p75_ms,
        timing.min_ms,
        timing.max_ms,
        timing.std_ms,
    )
    assert (record.ci_rel, record.repeats, record.stopped_by) == (timing.ci_rel, timing.repeats, "confidence")
    assert (record.threads, record.runtime, record.runtime_version, record.dtype) == (1, "torch", "0.0-test", "float32")
    assert record.versions == {"python": "3.11.0", "torch": "0.0-test"}
    assert record.extra == {"shape": [1, 3, 224, 224]}
    assert record.command == "edgeplan measure"
    assert record.created_at.endswith("+00:00")
    assert store.device(device.key) == device
    assert store.device("nope") is None


def test_default_versions_and_infinite_ci(store: Store) -> None:
    store.add_measurement(Timing.from_samples([3.0], "time_cap"), _device(), model="m", task_key="t")
    (record,) = store.measurements()
    assert math.isinf(record.ci_rel)
    assert record.versions["python"]
    assert "edgeplan" in record.versions
    assert record.campaign_id is None and record.campaign is None


def test_versions_are_read_once_and_handed_out_as_copies(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Package metadata cost 12 ms a row, nine tenths of a range campaign: it is read once per process."""
    import importlib.metadata

    from edgeplan.measure import collect_versions

    first = collect_versions()
    first["torch"] = "changed by a caller"

    def unreadable(package: str) -> str:
        raise AssertionError(f"package metadata read again for {package}")

    monkeypatch.setattr(importlib.metadata, "version", unreadable)
    again = collect_versions()
    assert again["torch"] != "changed by a caller" and again["edgeplan"] == first["edgeplan"]
    store.add_measurement(Timing.from_samples([3.0], "time_cap"), _device(), model="m", task_key="t")
    assert store.measurements()[0].versions == again


def test_filters(store: Store) -> None:
    c1, c2 = store.campaign("c1"), store.campaign("c2")
    d1, d2 = _device(1), _device(2)
    store.add_measurement(_timing(), d1, model="a", task_key="1", provenance=Provenance(c1))
    store.add_measurement(_timing(), d2, model="a", task_key="2", kind="op", subject="x", provenance=Provenance(c1))
    store.add_measurement(_timing(), d1, model="b", task_key="1", provenance=Provenance(c2))
    assert d1.key != d2.key
    assert [r.task_key for r in store.measurements(model="a")] == ["1", "2"]
    assert [r.model for r in store.measurements(device_key=d1.key)] == ["a", "b"]
    assert [r.subject for r in store.measurements(kind="op")] == ["x"]
    assert [r.model for r in store.measurements(campaign="c2")] == ["b"]
    assert [r.task_key for r in store.measurements(campaign=c1, kind="end_to_end")] == ["1"]
    assert store.measurements(campaign="missing") == []


def test_device_key_ignores_provenance_only_fields() -> None:
    device = _device()
    assert replace(device, hostname="other", os="other", python="3.12").key == device.key
    assert replace(device, threads=4).key != device.key
    assert replace(device, runtime_version="9").key != device.key
    assert replace(device, accelerator="NVIDIA H100").key != device.key
    assert DeviceDescriptor.from_dict(json.loads(json.dumps(device.to_dict()))) == device
    with pytest.raises(InvalidInputError, match="missing fields"):
        DeviceDescriptor.from_dict({"cpu_model": "x"})


def test_describe_device_on_this_machine() -> None:
    pytest.importorskip("torch")
    device = describe_device("torch", threads=1)
    assert device.threads == 1 and device.runtime == "torch" and device.accelerator is None
    assert device.cpu_model and device.logical_cores >= 1
    assert describe_device("torch", threads=1).key == device.key
    with pytest.raises(InvalidInputError, match="thread count"):
        describe_device("torch", threads=0)
    with pytest.raises(InvalidInputError, match="unknown runtime"):
        describe_device("tensorflow", threads=1)


# ---------------------------------------------------------------- campaigns and uniqueness


def test_campaign_get_or_create(store: Store) -> None:
    created = store.campaign("c", command="cmd", params={"a": 1})
    again = store.campaign("c", command="other cmd", params={"a": 1})
    assert again.id == created.id and again.command == "cmd" and again.status == "created"
    with pytest.raises(InvalidInputError, match="already exists"):
        store.campaign("c", params={"a": 2})
    store.campaign("d", params={"timing": {"x": 1, "y": 2}})
    with pytest.raises(InvalidInputError, match=r"other parameters \(timing.y: 2 stored, 3 given; z: \(none\) "
                                                r"stored, 0 given\); resume it"):
        store.campaign("d", params={"timing": {"x": 1, "y": 3}, "z": 0})
    with pytest.raises(InvalidInputError, match=r'other parameters \(\{"a": 1\} stored, \{"a": 1.0\} given\)'):
        store.campaign("c", params={"a": 1.0})  # equal in Python, not in the Store
    assert [c.name for c in store.campaigns()] == ["c", "d"]


def test_a_campaign_never_measures_a_task_twice(store: Store) -> None:
    campaign = store.campaign("c")
    store.add_measurement(_timing(), _device(), model="m", task_key="k", provenance=Provenance(campaign))
    with pytest.raises(StoreError, match="'k'"):
        store.add_measurement(_timing(3.0), _device(), model="m", task_key="k", provenance=Provenance(campaign))
    assert len(store.measurements()) == 1
    # The same key in another campaign, or outside campaigns, is fine.
    other = Provenance(store.campaign("other"))
    store.add_measurement(_timing(), _device(), model="m", task_key="k", provenance=other)
    store.add_measurement(_timing(), _device(), model="m", task_key="k")
    store.add_measurement(_timing(), _device(), model="m", task_key="k")
    assert len(store.measurements()) == 4
    assert store.completed_task_keys(campaign) == frozenset({"k"})


def test_bad_measurement_values_are_refused(store: Store) -> None:
    with pytest.raises(InvalidInputError, match="task key"):
        store.add_measurement(_timing(), _device(), model="m", task_key="")
    with pytest.raises(InvalidInputError, match="JSON"):
        store.add_measurement(_timing(), _device(), model="m", task_key="t", extra={"f": object()})
    assert store.measurements() == []


# ---------------------------------------------------------------- export


def _fill(store: Store) -> list[MeasurementRecord]:
    campaign = store.campaign("c")
    for i in range(3):
        store.add_measurement(_timing(i + 1.0), _device(), model=f"m{i}", task_key=f"t{i}",
                              provenance=Provenance(campaign))
    store.add_measurement(Timing.from_samples([1.0], "time_cap"), _device(), model="solo", task_key="s")
    return store.measurements()


def test_export_csv_reads_back(store: Store, tmp_path: Path) -> None:
    records = _fill(store)
    out = tmp_path / "out" / "m.csv"
    assert store.export(out) == len(records)
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["id"]) for r in rows] == [r.id for r in records]
    assert [float(r["latency_ms"]) for r in rows] == [r.latency_ms for r in records]
    assert [r["campaign"] for r in rows] == ["c", "c", "c", ""]
    assert json.loads(rows[0]["versions"]) == records[0].versions
    assert math.isinf(float(rows[3]["ci_rel"]))
    assert store.export(out, model="m1") == 1  # an existing export is replaced
    with out.open(newline="", encoding="utf-8") as handle:
        assert [r["model"] for r in csv.DictReader(handle)] == ["m1"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.csv"]  # no temporary file left


def test_export_parquet_reads_back(store: Store, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    records = _fill(store)
    out = tmp_path / "m.parquet"
    assert store.export(out) == len(records)
    table = pq.read_table(out)
    assert table.column_names == list(MeasurementRecord.__dataclass_fields__)
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == [r.id for r in records]
    assert [r["latency_ms"] for r in rows] == [r.latency_ms for r in records]
    assert [r["campaign_id"] for r in rows][-1] is None
    assert json.loads(rows[1]["extra"]) == dict(records[1].extra)
    assert str(table.schema.field("repeats").type) == "int64"


def test_export_empty_parquet_has_a_schema(store: Store, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    assert store.export(tmp_path / "empty.parquet") == 0
    assert pq.read_table(tmp_path / "empty.parquet").num_rows == 0


def test_export_unknown_suffix(store: Store, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"\.csv or \.parquet"):
        store.export(tmp_path / "m.xlsx")
    assert not (tmp_path / "m.xlsx").exists()


# ---------------------------------------------------------------- bad paths and files


def test_unwritable_path_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for path in (blocker / "store.sqlite", blocker / "sub" / "store.sqlite"):
        with pytest.raises(StoreError, match=r"cannot write the Store at .*EDGEPLAN_HOME or --home"):
            Store.open(path)
    assert blocker.read_text() == "not a folder"


def test_a_folder_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a folder"):
        Store.open(tmp_path)


@pytest.mark.parametrize(
    "content",
    [
        b"this is my thesis, not a database\n" * 100,
        b"SQLite format 3\x00" + b"\xff" * 4000,
        bytes(range(256)) * 20,
    ],
    ids=["text", "sqlite-header-garbage", "binary"],
)
def test_corrupt_file_is_reported_and_left_unchanged(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "store.sqlite"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="left unchanged"):
        Store.open(path)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.sqlite"]


def test_foreign_sqlite_database_is_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.execute("INSERT INTO notes VALUES ('keep me')")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not an edgeplan Store"):
        Store.open(path)
    assert path.read_bytes() == before


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    Store.open(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="upgrade edgeplan"):
        Store.open(path)


# ---------------------------------------------------------------- home folder


def test_edgeplan_home_respected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EDGEPLAN_HOME", str(tmp_path / "from_env"))
    assert edgeplan_home() == tmp_path / "from_env"
    assert default_store_path() == tmp_path / "from_env" / "store.sqlite"
    assert edgeplan_home(tmp_path / "explicit") == tmp_path / "explicit"
    assert default_store_path(tmp_path / "explicit") == tmp_path / "explicit" / "store.sqlite"
    assert not (tmp_path / "from_env").exists()  # resolving a path creates nothing
    with Store.open(default_store_path()) as store:
        store.add_measurement(_timing(), _device(), model="m", task_key="t")
    assert (tmp_path / "from_env" / "store.sqlite").is_file()


def test_edgeplan_home_default_is_the_user_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    platformdirs = pytest.importorskip("platformdirs")
    monkeypatch.delenv("EDGEPLAN_HOME", raising=False)
    assert edgeplan_home() == Path(platformdirs.user_cache_dir("edgeplan"))
    monkeypatch.setenv("EDGEPLAN_HOME", "")
    assert edgeplan_home() == Path(platformdirs.user_cache_dir("edgeplan"))


def test_importing_measure_is_cheap() -> None:
    code = (
        "import sys, edgeplan.measure\n"
        "heavy = [m for m in ('torch', 'onnxruntime', 'onnx', 'numpy', 'pyarrow', 'rich') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == ""
