"""Predict a model's latency on a device profile from its graph alone (li2023 §4): no execution.

The model's IR is imported, the kernels the scenario's runtime runs are deduced from it
(:func:`edgeplan.ir.kernels.deduce_kernels`; for ONNX Runtime scenarios, read from ORT's optimized graph of the
exported model, :func:`onnxruntime_ops`), each kernel is featurized like the training data, and the device's
:class:`~edgeplan.latency.model.LatencyModel` sums the kernels' predictions and its overhead.

Device profiles are the folders of shipped models (``edgeplan/data/latency/models/{device}/{method}.json.xz``,
xz-compressed JSON) and the ones ``edgeplan calibrate`` creates under the edgeplan home
(``devices/{name}/{method}.json``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError
from edgeplan.ir.graph import Graph
from edgeplan.latency.features import features, lead_node, predictor_key
from edgeplan.latency.model import (
    MODEL_FORMAT,
    MODEL_SUFFIXES,
    LatencyModel,
    OpInput,
    Prediction,
    model_file,
    network_values,
    read_json,
    with_context,
)

if TYPE_CHECKING:
    from edgeplan.latency.calibrate import CalibratedDevice

__all__ = [
    "ModelPrediction",
    "available_devices",
    "deduction_of",
    "folded_work_ops",
    "graph_ops",
    "kernel_profile_of",
    "load_device_model",
    "onnxruntime_ops",
    "spec_ops",
    "predict_graph",
    "predict_models",
    "resolve_method",
    "shipped_devices",
    "source_method",
    "with_skipped",
]

DEFAULT_DEVICE = "torch-fp32-1t"
DEFAULT_METHOD = "gbdt"

#: Kernel profiles of ONNX Runtime scenarios: their kernels are read from ORT's optimized graph, not deduced.
ORT_OBSERVED = ("onnxruntime-float32", "onnxruntime-int8")


def _shipped_root() -> Path:
    return Path(str(resources.files("edgeplan.data").joinpath("latency/models")))


def shipped_devices() -> set[str]:
    """Names a latency calibration may not take: every measurement scenario's, shipped profile or not (a calibrated
    device is looked up before a shipped one and would hide it)."""
    from edgeplan.measure.scenarios import SCENARIOS

    root = _shipped_root()
    return set(SCENARIOS) | ({p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set())


def home_root(home: str | Path | None) -> Path:
    """Where calibrated devices live: ``{edgeplan home}/devices``."""
    from edgeplan.measure.paths import edgeplan_home

    return edgeplan_home(home) / "devices"


def available_devices(home: str | Path | None = None) -> dict[str, list[str]]:
    """Device profiles with a model, and the methods each has: shipped scenarios and calibrated devices."""
    out: dict[str, list[str]] = {}
    for root in (_shipped_root(), home_root(home)):
        if root.is_dir():
            for d in sorted(p for p in root.iterdir() if p.is_dir()):
                methods = {f.name.removesuffix(suffix) for suffix in MODEL_SUFFIXES for f in d.glob(f"*{suffix}")}
                if methods:
                    out[d.name] = sorted(methods | set(out.get(d.name, ())))
    return out


def load_device_model(device: str, method: str, home: str | Path | None = None) -> LatencyModel | CalibratedDevice:
    """The latency model of ``device`` (a calibrated device first, then a shipped scenario) for ``method``.

    Raises
    ------
    InvalidInputError
        When no such device or method exists; the message lists what does.
    """
    if not isinstance(device, str) or not device or "/" in device or "\\" in device or device.startswith("."):
        known = ", ".join(sorted(available_devices(home))) or "none"
        raise InvalidInputError(f"device {device!r}: give a device name (one of {known}), not a path")
    for root in (home_root(home), _shipped_root()):
        path = model_file(root / device, method)
        if path is None:
            continue
        data = read_json(path, what="a latency model")
        fmt = data.get("format") if isinstance(data, dict) else None
        if fmt == MODEL_FORMAT:
            return LatencyModel.from_dict(data)
        from edgeplan.latency.calibrate import CALIBRATED_FORMAT, CalibratedDevice

        if fmt == CALIBRATED_FORMAT:
            return CalibratedDevice.from_dict(data)
        raise InvalidInputError(f"{path} is neither a latency model nor a calibrated device")
    have = available_devices(home)
    if device in have:
        raise InvalidInputError(f"device {device!r} has no {method!r} predictors; it has {', '.join(have[device])}")
    listed = ", ".join(sorted(have)) or "none"
    raise InvalidInputError(f"unknown device {device!r}; devices with predictors: {listed} (create one with "
                            "`edgeplan calibrate`)")


def graph_ops(graph: Graph, kernel_profile: str, deduction: str = "as-source") -> tuple[list[OpInput], list[str]]:
    """The featurized kernels ``kernel_profile`` runs for ``graph``, and kernels it cannot featurize (by name).

    ``deduction`` ``fold-zeros`` keeps only the kernels of nodes a zero-simplifying graph runtime executes
    (:func:`edgeplan.ir.fold.executed_nodes`); ``as-source`` (default) keeps what ``kernel_profile`` runs;
    ``fold-constants`` keeps it too, except for a graph that folds into a constant (no kernel).
    """
    from edgeplan.ir.kernels import deduce_kernels

    if kernel_profile in ORT_OBSERVED:
        raise InvalidInputError(f"an ONNX Runtime device ({kernel_profile}) reads its kernels from ORT's optimizer on "
                                "the exported model, not from a graph: predict a zoo model by name")
    kernels = [(k.name, k.kind, tuple(k.nodes)) for k in deduce_kernels(graph, kernel_profile).kernels]
    if deduction == "fold-zeros":
        from edgeplan.ir.fold import executed_nodes

        executed = executed_nodes(graph)
        if not executed:  # folded into a constant: nothing runs, not even the kernels the runtime inserts
            return [], []
        # A fused kernel runs if one of its nodes does, and is featurized from the nodes that run.
        kept = [(name, kind, tuple(n for n in nodes if n in executed)) for name, kind, nodes in kernels]
        kernels = [k for k, (_, _, nodes) in zip(kept, kernels, strict=True) if k[2] or not nodes]
    elif deduction == "fold-constants":  # the source's kernels, unless the graph folds into a constant
        from edgeplan.ir.fold import executed_nodes

        if not executed_nodes(graph):
            return [], []
    elif deduction != "as-source":
        raise InvalidInputError(f"unknown kernel deduction {deduction!r}; use as-source, fold-zeros or "
                                "fold-constants")
    ops, skipped = _featurize(graph, kernels)
    if deduction == "as-source" and graph.folded_ops:
        folded, not_priced = folded_work_ops(graph, kernel_profile, network_values(ops))
        ops, skipped = ops + folded, skipped + not_priced
    return ops, skipped


def folded_work_ops(graph: Graph, kernel_profile: str, network: Sequence[float] | None = None
                    ) -> tuple[list[OpInput], list[str]]:
    """The graph's folded operators (:attr:`~edgeplan.ir.Graph.folded_ops`) that ``kernel_profile``'s runtime runs
    at every call, as predictor inputs, and those that cannot be priced, by name.

    Only a runtime whose rules have ``folded_work`` (eager PyTorch) runs them; the others fold them when the model
    is loaded. Each folded operator but a view (the rules' ``views``) is an op (:func:`folded_op_input`) with the
    shapes of :attr:`~edgeplan.ir.Graph.folded_shapes`: MobileOne's and NFNets' identity additions and scalings of
    activations, NFNets' weight standardization. A folded linear layer, matrix product or 2-D convolution (Swin V2's
    and the relative-position ViTs' position-bias MLPs over their constant coordinate tables) is priced as the IR
    node it would have been (:func:`folded_product_node`: its weight is among its recorded inputs). Returned by
    name instead, never priced 0: a folded product whose shapes do not determine it (another product, a transposed
    convolution); an operator the rules list as ``unpriced``; and every folded operator of a graph
    without shapes.

    Parameters
    ----------
    graph
        The model's graph.
    kernel_profile
        The runtime profile (:func:`edgeplan.ir.kernels.profiles`).
    network
        The network-level features' values (:func:`~edgeplan.latency.model.network_values` of the graph's
        kernels); None takes it from the folded ops alone.

    Returns
    -------
    tuple[list[OpInput], list[str]]
        The folded ops to price, and ``"{name} ({kind})"`` of those that cannot be.
    """
    from edgeplan.ir.kernels.rules import load_rules
    from edgeplan.latency.features import computes_product

    rules: dict[str, Any] = dict(load_rules(kernel_profile).data.get("folded_work", {}))
    if not rules:
        return [], []
    views, unpriced = set(rules.get("views", ())), set(rules.get("unpriced", ()))
    renamed: dict[str, str] = rules.get("renamed", {})
    ops: list[OpInput] = []
    skipped: list[str] = []
    for i, op in enumerate(graph.folded_ops):
        if op in views:
            continue
        kind = renamed.get(op, f"aten::{op}")
        product = (folded_product_node(op, *graph.folded_shapes[i])
                   if graph.folded_shapes and computes_product(kind) else None)
        why = ("no shapes recorded" if not graph.folded_shapes else "no predictor" if op in unpriced
               else "shapes do not determine the product" if computes_product(kind) and product is None else None)
        if why is not None:
            skipped.append(f"{kind}@folded#{i} ({kind}, folded: {why})")
            continue
        ins, outs = graph.folded_shapes[i]
        ops.append(folded_op_input(i, op, kind, ins, outs, rules))
    return with_context(ops, network), skipped


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
    from edgeplan.latency.features import computes_product

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


def _featurize(graph: Graph, kernels: Sequence[tuple[str, str, Sequence[str]]]) -> tuple[list[OpInput], list[str]]:
    """(name, kind, IR nodes) of each kernel as predictor inputs, and those without IR nodes, or with an opaque one
    (an operator edgeplan does not know, kept by ``opaque=True``), by name."""
    from edgeplan.ir.ops import OpKind
    from edgeplan.ir.serialize import node_to_dict

    ops, skipped = [], []
    for name, kind, nodes in kernels:
        opaque = [n for n in nodes if graph.node(n).kind is OpKind.OPAQUE]
        if not nodes or opaque:
            skipped.append(f"{name}@{opaque[0]} ({kind}, opaque)" if opaque else f"{name} ({kind})")
            continue
        dicts = [node_to_dict(graph.node(n)) for n in nodes]
        cat, x = features(dicts, kind)
        lead = lead_node(dicts, kind)
        ops.append(OpInput(f"{name}@{nodes[0]}", kind, predictor_key(kind, lead), cat, x, lead=lead))
    return with_context(ops), skipped


def onnxruntime_ops(spec: str, kernel_profile: str, home: str | Path | None = None,
                    opaque: bool = False) -> tuple[list[OpInput], list[str]]:
    """The featurized kernels ONNX Runtime runs for ``spec`` (``kernel_profile`` one of :data:`ORT_OBSERVED`).

    ORT's own optimizer says which kernels run (its NCHWc and int8 rewrites depend on the CPU and on
    quantization choices that rules cannot foresee), see :func:`edgeplan.runtimes.op_profile.onnxruntime_kernel_ops`;
    the model is not timed (for int8, the first prediction of a model quantizes it, which runs a few calibration
    inputs through it; the result is cached). Kernels that cannot be traced to IR nodes are returned by name, and
    so are kernels of operators edgeplan does not know when ``opaque`` keeps them (else they raise).
    """
    from edgeplan.runtimes.op_profile import onnxruntime_kernel_ops

    return _featurize(*onnxruntime_kernel_ops(spec, kernel_profile.split("-", 1)[1], home, opaque=opaque))


def spec_ops(spec: str, kernel_profile: str, home: str | Path | None = None,
             deduction: str = "as-source", opaque: bool = False) -> tuple[list[OpInput], list[str]]:
    """:func:`graph_ops` of a zoo model, or :func:`onnxruntime_ops` for an ONNX Runtime scenario's profile;
    ``opaque``: operators edgeplan does not know are kept as opaque nodes, whose kernels are returned as not
    featurized (unpredicted), instead of raising."""
    if kernel_profile in ORT_OBSERVED:
        if deduction != "as-source":
            raise InvalidInputError(f"an ONNX Runtime device ({kernel_profile}) runs what ORT's optimizer keeps; "
                                    f"the {deduction} deduction applies to graph profiles only")
        return onnxruntime_ops(spec, kernel_profile, home, opaque=opaque)
    from edgeplan.frontends.zoo import load_graph

    return graph_ops(load_graph(spec, opaque=opaque), kernel_profile, deduction)


def predict_graph(graph: Graph, model: LatencyModel | CalibratedDevice, kernel_profile: str) -> Prediction:
    """Predict ``graph`` with ``model``; kernels that cannot be featurized count as unpredicted."""
    ops, skipped = graph_ops(graph, kernel_profile, deduction_of(model))
    return with_skipped(model.predict_ops(ops), skipped)


def with_skipped(pred: Prediction, skipped: Sequence[str]) -> Prediction:
    """``pred`` with the kernels that could not be featurized listed as unpredicted ops."""
    if not skipped:
        return pred
    from edgeplan.latency.model import OpPrediction

    extra = tuple(OpPrediction(name, kind.rstrip(")"), "", None)
                  for name, kind in (s.rsplit(" (", 1) for s in skipped))
    return replace(pred, ops=pred.ops + extra)


@dataclass(frozen=True)
class ModelPrediction:
    """A zoo model's prediction on a device."""

    model: str
    device: str
    method: str
    prediction: Prediction

    def to_dict(self, breakdown: bool = False) -> dict[str, Any]:
        """JSON form: ``model``, ``device``, ``method``, ``latency_ms``, ``overhead_ms``, ``overhead_clamped``,
        ``unpredicted_ops``, ``stand_in_ops`` (:meth:`stand_ins`) and ``ops`` with ``breakdown``.

        ``overhead_ms`` is the overhead as it counts in ``latency_ms`` (``latency_ms`` minus the ops' sum);
        ``overhead_clamped`` says that the learnt overhead would have taken the total below half the ops' sum
        (:attr:`~edgeplan.latency.model.Prediction.overhead_clamped`). Each op of ``ops`` has ``op``, ``kernel``,
        ``key`` (its own predictor key), ``ms``, ``by_category``, ``predictor`` (which predictor made it, as
        :attr:`~edgeplan.latency.model.OpPrediction.predictor` shows it), ``predicted_by`` (that predictor's key)
        and ``fallback_for`` (the op's own category when another category's predictor stood in, else None).
        """
        p = self.prediction
        out: dict[str, Any] = {"model": self.model, "device": self.device, "method": self.method,
                               "latency_ms": p.latency_ms, "overhead_ms": p.overhead_ms,
                               "overhead_clamped": p.overhead_clamped, "unpredicted_ops": p.unpredicted,
                               "stand_in_ops": self.stand_ins()}
        if breakdown:
            out["ops"] = [{"op": o.name, "kernel": o.kind, "key": o.key, "ms": o.ms, "by_category": o.by_category,
                           "predictor": o.predictor, "predicted_by": o.predicted_by, "fallback_for": o.fallback_for}
                          for o in p.ops]
        return out

    def stand_ins(self) -> list[dict[str, Any]]:
        """The ops priced by a stand-in: runtime kernels without a predictor of their own, predicted by their
        category's (or op family's) predictor, grouped by kernel and stand-in, most time first.

        Each entry has ``kernel``, ``predictor`` (as :attr:`~edgeplan.latency.model.OpPrediction.predictor` shows
        it), ``count`` and ``ms`` (their predicted sum). A stand-in was not trained on that kernel, so its error
        is unknown; a kernel far off its category's cost per byte (nearest upsampling, say) can be mispriced."""
        groups: dict[tuple[str, str], list[float]] = {}
        for o in self.prediction.ops:
            if o.by_category and o.ms is not None:
                groups.setdefault((o.kind, o.predictor), []).append(o.ms)
        entries = [{"kernel": kernel, "predictor": predictor, "count": len(ms), "ms": sum(ms)}
                   for (kernel, predictor), ms in groups.items()]
        return sorted(entries, key=lambda e: -e["ms"])


def kernel_profile_of(device_model: LatencyModel | CalibratedDevice) -> str:
    """The kernel rules whose kernels ``device_model`` predicts (a calibrated device: its source's)."""
    if not isinstance(device_model, LatencyModel):
        device_model = device_model.source
    profile = device_model.info.get("kernel_profile")
    if profile:
        return str(profile)
    from edgeplan.measure.scenarios import SCENARIOS

    if device_model.source_scenario in SCENARIOS:
        return SCENARIOS[device_model.source_scenario].kernel_profile
    raise InvalidInputError(f"latency model of {device_model.scenario!r} does not say which runtime's kernels it "
                            "predicts; refit it")


def deduction_of(device_model: LatencyModel | CalibratedDevice) -> str:
    """The kernel deduction ``device_model`` predicts under: a calibrated device's, else ``as-source``."""
    return "as-source" if isinstance(device_model, LatencyModel) else device_model.deduction


def resolve_method(device: str, method: str | None, home: str | Path | None = None) -> str:
    """``method``, or when None the device's default: ``gbdt`` where it has it, else its first of gbdt, rf, lasso
    and mlp (a device calibrated from a Lasso source has only ``lasso``).

    Parameters
    ----------
    device
        A device profile name (:func:`available_devices`); an unknown one gets ``gbdt``, and
        :func:`load_device_model` then names the devices there are.
    method
        The method asked for, or None.
    home
        The edgeplan home (calibrated devices).

    Returns
    -------
    str
        The method to load.
    """
    if method is not None:
        return method
    have = available_devices(home).get(device, [])
    return next((m for m in (DEFAULT_METHOD, "rf", "lasso", "mlp") if m in have), DEFAULT_METHOD)


def source_method(device: str, method: str | None, home: str | Path | None = None) -> str:
    """The predictor method a few-shot calibration corrects: ``method``, or when None Lasso where ``device`` has it
    (the calibration default since the first profiles, which all had one), else the device's default
    (:func:`resolve_method`: ``gbdt`` for the GBDT-only Zen 5 profiles)."""
    if method is not None:
        return method
    return "lasso" if "lasso" in available_devices(home).get(device, []) else resolve_method(device, None, home)


def predict_models(specs: Sequence[str], device: str = DEFAULT_DEVICE, method: str | None = None,
                   home: str | Path | None = None, progress: bool = False,
                   opaque: bool = False) -> list[ModelPrediction]:
    """Predict every zoo model of ``specs`` on ``device`` with ``method``'s predictors.

    Parameters
    ----------
    specs
        Zoo strings or ONNX paths.
    device
        A device profile (:func:`available_devices`).
    method
        ``gbdt``, ``lasso``, ``rf`` or ``mlp``; None: the device's default (:func:`resolve_method`).
    home
        The edgeplan home (calibrated devices).
    progress
        Show a progress bar.
    opaque
        Keep operators edgeplan does not know as opaque nodes: their kernels are listed among the unpredicted ops
        (never counted as 0 ms) and ``latency_ms`` is that of the rest, instead of the model being refused.

    Returns
    -------
    list[ModelPrediction]
        One per model, in order.
    """
    from edgeplan.measure.progress import counting_bar

    method = resolve_method(device, method, home)
    model = load_device_model(device, method, home)
    profile = kernel_profile_of(model)
    featurized: list[tuple[list[OpInput], list[str]]] = []
    with counting_bar(progress and len(specs) > 1, "importing", total=len(specs)) as advance:
        for spec in specs:
            featurized.append(spec_ops(spec, profile, home, deduction_of(model), opaque=opaque))
            advance(1)
    preds = model.predict_batch([ops for ops, _ in featurized])
    out = []
    for spec, pred, (_, skipped) in zip(specs, preds, featurized, strict=True):
        out.append(ModelPrediction(spec, device, method, with_skipped(pred, skipped)))
    return out
