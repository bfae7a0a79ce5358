"""A graph as the operations a latency model prices: kernels deduced from the IR (or read from ONNX Runtime's
optimized graph), each featurized like the training data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.costmodels.opwise.features import features, lead_node, predictor_key
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.ops import (
    OpInput,
    Prediction,
    folded_op_input,
    folded_product_node,
    network_values,
    with_context,
)
from edgeplan.costmodels.opwise.profiles import deduction_of
from edgeplan.errors import InvalidInputError
from edgeplan.ir.graph import Graph

if TYPE_CHECKING:
    from edgeplan.costmodels.opwise.calibrate import CalibratedDevice
    from edgeplan.costmodels.opwise.litert_ops import LiteRTKernel

__all__ = [
    "ORT_OBSERVED",
    "folded_work_ops",
    "graph_ops",
    "onnxruntime_ops",
    "predict_graph",
    "spec_ops",
    "with_skipped",
]


#: Kernel profiles of ONNX Runtime scenarios: their kernels are read from ORT's optimized graph, not deduced.
ORT_OBSERVED = ("onnxruntime-float32", "onnxruntime-int8")


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
    deduced = deduce_kernels(graph, kernel_profile)
    kernels: list[LiteRTKernel] = [(k.name, k.kind, tuple(k.nodes), None) for k in deduced.kernels]
    if kernel_profile.startswith("litert"):  # as XNNPACK runs them, featurized as the .tflite file's IR has them
        from edgeplan.costmodels.opwise.litert_ops import litert_kernels

        kernels = litert_kernels(graph, deduced)
    if deduction == "fold-zeros":
        from edgeplan.ir.fold import executed_nodes

        executed = executed_nodes(graph)
        if not executed:  # folded into a constant: nothing runs, not even the kernels the runtime inserts
            return [], []
        # A fused kernel runs if one of its nodes does, and is featurized from the nodes that run; an operator the
        # runtime inserts for a node (``OP:node``) runs if that node does.
        names = {n.name for n in graph.nodes}
        kernels = [(name, kind, kept, written if kept == nodes else _retyped(graph, kept, written))
                   for name, kind, nodes, written in kernels
                   for kept in [tuple(n for n in nodes if n in executed)]
                   if kept or (not nodes and _served(name, names) in executed | {None})]
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


def _retyped(graph: Graph, kept: Sequence[str], written: Sequence[Mapping[str, Any]] | None
             ) -> list[dict[str, Any]] | None:
    """The node dicts of the ``kept`` nodes of a kernel whose other nodes do not run, in the element type the
    kernel's ``written`` dicts have (an int8 LiteRT kernel's), or None to featurize the graph's nodes as they are."""
    from edgeplan.ir.ops import DType
    from edgeplan.ir.serialize import node_to_dict

    if not written or not kept:
        return None
    dtype = DType(written[-1]["dtype"])
    return [node_to_dict(replace(graph.node(n), dtype=dtype)) for n in kept]


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
        The network-level features' values (:func:`~edgeplan.costmodels.opwise.ops.network_values` of the graph's
        kernels); None takes it from the folded ops alone.

    Returns
    -------
    tuple[list[OpInput], list[str]]
        The folded ops to price, and ``"{name} ({kind})"`` of those that cannot be.
    """
    from edgeplan.costmodels.opwise.features import computes_product
    from edgeplan.ir.kernels.rules import load_rules

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


def _served(kernel: str, names: set[str]) -> str | None:
    """The node an inserted operator's kernel (``OP:node``) serves, or None when it names none of ``names``."""
    _, colon, target = kernel.partition(":")
    return target if colon and target in names else None


def _featurize(graph: Graph, kernels: Sequence[LiteRTKernel | tuple[str, str, Sequence[str]]]
               ) -> tuple[list[OpInput], list[str]]:
    """(name, kind, IR nodes[, node dicts]) of each kernel as predictor inputs, and those without IR nodes, or with
    an opaque one (an operator edgeplan does not know, kept by ``opaque=True``), by name. A kernel with node dicts
    (a runtime's own view of its nodes, or of an operator it inserts) is featurized from them."""
    from edgeplan.ir.ops import OpKind
    from edgeplan.ir.serialize import node_to_dict

    ops, skipped = [], []
    for kernel in kernels:
        name, kind, nodes = kernel[0], kernel[1], kernel[2]
        written = kernel[3] if len(kernel) > 3 else None
        opaque = [n for n in nodes if graph.node(n).kind is OpKind.OPAQUE]
        if (not nodes and not written) or opaque:
            skipped.append(f"{name}@{opaque[0]} ({kind}, opaque)" if opaque else f"{name} ({kind})")
            continue
        dicts = list(written) if written else [node_to_dict(graph.node(n)) for n in nodes]
        cat, x = features(dicts, kind)
        lead = lead_node(dicts, kind)
        ops.append(OpInput(f"{name}@{nodes[0]}" if nodes else name, kind, predictor_key(kind, lead), cat, x,
                           lead=lead))
    return with_context(ops), skipped


def onnxruntime_ops(spec: str, kernel_profile: str, home: str | Path | None = None,
                    opaque: bool = False) -> tuple[list[OpInput], list[str]]:
    """The featurized kernels ONNX Runtime runs for ``spec`` (``kernel_profile`` one of :data:`ORT_OBSERVED`).

    ORT's own optimizer says which kernels run (its NCHWc and int8 rewrites depend on the CPU and on
    quantization choices that rules cannot foresee), see :func:`edgeplan.measure.ort_op_profile.onnxruntime_kernel_ops`;
    the model is not timed (for int8, the first prediction of a model quantizes it, which runs a few calibration
    inputs through it; the result is cached). Kernels that cannot be traced to IR nodes are returned by name, and
    so are kernels of operators edgeplan does not know when ``opaque`` keeps them (else they raise).
    """
    from edgeplan.measure.ort_op_profile import onnxruntime_kernel_ops

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
    from edgeplan.costmodels.opwise.ops import OpPrediction

    extra = tuple(OpPrediction(name, kind.rstrip(")"), "", None)
                  for name, kind in (s.rsplit(" (", 1) for s in skipped))
    return replace(pred, ops=pred.ops + extra)
