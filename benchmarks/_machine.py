"""The machine line every benchmark prints with its figure."""

from __future__ import annotations

import os


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
