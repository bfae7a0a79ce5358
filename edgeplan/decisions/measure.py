"""Measure a model's end-to-end latency on this machine, stored in the Store with its provenance."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from edgeplan.errors import InvalidInputError
from edgeplan.measure.model_latency import ModelMeasurement, measure_model

__all__ = ["ModelMeasurement", "measure_latency"]


def _thread_warnings(threads: int) -> tuple[str, ...]:
    """A warning when ``threads`` exceeds the cores this process may use (its CPU affinity, else the CPU count): such
    a time includes the threads' contention for the cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if threads <= cores:
        return ()
    return (f"--threads {threads} on the {cores} core(s) this process may use: the time includes the threads' "
            f"contention for the cores; use at most {cores} to time the model",)


def measure_latency(model: str, *, runtime: str = "torch", threads: int = 1, repeats: int | None = None,
                    max_time_s: float = 10.0, input_shape: tuple[int, ...] | None = None,
                    home: str | Path | None = None, command: str | None = None) -> ModelMeasurement:
    """Measure the end-to-end latency of a model on this machine (median of repeated runs) and store it.

    Parameters
    ----------
    model
        A zoo string or an ``.onnx`` path.
    runtime
        ``"torch"`` or ``"onnxruntime"``.
    threads
        Intra-op threads (set and recorded).
    repeats
        Exactly this many timed runs; None: adaptive, until the median's 95 % CI is within +-2 %.
    max_time_s
        Time cap in seconds.
    input_shape
        Overrides the default input shape.
    home
        The edgeplan home (Store location).
    command
        The command line recorded as provenance (default: this process's argv).

    Returns
    -------
    ModelMeasurement
        ``.timing`` (median and spread), ``.device`` (this machine's descriptor), where it was stored, and
        ``.warnings``: more ``threads`` than this process may use cores are measured anyway (on purpose, say), but
        not silently.
    """
    from edgeplan.measure import TimingConfig

    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        raise InvalidInputError(f"repeats must be a positive integer or None, got {repeats!r}")
    if not (isinstance(max_time_s, int | float) and max_time_s > 0):
        raise InvalidInputError(f"max_time_s must be a positive number of seconds, got {max_time_s!r}")
    config = (TimingConfig(min_repeats=repeats, max_repeats=repeats, max_time_s=max_time_s) if repeats
              else TimingConfig(max_time_s=max_time_s))
    result = measure_model(model, runtime=runtime, threads=threads, config=config, input_shape=input_shape,
                           home=home, command=command)
    return dataclasses.replace(result, warnings=result.warnings + _thread_warnings(threads))
