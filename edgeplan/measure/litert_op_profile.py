"""Per-operator latencies of a LiteRT model: each operator taken out of the converted model and timed alone.

LiteRT's Python interpreter exposes no profiler (the op profiling of ``benchmark_model`` is a C++ tool that PyPI
does not ship), so the operators are measured as nn-Meter measures kernels: each one alone in a model of its own
(:func:`operator_models`), cut out of the converted file with its exact tensors, weights and builtin options (the
fused activation included), so it runs at the shapes and fusions the runtime really uses, on the XNNPACK delegate
when the delegate takes it (else on LiteRT's default kernel, as in the whole model).

:func:`profile_litert_ops` times every operator model once per round, beside unprofiled end-to-end runs of the
whole model, round after round, so that the per-op times and the end-to-end time are taken under the same load;
each operator's latency is its median over the rounds. As nn-Meter and li2023 time a kernel (``benchmark_model``
runs it again and again), each operator model runs twice in a row and the second run is timed: it finds its
inputs, weights and XNNPACK's state in the cache. Timed once per round instead, an operator reads everything cold,
after all the others ran; the memory-bound operators (depthwise convolutions, elementwise operators) then take
longest, so the per-op sum runs over the end-to-end time by a factor that grows with their share, and a model fitted
on one family of networks cannot carry it to another. Timed warm, per-op sums are a steady fraction of the
end-to-end time across families. An operator alone also pays the interpreter's call and the delegate's dispatch,
which a whole model pays once: li2023's overhead term absorbs the differences, and :class:`LiteRTProfile` reports
how the per-op sum compares with the end-to-end time.
"""

from __future__ import annotations

import copy
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeplan.errors import MeasurementError
from edgeplan.frontends.tflite_frontend import (
    TfliteModel,
    TfliteOp,
    buffer_bytes,
    folded_pads,
    has_act_node,
    read_tflite,
)
from edgeplan.measure.op_timing import OpRuns, OpTiming, ProfileCalls, median_iqr

__all__ = ["LiteRTProfile", "operator_models", "profile_litert_ops", "xnnpack_groups"]


def operator_models(path: str | os.PathLike[str], groups: Sequence[Sequence[int]] | None = None) -> list[bytes]:
    """One ``.tflite`` model per group of operators of ``path``: the group's operators, in order, with copies of their
    tensors and of their constant buffers (weights, shapes); the tensors they read but do not compute are the model's
    inputs, those they compute and the rest of the model reads (or the model returns) its outputs.

    Parameters
    ----------
    path
        The ``.tflite`` file.
    groups
        Operator indices per model; default: every operator alone.

    Raises
    ------
    InvalidInputError
        On a missing file or one that is not a LiteRT flatbuffer (see
        :func:`~edgeplan.frontends.tflite_frontend.read_tflite`).
    """
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    parsed = read_tflite(path)
    data = Path(path).read_bytes()
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    sub = model.subgraphs[0]
    contents = [buffer_bytes(b, data) for b in model.buffers]
    read_elsewhere = _reads_outside(parsed)
    out = []
    for group in groups if groups is not None else [[op.index] for op in parsed.ops]:
        piece = _Piece(schema, model, contents)
        ops = [piece.operator(sub.operators[i]) for i in group]
        produced = {t for i in group for t in parsed.ops[i].outputs}
        graph = schema.SubGraphT()
        graph.tensors, graph.operators = piece.tensors, ops
        graph.inputs = [piece.index[t] for t in piece.read if t not in produced]
        graph.outputs = [piece.index[t] for t in sorted(produced)
                         if t in parsed.outputs or read_elsewhere.get(t, set()) - set(group)]
        alone = schema.ModelT()
        alone.version, alone.description = model.version, b"edgeplan: operators alone"
        alone.operatorCodes, alone.subgraphs, alone.buffers = piece.codes, [graph, *piece.bodies], piece.buffers
        builder = flatbuffers.Builder(1024)
        builder.Finish(alone.Pack(builder), file_identifier=b"TFL3")
        out.append(bytes(builder.Output()))
    return out


def _reads_outside(model: TfliteModel) -> dict[int, set[int]]:
    """For each tensor, the operators that read it."""
    readers: dict[int, set[int]] = {}
    for op in model.ops:
        for t in op.inputs:
            readers.setdefault(t, set()).add(op.index)
    return readers


class _Piece:
    """The tensors, buffers and operator codes of a model cut out of a bigger one, copied as they are used, and the
    subgraphs its operators call (a StableHLO reduce window's body), appended after its own."""

    def __init__(self, schema: Any, model: Any, contents: Sequence[bytes | None], sub: Any = None) -> None:
        self.schema, self.model, self.contents = schema, model, contents
        self.sub = model.subgraphs[0] if sub is None else sub
        self.buffers: list[Any] = [schema.BufferT()]  # buffer 0 is the empty sentinel
        self.tensors: list[Any] = []
        self.codes: list[Any] = []
        self.index: dict[int, int] = {}
        self.read: list[int] = []  # activations read, in first-use order
        self.bodies: list[Any] = []  # called subgraphs, numbered from 1 in the cut model
        self.body_index: dict[int, int] = {}

    def tensor(self, t: int, *, reading: bool) -> int:
        import numpy as np

        if t < 0:
            return -1
        if t not in self.index:
            tensor = copy.copy(self.sub.tensors[t])
            content = self.contents[tensor.buffer] if 0 < tensor.buffer < len(self.contents) else None
            buffer = self.schema.BufferT()
            if content is not None:
                buffer.data = np.frombuffer(content, dtype=np.uint8)
            self.buffers.append(buffer)
            tensor.buffer = len(self.buffers) - 1
            self.tensors.append(tensor)
            self.index[t] = len(self.tensors) - 1
            if content is None and reading:
                self.read.append(t)
        return self.index[t]

    def operator(self, op: Any) -> Any:
        code = self.model.operatorCodes[op.opcodeIndex]
        if code not in self.codes:
            self.codes.append(code)
        single = copy.copy(op)
        single.opcodeIndex = self.codes.index(code)
        single.inputs = [self.tensor(int(t), reading=True) for t in op.inputs]
        single.outputs = [self.tensor(int(t), reading=False) for t in op.outputs]
        for table in ("builtinOptions", "builtinOptions2"):  # subgraphs it calls: bodies, branches, decompositions
            options = getattr(op, table, None)
            called = [a for a in vars(options) if a.endswith("SubgraphIndex")] if options is not None else []
            if called:
                options = copy.copy(options)
                for a in called:
                    if getattr(options, a) is not None:
                        setattr(options, a, self.body(int(getattr(options, a))))
                setattr(single, table, options)
        return single

    def body(self, k: int) -> int:
        """The index in the cut model of the original model's subgraph ``k`` (copied on first use)."""
        if k not in self.body_index:
            self.body_index[k] = 1 + len(self.bodies)
            original = self.model.subgraphs[k]
            inner = _Piece(self.schema, self.model, self.contents, original)
            inner.codes, inner.buffers, inner.bodies, inner.body_index = (self.codes, self.buffers, self.bodies,
                                                                          self.body_index)
            graph = self.schema.SubGraphT()
            self.bodies.append(graph)
            graph.operators = [inner.operator(o) for o in original.operators]
            graph.inputs = [inner.tensor(int(t), reading=True) for t in original.inputs]
            graph.outputs = [inner.tensor(int(t), reading=False) for t in original.outputs]
            graph.tensors, graph.name = inner.tensors, original.name
        return self.body_index[k]


def xnnpack_groups(model: TfliteModel, taken: Mapping[int, int]) -> list[list[int]]:
    """The operators as XNNPACK runs them: a zero ``PAD`` before a convolution of the same delegate partition
    (:func:`~edgeplan.frontends.tflite_frontend.folded_pads`) is fused into it by XNNPACK's subgraph optimizer and
    runs with it; every other operator runs alone."""
    folded = {p: c for p, c in folded_pads(model).items() if p in taken and taken.get(c) == taken[p]}
    fused = set(folded.values())
    return [[op.index, folded[op.index]] if op.index in folded else [op.index]
            for op in model.ops if op.index not in fused]


@dataclass(frozen=True)
class LiteRTProfile:
    """A LiteRT model measured per operator and end to end.

    Attributes
    ----------
    runs
        The per-op timings (one per group of :func:`xnnpack_groups`, kernel named by its operators
        ``{type}_{index}`` joined by ``+``, as the IR nodes of
        :func:`~edgeplan.frontends.tflite_frontend.graph_from_tflite`, kind ``xnnpack.{TYPE}`` or ``tflite.{TYPE}``
        of its last operator) and the end-to-end times.
    """

    runs: OpRuns

    @property
    def op_sum_ms(self) -> float:
        """Sum of the per-op medians."""
        return sum(o.median_ms for o in self.runs.ops)

    @property
    def end_to_end_ms(self) -> float:
        """Median of the end-to-end runs."""
        return statistics.median(self.runs.plain_ms)


def profile_litert_ops(path: str | os.PathLike[str], threads: int, calls: ProfileCalls | None = None,
                       reference: Callable[[], object] | None = None) -> LiteRTProfile:
    """Time every operator of a ``.tflite`` model alone (:func:`operator_models`) and the whole model, interleaved.

    Parameters
    ----------
    path
        The ``.tflite`` file.
    threads
        Threads of every interpreter and of its XNNPACK delegate.
    calls
        ``runs`` rounds (each op's median is over them), ``warmup`` untimed rounds first, ``plain_per_run``
        end-to-end runs of the whole model timed at the start of each round (at least 1).
    reference
        A reference model's call (:func:`~edgeplan.measure.op_profile.reference_runner`), timed before each
        end-to-end run: its times are kept in ``reference_ms``.

    Returns
    -------
    LiteRTProfile

    Raises
    ------
    MeasurementError
        When LiteRT cannot load or run the model or one of its operators alone.
    """
    from edgeplan.measure.litert_delegate import delegated_ops
    from edgeplan.measure.runners import litert_interpreter

    calls = calls or ProfileCalls(plain_per_run=3)
    model = read_tflite(path)
    taken = delegated_ops(path, threads)
    groups = xnnpack_groups(model, taken)
    whole = litert_interpreter(path, threads)
    _invoke(whole, f"{path}: LiteRT cannot run the model")
    alone = []
    for group, content in zip(groups, operator_models(path, groups), strict=True):
        names = ", ".join(f"{i} ({model.ops[i].type})" for i in group)
        try:
            alone.append(litert_interpreter(content, threads))
        except MeasurementError as e:
            raise MeasurementError(f"{path}: operator {names} cannot run alone: {e}") from e
        _invoke(alone[-1], f"{path}: operator {names} cannot run alone")
    times: list[list[float]] = [[] for _ in alone]
    plain: list[float] = []
    ref: list[float] = []
    for round_ in range(calls.warmup + calls.runs):
        keep = round_ >= calls.warmup
        for _ in range(max(calls.plain_per_run, 1)):
            if reference is not None:
                reference()
                start = time.perf_counter_ns()
                reference()
                ref_ms = (time.perf_counter_ns() - start) / 1e6
            start = time.perf_counter_ns()
            whole.invoke()
            ms = (time.perf_counter_ns() - start) / 1e6
            if keep:
                plain.append(ms)
                if reference is not None:
                    ref.append(ref_ms)
        for k, interpreter in enumerate(alone):
            interpreter.invoke()  # warms the cache; the run back to back with it is timed
            start = time.perf_counter_ns()
            interpreter.invoke()
            if keep:
                times[k].append((time.perf_counter_ns() - start) / 1e6)
    ops = [_timing([model.ops[i] for i in group], taken, samples) for group, samples in zip(groups, times, strict=True)]
    return LiteRTProfile(OpRuns(ops, plain, reference_ms=ref))


def _invoke(interpreter: Any, what: str) -> None:
    """Run ``interpreter`` once; LiteRT's error becomes a :class:`MeasurementError` saying ``what``."""
    try:
        interpreter.invoke()
    except (RuntimeError, ValueError) as e:
        raise MeasurementError(f"{what}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from e


def _timing(ops: Sequence[TfliteOp], taken: Mapping[int, int], samples: list[float]) -> OpTiming:
    """The timing of a group: named by its operators (``pad_6+conv_2d_7``), of the kind of its last one, computing
    the IR nodes of :func:`~edgeplan.frontends.tflite_frontend.graph_from_tflite` (a folded pad has none)."""
    median, iqr = median_iqr(samples)
    names = [f"{op.type.lower()}_{op.index}" for op in ops]
    last = ops[-1]
    nodes = tuple(n for op, name in zip(ops, names, strict=True) if op is last or op.type != "PAD"
                  for n in ((name, f"{name}.act") if has_act_node(op) else (name,)))
    kind = f"{'xnnpack' if last.index in taken else 'tflite'}.{last.type}"
    return OpTiming("+".join(names), kind, nodes, median, iqr, min(samples))
