"""What a per-op profile measures: one kernel's latency over the profiled runs (:class:`OpTiming`), a model's
runs (:class:`OpRuns`), and the timers and reference ratios they are made of.

The latency of an op is the median over the profiled runs; the spread (interquartile range over the median) is kept
beside it. With a reference model, every call is preceded by a timed call of the reference (:func:`timed_reference_ms`,
which calls it once untimed first), and each time is also kept as its ratio to the reference's time just before it
(median over the runs; fastest over fastest): the neighbours' load that slows a model down slows the reference down
with it (:func:`with_ratios`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "FoldedEvent",
    "OpRuns",
    "OpTiming",
    "ProfileCalls",
    "RUN_MARK",
    "median_iqr",
    "paired_ratios",
    "timed_ms",
    "timed_reference_ms",
    "with_ratios",
]


RUN_MARK = "edgeplan::run"


@dataclass(frozen=True)
class ProfileCalls:
    """How many calls of each sort a per-op profiler makes of the model.

    Attributes
    ----------
    runs
        Profiled calls (the per-op median is over them).
    warmup
        Calls before the first profiled one, whose events are dropped.
    plain_per_run
        Unprofiled calls timed end to end before each profiled one.
    """

    runs: int = 10
    warmup: int = 3
    plain_per_run: int = 0


@dataclass(frozen=True)
class OpTiming:
    """The measured latency of one kernel the runtime ran.

    Attributes
    ----------
    kernel
        The IR ops it runs joined by ``+`` (PyTorch), or ORT's node name (ONNX Runtime).
    kind
        The runtime's kernel kind (``aten::conv2d``, ``com.microsoft.FusedConv``, ``com.microsoft.QLinearConv``).
    nodes
        The IR nodes it computes (for ONNX Runtime, of the float ONNX file's IR; a kernel ORT inserted, a layout
        reorder or a (de)quantization, has the node whose tensor it converts; empty when ORT's names hide the
        origin). Without a float model given to :func:`profile_onnxruntime_ops`: the original ONNX nodes between
        the kernel's inputs and outputs that the tensor names show.
    median_ms
        Median over the profiled runs.
    iqr_rel
        Interquartile range over the median (0 for fewer than 4 runs).
    min_ms
        Fastest profiled run: on a shared machine interference only adds time, so the minimum is the most
        reproducible estimate of the op's uncontended latency.
    noop
        A kernel that computes nothing (a view, eval dropout).
    shapes
        ORT only: input and output shapes as its profiler reports them.
    ratio, min_ratio
        With a reference model (:func:`profile_torch_ops`): the median over the profiled runs of the op's time over
        the reference's time just before, and the op's fastest time over the reference's fastest; else None.
    """

    kernel: str
    kind: str
    nodes: tuple[str, ...]
    median_ms: float
    iqr_rel: float
    min_ms: float
    noop: bool = False
    shapes: Mapping[str, Any] = field(default_factory=dict)
    ratio: float | None = None
    min_ratio: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out: dict[str, Any] = {
            "kernel": self.kernel, "kind": self.kind, "nodes": list(self.nodes),
            "ms": self.median_ms, "iqr_rel": self.iqr_rel, "min_ms": self.min_ms,
        }
        if self.noop:
            out["noop"] = True
        if self.shapes:
            out["shapes"] = dict(self.shapes)
        if self.ratio is not None:
            out["ratio"], out["min_ratio"] = self.ratio, self.min_ratio
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpTiming:
        """Inverse of :meth:`to_dict`."""
        return cls(str(data["kernel"]), str(data["kind"]), tuple(data["nodes"]), float(data["ms"]),
                   float(data["iqr_rel"]), float(data.get("min_ms", data["ms"])), bool(data.get("noop", False)),
                   dict(data.get("shapes", {})), _opt_float(data.get("ratio")), _opt_float(data.get("min_ratio")))


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class OpRuns:
    """What a profiling call measured.

    Attributes
    ----------
    ops
        One timing per kernel.
    plain_ms
        End-to-end times (ms) of the unprofiled calls.
    reference_ms
        With a reference model: its time just before each unprofiled call (aligned with ``plain_ms``); else empty.
    reference_profiled_ms
        With a reference model: its time just before each profiled call; else empty.
    folded_ms
        Eager PyTorch, a graph with folded operators (:attr:`~edgeplan.ir.Graph.folded_ops`): the time of those
        operators in each profiled call; else empty.
    folded_ops
        Eager PyTorch: each folded operator that moves data (not a view of the rules' ``folded_work``) and ran in
        every profiled call, as its index in the graph's ``folded_ops`` and its timing (no IR nodes; the kernel
        named ``{kind}@folded#{index}``).
    """

    ops: list[OpTiming]
    plain_ms: list[float]
    reference_ms: list[float] = field(default_factory=list)
    reference_profiled_ms: list[float] = field(default_factory=list)
    folded_ms: list[float] = field(default_factory=list)
    folded_ops: list[tuple[int, OpTiming]] = field(default_factory=list)


#: A folded operator's profiler event in one run: its name, first input shape and time (ms).
FoldedEvent = tuple[str, tuple[int, ...] | None, float]


def paired_ratios(samples_ms: Sequence[float], reference_ms: Sequence[float]) -> tuple[float, float, float] | None:
    """Median and relative spread of each sample over the reference time paired with it, and fastest over fastest
    reference; reference times of zero are skipped (None when none is left)."""
    ratios = [a / b for a, b in zip(samples_ms, reference_ms, strict=True) if b > 0]
    if not ratios:
        return None
    ratio, iqr = median_iqr(ratios)
    return ratio, iqr, min(samples_ms) / min(b for b in reference_ms if b > 0)


def with_ratios(op: OpTiming, samples_ms: Sequence[float], reference_ms: Sequence[float]) -> OpTiming:
    """``op`` with its times over the reference's paired times (unchanged without reference samples)."""
    paired = paired_ratios(samples_ms, reference_ms) if reference_ms else None
    return op if paired is None else replace(op, ratio=paired[0], min_ratio=paired[2])


def timed_ms(call: Callable[[], object]) -> float:
    """Milliseconds one call takes."""
    t0 = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - t0) / 1e6


def timed_reference_ms(reference: Callable[[], object]) -> float:
    """Time the reference model after one untimed call of it.

    Timed straight after a call of the measured model, the reference would run with that model's weights and
    activations in the caches and its own evicted, and more so the larger the model, so large models' ratios to it
    would come out low. One untimed call of the reference first removes most of that bias.
    """
    reference()
    return timed_ms(reference)


def median_iqr(samples_ms: Sequence[float]) -> tuple[float, float]:
    med = statistics.median(samples_ms)
    if len(samples_ms) < 4 or med <= 0:
        return med, 0.0
    q = statistics.quantiles(samples_ms, n=4)
    return med, (q[2] - q[0]) / med
