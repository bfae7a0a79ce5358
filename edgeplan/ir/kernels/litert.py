"""LiteRT's operators and the XNNPACK delegate (``litert.json``): what litert-torch writes, and where it runs.

For a graph of the torch frontend the deduction replays the converter (:class:`_Converter`):

1. Layout (litert-torch's ``OptimizeLayoutTransposesPass``): each IR node runs NHWC or NCHW, by the same minimum cut
   the converter solves (:func:`nhwc_nodes`); a ``TRANSPOSE`` is written where a tensor crosses from one layout to
   the other (once per tensor and direction), the graph's 4-D input included.
2. Lowering: each IR node becomes the TFLite operators of its ``lowering`` entry; a convolution or pooling whose
   torch padding is not TFLite's SAME padding gets an explicit ``PAD`` (``PADV2`` with -inf for a max pooling).
3. The converter's own passes: constant steps (a batch norm's, a layer scale, a bias) folded into the convolution or
   fully connected layer before them, activations fused into the operator before them, a transpose that only moves
   unit axes turned into a reshape, reshapes merged, a reshape after a mean folded into it.
4. Delegation: an operator the XNNPACK delegate takes is ``xnnpack.OP``, one it refuses ``tflite.OP`` (LiteRT's
   default kernels). In an int8 profile (``litert-xnnpack-int8``) the operators the quantizer keeps in float read
   and write through ``DEQUANTIZE`` and ``QUANTIZE`` operators (the converter's last pass), and an int8 operator
   XNNPACK has no int8 kernel for is refused.

A graph read from a ``.tflite`` file (:func:`edgeplan.frontends.tflite_frontend.graph_from_tflite`) already has one
node per operator, its type in ``Node.source``: each is one kernel, a fused activation's ``.act`` node goes back
into its operator, and only step 4 applies (by each operator's own element type).

Every kernel that computes an IR node's output lists it; an operator with no IR node of its own (an inserted
transpose or pad, a helper of a node lowered into several operators) has ``nodes=()`` and the runtime name
``OP:node``, ``node`` being the IR node it serves. Loads without torch; the minimum cut uses scipy.

Modules: :mod:`~edgeplan.ir.kernels.litert_layout` (step 1), :mod:`~edgeplan.ir.kernels.litert_convert` (step 2
and the replay), :mod:`~edgeplan.ir.kernels.litert_folded` (in step 2, the folded masks the converter keeps as
operators), :mod:`~edgeplan.ir.kernels.litert_passes` and :mod:`~edgeplan.ir.kernels.litert_patterns` (step 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.kernels.groups import Group
from edgeplan.ir.kernels.litert_convert import _Converter
from edgeplan.ir.kernels.litert_layout import nhwc_nodes
from edgeplan.ir.kernels.litert_passes import _facts, _Op, same_padding
from edgeplan.ir.kernels.rules import KernelRules, node_label
from edgeplan.ir.ops import DType

__all__ = ["is_file_op", "litert_groups", "nhwc_nodes", "runs_in_int8", "same_padding"]

Shape = tuple[int, ...]

#: TFLite ``fusedActivationFunction`` values as the ``.act`` nodes of the tflite frontend write them.
_SOURCE_FUSED = ":fused"
#: The source suffix of a convolution whose zero padding is a ``PAD`` operator of the file (tflite frontend).
_SOURCE_PADDED = ":pad"
#: The source of the reshape the tflite frontend writes before a fully connected layer that flattens its input.
_SOURCE_FLATTEN = ":flatten"
#: The source of the reshape the tflite frontend writes for an element-wise operand that broadcasts against an NHWC one.
_SOURCE_BROADCAST = ":broadcast"




def litert_groups(graph: Graph, kept: Sequence[Node], rules: KernelRules, alias: Mapping[Ref, Ref]) -> list[Group]:
    """The kernels of a ``litert`` profile for the nodes ``kept``: one per TFLite operator, in the file's order.

    Parameters
    ----------
    graph
        The whole graph (uses, inputs and outputs).
    kept
        Its nodes that run, from :func:`~edgeplan.ir.kernels.groups.split_eliminated`.
    rules
        Rules of a ``litert`` profile.
    alias
        Eliminated identity nodes, from :func:`~edgeplan.ir.kernels.groups.bypass`.

    Returns
    -------
    list[Group]
        One group per operator, its kind ``xnnpack.OP`` or ``tflite.OP``.
    """
    delegate = rules.data["delegate"]
    if kept and all(is_file_op(n) for n in kept):  # the file says which operators are int8
        ops = _file_ops(kept)
        int8 = [op.serves.dtype is DType.INT8 for op in ops]
    else:
        ops = _Converter(graph, rules, alias).run(kept)
        int8 = [runs_in_int8(rules, op.type) for op in ops]
    return [Group(list(op.nodes), _delegated_kind(op, delegate, q), runtime_name=op.runtime_name)
            for op, q in zip(ops, int8, strict=True)]


# ---------------------------------------------------------------------------------------------------------------
# A graph read from a .tflite file: one node per operator
# ---------------------------------------------------------------------------------------------------------------


def runs_in_int8(rules: KernelRules, op_type: str) -> bool:
    """Whether an operator of ``op_type`` deduced from a model's graph runs in int8 under ``rules``: in an int8
    profile, unless the quantizer keeps it in float (the rules' ``quantized.float_ops``)."""
    return rules.settings.get("dtype") == "int8" and op_type not in rules.data["quantized"]["float_ops"]


def is_file_op(node: Node) -> bool:
    """True for a node of the tflite frontend: its source is a TFLite operator type (``CONV_2D``, ``ADD:fused``)."""
    head = node.source.split(":", 1)[0]
    return bool(head) and head.replace("_", "").isalnum() and head.upper() == head and not head.isdigit()


def _file_ops(kept: Sequence[Node]) -> list[_Op]:
    """One operator per node; a fused activation's ``.act`` node joins the operator it was read from, the
    ``.flatten`` reshape of a fully connected layer the layer, the ``.broadcast`` reshape of an element-wise operand
    the operation (after it: the operation leads its features)."""
    ops: list[_Op] = []
    by_name: dict[str, _Op] = {}
    pending: list[Node] = []
    after: list[Node] = []
    for n in kept:
        if n.source.endswith(_SOURCE_FLATTEN):
            pending.append(n)
            continue
        if n.source.endswith(_SOURCE_BROADCAST):
            after.append(n)
            continue
        if n.source.endswith(_SOURCE_FUSED) and n.inputs and n.inputs[0].node in by_name:
            owner = by_name[n.inputs[0].node]
            owner.nodes.append(n)
            owner.fused = node_label(n)
            by_name[n.name] = owner
            continue
        source = n.source
        if source.endswith(_SOURCE_PADDED):  # its zero padding is a PAD operator of the file, before it
            source = source[:-len(_SOURCE_PADDED)]
            ops.append(_Op("PAD", n, [], [by_name.get(r.node) for r in n.inputs], n.input_shapes[0]))
        op = _Op(source, n, [*pending, n, *after], [by_name.get(r.node) for r in n.inputs],
                 n.output_shapes[0] if n.output_shapes else (), facts=_facts(n))
        pending, after = [], []
        ops.append(op)
        by_name[n.name] = op
    return ops


# ---------------------------------------------------------------------------------------------------------------
# Delegation
# ---------------------------------------------------------------------------------------------------------------


_COMPARE = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}


def _delegated_kind(op: _Op, delegate: Mapping[str, Any], int8: bool) -> str:
    """``xnnpack.OP`` when the delegate takes the operator (in int8 where ``int8``), else ``tflite.OP``."""
    if op.inputs or "inputs" not in op.facts:
        op.facts["inputs"] = len(op.inputs)
    refused = op.type in delegate["unsupported"] or (int8 and op.type in delegate["unsupported_int8"])
    for rule in delegate["refused"]:
        if op.type in rule["op"] and all(
            name in op.facts and _COMPARE[cmp](op.facts[name], value) for name, cmp, value in rule["when"]
        ):
            refused = True
    return (delegate["default_prefix"] if refused else delegate["prefix"]) + op.type


