"""Compute costs predicted on a device profile, for the planners: what a model's layers cost on a device and runtime
this machine does not run (a phone's LiteRT with XNNPACK, a calibrated board), so that ``offload`` can plan for that
mobile and ``partition`` for nodes of that kind.

The device's op-wise latency model (:func:`edgeplan.costmodels.opwise.profiles.load_device_model`) prices the
kernels its runtime runs for the graph once; each kernel belongs to the IR node it computes first (a kernel the
runtime inserts, such as LiteRT's layout ``TRANSPOSE`` named ``TRANSPOSE:node``, to the node it serves; one that
names no computing node of the graph, to the next kernel's node). A range of nodes run as one model costs what the
device's model says of a model of just those kernels: their predicted times plus the overhead learnt for that many
kernels of that total (a constant, a cost per kernel, a share of their sum, a cost per million parameters they
read; a calibrated device's correction on top). An operation the device cannot price is an error that names it,
never a cost of 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from edgeplan.errors import InvalidInputError
from edgeplan.ir.graph import Graph

__all__ = ["PredictedCosts", "predicted_costs"]


@dataclass(frozen=True)
class PredictedCosts:
    """A graph's kernels priced on a device profile, by the IR node each belongs to.

    Attributes
    ----------
    device, method
        The device profile and its predictors' method.
    op_nodes
        The IR node of each kernel, in execution order.
    op_ms
        Each kernel's predicted milliseconds.
    total_of
        The predicted latency of a model of the kernels at the given indices (its overhead included).
    """

    device: str
    method: str
    op_nodes: tuple[str, ...]
    op_ms: tuple[float, ...]
    total_of: Callable[[Sequence[int]], float] = field(repr=False, compare=False)

    @property
    def node_ms(self) -> dict[str, float]:
        """The kernels' predicted milliseconds summed per IR node (no overhead)."""
        out: dict[str, float] = {}
        for node, ms in zip(self.op_nodes, self.op_ms, strict=True):
            out[node] = out.get(node, 0.0) + ms
        return out

    def range_ms(self, nodes: Iterable[str]) -> float:
        """The predicted latency of running ``nodes`` as one model: their kernels and that model's overhead."""
        wanted = set(nodes)
        return self.total_of([i for i, n in enumerate(self.op_nodes) if n in wanted])

    @property
    def label(self) -> str:
        """What a report says the costs are."""
        return f"predicted: device profile {self.device} ({self.method})"


def predicted_costs(graph: Graph, device: str, method: str | None = None,
                    home: str | Path | None = None) -> PredictedCosts:
    """Price every kernel of ``graph`` on ``device`` (see the module docstring).

    Parameters
    ----------
    graph
        The model's graph.
    device
        A device profile (``edgeplan predict --device``): shipped, such as ``litert-fp32-1t``, or calibrated.
    method
        Its predictors' method; None: the device's default.
    home
        The edgeplan home (calibrated devices).

    Raises
    ------
    InvalidInputError
        For an unknown device, a device whose kernels are read from an exported model (ONNX Runtime), or a graph
        with operations the device cannot price (named).
    """
    from edgeplan.costmodels.opwise.graph_ops import ORT_OBSERVED, graph_ops
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.costmodels.opwise.profiles import deduction_of, kernel_profile_of, load_device_model, resolve_method

    method = resolve_method(device, method, home)
    model = load_device_model(device, method, home)
    profile = kernel_profile_of(model)
    if profile in ORT_OBSERVED:
        raise InvalidInputError(f"device {device!r} prices the kernels ONNX Runtime's optimizer keeps for a whole "
                                "model, which cannot be cut into layers; plan with a device of a graph runtime "
                                "(torch-*, litert-*) or one calibrated from it")
    ops, skipped = graph_ops(graph, profile, deduction_of(model))
    source = model if isinstance(model, LatencyModel) else model.source
    src = source.predict_ops(ops)
    unpriced = skipped + [f"{o.name} ({o.kind})" for o in src.ops if o.ms is None]
    if unpriced:
        shown = ", ".join(unpriced[:5]) + (", ..." if len(unpriced) > 5 else "")
        raise InvalidInputError(f"device {device!r} cannot price {len(unpriced)} operation(s) of {graph.name}: "
                                f"{shown}; calibrate a device that covers them (`edgeplan calibrate`) or plan with "
                                "measured costs")
    if isinstance(model, LatencyModel):
        def total_of(idx: Sequence[int]) -> float:
            return model.prediction([src.ops[i] for i in idx]).latency_ms
        op_ms = tuple(float(o.ms or 0.0) for o in src.ops)
    else:
        calibrated = model

        def total_of(idx: Sequence[int]) -> float:
            part = source.prediction([src.ops[i] for i in idx])
            return calibrated.corrected(part, [ops[i] for i in idx]).latency_ms
        op_ms = tuple(float(o.ms or 0.0) for o in calibrated.corrected(src, ops).ops)
    return PredictedCosts(device, method, _op_nodes(graph, [o.name for o in ops]), op_ms, total_of)


def _op_nodes(graph: Graph, kernels: Sequence[str]) -> tuple[str, ...]:
    """The IR node of each kernel: the one its name points at (``kernel@node``, ``OP:node``), else the next kernel's
    (the previous one's for the last kernels)."""
    from edgeplan.ir.ops import OpKind

    computing = {n.name for n in graph.nodes if n.kind is not OpKind.INPUT}
    found = [_node_of(k, computing) for k in kernels]
    after: str | None = None
    for i in range(len(found) - 1, -1, -1):
        found[i] = after = found[i] or after
    before: str | None = None
    for i, node in enumerate(found):
        found[i] = before = node or before
    if any(n is None for n in found):
        raise InvalidInputError(f"no kernel of {graph.name} names a node of its graph; it cannot be cut into layers")
    return tuple(n for n in found if n is not None)


def _node_of(kernel: str, names: set[str]) -> str | None:
    """The IR node a kernel's name points at: ``kernel@node`` or ``OP:node`` (an inserted operator)."""
    head, at, tail = kernel.rpartition("@")
    if at and tail in names:
        return tail
    _, colon, target = (head if at else kernel).partition(":")
    return target if colon and target in names else None
