"""Measuring latency honestly: the timing harness, device descriptions, the Store and resumable campaigns.

Importing this package is cheap: torch, onnxruntime, numpy, pyarrow and rich are imported only inside the
functions that need them.
"""

from __future__ import annotations

from edgeplan.measure.campaign import CampaignReport, FailedTask, MeasurementResult, Task, run_campaign
from edgeplan.measure.device import DTYPES, RUNTIMES, DeviceDescriptor, collect_versions, describe_device
from edgeplan.measure.harness import (
    Timing,
    TimingConfig,
    check_thread_count,
    median_confidence_interval,
    set_threads,
    time_callable,
    use_threads,
)
from edgeplan.measure.paths import default_store_path, edgeplan_home
from edgeplan.measure.runners import measure_onnxruntime, measure_torch
from edgeplan.measure.store import SCHEMA_VERSION, Campaign, MeasurementRecord, Provenance, Store

__all__ = [
    "DTYPES",
    "RUNTIMES",
    "SCHEMA_VERSION",
    "Campaign",
    "CampaignReport",
    "DeviceDescriptor",
    "FailedTask",
    "MeasurementRecord",
    "MeasurementResult",
    "Provenance",
    "Store",
    "Task",
    "Timing",
    "TimingConfig",
    "check_thread_count",
    "collect_versions",
    "default_store_path",
    "describe_device",
    "edgeplan_home",
    "measure_onnxruntime",
    "measure_torch",
    "median_confidence_interval",
    "run_campaign",
    "set_threads",
    "time_callable",
    "use_threads",
]
