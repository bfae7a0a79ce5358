"""Resumable campaigns: a campaign killed with SIGKILL resumes with nothing lost and nothing measured twice."""

from __future__ import annotations

import collections
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.measure import (
    DeviceDescriptor,
    MeasurementRecord,
    MeasurementResult,
    Store,
    Task,
    Timing,
    run_campaign,
)

WORKER = Path(__file__).with_name("campaign_worker.py")
N_TASKS = 30
SLEEP_S = 0.1
KILL_AFTER_ROWS = 5
SAFETY_TIMEOUT_S = 120.0  # only guards against a hung worker; nothing asserts on elapsed time


def _start_worker(store_path: Path, campaign: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(store_path), campaign, str(N_TASKS), str(SLEEP_S)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _committed_rows(store_path: Path) -> int:
    if not store_path.exists():
        return 0
    with Store.open(store_path) as store:
        return len(store.measurements())


def _wait_for_rows(process: subprocess.Popen[str], store_path: Path, rows: int) -> None:
    deadline = time.monotonic() + SAFETY_TIMEOUT_S
    while _committed_rows(store_path) < rows:
        if process.poll() is not None:
            _, stderr = process.communicate()
            pytest.fail(f"the campaign worker exited early with {process.returncode}:\n{stderr}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the campaign worker committed too few rows before the safety timeout")
        time.sleep(0.05)


def _snapshot(store_path: Path) -> dict[int, MeasurementRecord]:
    with Store.open(store_path) as store:
        return {record.id: record for record in store.measurements()}


def test_killed_campaign_resumes_with_nothing_lost_or_measured_twice(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    store_path = tmp_path / "home" / "store.sqlite"
    worker = _start_worker(store_path, "kill-me")
    try:
        _wait_for_rows(worker, store_path, KILL_AFTER_ROWS)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.communicate(timeout=SAFETY_TIMEOUT_S)
    assert worker.returncode == -signal.SIGKILL

    # The Store opens after the kill, is consistent, and holds part of the campaign.
    db = sqlite3.connect(store_path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    before = _snapshot(store_path)
    assert KILL_AFTER_ROWS <= len(before) < N_TASKS
    with Store.open(store_path) as store:
        (campaign,) = store.campaigns()
        assert campaign.status == "running"  # killed while running

    resumed = subprocess.run(
        [sys.executable, str(WORKER), str(store_path), "kill-me", str(N_TASKS), str(SLEEP_S)],
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT_S,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["done_before"] == len(before)
    assert report["done_now"] == N_TASKS - len(before)
    assert report["remaining"] == 0 and report["failed"] == []

    after = _snapshot(store_path)
    counts = collections.Counter(record.task_key for record in after.values())
    assert sorted(counts) == [f"matmul64-{i:03d}" for i in range(N_TASKS)]
    assert set(counts.values()) == {1}
    for row_id, record in before.items():
        assert after[row_id] == record  # rows committed before the kill are unchanged
    assert all(r.latency_ms > 0 and r.repeats >= 1 and r.threads == 1 for r in after.values())
    with Store.open(store_path) as store:
        assert store.campaigns()[0].status == "complete"


# ---------------------------------------------------------------- run_campaign in-process


def _device() -> DeviceDescriptor:
    return DeviceDescriptor("Test CPU", 2, 1, 1, "torch", "0.0-test", "float32", None, "host", "os", "3.11")


def _result(latency_ms: float = 1.0) -> MeasurementResult:
    return MeasurementResult(Timing.from_samples([latency_ms] * 6, "confidence"), _device(), {"note": "fake"})


def _tasks(n: int) -> list[Task]:
    return [Task(key=f"t{i}", model=f"m{i}", params={"i": i}) for i in range(n)]


def test_run_campaign_commits_every_task_once(tmp_path: Path) -> None:
    measured: list[str] = []

    def measure(task: Task) -> MeasurementResult:
        measured.append(task.key)
        return _result(float(task.params["i"] + 1))

    with Store.open(tmp_path / "s.sqlite") as store:
        first = run_campaign(store, "c", _tasks(4), measure, command="edgeplan test")
        second = run_campaign(store, "c", _tasks(6), measure, progress=True)
        records = store.measurements(campaign="c")
    assert (first.done_before, first.done_now, first.remaining) == (0, 4, 0)
    assert (second.done_before, second.done_now, second.remaining) == (4, 2, 0)
    assert measured == ["t0", "t1", "t2", "t3", "t4", "t5"]
    assert [r.latency_ms for r in records] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert records[0].extra == {"note": "fake", "task_params": {"i": 0}}
    assert records[0].command == "edgeplan test"


def test_measurement_errors_are_reported_and_retried(tmp_path: Path) -> None:
    broken = {"t1", "t3"}

    def measure(task: Task) -> MeasurementResult:
        if task.key in broken:
            raise MeasurementError(f"model {task.model!r} crashed")
        return _result()

    with Store.open(tmp_path / "s.sqlite") as store:
        report = run_campaign(store, "c", _tasks(5), measure)
        assert [(f.key, f.reason) for f in report.failed] == [
            ("t1", "model 'm1' crashed"),
            ("t3", "model 'm3' crashed"),
        ]
        assert (report.done_now, report.remaining) == (3, 2)
        assert store.campaigns()[0].status == "partial"
        broken.clear()
        retry = run_campaign(store, "c", _tasks(5), measure)
        assert (retry.done_before, retry.done_now, retry.remaining, retry.failed) == (3, 2, 0, ())
        assert store.campaigns()[0].status == "complete"


def test_other_exceptions_propagate_and_keep_committed_rows(tmp_path: Path) -> None:
    def measure(task: Task) -> MeasurementResult:
        if task.key == "t2":
            raise KeyError("a bug")
        return _result()

    with Store.open(tmp_path / "s.sqlite") as store:
        with pytest.raises(KeyError, match="a bug"):
            run_campaign(store, "c", _tasks(4), measure)
        assert [r.task_key for r in store.measurements()] == ["t0", "t1"]
        assert store.campaigns()[0].status == "partial"


def test_budget_stops_cleanly_between_tasks(tmp_path: Path) -> None:
    def measure(task: Task) -> MeasurementResult:
        time.sleep(0.6)
        return _result()

    with Store.open(tmp_path / "s.sqlite") as store:
        report = run_campaign(store, "c", _tasks(5), measure, budget_s=1.0)
        assert report.stopped_by_budget
        assert 1 <= report.done_now < 5
        assert report.remaining == 5 - report.done_now
        assert len(store.measurements()) == report.done_now


def test_bad_campaign_arguments(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite") as store:
        with pytest.raises(InvalidInputError, match="'t0' appears twice"):
            run_campaign(store, "c", [*_tasks(2), Task(key="t0", model="x")], lambda t: _result())
        with pytest.raises(InvalidInputError, match="budget_s"):
            run_campaign(store, "c", _tasks(2), lambda t: _result(), budget_s=0)
        run_campaign(store, "c", _tasks(1), lambda t: _result(), params={"threads": 1})
        with pytest.raises(InvalidInputError, match=r"other parameters \(threads: 1 stored, 2 given\)"):
            run_campaign(store, "c", _tasks(1), lambda t: _result(), params={"threads": 2})


def test_a_failure_that_names_its_task_is_not_named_twice(tmp_path: Path) -> None:
    def measure(task: Task) -> MeasurementResult:
        raise MeasurementError(f"{task.key}: the profiler's operators do not match")

    with Store.open(tmp_path / "s.sqlite") as store:
        report = run_campaign(store, "c", _tasks(1), measure)
    assert [(f.key, f.reason) for f in report.failed] == [("t0", "the profiler's operators do not match")]


def test_progress_off_a_terminal_is_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.measure.progress import counting_bar

    with counting_bar(True, "ranges of m", total=5, completed=1, every_s=0.0) as advance:
        advance(2)
        advance(1)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("ranges of m: 3/5, ") and "min left" in lines[0]
    assert lines[1].startswith("ranges of m: 4/5, ") and lines[-1].startswith("ranges of m: 4/5, ")
    with counting_bar(True, "budget", total=4, every_s=3600.0) as advance:
        advance(1)  # stopped early: the last line says how far it got
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("budget: 1/4, ") and "min left" in lines[0]
