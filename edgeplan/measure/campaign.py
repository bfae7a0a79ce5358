"""Resumable measurement campaigns.

A campaign is a named list of tasks, each with a unique key. :func:`run_campaign` measures the tasks that have
no committed row yet and commits each result in its own transaction as soon as it is measured, so a campaign
that is killed loses at most the task in flight, and running it again measures only what is left: nothing
twice, nothing lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.measure.device import DeviceDescriptor
from edgeplan.measure.harness import Timing
from edgeplan.measure.progress import counting_bar
from edgeplan.measure.store import Campaign, Provenance, Store

__all__ = [
    "CampaignReport",
    "FailedTask",
    "MeasurementResult",
    "Task",
    "run_campaign",
]


@dataclass(frozen=True)
class Task:
    """One thing to measure in a campaign.

    Attributes
    ----------
    key
        Unique key of the task inside its campaign (e.g. ``"torchvision:resnet18|threads=2"``).
    model
        The model as a user types it; stored in ``measurements.model``.
    kind
        ``"end_to_end"``, ``"op"``, ...
    subject
        The operation or node measured; ``""`` for a whole model.
    params
        Whatever the measure function needs (input shape, thread count, ...); stored in ``measurements.extra``
        under ``"task_params"``; must be JSON-serialisable.
    """

    key: str
    model: str
    kind: str = "end_to_end"
    subject: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MeasurementResult:
    """What a measure function returns for one task.

    Attributes
    ----------
    timing
        The harness result.
    device
        What it ran on.
    extra
        More provenance to store in ``measurements.extra`` (JSON-serialisable).
    """

    timing: Timing
    device: DeviceDescriptor
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FailedTask:
    """A task whose measure function raised :class:`~edgeplan.errors.MeasurementError`."""

    key: str
    reason: str


@dataclass(frozen=True)
class CampaignReport:
    """What one call of :func:`run_campaign` did.

    Attributes
    ----------
    campaign
        The campaign's name.
    total
        Tasks given.
    done_before
        Tasks that already had a committed row when the call began.
    done_now
        Tasks measured and committed by this call.
    remaining
        Tasks still without a row: failed ones and those the time budget left out.
    failed
        Tasks that raised :class:`~edgeplan.errors.MeasurementError`, with the message; they are retried when
        the campaign is run again.
    stopped_by_budget
        Whether the time budget stopped the call before every task was tried.
    elapsed_s
        Wall-clock duration of the call.
    """

    campaign: str
    total: int
    done_before: int
    done_now: int
    remaining: int
    failed: tuple[FailedTask, ...]
    stopped_by_budget: bool
    elapsed_s: float

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-serialisable dict."""
        return {
            "campaign": self.campaign,
            "total": self.total,
            "done_before": self.done_before,
            "done_now": self.done_now,
            "remaining": self.remaining,
            "failed": [{"key": f.key, "reason": f.reason} for f in self.failed],
            "stopped_by_budget": self.stopped_by_budget,
            "elapsed_s": self.elapsed_s,
        }


def run_campaign(
    store: Store,
    campaign_name: str,
    tasks: Sequence[Task],
    measure: Callable[[Task], MeasurementResult],
    budget_s: float | None = None,
    progress: bool = False,
    *,
    command: str = "",
    params: Mapping[str, Any] | None = None,
) -> CampaignReport:
    """Measure every task of a campaign that has no committed row yet.

    Tasks run in the order given. Each result is committed in its own transaction right after it is measured.
    The time budget is checked before each task starts, so a call may exceed it by the duration of one task.

    Parameters
    ----------
    store
        Where the results go.
    campaign_name
        The campaign; created on first use, resumed afterwards.
    tasks
        The campaign's tasks; keys must be unique.
    measure
        Measures one task. A :class:`~edgeplan.errors.MeasurementError` marks the task as failed and the
        campaign goes on; any other exception propagates (results committed so far stay).
    budget_s
        Time budget of this call in seconds, or ``None`` for no limit.
    progress
        Show a rich progress bar on stderr.
    command
        Command line stored with the campaign and each measurement.
    params
        Campaign parameters; resuming requires the same ones (see :meth:`Store.campaign`).

    Returns
    -------
    CampaignReport

    Raises
    ------
    InvalidInputError
        On duplicate task keys, a non-positive budget or parameters that differ from the stored campaign's.
    """
    started_s = time.monotonic()
    _check_tasks(tasks)
    if budget_s is not None and not budget_s > 0:
        raise InvalidInputError(f"campaign {campaign_name!r}: budget_s must be positive or None, got {budget_s}")
    campaign = store.campaign(campaign_name, command=command, params=params)
    committed = store.completed_task_keys(campaign)
    pending = [task for task in tasks if task.key not in committed]
    done_before = len(tasks) - len(pending)
    failed: list[FailedTask] = []
    done_now, stopped_by_budget = 0, False
    campaign = store.set_campaign_status(campaign, "running")
    try:
        with counting_bar(progress, campaign_name, total=len(tasks), completed=done_before) as advance:
            for task in pending:
                if budget_s is not None and time.monotonic() - started_s >= budget_s:
                    stopped_by_budget = True
                    break
                if _measure_and_commit(store, campaign, task, measure, command, failed):
                    done_now += 1
                advance(1)
    finally:
        remaining = len(pending) - done_now
        store.set_campaign_status(campaign, "complete" if remaining == 0 else "partial")
    return CampaignReport(
        campaign=campaign_name,
        total=len(tasks),
        done_before=done_before,
        done_now=done_now,
        remaining=remaining,
        failed=tuple(failed),
        stopped_by_budget=stopped_by_budget,
        elapsed_s=time.monotonic() - started_s,
    )


def _check_tasks(tasks: Sequence[Task]) -> None:
    seen: set[str] = set()
    for task in tasks:
        if not isinstance(task, Task):
            raise InvalidInputError(f"campaign tasks must be Task objects, got {task!r}")
        if not isinstance(task.key, str) or not task.key:
            raise InvalidInputError(f"task {task!r} has no key; give every task a non-empty string key")
        if task.key in seen:
            raise InvalidInputError(f"task key {task.key!r} appears twice; give every task of a campaign a unique key")
        seen.add(task.key)


def _measure_and_commit(
    store: Store,
    campaign: Campaign,
    task: Task,
    measure: Callable[[Task], MeasurementResult],
    command: str,
    failed: list[FailedTask],
) -> bool:
    """Measure one task and commit it; on MeasurementError record the failure and return False."""
    try:
        result = measure(task)
    except MeasurementError as e:
        reason = str(e)  # the report names the task: a message that begins with its key need not say it twice
        failed.append(FailedTask(task.key, reason.removeprefix(f"{task.key}: ")))
        return False
    store.add_measurement(
        result.timing,
        result.device,
        model=task.model,
        task_key=task.key,
        kind=task.kind,
        subject=task.subject,
        extra={**result.extra, "task_params": dict(task.params)},
        provenance=Provenance(campaign, command),
    )
    return True
