"""Per-operation latencies from the runtime's own profiler, matched to the kernels deduced from the IR.

li2023 predicts a network's latency as an overhead plus the sum of its operations' latencies, each predicted from
the operation's features; training needs every operation's latency on the device. This module measures them with
the runtime's profiler, not with timers of our own around each op: what is timed is exactly what the runtime runs.

- **Eager PyTorch** (:func:`profile_torch_ops`): ``torch.profiler`` over ``runs`` calls of the module, each inside
  a ``record_function`` marker. The operators directly under a marker are the top-level aten operators the model
  dispatched; their inclusive CPU time is the op's latency in that run. They are matched one to one to the
  kernels of the ``torch-eager`` deduction (:func:`edgeplan.ir.kernels.deduce_kernels`) in execution order; when
  the orders differ (branches run in another order than the IR lists them), by aten kind and first input shape.
  Operators the IR writes as aliases of their input (``contiguous`` after a transpose, ``cat`` of one tensor,
  listed under ``elided_by_ir`` in the torch rules) add their time to the operator before them. A model whose
  operators still do not match is refused with the differences named, never half-matched.
- **ONNX Runtime** (:func:`profile_onnxruntime_ops`): the session's own profiling (``enable_profiling``): one
  ``*_kernel_time`` event per node of the *optimized* graph per run. Each kernel keeps ORT's node name and op type
  (``com.microsoft.FusedConv``, ``com.microsoft.nchwc.Conv``, ``com.microsoft.QLinearConv``, ``ReorderInput``,
  ...), its shapes, and the IR nodes of the float ONNX model it computes, traced through ORT's names
  (:func:`edgeplan.measure.kernel_check.onnxruntime_kernel_origins`), so ORT's data trains predictors too.

The latency of an op is the median over the profiled runs; the spread (interquartile range over the median) is
kept beside it. The profiler adds a little time per op, so the sum of the ops is not the end-to-end latency,
which is timed on unprofiled runs interleaved with the profiled ones (:func:`profile_model`): on a shared
machine, latencies drift by tens of percent from one minute to the next, and interleaving keeps a model's two
views coherent. li2023's overhead term absorbs the difference between them.

With a **reference model** (:func:`reference_runner`, ``edgeplan profile ops --reference synthetic:0``), every
call, profiled or not, is preceded by a timed call of the reference, and each time is also kept as its ratio to
the reference's time just before it (median over the runs; fastest over fastest). The neighbours' load that slows a
model down slows the reference down with it, so the ratios move far less than the times between two
measurements of the same networks (the noise floors in docs/figures.md). The reference is called once untimed before
each timed call (:func:`_timed_reference`): timed right after the measured model, it ran the more slowly the larger
the model, which deflated large models' ratios; the untimed call narrows that gap without closing it.
:func:`edgeplan.measure.op_campaign.export_dataset` converts the ratios back to milliseconds with the scenario's
typical reference latency.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir.graph import Graph
from edgeplan.ir.kernels import KernelDeduction
from edgeplan.measure.harness import Timing, TimingConfig, check_thread_count, use_threads
from edgeplan.measure.scenarios import Scenario

__all__ = [
    "ModelProfile",
    "OpRuns",
    "OpTiming",
    "onnxruntime_kernel_ops",
    "profile_model",
    "profile_onnxruntime_ops",
    "profile_torch_ops",
    "quantize_onnx",
    "reference_runner",
]

_MARK = "edgeplan::run"


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
_FoldedEvent = tuple[str, tuple[int, ...] | None, float]


def _folded_keys(graph: Graph, renamed: Mapping[str, str]) -> list[tuple[str, tuple[int, ...] | None]]:
    """The profiler's name and first input shape of each of the graph's folded operators."""
    shapes = graph.folded_shapes or tuple(((), ()) for _ in graph.folded_ops)
    return [(renamed.get(op, f"aten::{op}"), tuple(ins[0]) if ins else None)
            for op, (ins, _) in zip(graph.folded_ops, shapes, strict=True)]


def _assign_folded(dropped: Sequence[_FoldedEvent],
                   keys: Sequence[tuple[str, tuple[int, ...] | None]]) -> list[tuple[int, float]]:
    """Each folded event of one run (name, first input shape, ms; in the order they ran) as the index of the folded
    operator it is and its time: the first operator not yet taken of its name and shape, else of its name."""
    taken: set[int] = set()
    out = []
    for name, shape, ms in dropped:
        free = [j for j, key in enumerate(keys) if j not in taken and key[0] == name]
        j = next((j for j in free if keys[j][1] == shape), free[0] if free else None)
        if j is not None:
            taken.add(j)
            out.append((j, ms))
    return out


def _paired(samples_ms: Sequence[float], reference_ms: Sequence[float]) -> tuple[float, float, float] | None:
    """Median and relative spread of each sample over the reference time paired with it, and fastest over fastest
    reference; reference times of zero are skipped (None when none is left)."""
    ratios = [a / b for a, b in zip(samples_ms, reference_ms, strict=True) if b > 0]
    if not ratios:
        return None
    ratio, iqr = _median_iqr(ratios)
    return ratio, iqr, min(samples_ms) / min(b for b in reference_ms if b > 0)


def _with_ratios(op: OpTiming, samples_ms: Sequence[float], reference_ms: Sequence[float]) -> OpTiming:
    """``op`` with its times over the reference's paired times (unchanged without reference samples)."""
    paired = _paired(samples_ms, reference_ms) if reference_ms else None
    return op if paired is None else replace(op, ratio=paired[0], min_ratio=paired[2])


def _timed(call: Callable[[], object]) -> float:
    """Milliseconds one call takes."""
    t0 = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - t0) / 1e6


def _timed_reference(reference: Callable[[], object]) -> float:
    """Time the reference model after one untimed call of it.

    Timed straight after a call of the measured model, the reference runs with that model's weights and
    activations in the caches and its own evicted: on the Intel Xeon of the README, ``synthetic:0`` at two threads
    took 8.00 ms beside synthetic networks but 9.06 ms beside the zoo CNNs, 10.07 beside those over 200 ms, so large
    models' ratios came out low (the zoo's convolutions at 0.92x synthetic ones of the same features, 0.98x with the
    reference warmed). One untimed call first removes part of that, not all: over the whole re-measured Xeon dataset
    the reference still took 11.15 ms beside the CNNs against 9.98 ms beside the synthetic networks (the first line of
    ``benchmarks/bench_li2023_zoo_bias.py --data out/history/xeon/torch-fp32-2t.warm-all.jsonl.xz``, the file
    written out of git by ``make`` of that path).
    """
    reference()
    return _timed(reference)


def _median_iqr(samples_ms: Sequence[float]) -> tuple[float, float]:
    med = statistics.median(samples_ms)
    if len(samples_ms) < 4 or med <= 0:
        return med, 0.0
    q = statistics.quantiles(samples_ms, n=4)
    return med, (q[2] - q[0]) / med


# ---------------------------------------------------------------------------------------------------------------
# Eager PyTorch
# ---------------------------------------------------------------------------------------------------------------


def profile_torch_ops(
    module: Any,
    example_inputs: Sequence[Any],
    deduction: KernelDeduction,
    graph: Graph,
    threads: int,
    runs: int = 10,
    warmup: int = 3,
    plain_per_run: int = 0,
    reference: Callable[[], object] | None = None,
) -> OpRuns:
    """Per-kernel latencies of eager PyTorch from ``torch.profiler``, matched to ``deduction``'s kernels.

    Each profiled run is preceded by ``plain_per_run`` unprofiled runs timed end to end, so that the end-to-end
    samples and the per-op samples are taken under the same machine conditions (on a shared machine, latencies
    drift by tens of percent between minutes; interleaving keeps the two views of a model coherent). With a
    ``reference``, every call, profiled or not, is preceded by a timed call of the reference: a time over the
    reference's time just before it cancels most of the machine's drift (see :func:`profile_model`).

    Parameters
    ----------
    module
        The model (an ``nn.Module``; put in eval mode, run under ``torch.inference_mode``).
    example_inputs
        Its forward's positional arguments.
    deduction
        The ``torch-eager`` kernels of ``graph``.
    graph
        The IR of ``module`` on these inputs.
    threads
        Intra-op threads.
    runs, warmup
        Profiled calls, and unprofiled warm-up calls before the first.
    plain_per_run
        Unprofiled, timed calls before each profiled one.
    reference
        A call of the reference model, run in the same threads and inference mode.

    Returns
    -------
    OpRuns
        One timing per kernel of ``deduction``, in its order, with ratios to the reference when one is given; the
        end-to-end times (ms) of the plain calls; the reference's times.

    Raises
    ------
    MeasurementError
        When the profiled operators cannot be matched to the deduced kernels (the message lists the kinds that
        differ), or running the model fails.
    """
    import torch

    check_thread_count(threads)
    if runs < 1 or warmup < 0 or plain_per_run < 0:
        raise InvalidInputError(f"profile_torch_ops: runs must be >= 1, warmup and plain_per_run >= 0, got {runs}, "
                                f"{warmup}, {plain_per_run}")
    from edgeplan.ir.kernels import load_rules

    rules = load_rules(deduction.profile).data
    elided: Mapping[str, str] = rules.get("elided_by_ir", {})
    unknown: Mapping[str, str] = rules.get("not_deduced", {})
    renamed: Mapping[str, str] = rules.get("folded_work", {}).get("renamed", {})
    views = set(rules.get("folded_work", {}).get("views", ()))
    allowance = Counter(renamed.get(op, f"aten::{op}") for op in graph.folded_ops)
    folded_keys = _folded_keys(graph, renamed)
    folded_samples: list[list[float]] = [[] for _ in folded_keys]
    module.eval()
    activities = [torch.profiler.ProfilerActivity.CPU]
    samples: list[list[float]] = [[] for _ in deduction.kernels]
    plain_ms: list[float] = []
    ref_ms: list[float] = []
    ref_profiled_ms: list[float] = []
    folded_ms: list[float] = []
    with use_threads(threads), torch.inference_mode():
        for _ in range(warmup):
            module(*example_inputs)
            if reference is not None:
                reference()
        for _ in range(runs):
            for _ in range(plain_per_run):
                if reference is not None:
                    ref_ms.append(_timed_reference(reference))
                plain_ms.append(_timed(lambda: module(*example_inputs)))
            if reference is not None:
                ref_profiled_ms.append(_timed_reference(reference))
            with _profiler(activities) as prof, torch.profiler.record_function(_MARK):
                module(*example_inputs)
            per_run = _top_level_by_run(prof.events())
            if len(per_run) != 1:
                raise MeasurementError(f"torch.profiler reported {len(per_run)} runs of {graph.name!r} instead of 1")
            dropped: list[_FoldedEvent] = []
            times, folded_work = _match_run(per_run[0], deduction, graph, elided, allowance, unknown, dropped)
            for k, ms in enumerate(times):
                samples[k].append(ms)
            folded_ms.append(folded_work)
            for j, ms in _assign_folded(dropped, folded_keys):
                folded_samples[j].append(ms)
    out = []
    for kernel, s in zip(deduction.kernels, samples, strict=True):
        med, iqr = _median_iqr(s)
        out.append(_with_ratios(OpTiming(kernel.name, kernel.kind, kernel.nodes, med, iqr, min(s), kernel.noop), s,
                                ref_profiled_ms))
    folded_ops = []
    for j, s in enumerate(folded_samples):
        if graph.folded_ops[j] not in views and len(s) == runs:
            med, iqr = _median_iqr(s)
            kind = folded_keys[j][0]
            folded_ops.append((j, _with_ratios(OpTiming(f"{kind}@folded#{j}", kind, (), med, iqr, min(s)), s,
                                               ref_profiled_ms)))
    return OpRuns(out, plain_ms, ref_ms, ref_profiled_ms, folded_ms if allowance else [], folded_ops)


@contextmanager
def _fd2_silenced() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null (kineto prints two lines to it at every profiler start and stop)."""
    import os
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextmanager
def _profiler(activities: Sequence[Any]) -> Iterator[Any]:
    """``torch.profiler.profile`` with shapes recorded, quiet while it starts and stops."""
    import torch

    prof = torch.profiler.profile(activities=list(activities), record_shapes=True)
    with _fd2_silenced():
        prof.__enter__()
    try:
        yield prof
    finally:
        with _fd2_silenced():
            prof.__exit__(None, None, None)


def _top_level_by_run(events: Sequence[Any]) -> list[list[Any]]:
    """The events directly under each ``record_function`` marker, per marker in time order."""
    marks = sorted((e for e in events if e.name == _MARK), key=lambda e: e.time_range.start)
    index = {id(m): i for i, m in enumerate(marks)}
    runs: list[list[Any]] = [[] for _ in marks]
    for e in events:
        parent = e.cpu_parent
        if parent is not None and id(parent) in index:
            runs[index[id(parent)]].append(e)
    for r in runs:
        r.sort(key=lambda e: e.time_range.start)
    return runs


def _first_shape(shapes: Sequence[Any]) -> tuple[int, ...] | None:
    """The first tensor shape the profiler recorded for an operator (a tensor list's first tensor)."""
    for s in shapes:
        if isinstance(s, (list, tuple)) and s and all(isinstance(d, (list, tuple)) for d in s):
            s = s[0]
        if isinstance(s, (list, tuple)) and s and all(isinstance(d, int) for d in s):
            return tuple(s)
    return None


def _match_run(events: Sequence[Any], deduction: KernelDeduction, graph: Graph,
               elided: Mapping[str, str] | None = None, allowance: Mapping[str, int] | None = None,
               unknown: Mapping[str, str] | None = None,
               dropped: list[_FoldedEvent] | None = None) -> tuple[list[float], float]:
    """Each deduced kernel's time in one run (ms), from the profiler events directly under the run's marker, and
    the time of the run's folded work (ms).

    Events are matched in order when the kinds line up, else by kind and first input shape, else the remaining
    events of a kernel's kind in order. An operator the IR elides as an alias (``elided``: ``contiguous`` after a
    transpose, ``cat`` of one tensor) is not a kernel of its own: its time goes to the operator before it, whose
    output it copies. ``aten::cat`` is both (the profiler does not record its tensor list): a surplus of cats is
    found by walking the events and the kernels in order. Operators the IR folds away (``allowance``: at most this
    many of each name; computations on constants alone, identities such as ``x * 1``) are taken from a surplus of
    their name, events whose first input shape no kernel of that name is waiting for first; their time is the
    folded work; ``dropped``, when given, receives each folded event's name, first input shape and time (ms), in
    the order they ran. A mismatch is refused, with the
    reason of any operator the rules know cannot be deduced (``unknown``: a fused fast path).
    """
    elided = elided or {}
    events = sorted(events, key=lambda e: e.time_range.start)
    kernels = deduction.kernels
    kinds = [k.kind for k in kernels]
    deduced = set(kinds)
    folded: dict[int, float] = defaultdict(float)

    def fold(keep: Sequence[Any], e: Any) -> None:
        # ``e``'s own time and whatever was already folded into it go to the event before it.
        folded[id(keep[-1])] += e.time_range.elapsed_us() / 1000.0 + folded.pop(id(e), 0.0)

    kept: list[Any] = []
    for e in events:
        if e.name in elided and e.name not in deduced and kept:
            fold(kept, e)
        else:
            kept.append(e)
    kept, folded_work = _without_folded_work(kept, kernels, graph, allowance or {}, folded, dropped)
    names = [e.name for e in kept]
    surplus = Counter(names) - Counter(kinds)
    if surplus and not Counter(kinds) - Counter(names) and all(k in elided for k in surplus):
        walked: list[Any] = []
        j = 0
        for e in kept:
            if j < len(kinds) and e.name == kinds[j]:
                walked.append(e)
                j += 1
            elif surplus[e.name] > 0 and walked:
                surplus[e.name] -= 1
                fold(walked, e)
            else:
                break
        else:
            if j == len(kinds):
                kept, names = walked, [e.name for e in walked]
    events = kept
    if sorted(names) != sorted(kinds):
        extra = _multiset_diff(names, kinds)
        missing = _multiset_diff(kinds, names)
        known = [f"{name}: {why}" for name, why in (unknown or {}).items() if name in names]
        advice = "; ".join(known) or "the kernel rules in edgeplan/data/kernel_rules/torch.json need this case"
        raise MeasurementError(
            f"{graph.name}: torch.profiler's operators do not match the torch-eager kernels deduced from the IR "
            f"(profiled but not deduced: {extra or 'none'}; deduced but not profiled: {missing or 'none'}); {advice}"
        )
    keys = [_kernel_key(k, graph) for k in kernels]
    if names == kinds and all(_agrees(e, key) for e, key in zip(events, keys, strict=True)):
        matched = list(events)
    else:
        matched = _match_unordered(events, kernels, keys, graph.name)
    return [e.time_range.elapsed_us() / 1000.0 + folded.get(id(e), 0.0) for e in matched], folded_work


def _without_folded_work(events: list[Any], kernels: Sequence[Any], graph: Graph, allowance: Mapping[str, int],
                           folded: Mapping[int, float],
                           out: list[_FoldedEvent] | None = None
                           ) -> tuple[list[Any], float]:
    """``events`` less those of the graph's folded operators (see :func:`_match_run`), and their time (ms).

    Which events of a name are the folded ones is told by their first input shape where the profiler records
    one; it records none for tensor lists (``cat``, ``stack``), whose folded events are then the first of the
    surplus in time. Operators the IR elides as aliases were folded into the event before them already, so a
    folded ``contiguous`` counts with the event it follows (folded work when that event is folded too). ``out``
    receives each folded event's name, first input shape and time (ms), in the order they ran.
    """
    surplus = Counter(e.name for e in events) - Counter(k.kind for k in kernels)
    take = surplus & Counter(allowance)
    if not take:
        return events, 0.0
    waiting = Counter(_kernel_key(k, graph) for k in kernels if k.kind in take)
    spare: dict[str, list[Any]] = defaultdict(list)  # events of a taken name, those no kernel waits for first
    claimed: list[Any] = []
    for e in events:
        if e.name in take:
            key = (e.name, _first_shape(e.input_shapes))
            if waiting[key] > 0:
                waiting[key] -= 1
                claimed.append(e)
            else:
                spare[e.name].append(e)
    for e in claimed:
        spare[e.name].append(e)
    dropped = {id(e) for name, n in take.items() for e in spare[name][:n]}
    times = [(e.name, _first_shape(e.input_shapes), e.time_range.elapsed_us() / 1000.0 + folded.get(id(e), 0.0))
             for e in events if id(e) in dropped]
    if out is not None:
        out.extend(times)
    return [e for e in events if id(e) not in dropped], sum(t for _, _, t in times)


def _match_unordered(events: Sequence[Any], kernels: Sequence[Any],
                     keys: Sequence[tuple[str, tuple[int, ...] | None]], what: str) -> list[Any]:
    """Kernels whose (kind, first input shape) a profiled event shows take that event; the rest take the remaining
    events of their kind in execution order, if the event shows the kernel's shape among its inputs (swapped
    operands: a layer scale's ``gamma * x``) or its first input has a lower rank or no shape (a scalar or parameter
    operand). Anything else is refused with both shapes named."""
    queues: dict[tuple[str, tuple[int, ...] | None], deque[Any]] = defaultdict(deque)
    for e in events:
        queues[(e.name, _first_shape(e.input_shapes))].append(e)
    matched: list[Any] = [None] * len(kernels)
    for i, key in enumerate(keys):
        queue = queues.get(key)
        if queue:
            matched[i] = queue.popleft()
    taken = {id(e) for e in matched if e is not None}
    left_by_kind: dict[str, deque[Any]] = defaultdict(deque)
    for e in events:
        if id(e) not in taken:
            left_by_kind[e.name].append(e)
    for i, k in enumerate(kernels):
        if matched[i] is None:
            e = left_by_kind[k.kind].popleft()
            if not _plausible(e, keys[i]):
                raise MeasurementError(
                    f"{what}: the profiled {k.kind} left for kernel {k.name!r} (IR node {k.nodes[0]!r}, input shape "
                    f"{keys[i][1]}) has input shapes {list(e.input_shapes)}; the profiled operators cannot be "
                    "matched to the IR"
                )
            matched[i] = e
    return matched


def _plausible(event: Any, key: tuple[str, tuple[int, ...] | None]) -> bool:
    """Whether a leftover ``event`` of the kernel's kind can be that kernel (see :func:`_match_unordered`)."""
    first = _first_shape(event.input_shapes)
    if first is None or key[1] is None or len(first) < len(key[1]):
        return True
    shapes = [tuple(s) for s in event.input_shapes
              if isinstance(s, (list, tuple)) and s and all(isinstance(d, int) for d in s)]
    return key[1] in shapes


def _kernel_key(kernel: Any, graph: Graph) -> tuple[str, tuple[int, ...] | None]:
    """(aten kind, first input shape) of a deduced kernel, as the profiler would record it."""
    node = graph.node(kernel.nodes[0])
    return kernel.kind, tuple(node.input_shapes[0]) if node.input_shapes else None


def _agrees(event: Any, key: tuple[str, tuple[int, ...] | None]) -> bool:
    """Whether a profiled event can be the kernel of ``key`` (an unrecorded shape on either side agrees)."""
    shape = _first_shape(event.input_shapes)
    return shape is None or key[1] is None or shape == key[1]


def _multiset_diff(a: Sequence[str], b: Sequence[str]) -> str:
    left: defaultdict[str, int] = defaultdict(int)
    for x in a:
        left[x] += 1
    for x in b:
        left[x] -= 1
    return ", ".join(f"{k} x{v}" for k, v in sorted(left.items()) if v > 0)


# ---------------------------------------------------------------------------------------------------------------
# ONNX Runtime
# ---------------------------------------------------------------------------------------------------------------


def profile_onnxruntime_ops(
    onnx_path: str | Path,
    feed: Mapping[str, Any],
    threads: int,
    runs: int = 10,
    warmup: int = 3,
    plain_per_run: int = 0,
    origin: tuple[str | Path, Collection[str]] | None = None,
    reference: Callable[[], object] | None = None,
) -> OpRuns:
    """Per-kernel latencies of ONNX Runtime's CPU provider from its own profiler.

    The session is the one :func:`edgeplan.measure.measure_onnxruntime` times (default optimizations, sequential,
    ``threads`` intra-op threads), with profiling on. A second, unprofiled session runs ``plain_per_run`` timed
    calls before each profiled call (see :func:`profile_torch_ops` for why they are interleaved, and for the
    ``reference`` calls before every call).

    Parameters
    ----------
    onnx_path
        The model.
    feed
        Input arrays by name.
    threads
        Intra-op threads.
    runs, warmup
        Profiled runs kept, and runs before them whose events are dropped.
    plain_per_run
        Unprofiled, timed calls before each profiled one.
    origin
        The float model ``onnx_path`` was made from (itself, or the model before int8 quantization) and the names of
        its IR nodes: each kernel's ``nodes`` are then those IR nodes
        (:func:`edgeplan.measure.kernel_check.onnxruntime_kernel_origins`). Without it, the original ONNX nodes
        between a kernel's inputs and outputs when the tensor names show them.
    reference
        A call of the reference model (its own session, same threads).

    Returns
    -------
    OpRuns
        One timing per node of ORT's optimized graph that ran, in execution order, its ``kind`` the optimized
        node's op type qualified by a non-default domain (``com.microsoft.nchwc.Conv``, ``com.microsoft.QLinearConv``);
        the plain calls' times (ms); the reference's times.

    Raises
    ------
    MeasurementError
        If ORT cannot load or run the model, or a node ran a different number of times than the session.
    """
    import onnxruntime as ort

    from edgeplan.measure.kernel_check import (
        onnx_graph,
        onnxruntime_kernel_origins,
        onnxruntime_kernels,
        onnxruntime_kind,
    )

    check_thread_count(threads)
    if runs < 1 or warmup < 0 or plain_per_run < 0:
        raise InvalidInputError(f"profile_onnxruntime_ops: runs must be >= 1, warmup and plain_per_run >= 0, got "
                                f"{runs}, {warmup}, {plain_per_run}")

    plain_ms: list[float] = []
    ref_ms: list[float] = []
    ref_profiled_ms: list[float] = []

    def timed(call: Callable[[], object], into: list[float] | None) -> None:
        ms = _timed(call)
        if into is not None:
            into.append(ms)

    with tempfile.TemporaryDirectory() as folder:
        profiled_options = _ort_options(threads, str(Path(folder) / "ort"))
        profiled_options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        feed = dict(feed)
        try:
            session = ort.InferenceSession(str(onnx_path), profiled_options, providers=["CPUExecutionProvider"])
            plain = (ort.InferenceSession(str(onnx_path), _ort_options(threads), providers=["CPUExecutionProvider"])
                     if plain_per_run else None)
            for i in range(warmup + runs):
                kept = i >= warmup
                for _ in range(plain_per_run if plain is not None else 0):
                    if reference is not None:
                        reference()  # untimed first, as :func:`_timed_reference`
                        timed(reference, ref_ms if kept else None)
                    timed(lambda: plain.run(None, feed), plain_ms if kept else None)  # type: ignore[union-attr]
                if reference is not None:
                    reference()
                    timed(reference, ref_profiled_ms if kept else None)
                session.run(None, feed)
            trace = json.loads(Path(session.end_profiling()).read_text())
        except Exception as e:  # ORT raises its own exception types
            raise MeasurementError(f"profiling {onnx_path} with onnxruntime failed: {e}") from e
        try:  # the graph ORT ran, for matching its kernels to the original's nodes
            optimized = onnx_graph(profiled_options.optimized_model_filepath)
        except Exception as e:  # onnx raises its own exception types
            raise MeasurementError(f"onnxruntime ran {onnx_path}, but its optimized graph cannot be read: {e}") from e
        unnamed = _name_unnamed_nodes(optimized)
        kinds = {n.name: onnxruntime_kind(n) for n in optimized.graph.node}
        if origin is None:
            covered = {k.name: k.nodes for k in onnxruntime_kernels(onnx_graph(onnx_path), optimized)}
        else:
            covered = onnxruntime_kernel_origins(optimized, origin[0], origin[1])
    ops = _ort_timings(trace, covered, runs, warmup, str(onnx_path), kinds, ref_profiled_ms, unnamed)
    return OpRuns(ops, plain_ms, ref_ms, ref_profiled_ms)


def _name_unnamed_nodes(model: Any) -> dict[str, list[str]]:
    """Name the optimized graph's nodes that ORT left without one (``<op_type>#<k>``, k counting per op type in
    graph order) and return those names by op type. ORT writes a node it made from a function without a name (a
    ``HardSwish`` on a 2-D tensor decomposed into ``HardSigmoid`` and ``Mul``: EfficientViT's classifier head) and
    its profiler calls it after its internal index (``HardSigmoid_216``), which the saved graph does not keep."""
    out: dict[str, list[str]] = defaultdict(list)
    for n in model.graph.node:
        if not n.name:
            n.name = f"{n.op_type}#{len(out[n.op_type])}"
            out[n.op_type].append(n.name)
    return dict(out)


def _ort_options(threads: int, profile_prefix: str | None = None) -> Any:
    """The session options edgeplan measures ORT with: ``threads`` intra-op threads, sequential, quiet."""
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.log_severity_level = 3
    if profile_prefix:
        o.enable_profiling = True
        o.profile_file_prefix = profile_prefix
    return o


def _ort_timings(trace: Sequence[Mapping[str, Any]], covered: Mapping[str, tuple[str, ...]], runs: int,
                 warmup: int, what: str, kinds: Mapping[str, str] | None = None,
                 reference_ms: Sequence[float] = (), unnamed: Mapping[str, Sequence[str]] | None = None,
                 ) -> list[OpTiming]:
    suffix = "_kernel_time"
    order: list[str] = []
    durations: dict[str, list[float]] = defaultdict(list)
    info: dict[str, Mapping[str, Any]] = {}
    for e in trace:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith(suffix):
            continue
        name = str(e["name"])[: -len(suffix)]
        if name not in info:
            order.append(name)
            info[name] = e.get("args", {})
        durations[name].append(float(e["dur"]) / 1000.0)
    # Kernels of nodes the saved graph has without a name (see _name_unnamed_nodes), in execution order, are its
    # unnamed nodes of their op type in graph order; matched only when the counts agree.
    saved_as: dict[str, str] = {}
    strangers: dict[str, list[str]] = defaultdict(list)
    for name in order:
        if name not in covered and name not in (kinds or {}):
            strangers[str(info[name].get("op_name", ""))].append(name)
    for op, names in strangers.items():
        if len((unnamed or {}).get(op, ())) == len(names):
            saved_as.update(zip(names, (unnamed or {})[op], strict=True))
    out = []
    for name in order:
        d = durations[name]
        if len(d) != warmup + runs:
            raise MeasurementError(
                f"{what}: ORT node {name!r} ran {len(d)} times in {warmup + runs} runs; cannot attribute its times"
            )
        med, iqr = _median_iqr(d[warmup:])
        fastest = min(d[warmup:])
        args = info[name]
        shapes = {k: args[k] for k in ("input_type_shape", "output_type_shape") if k in args}
        key = saved_as.get(name, name)
        kind = (kinds or {}).get(key) or str(args.get("op_name", ""))
        out.append(_with_ratios(OpTiming(name, kind, tuple(covered.get(key, ())), med, iqr, fastest, shapes=shapes),
                                d[warmup:], reference_ms))
    return out


def quantize_onnx(src: str | Path, dst: str | Path, input_shapes: Mapping[str, Sequence[int]], seed: int = 0,
                  calibration_batches: int = 4) -> Path:
    """Quantize ``src`` to int8 the way ONNX Runtime deploys it on CPUs; write ``dst``.

    Static quantization in the QDQ format: uint8 activations with ranges calibrated (min-max) on
    ``calibration_batches`` seeded random inputs, int8 weights per output channel; ORT fuses the QDQ pairs into
    ``QLinearConv`` & co. at load time. The model goes through ORT's pre-processing (shape inference and
    optimization) first, as ORT's documentation recommends. Random calibration data gives other scales than real
    images but the same kernels and shapes, which is what latency depends on.

    Parameters
    ----------
    src, dst
        Float model and where to write the quantized one.
    input_shapes
        Shape of every model input, by name.
    seed
        Seed of the calibration inputs.
    calibration_batches
        Number of calibration inputs.

    Returns
    -------
    Path
        ``dst``.
    """
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    rng = np.random.default_rng(seed)
    batches = [{n: rng.standard_normal(tuple(s)).astype(np.float32) for n, s in input_shapes.items()}
               for _ in range(calibration_batches)]

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(batches)

        def get_next(self) -> dict[str, Any] | None:
            return next(self._it, None)

    dst = Path(dst)
    with tempfile.TemporaryDirectory() as folder:
        pre = Path(folder) / "pre.onnx"
        try:
            quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
            quantize_static(str(pre), str(dst), _Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
        except Exception as e:  # the quantizer raises many exception types
            raise MeasurementError(f"quantizing {src} to int8 failed: {e}") from e
    return dst


# ---------------------------------------------------------------------------------------------------------------
# A whole model in a scenario
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelProfile:
    """A model measured in one scenario: end to end (no profiler) and per op (profiler).

    Attributes
    ----------
    model
        The zoo string.
    scenario
        The scenario's name.
    end_to_end
        The harness timing of whole runs.
    ops
        Per-kernel latencies.
    kernel_profile
        The kernel rules the ops were matched with (PyTorch), or the runtime (ORT).
    nodes
        JSON descriptions (:func:`edgeplan.ir.serialize.node_to_dict`) of the IR nodes the ops compute, by name,
        so that features can be computed without rebuilding the model.
    reference
        With a reference model (:func:`reference_runner`): its zoo string (``model``), its median and fastest
        time (``ms``, ``min_ms``) over the calls just before the unprofiled ones, the median of the paired ratios
        of those calls (``ratio``), their spread (``iqr_rel``) and the fastest over fastest (``min_ratio``);
        else None.
    folded_work_ms
        Eager PyTorch, a graph with folded operators: their median time over the profiled runs (ms), part of the
        end-to-end time but of no op's; else None.
    folded_ops
        Eager PyTorch: the timings of those folded operators that move data (:attr:`OpRuns.folded_ops`), each an
        op's dict (:meth:`OpTiming.to_dict`, no nodes) with the operator's index in the graph's ``folded_ops``
        (``folded``), its name there (``op``) and its ``input_shapes`` and ``output_shapes``: what a latency model
        needs to learn them (:func:`edgeplan.costmodels.opwise.ops.folded_op_input`).
    """

    model: str
    scenario: str
    end_to_end: Timing
    ops: tuple[OpTiming, ...]
    kernel_profile: str
    nodes: Mapping[str, Mapping[str, Any]]
    reference: Mapping[str, Any] | None = None
    folded_work_ms: float | None = None
    folded_ops: tuple[Mapping[str, Any], ...] = ()

    @property
    def op_sum_ms(self) -> float:
        """Sum of the per-op medians."""
        return sum(o.median_ms for o in self.ops)

    @property
    def op_sum_min_ms(self) -> float:
        """Sum of the per-op minima."""
        return sum(o.min_ms for o in self.ops)

    def extra(self) -> dict[str, Any]:
        """What the Store keeps beside the end-to-end timing."""
        return {"scenario": self.scenario, "kernel_profile": self.kernel_profile,
                "ops": [o.to_dict() for o in self.ops], "nodes": dict(self.nodes), "op_sum_ms": self.op_sum_ms,
                "op_sum_min_ms": self.op_sum_min_ms, **({"reference": dict(self.reference)} if self.reference else {}),
                **({"folded_work_ms": self.folded_work_ms} if self.folded_work_ms is not None else {}),
                **({"folded_ops": [dict(o) for o in self.folded_ops]} if self.folded_ops else {})}


def _reference_summary(spec: str, runs: OpRuns) -> dict[str, Any] | None:
    if not runs.reference_ms or not runs.plain_ms or min(runs.reference_ms) <= 0:
        return None
    ratio, iqr, min_ratio = _paired(runs.plain_ms, runs.reference_ms) or (0.0, 0.0, 0.0)
    return {"model": spec, "ms": statistics.median(runs.reference_ms), "min_ms": min(runs.reference_ms),
            "ratio": ratio, "iqr_rel": iqr, "min_ratio": min_ratio}


def reference_runner(spec: str, scenario: Scenario, home: str | Path | None = None) -> Callable[[], object]:
    """A call of the zoo model ``spec`` as ``scenario`` runs it, to time beside each measured call.

    On a shared machine a model's latency moves by tens of percent from one second to the next with the
    neighbours' load; the latency of a fixed reference model timed just before moves with it. The ratio of the two
    is what a campaign with a reference keeps, and :func:`edgeplan.measure.op_campaign.export_dataset` turns ratios
    back into milliseconds with the scenario's typical reference latency.

    Parameters
    ----------
    spec
        The reference (a zoo string; ``synthetic:0`` in the shipped campaigns).
    scenario
        Runtime, dtype and threads; the call must be made inside the measuring function's thread setting (PyTorch)
        or runs its own ORT session with the scenario's threads.
    home
        The edgeplan home (ONNX exports and int8 models are cached there).

    Returns
    -------
    Callable[[], object]
        One inference of the reference on its example inputs.
    """
    model = _zoo_model(spec, scenario.runtime)
    if scenario.runtime == "torch":
        module, inputs = model.module.eval(), model.example_inputs()
        return lambda: module(*inputs)
    import onnxruntime as ort

    files = _ort_files(spec, model, scenario.dtype, home)
    session = ort.InferenceSession(str(files.path), _ort_options(scenario.threads),
                                   providers=["CPUExecutionProvider"])
    feed = _feed(_onnx_input_names(files.path), files.input_shapes)
    return lambda: session.run(None, feed)


def profile_model(
    spec: str,
    scenario: Scenario,
    runs: int = 10,
    config: TimingConfig | None = None,
    home: str | Path | None = None,
    plain_per_run: int = 3,
    reference: tuple[str, Callable[[], object]] | None = None,
) -> ModelProfile:
    """Measure a zoo model (or, in an ONNX Runtime scenario, an ONNX file) in ``scenario``: per-op latencies with
    the runtime's profiler, then end to end.

    Parameters
    ----------
    spec
        A zoo string (``synthetic:12``, ``torchvision:resnet18``, ``timm:...``), or an ONNX file's path in an ONNX
        Runtime scenario.
    scenario
        Where and how it runs.
    runs
        Profiled runs (the per-op median is over these).
    config
        End-to-end harness settings when ``plain_per_run`` is 0 (default: adaptive to +-2%, at most 10 s).
    home
        The edgeplan home, where ONNX exports and int8 models are cached.
    plain_per_run
        Unprofiled runs timed before each profiled run; their median is the end-to-end latency, taken under the
        same conditions as the per-op times (see :func:`profile_torch_ops`). 0: a separate harness measurement
        after the profile.
    reference
        A reference model's zoo string and :func:`reference_runner` call, timed before every call of the model
        (needs ``plain_per_run`` > 0): the profile then keeps the model's times over the reference's.

    Returns
    -------
    ModelProfile
    """
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.measure.runners import measure_onnxruntime, measure_torch

    if reference is not None and plain_per_run < 1:
        raise InvalidInputError("a reference model is timed beside the unprofiled runs: give plain_per_run >= 1")
    ref_call = reference[1] if reference else None
    config = config or TimingConfig()
    model = _zoo_model(spec, scenario.runtime)
    if scenario.runtime == "torch":
        inputs = model.example_inputs()
        graph = graph_from_torch(model.module, inputs, name=spec)
        deduction = deduce_kernels(graph, scenario.kernel_profile)
        measured = profile_torch_ops(model.module, inputs, deduction, graph, scenario.threads, runs=runs,
                                     plain_per_run=plain_per_run, reference=ref_call)
    else:
        path, float_path, graph, input_shapes = _ort_files(spec, model, scenario.dtype, home)
        feed = _feed(_onnx_input_names(path), input_shapes)
        measured = profile_onnxruntime_ops(path, feed, scenario.threads, runs=runs, plain_per_run=plain_per_run,
                                           origin=(float_path, {n.name for n in graph.nodes}), reference=ref_call)
        untraced = [o.kernel for o in measured.ops if not o.nodes]
        if untraced:
            raise MeasurementError(f"{spec}: ONNX Runtime kernels {', '.join(untraced[:5])} cannot be traced to the "
                                   "model's ONNX nodes; their time would have no features")
    plain, ops = measured.plain_ms, measured.ops
    if plain:
        e2e = Timing.from_samples(plain, "max_repeats")
    elif scenario.runtime == "torch":
        e2e = measure_torch(model.module, inputs, scenario.threads, config, name=spec)
    else:
        e2e = measure_onnxruntime(path, feed, scenario.threads, config)
    return ModelProfile(spec, scenario.name, e2e, tuple(ops), scenario.kernel_profile, _node_dicts(graph, ops),
                        _reference_summary(reference[0], measured) if reference else None,
                        statistics.median(measured.folded_ms) if measured.folded_ms else None,
                        _folded_dicts(graph, measured.folded_ops))


def _folded_dicts(graph: Graph, timed: Sequence[tuple[int, OpTiming]]) -> tuple[dict[str, Any], ...]:
    """:attr:`ModelProfile.folded_ops` of the graph's timed folded operators."""
    shapes = graph.folded_shapes
    return tuple({**t.to_dict(), "folded": j, "op": graph.folded_ops[j],
                  "input_shapes": [list(x) for x in shapes[j][0]] if shapes else [],
                  "output_shapes": [list(x) for x in shapes[j][1]] if shapes else []} for j, t in timed)


def _node_dicts(graph: Graph, ops: Sequence[OpTiming]) -> dict[str, dict[str, Any]]:
    """JSON descriptions of the IR nodes ``ops`` compute, by name (what a dataset needs for features)."""
    from edgeplan.ir.serialize import node_to_dict

    used = {n for o in ops for n in o.nodes}
    return {n.name: node_to_dict(n) for n in graph.nodes if n.name in used}


class _OrtFiles(NamedTuple):
    path: Path  # what ORT runs
    float_path: Path  # the float file it was made from
    graph: Graph  # the float file's IR
    input_shapes: tuple[tuple[int, ...], ...]  # of the graph inputs, in order


def _zoo_model(spec: str, runtime: str) -> Any:
    """The zoo model of ``spec``, or None for an ONNX file of the user's, which only ONNX Runtime runs."""
    from edgeplan.frontends.zoo import build_model, is_onnx_path

    if not is_onnx_path(spec):
        return build_model(spec)
    if runtime == "torch":
        raise InvalidInputError(f"{spec} is an ONNX file: eager PyTorch cannot run it; profile it in an ONNX "
                                "Runtime scenario (ort-fp32-1t, ort-int8-1t, ...)")
    return None


def _ort_files(spec: str, model: Any, dtype: str, home: str | Path | None, opaque: bool = False) -> _OrtFiles:
    """The ONNX file ORT runs for ``spec`` in ``dtype``, the float file it was made from, the latter's IR (unknown
    operators as opaque nodes with ``opaque``) and its input shapes. ``model`` is the zoo model, or None for an ONNX
    file of the user's (:func:`_named_copy`)."""
    from edgeplan.frontends.onnx_frontend import graph_from_onnx

    float_path = _exported(spec, model, home) if model is not None else _named_copy(spec, home)
    graph = graph_from_onnx(float_path, opaque=opaque)
    shapes = tuple(model.input_shapes) if model is not None else tuple(n.output_shapes[0] for n in graph.inputs)
    path = float_path if dtype == "float32" else _quantized(float_path, shapes)
    return _OrtFiles(path, float_path, graph, shapes)


#: Largest user ONNX model (bytes, weights included) traced for ONNX Runtime devices: its named copy is one
#: protobuf file, which cannot exceed 2 GB (weights kept beside it would not follow the copy ORT's tools make).
_INLINE_LIMIT = 1_500_000_000


def onnx_file_digest(spec: str) -> str:
    """A short digest of an ONNX file's bytes: what names its traced copy, and what tells an edited file from
    the one a campaign measured.

    Parameters
    ----------
    spec
        The file's path.

    Returns
    -------
    str
        12 hexadecimal digits of its SHA-1.

    Raises
    ------
    InvalidInputError
        When there is no such file.
    """
    import hashlib

    source = Path(spec)
    if not source.is_file():
        raise InvalidInputError(f"{spec}: no such ONNX file")
    return hashlib.sha1(source.read_bytes()).hexdigest()[:12]


def _named_copy(spec: str, home: str | Path | None) -> Path:
    """A user's ONNX file as ORT's kernels are traced from it: a copy in the edgeplan home (by content) whose
    unnamed nodes, and nodes named like another, get names of their own (``Conv_12``), so that ORT's optimized
    graph and the IR agree on every node. Named after their first output, as the IR would name them, int8
    kernels were traced to their neighbours too: ResNet-18's convolutions predicted 15% slower than from the
    same file with names."""
    import onnx

    from edgeplan.frontends.onnx_frontend.loading import _load as _load_onnx
    from edgeplan.measure.paths import edgeplan_home

    source = Path(spec)
    path = edgeplan_home(home) / "onnx" / f"file-{source.stem[:40]}-{onnx_file_digest(spec)}.onnx"
    if path.is_file():
        return path
    model, _ = _load_onnx(str(source))  # a clear error for a file that is not ONNX or misses its external data
    taken = {n.name for n in model.graph.node} | {t for n in model.graph.node for t in (*n.input, *n.output)}
    seen: set[str] = set()
    for i, node in enumerate(model.graph.node):
        # A name of its own for a node without one (one shared with a tensor confuses the tracing of fused
        # kernels) or with another node's (ORT refuses the model).
        if not node.name or node.name in seen:
            node.name = next(name for k in range(len(taken) + 1)
                             if (name := f"{node.op_type}_{i}" + (f"_{k}" if k else "")) not in taken)
            taken.add(node.name)
        seen.add(node.name)
    size = model.ByteSize()
    if size > _INLINE_LIMIT:
        raise InvalidInputError(f"{spec}: {size / 1e9:.1f} GB with its weights; ONNX Runtime devices take ONNX files "
                                f"up to {_INLINE_LIMIT / 1e9:g} GB (the traced copy is one protobuf file)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    onnx.save(model, str(tmp))
    tmp.replace(path)
    return path


def _quantized(float_path: Path, shapes: Sequence[Sequence[int]]) -> Path:
    """The int8 (static QDQ) version of ``float_path`` beside it, made once (:func:`quantize_onnx`)."""
    qpath = float_path.with_name(float_path.stem + ".int8.onnx")
    if not qpath.is_file():
        names = _onnx_input_names(float_path)
        tmp = qpath.with_suffix(".tmp.onnx")
        quantize_onnx(float_path, tmp, dict(zip(names, shapes, strict=True)))
        tmp.replace(qpath)
    return qpath


def _onnx_input_names(path: Path) -> list[str]:
    from edgeplan.measure.kernel_check import onnx_graph

    model = onnx_graph(path)
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def _feed(names: Sequence[str], shapes: Sequence[Sequence[int]]) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    return {n: rng.standard_normal(tuple(s)).astype(np.float32) for n, s in zip(names, shapes, strict=True)}


def onnxruntime_kernel_ops(
    spec: str, dtype: str, home: str | Path | None = None, opaque: bool = False
) -> tuple[Graph, list[tuple[str, str, tuple[str, ...]]]]:
    """The kernels ONNX Runtime's CPU provider runs for a zoo model or an ONNX file, each traced to IR nodes;
    nothing is timed.

    The model is exported to ONNX (and quantized for ``int8``), both cached under the edgeplan home, and given
    to ORT's graph optimizer at the default level, exactly as :func:`profile_model` runs it; its kernels are
    traced to the nodes of the float ONNX file's IR (:func:`edgeplan.measure.kernel_check.onnxruntime_kernel_origins`).

    Parameters
    ----------
    spec
        A zoo string, or the path of an ONNX file (traced from a named copy, :func:`_named_copy`).
    dtype
        ``float32`` or ``int8``.
    home
        The edgeplan home.
    opaque
        Import the float file with operators edgeplan does not know as opaque nodes instead of raising.

    Returns
    -------
    tuple[Graph, list[tuple[str, str, tuple[str, ...]]]]
        The IR of the float ONNX file, and (ORT node name, kind, IR nodes) per kernel in ORT's order (a node ORT
        saved without a name is called ``<op_type>#<k>``, see :func:`_name_unnamed_nodes`).
    """
    from edgeplan.measure.kernel_check import onnxruntime_kernel_origins, onnxruntime_kind, onnxruntime_optimized_model

    path, float_path, graph, _ = _ort_files(spec, _zoo_model(spec, "onnxruntime"), dtype, home, opaque)
    optimized = onnxruntime_optimized_model(path)
    _name_unnamed_nodes(optimized)
    origins = onnxruntime_kernel_origins(optimized, float_path, {n.name for n in graph.nodes})
    return graph, [(n.name, onnxruntime_kind(n), origins[n.name]) for n in optimized.graph.node]


def _exported(spec: str, model: Any, home: str | Path | None) -> Path:
    """The zoo model's fp32 ONNX export, cached under the edgeplan home."""
    from edgeplan.frontends.onnx_export import cache_export, onnx_cache_path
    from edgeplan.measure.paths import edgeplan_home

    path = onnx_cache_path(spec, None, edgeplan_home(home))
    if not path.is_file():
        cache_export(model.module, model.example_inputs(), path)
    return path
