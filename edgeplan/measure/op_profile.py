"""Per-operation latencies from the runtime's own profiler, matched to the kernels deduced from the IR.

li2023 predicts a network's latency as an overhead plus the sum of its operations' latencies, each predicted from
the operation's features; training needs every operation's latency on the device. This module measures them with
the runtime's profiler, not with timers of our own around each op: what is timed is exactly what the runtime runs.

- **Eager PyTorch** (:func:`~edgeplan.measure.torch_op_profile.profile_torch_ops`): ``torch.profiler``, its
  top-level aten operators matched to the kernels deduced from the IR.
- **ONNX Runtime** (:func:`~edgeplan.measure.ort_op_profile.profile_onnxruntime_ops`): the session's own profiling,
  one event per node of the optimized graph, traced back to the IR nodes.
- **LiteRT** (:func:`~edgeplan.measure.litert_op_profile.profile_litert_ops`): no profiler is reachable from Python,
  so each operator of the converted model is timed alone, cut out of it; its IR nodes are those of the ``.tflite``
  file's IR (:func:`~edgeplan.frontends.tflite_frontend.graph_from_tflite`).

The latency of an op is the median over the profiled runs; the spread (interquartile range over the median) is
kept beside it. The profiler adds a little time per op, so the sum of the ops is not the end-to-end latency,
which is timed on unprofiled runs interleaved with the profiled ones (:func:`profile_model`): on a shared
machine, latencies drift by tens of percent from one minute to the next, and interleaving keeps a model's two
views coherent. li2023's overhead term absorbs the difference between them.

With a **reference model** (:func:`reference_runner`, ``edgeplan profile ops --reference synthetic:0``), every
call, profiled or not, is preceded by a timed call of the reference, and each time is also kept as its ratio to
the reference's time just before it (median over the runs; fastest over fastest). The neighbours' load that slows a
model down slows the reference down with it, so the ratios move far less than the times between two
measurements of the same networks. The reference is called once untimed before each timed call
(:func:`~edgeplan.measure.op_timing.timed_reference_ms`): timed right after the measured model, it ran the more slowly
the larger the model.
:func:`edgeplan.measure.op_campaign.export_dataset` converts the ratios back to milliseconds with the scenario's
typical reference latency.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir.graph import Graph
from edgeplan.measure.harness import Timing, TimingConfig
from edgeplan.measure.op_timing import (
    OpRuns,
    OpTiming,
    ProfileCalls,
    paired_ratios,
)
from edgeplan.measure.ort_op_profile import (
    onnx_input_names,
    ort_files,
    ort_session_options,
    profile_onnxruntime_ops,
    random_feed,
    zoo_model,
)
from edgeplan.measure.scenarios import Scenario
from edgeplan.measure.torch_op_profile import (
    profile_torch_ops,
)

__all__ = [
    "ModelProfile",
    "profile_model",
    "reference_runner",
]


# ---------------------------------------------------------------------------------------------------------------
# Eager PyTorch
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# ONNX Runtime
# ---------------------------------------------------------------------------------------------------------------


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
    ratio, iqr, min_ratio = paired_ratios(runs.plain_ms, runs.reference_ms) or (0.0, 0.0, 0.0)
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
    if scenario.runtime == "litert":
        from edgeplan.frontends.litert_export import cache_tflite
        from edgeplan.measure.paths import edgeplan_home
        from edgeplan.measure.runners import litert_interpreter

        interpreter = litert_interpreter(cache_tflite(spec, None, scenario.dtype, edgeplan_home(home)),
                                         scenario.threads)
        return interpreter.invoke
    model = zoo_model(spec, scenario.runtime)
    if scenario.runtime == "torch":
        module, inputs = model.module.eval(), model.example_inputs()
        return lambda: module(*inputs)
    import onnxruntime as ort

    files = ort_files(spec, model, scenario.dtype, home)
    session = ort.InferenceSession(str(files.path), ort_session_options(scenario.threads),
                                   providers=["CPUExecutionProvider"])
    feed = random_feed(onnx_input_names(files.path), files.input_shapes)
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
    calls = ProfileCalls(runs=runs, plain_per_run=plain_per_run)
    if scenario.runtime == "litert":
        return _profile_litert(spec, scenario, calls, home, reference)
    model = zoo_model(spec, scenario.runtime)
    if scenario.runtime == "torch":
        inputs = model.example_inputs()
        graph = graph_from_torch(model.module, inputs, name=spec)
        deduction = deduce_kernels(graph, scenario.kernel_profile)
        measured = profile_torch_ops(model.module, inputs, deduction, graph, scenario.threads, calls=calls,
                                     reference=ref_call)
    else:
        path, float_path, graph, input_shapes = ort_files(spec, model, scenario.dtype, home)
        feed = random_feed(onnx_input_names(path), input_shapes)
        measured = profile_onnxruntime_ops(path, feed, scenario.threads, calls=calls,
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


def _profile_litert(spec: str, scenario: Scenario, calls: ProfileCalls, home: str | Path | None,
                    reference: tuple[str, Callable[[], object]] | None) -> ModelProfile:
    """:func:`profile_model` in a LiteRT scenario: the model converted (cached), each operator timed alone."""
    from edgeplan.frontends.litert_export import cache_tflite
    from edgeplan.frontends.tflite_frontend import graph_from_tflite
    from edgeplan.frontends.zoo import is_tflite_path
    from edgeplan.measure.litert_op_profile import profile_litert_ops
    from edgeplan.measure.paths import edgeplan_home

    path = Path(spec) if is_tflite_path(spec) else cache_tflite(spec, None, scenario.dtype, edgeplan_home(home))
    graph = graph_from_tflite(path, name=spec)
    measured = profile_litert_ops(path, scenario.threads, ProfileCalls(calls.runs, calls.warmup,
                                                                       max(calls.plain_per_run, 1)),
                                  reference[1] if reference else None).runs
    ops = measured.ops
    return ModelProfile(spec, scenario.name, Timing.from_samples(measured.plain_ms, "max_repeats"), tuple(ops),
                        scenario.kernel_profile, _node_dicts(graph, ops),
                        _reference_summary(reference[0], measured) if reference else None)


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


