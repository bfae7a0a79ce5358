"""A small campaign for tests/test_campaign_resume.py, run as a separate process so that it can be killed.

Usage: ``python tests/campaign_worker.py STORE_PATH CAMPAIGN N_TASKS SLEEP_S``. Each task times a 64x64 torch
matmul with the harness, then sleeps ``SLEEP_S`` so the campaign lasts long enough to be killed part-way. The
campaign report is printed as JSON on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeplan.measure import (
    MeasurementResult,
    Store,
    Task,
    TimingConfig,
    describe_device,
    run_campaign,
    time_callable,
    use_threads,
)

CONFIG = TimingConfig(warmup=2, min_repeats=5, max_repeats=30, target_rel_ci=0.05, max_time_s=0.1)


def tasks(n_tasks: int) -> list[Task]:
    """The campaign's tasks: the same matmul, keyed by index and seeded differently."""
    return [
        Task(key=f"matmul64-{i:03d}", model="op:matmul64", kind="op", subject="matmul", params={"seed": i})
        for i in range(n_tasks)
    ]


def make_measure(sleep_s: float) -> Callable[[Task], MeasurementResult]:
    """A measure function that times a real 64x64 matmul on one thread."""
    import torch

    device = describe_device("torch", threads=1)

    def measure(task: Task) -> MeasurementResult:
        generator = torch.Generator().manual_seed(int(task.params["seed"]))
        a = torch.randn(64, 64, generator=generator)
        b = torch.randn(64, 64, generator=generator)
        with use_threads(1), torch.inference_mode():
            timing = time_callable(lambda: a @ b, CONFIG)
        time.sleep(sleep_s)
        return MeasurementResult(timing=timing, device=device, extra={"shape": [64, 64]})

    return measure


def main() -> None:
    store_path, campaign, n_tasks, sleep_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    with Store.open(store_path) as store:
        report = run_campaign(store, campaign, tasks(n_tasks), make_measure(sleep_s), params={"n_tasks": n_tasks})
    print(json.dumps(report.to_dict()))


if __name__ == "__main__":
    main()
