"""The operations a latency model prices and its predictions: an op's features, its place in its network, and
the ops of a measured dataset record.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from edgeplan.costmodels.opwise.features import (
    CONTEXT_CAPS,
    NETWORK_FEATURES,
    features,
    lead_node,
    predictor_key,
)
from edgeplan.errors import InvalidInputError

__all__ = [
    "FOLDING_PROFILE",
    "OpInput",
    "OpPrediction",
    "Prediction",
    "STATISTICS",
    "folded_op_input",
    "folded_product_node",
    "network_footprint",
    "network_peak",
    "network_values",
    "op_ms",
    "op_params",
    "record_latency",
    "record_ops",
    "with_context",
]


#: Which measured statistic a model learns: ``min`` (the fastest run, op by op and end to end) or ``median``.
#: On a shared machine interference only adds time, and the minimum is the more reproducible of the two (see
#: :mod:`edgeplan.measure.op_profile`); ``median`` is the usual choice on a dedicated device.
STATISTICS: tuple[str, ...] = ("min", "median")


def _check_statistic(statistic: str) -> None:
    if statistic not in STATISTICS:
        raise InvalidInputError(f"unknown statistic {statistic!r}; choose one of {', '.join(STATISTICS)}")


def record_latency(record: Mapping[str, Any], statistic: str = "median") -> float:
    """A dataset record's measured end-to-end latency under ``statistic``."""
    _check_statistic(statistic)
    if statistic == "min":
        if record.get("latency_min_ms") is None:
            raise InvalidInputError(f"{record['model']}: the dataset has no minima (an older export); use the median")
        return float(record["latency_min_ms"])
    return float(record["latency_ms"])


@dataclass(frozen=True)
class OpInput:
    """One operation to predict: its name, runtime kind, key, category and features.

    ``lead`` is its first IR node (a node dict, :func:`~edgeplan.costmodels.opwise.features.lead_node`), from which a
    model deduces the implementation the runtime selects for it (:meth:`LatencyModel.key_of`); ``key`` does not carry
    it. ``x`` holds the op's own features (:data:`~edgeplan.costmodels.opwise.features.CATEGORY_FEATURES`), ``context``
    those of its place in its network (:data:`~edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`), then its
    network's (:data:`~edgeplan.costmodels.opwise.features.NETWORK_FEATURES`), set by :func:`with_context`; empty
    until then.
    """

    name: str
    kind: str
    key: str
    category: str
    x: list[float]
    measured_ms: float | None = None
    lead: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    context: tuple[float, ...] = ()

    @property
    def vector(self) -> list[float]:
        """Own features, then context features: what a model's columns (:meth:`LatencyModel._columns`) index."""
        return [*self.x, *self.context]


def network_footprint(ops: Sequence[OpInput], with_params: bool = False) -> float:
    """:data:`~edgeplan.costmodels.opwise.features.NETWORK_FEATURES`' ``network_distinct_mib`` of a network from its
    kernels ``ops``: log2 of the summed MiB of their distinct output sizes (each lead node's ``activation_bytes``,
    counted once per size; at least 1 KiB); with ``with_params``, ``network_total_mib``: the kernels' parameter bytes
    (each lead node's ``param_bytes``) added to those sizes."""
    sizes = {int((o.lead or {}).get("activation_bytes", 0) or 0) for o in ops}
    params = sum(int((o.lead or {}).get("param_bytes", 0) or 0) for o in ops) if with_params else 0
    return math.log2(max((sum(sizes) + params) / 2**20, 2.0**-10))


def network_peak(ops: Sequence[OpInput]) -> float:
    """:data:`~edgeplan.costmodels.opwise.features.NETWORK_FEATURES`' ``network_peak_mib`` of a network from its kernels
    ``ops``: log2 of the MiB of their largest output (each lead node's ``activation_bytes``; at least 1 KiB)."""
    peak = max((int((o.lead or {}).get("activation_bytes", 0) or 0) for o in ops), default=0)
    return math.log2(max(peak / 2**20, 2.0**-10))


def op_params(op: OpInput) -> int:
    """The parameters ``op`` reads: its lead node's (0 without one)."""
    return int((op.lead or {}).get("params", 0) or 0)


def network_values(ops: Sequence[OpInput]) -> tuple[float, ...]:
    """Every one of :data:`~edgeplan.costmodels.opwise.features.NETWORK_FEATURES` of a network from its kernels ``ops``
    (:func:`network_footprint` without and with the parameters, :func:`network_peak`)."""
    return network_footprint(ops), network_footprint(ops, with_params=True), network_peak(ops)


def with_context(ops: Sequence[OpInput], network: Sequence[float] | None = None) -> list[OpInput]:
    """``ops`` (one network's, in execution order) with their context features set
    (:data:`~edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`): per op, how many ops before it have its key and
    identical features, and how many have its key, each capped at
    :data:`~edgeplan.costmodels.opwise.features.CONTEXT_CAPS`; then the network's
    (:data:`~edgeplan.costmodels.opwise.features.NETWORK_FEATURES`): ``network``, or
    :func:`network_values` of ``ops`` when None (give the kernels' values to a network's folded operators, whose sizes
    they leave out)."""
    same: dict[tuple[str, tuple[float, ...]], int] = defaultdict(int)
    kind: dict[str, int] = defaultdict(int)
    cap_op, cap_kind = CONTEXT_CAPS["same_op_before"], CONTEXT_CAPS["same_kind_before"]
    whole = network_values(ops) if network is None else tuple(float(v) for v in network)
    if len(whole) != len(NETWORK_FEATURES):
        raise InvalidInputError(f"{len(whole)} network values given; give one per feature of {NETWORK_FEATURES}")
    out = []
    for o in ops:
        exact = (o.key, tuple(o.x))
        out.append(replace(o, context=(float(min(same[exact], cap_op)), float(min(kind[o.key], cap_kind)), *whole)))
        same[exact] += 1
        kind[o.key] += 1
    return out


def op_ms(op: Mapping[str, Any], statistic: str = "median") -> float:
    """A dataset op's latency (ms) in ``statistic``: its ``min_ms`` (``min``) or its median ``ms``."""
    return float(op.get("min_ms", op["ms"]) if statistic == "min" else op["ms"])


#: The kernel profile whose rules say what a record's folded operators are (only eager PyTorch runs any).
FOLDING_PROFILE = "torch-eager"


def record_ops(record: Mapping[str, Any], statistic: str = "median") -> list[OpInput]:
    """The operations of a dataset record (see :func:`edgeplan.measure.op_dataset.load_dataset`) with features,
    their context's included (:func:`with_context`, in the order they ran).

    ``measured_ms`` is the op's ``statistic`` (``min_ms`` or ``ms``, the median). A record's operators that eager
    PyTorch runs and the IR folds, timed one by one (``folded_ops``), follow the kernels, as
    :func:`edgeplan.costmodels.opwise.graph_ops.folded_work_ops` appends them to a graph's (the context features
    counted among them alone, as there).

    Raises
    ------
    InvalidInputError
        When an operation has no IR nodes (an ONNX Runtime kernel whose origin is unknown): it cannot be featurized.
    """
    nodes = record["nodes"]
    out = []
    for op in record["ops"]:
        if not op["nodes"]:
            raise InvalidInputError(f"{record['model']}: op {op['kernel']!r} ({op['kind']}) is not matched to IR "
                                    "nodes, so it has no features; re-measure it with this edgeplan version (ONNX "
                                    "Runtime campaigns before it recorded none), under a new --repeat tag")
        missing = [n for n in op["nodes"] if n not in nodes]
        if missing:
            raise InvalidInputError(f"{record['model']}: op {op['kernel']!r} ({op['kind']}) names nodes without IR "
                                    f"descriptions ({', '.join(missing[:3])}); re-export the dataset with this "
                                    "edgeplan version")
        ns = [nodes[n] for n in op["nodes"]]
        cat, x = features(ns, op["kind"])
        measured = op_ms(op, statistic)
        lead = lead_node(ns, op["kind"])
        out.append(OpInput(op["kernel"] + "@" + op["nodes"][0], op["kind"], predictor_key(op["kind"], lead), cat, x,
                           measured, lead))
    if not record.get("folded_ops"):
        return with_context(out)
    kernels = with_context(out)
    from edgeplan.ir.kernels.rules import load_rules

    rules = load_rules(FOLDING_PROFILE).data["folded_work"]
    folded = [folded_op_input(int(op["folded"]), str(op["op"]), str(op["kind"]), op["input_shapes"],
                              op["output_shapes"], rules, op_ms(op, statistic)) for op in record["folded_ops"]]
    return [*kernels, *with_context(folded, network_values(out))]


@dataclass(frozen=True)
class OpPrediction:
    """One operation's prediction: ``ms`` is None when no predictor covers it.

    Attributes
    ----------
    name, kind, key
        The op's name, runtime kind and own predictor key (``{kind}|{category}``).
    ms
        The predicted latency, or None.
    by_category
        Predicted by another key's predictor than its own: its category's, or its family's (:data:`FAMILY`).
    predicted_by
        The key of the predictor that made the prediction (None when unpredicted, or not recorded).
    params
        The parameters the op reads (its lead node's), which the overhead's weight term counts
        (:meth:`~edgeplan.costmodels.opwise.model.LatencyModel.overhead_of`).
    """

    name: str
    kind: str
    key: str
    ms: float | None
    by_category: bool = False
    predicted_by: str | None = None
    params: int = 0

    @property
    def fallback_for(self) -> str | None:
        """The op's own category when another category's predictor predicted it (:data:`FAMILY`), else None."""
        if not self.predicted_by:
            return None
        own, used = self.key.rsplit("|", 1)[-1], self.predicted_by.rsplit("|", 1)[-1]
        return own if own != used else None

    @property
    def predictor(self) -> str:
        """Which predictor made the prediction, for display: the op's key, ``category {category}``, or for a
        family fallback the predictor used and what it stands in for (``aten::conv2d|conv (fallback for gconv)``).
        An unpredicted op shows its own key (empty for a kernel that could not be featurized)."""
        own = self.fallback_for
        if own is not None and self.predicted_by:
            used = self.predicted_by
            shown = "category " + used[2:] if used.startswith("*|") else used
            return f"{shown} (fallback for {own})"
        if self.by_category:
            return "category " + self.key.split("|")[-1]
        return self.key


@dataclass(frozen=True)
class Prediction:
    """A model's predicted latency and its breakdown.

    Attributes
    ----------
    latency_ms
        The predicted end-to-end latency.
    overhead_ms
        The overhead as it counts in ``latency_ms``: ``latency_ms`` minus the predicted ops' sum, so that the
        breakdown adds up. It is the model's learnt overhead unless ``overhead_clamped``.
    ops
        Per-op predictions.
    overhead_clamped
        The learnt (negative) overhead would have taken the total below half the ops' sum, so the total was raised
        to that (:meth:`LatencyModel.total_ms`) and ``overhead_ms`` is the effective overhead, not the learnt one.
    """

    latency_ms: float
    overhead_ms: float
    ops: tuple[OpPrediction, ...]
    overhead_clamped: bool = False

    @property
    def unpredicted(self) -> list[str]:
        """Names (with kind) of the operations no predictor covers."""
        return [f"{o.name} ({o.kind})" for o in self.ops if o.ms is None]


def folded_product_node(op: str, input_shapes: Sequence[Sequence[int]], output_shapes: Sequence[Sequence[int]]
                        ) -> dict[str, Any] | None:
    """The IR node (as a node dict) a folded linear layer, matrix product or 2-D convolution would have been, from
    the shapes the frontend recorded for it, its weight's among its inputs; None when they do not determine it.

    A linear layer's ``(out_features, in_features)`` weight gives its attributes; a product's contraction is its
    first input's last axis; a convolution's ``(filters, channels / groups, k_h, k_w)`` weight gives its kernel and
    groups, and its stride is the one that maps its input's height and width to its output's with a padding of
    at most half the kernel (its dilation is taken as 1: the shapes do not record it).

    Parameters
    ----------
    op
        The operator's name in the graph's ``folded_ops`` (``linear``, ``matmul``, ``mm``, ``bmm``, ``conv2d``).
    input_shapes, output_shapes
        Its recorded shapes (:attr:`~edgeplan.ir.Graph.folded_shapes`).

    Returns
    -------
    dict or None
        A node dict with ``op``, ``attrs``, shapes, ``macs``, ``flops``, ``params`` and the bytes of the parameters
        and the output (float32), as :func:`edgeplan.ir.serialize.node_to_dict` writes an IR node.
    """
    ins = [[int(d) for d in s] for s in input_shapes]
    outs = [[int(d) for d in s] for s in output_shapes]
    if len(outs) != 1 or len(ins) < 2 or not outs[0]:
        return None
    out = outs[0]
    size = math.prod(out)
    if op == "linear":
        x, w = ins[0], ins[1]
        if len(w) != 2 or not x or x[-1] != w[1] or out[-1] != w[0]:
            return None
        bias = len(ins) > 2 and ins[2] == [w[0]]
        params = w[0] * w[1] + (w[0] if bias else 0)
        return {"op": "linear", "attrs": {"in_features": w[1], "out_features": w[0], "bias": bias},
                "input_shapes": [x], "output_shapes": [out], "macs": size * w[1], "flops": 2 * size * w[1],
                "params": params, "param_bytes": 4 * params, "activation_bytes": 4 * size}
    if op in ("matmul", "mm", "bmm"):
        a, b = ins[0], ins[1]
        if len(a) < 2 or len(b) < 2 or a[-1] != b[-2] or out[-1] != b[-1]:
            return None
        return {"op": "matmul", "attrs": {"contraction": a[-1], "equation": ""}, "input_shapes": [a, b],
                "output_shapes": [out], "macs": size * a[-1], "flops": 2 * size * a[-1], "params": 0,
                "param_bytes": 0, "activation_bytes": 4 * size}
    if op == "conv2d":
        x, w = ins[0], ins[1]
        if len(x) != 4 or len(w) != 4 or len(out) != 4 or out[1] != w[0] or w[1] < 1 or x[1] % w[1]:
            return None
        stride = [_conv_stride(x[2 + a], out[2 + a], w[2 + a]) for a in (0, 1)]
        if None in stride:
            return None
        groups = x[1] // w[1]
        bias = len(ins) > 2 and ins[2] == [w[0]]
        params = math.prod(w) + (w[0] if bias else 0)
        macs = size * w[1] * w[2] * w[3]
        return {"op": "conv2d", "attrs": {"in_channels": x[1], "out_channels": w[0], "kernel": w[2:],
                                          "stride": stride, "dilation": [1, 1], "groups": groups, "bias": bias},
                "input_shapes": [x], "output_shapes": [out], "macs": macs, "flops": 2 * macs, "params": params,
                "param_bytes": 4 * params, "activation_bytes": 4 * size}
    return None


def _conv_stride(size: int, out: int, kernel: int) -> int | None:
    """The stride mapping ``size`` to ``out`` under a ``kernel`` with a padding of at most half of it per side."""
    from edgeplan.ir.checks import conv_output_size

    for stride in range(1, max(size, 1) + 1):
        if any(conv_output_size(size, kernel, stride, 2 * pad, 1) == out for pad in range(kernel // 2 + 1)):
            return stride
    return None


def folded_op_input(index: int, op: str, kind: str, input_shapes: Sequence[Sequence[int]],
                    output_shapes: Sequence[Sequence[int]], rules: Mapping[str, Any],
                    measured_ms: float | None = None) -> OpInput:
    """One folded operator of a graph as an operation to predict or to learn (context not set).

    It is named ``{kind}@folded#{index}`` (``index`` its place in the graph's ``folded_ops``). Its category is
    ``concat`` for the ``folded_work`` rules' ``concat`` operators, ``weight_norm`` for their ``weights`` ones (a
    convolution's weight standardized at every call, NFNets' ``aten::batch_norm`` over a ``(1, filters, fan_in)``
    view of it: its own predictors, learnt from the ``synthetic-nf`` space, never the batch norms of activations',
    which priced it at 0.17-0.38 of its time) and ``elementwise`` for the rest; a linear layer, matrix product or
    2-D convolution whose shapes determine it (:func:`folded_product_node`) is that node, with its category.

    Parameters
    ----------
    index, op, kind
        The operator's index in the graph's ``folded_ops``, its name there and its runtime kind.
    input_shapes, output_shapes
        Its shapes (:attr:`~edgeplan.ir.Graph.folded_shapes`).
    rules
        The runtime's ``folded_work`` rules.
    measured_ms
        Its measured time, for training.

    Returns
    -------
    OpInput
    """
    from edgeplan.costmodels.opwise.features import computes_product

    product = folded_product_node(op, input_shapes, output_shapes) if computes_product(kind) else None
    if product is not None:  # priced as the IR node it would have been
        cat, x = features([product], kind)
        return OpInput(f"{kind}@folded#{index}", kind, predictor_key(kind, product), cat, x, measured_ms, product)
    what = "concat" if op in rules.get("concat", ()) else "weight_norm" if op in rules.get("weights", {}) else "folded"
    lead: dict[str, Any] = {"op": what, "attrs": {}, "params": 0, "flops": 0,
                            "input_shapes": [list(s) for s in input_shapes],
                            "output_shapes": [list(s) for s in output_shapes] or [[1]]}
    cat, x = features([lead], kind)
    return OpInput(f"{kind}@folded#{index}", kind, predictor_key(kind, lead), cat, x, measured_ms, lead)
