"""The machine line every benchmark prints with its figure; importing it puts the repository root on ``sys.path``,
so that a benchmark run as ``python benchmarks/X.py`` imports ``experiments`` (outside the wheel) and this checkout's
``edgeplan``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))


def machine(threads: int | None = None) -> str:
    """CPU, cores, torch threads and versions, from :func:`edgeplan.measure.device.describe_device`."""
    from edgeplan.measure.device import describe_device

    d = describe_device("torch", threads or os.cpu_count() or 1)
    return (
        f"{d.cpu_model}; {d.logical_cores} logical / {d.physical_cores} physical cores; torch threads {d.threads}; "
        f"torch {d.runtime_version}; Python {d.python}; {d.os}"
    )


if __name__ == "__main__":  # the line for a target whose figure an `edgeplan` command prints
    print(f"machine: {machine()}")
