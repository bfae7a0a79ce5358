"""Measure a model's end-to-end latency on this machine, stored in the Store with its provenance."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from edgeplan.errors import InvalidInputError
from edgeplan.measure.harness import TimingConfig
from edgeplan.measure.model_latency import ModelMeasurement, measure_model

__all__ = ["ModelMeasurement", "measure_latency", "timing_config"]


def _thread_warnings(threads: int) -> tuple[str, ...]:
    """A warning when ``threads`` exceeds the cores this process may use (its CPU affinity, else the CPU count): such
    a time includes the threads' contention for the cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if threads <= cores:
        return ()
    return (f"--threads {threads} on the {cores} core(s) this process may use: the time includes the threads' "
            f"contention for the cores; use at most {cores} to time the model",)


def measure_latency(model: str, *, runtime: str = "torch", threads: int = 1, dtype: str = "float32",
                    timing: int | TimingConfig | None = None, input_shape: tuple[int, ...] | None = None,
                    home: str | Path | None = None, command: str | None = None) -> ModelMeasurement:
    """Measure the end-to-end latency of a model on this machine (median of repeated runs) and store it.

    Parameters
    ----------
    model
        A zoo string, an ``.onnx`` path (onnxruntime) or a ``.tflite`` path (litert).
    runtime
        ``"torch"``, ``"onnxruntime"`` or ``"litert"`` (LiteRT with its XNNPACK delegate).
    threads
        Intra-op threads (set and recorded).
    dtype
        ``"float32"``, or ``"int8"`` (litert: the zoo model quantized after training).
    timing
        How often to run it: exactly this many timed runs (an int), the harness settings (a
        :class:`~edgeplan.measure.TimingConfig`), or None: adaptive, until the median's 95 % CI is within +-2 %,
        at most 10 s.
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
    result = measure_model(model, runtime=runtime, threads=threads, config=timing_config(timing),
                           input_shape=input_shape, home=home, command=command, dtype=dtype)
    return dataclasses.replace(result, warnings=result.warnings + _thread_warnings(threads))


def timing_config(timing: int | TimingConfig | None, max_time_s: float = 10.0) -> TimingConfig:
    """The harness settings of :func:`measure_latency`'s ``timing``: exactly ``timing`` runs (an int, within
    ``max_time_s``), the settings given, or adaptive to +-2 % within ``max_time_s``."""
    if isinstance(timing, TimingConfig):
        return timing
    if timing is not None and (isinstance(timing, bool) or not isinstance(timing, int) or timing < 1):
        raise InvalidInputError(f"timing must be a positive number of runs, a TimingConfig or None, got {timing!r}")
    if not (isinstance(max_time_s, int | float) and max_time_s > 0):
        raise InvalidInputError(f"max_time_s must be a positive number of seconds, got {max_time_s!r}")
    if timing is None:
        return TimingConfig(max_time_s=max_time_s)
    return TimingConfig(min_repeats=timing, max_repeats=timing, max_time_s=max_time_s)
