"""Compute costs predicted on a device profile, for the planners: what a model's layers cost on a device and runtime
this machine does not run (a phone's LiteRT with XNNPACK, a calibrated board), so that ``offload`` can plan for that
mobile and ``partition`` for nodes of that kind.

The device's op-wise latency model (:func:`edgeplan.costmodels.opwise.profiles.load_device_model`) prices the
kernels its runtime runs for the graph; each kernel's time goes to the IR node it computes first (a kernel the
runtime inserts, such as LiteRT's layout ``TRANSPOSE`` named ``TRANSPOSE:node``, to the node it serves; one that
names no node of the graph, to the node before it). A range of nodes run as one model costs the sum of its nodes
plus the model's end-to-end overhead once (each range is its own invocation on the device). An operation the
device cannot price is an error that names it, never a cost of 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.ir.graph import Graph

__all__ = ["PredictedCosts", "predicted_costs"]


@dataclass(frozen=True)
class PredictedCosts:
    """A graph's compute cost per IR node on a device profile.

    Attributes
    ----------
    device, method
        The device profile and its predictors' method.
    node_ms
        Predicted milliseconds per IR node name (nodes no kernel computes are absent: 0).
    overhead_ms
        The end-to-end overhead of one invocation on the device (the model's learnt term, at least 0).
    """

    device: str
    method: str
    node_ms: dict[str, float] = field(repr=False)
    overhead_ms: float

    def range_ms(self, nodes: Iterable[str]) -> float:
        """The predicted time of running ``nodes`` as one model: their sum plus one overhead."""
        return sum(self.node_ms.get(n, 0.0) for n in nodes) + self.overhead_ms

    @property
    def label(self) -> str:
        """What a report says the costs are."""
        return f"predicted: device profile {self.device} ({self.method})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: device, method, overhead and the per-node times."""
        return {"device": self.device, "method": self.method, "overhead_ms": self.overhead_ms,
                "node_ms": dict(self.node_ms)}


def predicted_costs(graph: Graph, device: str, method: str | None = None,
                    home: str | Path | None = None) -> PredictedCosts:
    """Predict every IR node's compute time of ``graph`` on ``device`` (see the module docstring).

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
    from edgeplan.costmodels.opwise.graph_ops import ORT_OBSERVED, predict_graph
    from edgeplan.costmodels.opwise.profiles import kernel_profile_of, load_device_model, resolve_method

    method = resolve_method(device, method, home)
    model = load_device_model(device, method, home)
    profile = kernel_profile_of(model)
    if profile in ORT_OBSERVED:
        raise InvalidInputError(f"device {device!r} prices the kernels ONNX Runtime's optimizer keeps for a whole "
                                "model, which cannot be cut into layers; plan with a device of a graph runtime "
                                "(torch-*, litert-*) or one calibrated from it")
    pred = predict_graph(graph, model, profile)
    if pred.unpredicted:
        shown = ", ".join(pred.unpredicted[:5]) + (", ..." if len(pred.unpredicted) > 5 else "")
        raise InvalidInputError(f"device {device!r} cannot price {len(pred.unpredicted)} operation(s) of "
                                f"{graph.name}: {shown}; calibrate a device that covers them "
                                "(`edgeplan calibrate`) or plan with measured costs")
    names = {n.name for n in graph.nodes}
    node_ms: dict[str, float] = {}
    last = graph.nodes[0].name
    for op in pred.ops:
        node = _node_of(op.name, names) or last
        node_ms[node] = node_ms.get(node, 0.0) + float(op.ms or 0.0)
        last = node
    return PredictedCosts(device, method, node_ms, max(pred.overhead_ms, 0.0))


def _node_of(kernel: str, names: set[str]) -> str | None:
    """The IR node a kernel's name points at: ``kernel@node`` or ``OP:node`` (an inserted operator)."""
    head, at, tail = kernel.rpartition("@")
    if at and tail in names:
        return tail
    _, colon, target = (head if at else kernel).partition(":")
    return target if colon and target in names else None
