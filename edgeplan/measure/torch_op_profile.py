"""Per-operation latencies of eager PyTorch from ``torch.profiler``, matched to the kernels deduced from the IR.

:func:`profile_torch_ops` runs the module under the profiler (``calls.runs`` times), each call inside a
``record_function`` marker. The operators directly under a marker are the top-level aten operators the model
dispatched; their inclusive CPU time is the op's latency in that run. They are matched one to one to the kernels of
the ``torch-eager`` deduction (:func:`edgeplan.ir.kernels.deduce_kernels`) in execution order; when the orders
differ (branches run in another order than the IR lists them), by aten kind and first input shape. Operators the IR
writes as aliases of their input (``contiguous`` after a transpose, ``cat`` of one tensor, listed under
``elided_by_ir`` in the torch rules) add their time to the operator before them. A model whose operators still do
not match is refused with the differences named, never half-matched.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir.graph import Graph
from edgeplan.ir.kernels import KernelDeduction
from edgeplan.measure.harness import check_thread_count, use_threads
from edgeplan.measure.op_timing import (
    RUN_MARK,
    FoldedEvent,
    OpRuns,
    OpTiming,
    ProfileCalls,
    median_iqr,
    timed_ms,
    timed_reference_ms,
    with_ratios,
)

__all__ = ["profile_torch_ops"]


def _folded_keys(graph: Graph, renamed: Mapping[str, str]) -> list[tuple[str, tuple[int, ...] | None]]:
    """The profiler's name and first input shape of each of the graph's folded operators."""
    shapes = graph.folded_shapes or tuple(((), ()) for _ in graph.folded_ops)
    return [(renamed.get(op, f"aten::{op}"), tuple(ins[0]) if ins else None)
            for op, (ins, _) in zip(graph.folded_ops, shapes, strict=True)]


def _assign_folded(dropped: Sequence[FoldedEvent],
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


def profile_torch_ops(
    module: Any,
    example_inputs: Sequence[Any],
    deduction: KernelDeduction,
    graph: Graph,
    threads: int,
    *,
    calls: ProfileCalls | None = None,
    reference: Callable[[], object] | None = None,
) -> OpRuns:
    """Per-kernel latencies of eager PyTorch from ``torch.profiler``, matched to ``deduction``'s kernels.

    Each profiled run is preceded by ``calls.plain_per_run`` unprofiled runs timed end to end, so that the end-to-end
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
    calls
        Profiled, warm-up and plain calls; default :class:`~edgeplan.measure.op_timing.ProfileCalls` (10, 3, 0).
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
    calls = calls or ProfileCalls()
    runs, warmup, plain_per_run = calls.runs, calls.warmup, calls.plain_per_run
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
                    ref_ms.append(timed_reference_ms(reference))
                plain_ms.append(timed_ms(lambda: module(*example_inputs)))
            if reference is not None:
                ref_profiled_ms.append(timed_reference_ms(reference))
            with _profiler(activities) as prof, torch.profiler.record_function(RUN_MARK):
                module(*example_inputs)
            per_run = _top_level_by_run(prof.events())
            if len(per_run) != 1:
                raise MeasurementError(f"torch.profiler reported {len(per_run)} runs of {graph.name!r} instead of 1")
            dropped: list[FoldedEvent] = []
            times, folded_work = _match_run(per_run[0], deduction, graph, elided, allowance, unknown, dropped)
            for k, ms in enumerate(times):
                samples[k].append(ms)
            folded_ms.append(folded_work)
            for j, ms in _assign_folded(dropped, folded_keys):
                folded_samples[j].append(ms)
    out = []
    for kernel, s in zip(deduction.kernels, samples, strict=True):
        med, iqr = median_iqr(s)
        out.append(with_ratios(OpTiming(kernel.name, kernel.kind, kernel.nodes, med, iqr, min(s), kernel.noop), s,
                                ref_profiled_ms))
    folded_ops = []
    for j, s in enumerate(folded_samples):
        if graph.folded_ops[j] not in views and len(s) == runs:
            med, iqr = median_iqr(s)
            kind = folded_keys[j][0]
            folded_ops.append((j, with_ratios(OpTiming(f"{kind}@folded#{j}", kind, (), med, iqr, min(s)), s,
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
    marks = sorted((e for e in events if e.name == RUN_MARK), key=lambda e: e.time_range.start)
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
               dropped: list[FoldedEvent] | None = None) -> tuple[list[float], float]:
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
                           out: list[FoldedEvent] | None = None
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
