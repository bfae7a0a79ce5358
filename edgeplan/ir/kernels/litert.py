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
   default kernels).

A graph read from a ``.tflite`` file (:func:`edgeplan.frontends.tflite_frontend.graph_from_tflite`) already has one
node per operator, its type in ``Node.source``: each is one kernel, a fused activation's ``.act`` node goes back
into its operator, and only step 4 applies.

Every kernel that computes an IR node's output lists it; an operator with no IR node of its own (an inserted
transpose or pad, a helper of a node lowered into several operators) has ``nodes=()`` and the runtime name
``OP:node``, ``node`` being the IR node it serves. Loads without torch; the minimum cut uses scipy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.kernels.groups import Group
from edgeplan.ir.kernels.rules import KernelRules, label_keys, node_label
from edgeplan.ir.ops import (
    AxisAttrs,
    ConvAttrs,
    EltwiseAttrs,
    GlobalPoolAttrs,
    MeanAttrs,
    OpKind,
    PadAttrs,
    PermuteAttrs,
    PoolAttrs,
    PoolMode,
    ReduceAttrs,
    SliceAttrs,
)

__all__ = ["litert_groups", "nhwc_nodes"]

Shape = tuple[int, ...]

#: TFLite ``fusedActivationFunction`` values as the ``.act`` nodes of the tflite frontend write them.
_SOURCE_FUSED = ":fused"
#: The source suffix of a convolution whose zero padding is a ``PAD`` operator of the file (tflite frontend).
_SOURCE_PADDED = ":pad"
#: The source of the reshape the tflite frontend writes before a fully connected layer that flattens its input.
_SOURCE_FLATTEN = ":flatten"


@dataclass(eq=False)
class _Op:
    """A TFLite operator under construction.

    ``serves`` is the IR node it was lowered from or inserted for; ``nodes`` the IR nodes whose outputs it computes
    (empty for a helper or an inserted operator); ``inputs`` the operators producing its activation inputs (None for
    a graph input); ``shape`` its output's shape in its own layout.
    """

    type: str
    serves: Node
    nodes: list[Node]
    inputs: list[_Op | None]
    shape: Shape
    nhwc: bool = False
    fold: str | None = None
    fused: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def runtime_name(self) -> str:
        return "" if self.nodes else f"{self.type}:{self.serves.name}"


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
    if kept and all(_is_file_op(n) for n in kept):
        ops = _file_ops(kept)
    else:
        ops = _Converter(graph, rules, alias).run(kept)
    delegate = rules.data["delegate"]
    return [Group(list(op.nodes), _delegated_kind(op, delegate), runtime_name=op.runtime_name) for op in ops]


# ---------------------------------------------------------------------------------------------------------------
# A graph read from a .tflite file: one node per operator
# ---------------------------------------------------------------------------------------------------------------


def _is_file_op(node: Node) -> bool:
    """True for a node of the tflite frontend: its source is a TFLite operator type (``CONV_2D``, ``ADD:fused``)."""
    head = node.source.split(":", 1)[0]
    return bool(head) and head.replace("_", "").isalnum() and head.upper() == head and not head.isdigit()


def _file_ops(kept: Sequence[Node]) -> list[_Op]:
    """One operator per node; a fused activation's ``.act`` node joins the operator it was read from, the
    ``.flatten`` reshape of a fully connected layer the layer."""
    ops: list[_Op] = []
    by_name: dict[str, _Op] = {}
    pending: list[Node] = []
    for n in kept:
        if n.source.endswith(_SOURCE_FLATTEN):
            pending.append(n)
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
        op = _Op(source, n, [*pending, n], [by_name.get(r.node) for r in n.inputs],
                 n.output_shapes[0] if n.output_shapes else (), facts=_facts(n))
        pending = []
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


def _facts(node: Node) -> dict[str, Any]:
    """What the delegation rules may compare, read from the IR node an operator computes or serves."""
    a = node.attrs
    facts: dict[str, Any] = {"rank": len(node.output_shapes[0]) if node.output_shapes else 0,
                             "inputs": len(node.inputs)}
    if isinstance(a, (PoolAttrs, ConvAttrs)):
        facts["kernel_max"] = max(a.kernel)
        facts["stride_max"] = max(a.stride)
    if isinstance(a, PadAttrs):
        facts["pad_value_finite"] = int(math.isfinite(a.value))
    if isinstance(a, AxisAttrs):
        facts["axis"] = a.axis
    if isinstance(a, SliceAttrs):
        facts["step"] = a.step
    if isinstance(a, PermuteAttrs):
        facts["perm"] = tuple(a.dims)
    return facts


def _delegated_kind(op: _Op, delegate: Mapping[str, Any]) -> str:
    """``xnnpack.OP`` when the delegate takes the operator, else ``tflite.OP``."""
    if op.inputs or "inputs" not in op.facts:
        op.facts["inputs"] = len(op.inputs)
    refused = op.type in delegate["unsupported"]
    for rule in delegate["refused"]:
        if op.type in rule["op"] and all(
            name in op.facts and _COMPARE[cmp](op.facts[name], value) for name, cmp, value in rule["when"]
        ):
            refused = True
    return (delegate["default_prefix"] if refused else delegate["prefix"]) + op.type


# ---------------------------------------------------------------------------------------------------------------
# Layout: litert-torch's minimum cut between NHWC and NCHW operators
# ---------------------------------------------------------------------------------------------------------------


def _layout_class(node: Node, layout: Mapping[str, Any]) -> str:
    """``must``, ``can`` or ``cannot`` for ``node``, by its ATen source where the rules name it, else its label."""
    for prefix, cls in layout.get("sources", {}).items():
        if node.source.startswith(prefix):
            return str(cls)
    keys = _keys(node)
    for cls in ("must", "can", "cannot"):
        if any(k in layout[cls] for k in keys):
            return cls
    return "cannot"


def _is_4d(shape: Sequence[int] | None) -> bool:
    return shape is not None and len(shape) == 4


def _const_operand_4d(node: Node) -> bool:
    """Whether a constant operand of an element-wise node is 4-D or a Python scalar (no tensor in the graph)."""
    a = node.attrs
    if isinstance(a, EltwiseAttrs) and a.const_shape is not None:
        return len(a.const_shape) in (0, 4)
    return True


def nhwc_nodes(graph: Graph, kept: Sequence[Node], rules: KernelRules, alias: Mapping[Ref, Ref]) -> set[str]:
    """The IR nodes litert-torch runs in NHWC: its minimum cut between NHWC and NCHW operators.

    Operators that must be NHWC (a convolution, a pooling, a resize of 4-D tensors) are tied to the sink, those that
    cannot (graph inputs and outputs, views, permutes, operators without a 4-D result) to the source; every other
    edge between two operators costs one transpose (a tensor with several users is cut once, through a dummy node)
    and the nodes left on the sink's side of a minimum cut are NHWC. The flow is scipy's Dinic, as litert-torch's.

    Returns
    -------
    set[str]
        Names of the NHWC nodes.
    """
    import numpy as np
    from scipy.cluster.hierarchy import DisjointSet
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    layout = rules.data["layout"]
    inf = 1 << 28
    kept_names = {n.name for n in kept}
    nodes = {n.name: n for n in graph.nodes}
    users: dict[str, list[str]] = {}
    for n in kept:
        for r in n.inputs:
            src = alias.get(r, r).node
            if src in nodes and nodes[src].kind is not OpKind.CONSTANT:
                users.setdefault(src, [])
                if n.name not in users[src]:
                    users[src].append(n.name)
    for r in graph.outputs:
        users.setdefault(alias.get(r, r).node, []).append("<output>")

    ids: dict[object, int] = {}
    edges: dict[tuple[int, int], int] = {}

    def nid(obj: object) -> int:
        if obj not in ids:
            ids[obj] = len(ids) + 2
        return ids[obj]

    def edge(a: int, b: int, cost: int) -> None:
        edges[(a, b)] = cost

    order = [n for n in graph.nodes if n.kind is OpKind.INPUT or n.name in kept_names] + ["<output>"]
    for item in order:
        name = item if isinstance(item, str) else item.name
        i = nid(name)
        if isinstance(item, str) or item.kind is OpKind.INPUT:
            edge(0, i, inf)
        else:
            cls = _nhwcable(item, nodes, alias, layout)
            if cls == "cannot":
                edge(0, i, inf)
            elif cls == "must":
                edge(i, 1, inf)
        cost = layout["cut_cost"]
        if not isinstance(item, str) and any(k in layout["mean_kinds"] for k in label_keys(item)):
            cost = layout["cut_cost_after_mean"]
        outs = users.get(name, [])
        if not isinstance(item, str) and any(k in layout["view_after"] for k in _keys(item)):
            view = nid(("view", name))  # the reshape that ends the node (stack: cat, then a view) cannot be NHWC
            edge(0, view, inf)
            edge(i, view, cost)
            edge(view, i, cost)
            i = view
        if len(outs) > 1:
            dummy = nid(("dummy", name))
            edge(i, dummy, cost)
            edge(dummy, i, cost)
            i = dummy
        for u in outs:
            j = nid(u)
            edge(i, j, cost)
            edge(j, i, cost)

    count = len(ids) + 2
    pairs = list(edges.items())
    rows = np.array([a for (a, _), _ in pairs], dtype=np.int32)
    cols = np.array([b for (_, b), _ in pairs], dtype=np.int32)
    caps = np.array([min(c, inf) for _, c in pairs], dtype=np.int32)
    flow = maximum_flow(csr_matrix((caps, (rows, cols)), shape=(count, count)), 0, 1, method="dinic").flow
    ds = DisjointSet(range(count))
    for (a, b), c in pairs:
        if abs(flow[a, b]) < c:
            ds.merge(a, b)
    reach = ds.subset(0)
    cuts = {(a, b) for (a, b), _ in pairs if a in reach and b not in reach}
    ds = DisjointSet(range(count))
    for (a, b), _ in pairs:
        if (a, b) not in cuts and (b, a) not in cuts:
            ds.merge(a, b)
    return {obj for obj, i in ids.items() if isinstance(obj, str) and obj in kept_names
            and not ds.connected(i, 0)}


def _nhwcable(node: Node, nodes: Mapping[str, Node], alias: Mapping[Ref, Ref], layout: Mapping[str, Any]) -> str:
    """``must``, ``can`` or ``cannot`` for one node: its class, and only with a 4-D result and 4-D inputs."""
    cls = _layout_class(node, layout)
    if cls == "cannot":
        return cls
    inputs = [alias.get(r, r) for r in node.inputs]
    if cls == "must" or node.kind is OpKind.BATCH_NORM:
        inputs = inputs[:1]
    shapes = [nodes[r.node].output_shapes[r.index] for r in inputs if r.node in nodes]
    head_4d = any(k in layout["view_after"] for k in _keys(node)) and bool(shapes)  # 4-D before its view
    ok = (head_4d or _is_4d(node.output_shapes[0] if node.output_shapes else None)) and all(_is_4d(s) for s in shapes)
    return cls if ok and _const_operand_4d(node) else "cannot"


# ---------------------------------------------------------------------------------------------------------------
# The converter: lowering, transposes, pads, folds and fusions
# ---------------------------------------------------------------------------------------------------------------


_TO_NHWC = (0, 2, 3, 1)
_TO_NCHW = (0, 3, 1, 2)


def _permute(shape: Shape, perm: Sequence[int]) -> Shape:
    return tuple(shape[p] for p in perm)


def same_padding(size: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                 dilation: Sequence[int]) -> tuple[int, int, int, int]:
    """TFLite's SAME padding (top, left, bottom, right) of a window over ``size`` (H, W)."""
    pads = []
    for n, k, s, d in zip(size, kernel, stride, dilation, strict=True):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


class _Converter:
    """Replays litert-torch and the TFLite converter over a graph of the torch frontend."""

    def __init__(self, graph: Graph, rules: KernelRules, alias: Mapping[Ref, Ref]) -> None:
        self.graph = graph
        self.rules = rules
        self.data = rules.data
        self.alias = alias
        self.nodes = {n.name: n for n in graph.nodes}
        self.order = {n.name: i for i, n in enumerate(graph.nodes)}
        self.ops: list[_Op] = []
        self.out: dict[Ref, _Op | None] = {}  # the operator producing each IR tensor (None: graph input)
        self.nhwc: set[str] = set()
        self.transposed: dict[tuple[int, bool], _Op] = {}
        self._pending: list[Node] = []  # identities of a graph input, computed by the next operator
        self.viewed: set[str] = set()  # nodes whose last operator is a view of an NHWC result, in NCHW
        self.lazy: dict[Ref, _Op] = {}  # slices of a split replayed at their first use
        self.seen: dict[tuple[Any, ...], str] = {}  # the first node of each (kind, attributes, inputs)
        self.twins: dict[str, str] = {}  # a node -> the identical node computed before it

    # -- driver --------------------------------------------------------------------------------------------------

    def run(self, kept: Sequence[Node]) -> list[_Op]:
        self.nhwc = nhwc_nodes(self.graph, kept, self.rules, self.alias)
        for n in self.graph.nodes:
            if n.kind is OpKind.INPUT:
                self.out[Ref(n.name, 0)] = None
        for n in kept:
            self._lower(n)
        for r in self.graph.outputs:
            r = self.alias.get(r, r)
            if r in self.lazy:
                self.ops.append(self.lazy.pop(r))
                self.out[r] = self.ops[-1]
            self._output(r)
        self._simplify_layout()
        self._fold_and_fuse()
        self._simplify_layout()
        return self.ops

    # -- helpers -------------------------------------------------------------------------------------------------

    def _shape_of(self, ref: Ref) -> Shape:
        n = self.nodes[ref.node]
        return tuple(n.output_shapes[ref.index]) if ref.index < len(n.output_shapes) else ()

    def _physical(self, ref: Ref) -> Shape:
        shape = self._shape_of(ref)
        return _permute(shape, _TO_NHWC) if ref.node in self.nhwc and len(shape) == 4 else shape

    def _source(self, ref: Ref) -> tuple[_Op | None, bool, Shape]:
        """The operator producing ``ref`` (None: graph input), whether the tensor is NHWC, its physical shape."""
        ref = self.alias.get(ref, ref)
        if ref.node in self.twins:
            ref = Ref(self.twins[ref.node], ref.index)
        return self.out.get(ref), ref.node in self.nhwc and ref.node not in self.viewed, self._physical(ref)

    def _adapt(self, ref: Ref, node: Node, want_nhwc: bool) -> _Op | None:
        """The operator whose output ``node`` reads for ``ref``, behind a transpose when the layouts differ."""
        op, nhwc, shape = self._source(ref)
        if nhwc == want_nhwc or len(shape) != 4:
            return op
        key = (id(op) if op is not None else hash(self.alias.get(ref, ref)), want_nhwc)
        if key not in self.transposed:
            perm = _TO_NHWC if want_nhwc else _TO_NCHW
            t = _Op("TRANSPOSE", node, [], [op], _permute(shape, perm), nhwc=want_nhwc,
                    facts={"rank": 4, "perm": perm})
            self.ops.append(t)
            self.transposed[key] = t
        return self.transposed[key]

    def _inputs(self, node: Node) -> list[_Op | None]:
        want = node.name in self.nhwc
        refs = [self.alias.get(r, r) for r in node.inputs]
        for r in refs:
            if r in self.lazy:  # a replayed slice of a split: written where it is first read
                op = self.lazy.pop(r)
                self.ops.append(op)
                self.out[r] = op
        return [self._adapt(r, node, want) for r in refs if self.nodes[r.node].kind is not OpKind.CONSTANT]

    def _output(self, ref: Ref) -> None:
        """A graph output leaves in NCHW: a transpose after an NHWC operator."""
        op, nhwc, shape = self._source(ref)
        if op is not None and nhwc and len(shape) == 4:
            self._adapt(ref, op.serves, False)

    # -- lowering ------------------------------------------------------------------------------------------------

    def _lower(self, n: Node) -> None:
        specs = _entry(self.data["lowering"], n)
        if any(spec["op"] == "UNSUPPORTED" for spec in specs):
            raise UnsupportedOperatorError(node_label(n), n.name, "the litert rules have no lowering checked against a "
                                           "litert-torch conversion for it (edgeplan/data/kernel_rules/litert.json)")
        key = (n.kind, n.attrs, tuple(self.alias.get(r, r) for r in n.inputs), n.name in self.nhwc)
        pure = any(k in self.data["cse_kinds"] for k in _keys(n))
        twin = self.seen.get(key) if pure and n.inputs and len(n.output_shapes) == 1 else None
        if twin is not None and self.out.get(Ref(twin, 0)) is not None:
            # the same operation of the same tensors: one operator after the converter's CSE
            op = self.out[Ref(twin, 0)]
            assert op is not None
            op.nodes.append(n)
            self.out[Ref(n.name, 0)] = op
            self.twins[n.name] = twin
            return
        self.seen.setdefault(key, n.name)
        xs = self._inputs(n)
        if self._is_identity(n):
            self._identity(n, xs)
            return
        nhwc = n.name in self.nhwc
        shape = self._physical(Ref(n.name, 0)) if n.output_shapes else ()
        facts = _facts(n)
        a = n.attrs
        const_fold = None
        if isinstance(a, EltwiseAttrs) and a.const_shape is not None and len(n.inputs) == 1:
            const_fold = self.data["eltwise_const_fold"].get(label_keys(n)[0])
            facts["const"] = 1
            facts["scalar"] = int(math.prod(a.const_shape) == 1)
        if isinstance(a, (ConvAttrs, PoolAttrs)):
            before = len(self.ops)
            xs, facts["valid"] = self._pad(n, xs)
            facts["padded"] = int(len(self.ops) > before)
            if isinstance(a, ConvAttrs) and n.input_shapes and len(n.input_shapes[0]) == 4:
                facts["window"] = (n.input_shapes[0][2], n.input_shapes[0][3], a.kernel, a.stride, a.dilation)
        if isinstance(a, PadAttrs) and a.mode == "constant" and a.value == 0 and len(a.pads) == 4 \
                and a.pads[0] == a.pads[1] == (0, 0):
            facts["spatial_pads"] = (tuple(a.pads[2]), tuple(a.pads[3]))
        if isinstance(a, (GlobalPoolAttrs, MeanAttrs)):
            facts.update(self._reduced(n, nhwc))
        if len(specs) == 1 and specs[0].get("per_output"):
            self._per_output(n, str(specs[0]["op"]), xs, nhwc, facts)
            return
        if specs and all(spec.get("per_axis") for spec in specs):
            specs = self._per_axis(specs, n)
        applied = [k for k, spec in enumerate(specs) if self._applies(spec, n) and not self._skipped(spec, n)]
        made: list[_Op] = []
        named: dict[str, _Op | None] = {f"x{i}": x for i, x in enumerate(xs)}
        last_in: list[_Op | None] = list(xs)
        for k, spec in enumerate(specs):
            op_type = str(spec["op"])
            if op_type == "{conv}":
                op_type = self._conv_type(n)
            elif op_type == "{resize}":
                op_type = str(self.data["resize_ops"][getattr(n.attrs, "mode", "nearest")])
            ins = ([last_in[0] if name == "$last" else named[name] for name in spec["in"]] if "in" in spec
                   else last_in)
            if spec.get("view"):  # the view of an NHWC result reads it in NCHW
                self.viewed.add(n.name)
                if nhwc and ins and ins[0] is not None and len(ins[0].shape) == 4:
                    t = _Op("TRANSPOSE", n, [], [ins[0]], _permute(ins[0].shape, _TO_NCHW), nhwc=False,
                            facts={"rank": 4, "perm": _TO_NCHW})
                    self.ops.append(t)
                    ins = [t]
            if k not in applied:  # not written for this node: its name stands for its input
                named[str(spec.get("id", f"${k}"))] = ins[0] if ins else None
                last_in = ins[:1]
                continue
            last = k == applied[-1]
            fold = spec.get("fold")
            if last and len(applied) == 1 and const_fold is not None:
                fold = const_fold
            op = _Op(op_type, n, [n] if last else [], list(ins), self._spec_shape(spec, n, shape, nhwc),
                     nhwc=nhwc and not spec.get("view"), fold=fold, facts=dict(facts))
            if spec.get("perm") == "swap_last":
                rank = len(op.shape)
                op.facts["perm"] = (*range(rank - 2), rank - 1, rank - 2)
            elif spec.get("perm") == "shuffle":
                op.facts["perm"] = (0, 2, 1, 3, 4)
            if spec.get("hoist"):
                op.facts["hoist"] = 1
            made.append(op)
            self.ops.append(op)
            named[str(spec.get("id", f"${k}"))] = op
            last_in = [op]
        if self._pending:
            made[-1].nodes[:0] = self._pending
            self._pending = []
        if not made[-1].nodes:  # the last operator was skipped: the last one made computes the node
            made[-1].nodes.append(n)
        for i in range(max(len(n.output_shapes), 1)):
            self.out[Ref(n.name, i)] = made[-1]

    @staticmethod
    def _reduced(n: Node, nhwc: bool) -> dict[str, Any]:
        """A reduction's axes in its own layout, and whether it keeps them."""
        a = n.attrs
        if isinstance(a, GlobalPoolAttrs):
            axes: tuple[int, ...] = (2, 3)
            keep = a.keepdim
        else:
            assert isinstance(a, MeanAttrs)
            rank = len(n.input_shapes[0]) if n.input_shapes else 4
            axes, keep = tuple(x % rank for x in a.axes), a.keepdim
        if nhwc:
            axes = tuple(sorted(_TO_NHWC.index(x) for x in axes))
        return {"axes": axes, "keepdims": int(keep)}

    @staticmethod
    def _spec_shape(spec: Mapping[str, Any], n: Node, shape: Shape, nhwc: bool) -> Shape:
        """An op's output shape: the node's, or for a layer norm's helpers ``rows`` (1, rows, features), ``stats``
        (rows,) or ``stats3`` (1, rows, 1), for a stack's concatenation ``cat`` (the inputs joined on its axis), for a
        softmax's maximum ``reduced`` (without its axis), for a matrix product's or an attention's operands and
        products those of :func:`_product_shapes`."""
        kind = spec.get("shape")
        if kind is None or not n.input_shapes:
            return shape
        products = _product_shapes(n)
        if kind in products:
            return products[str(kind)]
        if kind == "unsqueezed":  # a slice before the reshape that drops its axis
            a = n.attrs
            if not getattr(a, "squeeze", False):
                return shape
            axis = getattr(a, "axis", 0) % len(n.input_shapes[0])
            return (*shape[:axis], 1, *shape[axis:])
        if kind == "reduced":  # without the axis of a softmax
            axis = getattr(n.attrs, "axis", -1) % len(n.output_shapes[0])
            if nhwc and len(shape) == 4:
                axis = _TO_NHWC.index(axis)
            return tuple(d for i, d in enumerate(shape) if i != axis)
        s = tuple(n.input_shapes[0])
        if kind == "cat":
            axis = getattr(n.attrs, "axis", 0) % len(s)
            cat = tuple(d * len(n.input_shapes) if i == axis else d for i, d in enumerate(s))
            return _permute(cat, _TO_NHWC) if nhwc and len(cat) == 4 else cat
        rows = math.prod(s[:-1])
        return {"rows": (1, rows, s[-1]), "stats": (rows,), "stats3": (1, rows, 1)}[str(kind)]

    def _applies(self, spec: Mapping[str, Any], n: Node) -> bool:
        """Whether an op of a lowering is written for ``n``: ``if: affine`` for a norm with a learnt scale and shift,
        ``if: last_axis`` / ``not_last_axis`` for an op along the last axis of its tensor (in its layout) or not,
        ``if: rank_over_4`` for the latter on a tensor of more than 4 axes, ``if: rank4`` for a product of 4-D
        operands, ``if: masked`` for an attention with a mask, ``if: unit_step`` / ``strided`` for a slice."""
        cond = spec.get("if")
        if cond is None:
            return True
        if cond == "affine":
            return bool(getattr(n.attrs, "affine", False))
        if cond == "rank_over_4":
            return bool(n.output_shapes) and len(n.output_shapes[0]) > 4 and self._applies({"if": "not_last_axis"}, n)
        if cond == "rank4":  # a matrix product of 4-D operands, batched over two axes
            return bool(n.input_shapes) and len(n.input_shapes[0]) == 4
        if cond == "masked":
            return len(n.inputs) > 3
        if cond in ("unit_step", "strided"):
            return (getattr(n.attrs, "step", 1) == 1) == (cond == "unit_step")
        if cond == "squeeze":
            return bool(getattr(n.attrs, "squeeze", False))
        axis = getattr(n.attrs, "axis", -1)
        rank = len(n.output_shapes[0]) if n.output_shapes else 1
        axis %= max(rank, 1)
        if n.name in self.nhwc and rank == 4:
            axis = _TO_NHWC.index(axis)
        last = axis == rank - 1
        return last if cond == "last_axis" else not last

    @staticmethod
    def _per_axis(specs: list[Mapping[str, Any]], n: Node) -> list[Mapping[str, Any]]:
        """A lowering repeated for every axis a roll shifts, each reading the one before (``$axis_in``); ``$k`` in
        its inputs names the k-th op of the same repetition."""
        shifts = [s for s in getattr(n.attrs, "shifts", ()) if s]
        out: list[Mapping[str, Any]] = []
        for rep in range(len(shifts)):
            base = len(out)
            prev = f"$r{rep - 1}" if rep else "x0"
            for k, spec in enumerate(specs):
                copy = {key: v for key, v in spec.items() if key != "per_axis"}
                copy["id"] = f"$r{rep}" if k == len(specs) - 1 else f"$r{rep}_{k}"
                ins = spec.get("in", ["$axis_in"] if k == 0 else None)
                if ins is not None:
                    copy["in"] = [prev if i == "$axis_in" else f"$r{rep}_{int(i[1:])}" for i in ins]
                out.append(copy)
            assert len(out) - base == len(specs)
        return out

    @staticmethod
    def _skipped(spec: Mapping[str, Any], n: Node) -> bool:
        """``skip: rows``: a reshape to (1, rows, features) of an input that already has that shape."""
        if spec.get("skip") != "rows" or not n.input_shapes:
            return False
        shape = tuple(n.input_shapes[0])
        return len(shape) == 3 and shape[0] == 1

    def _per_output(self, n: Node, op_type: str, xs: list[_Op | None], nhwc: bool, facts: dict[str, Any]) -> None:
        """One operator per used output (a split written as slices); the last computes the node.

        A split of a tensor written in place (see :meth:`_mutated`) is replayed by torch's functionalization at
        each use of an output: its slice comes right before the first operator that reads it (:meth:`_inputs`).
        """
        used = sorted({r.index for m in self.graph.nodes for r in m.inputs if self.alias.get(r, r).node == n.name}
                      | {self.alias.get(r, r).index for r in self.graph.outputs
                         if self.alias.get(r, r).node == n.name})
        lazy = bool(n.inputs) and self._mutated(self.alias.get(n.inputs[0], n.inputs[0]).node)
        for k, i in enumerate(used):
            op = _Op(op_type, n, [n] if k == len(used) - 1 else [], list(xs), self._physical(Ref(n.name, i)),
                     nhwc=nhwc, facts=dict(facts))
            if lazy:
                op.nodes = [n] if k == 0 else []
                self.lazy[Ref(n.name, i)] = op
                continue
            self.ops.append(op)
            self.out[Ref(n.name, i)] = op

    def _mutated(self, name: str) -> bool:
        """Whether the IR node ``name`` ends in an in-place write (``relu_``, ``add_``; a convolution with a bias,
        which litert-torch's NHWC rewrite adds in place), after which torch replays views of its result."""
        node = self.nodes.get(name)
        if node is None:
            return False
        if isinstance(node.attrs, ConvAttrs) and node.attrs.bias and name in self.nhwc:
            return True
        parts = node.source.split(".")
        return len(parts) >= 2 and parts[0] == "aten" and parts[1].endswith("_") and not parts[1].startswith("_")

    def _is_identity(self, n: Node) -> bool:
        """A node the converter drops because it returns its input (an adaptive pooling to the input's size)."""
        return any(k in self.data["identities"] for k in label_keys(n)) and bool(n.input_shapes) and \
            tuple(n.input_shapes[0]) == tuple(n.output_shapes[0])

    def _identity(self, n: Node, xs: list[_Op | None]) -> None:
        """``n`` runs in the operator producing its input; its users read that operator."""
        src = xs[0] if xs else None
        if src is None:
            self._pending.append(n)
        else:
            src.nodes.append(n)
        for i in range(max(len(n.output_shapes), 1)):
            self.out[Ref(n.name, i)] = src
        if n.inputs and n.name in self.nhwc and self.alias.get(n.inputs[0], n.inputs[0]).node not in self.nhwc:
            self.nhwc.discard(n.name)  # its output is its input, in its input's layout

    def _conv_type(self, n: Node) -> str:
        a = n.attrs
        conv = self.data["conv_ops"]
        if isinstance(a, ConvAttrs) and a.groups > 1 and a.groups == a.in_channels:
            return str(conv["depthwise"])
        return str(conv["other"])

    def _pad(self, n: Node, xs: list[_Op | None]) -> tuple[list[_Op | None], int]:
        """An explicit pad before a convolution or pooling whose padding is not SAME (see the module docstring), and
        whether the operator's own padding is VALID (1) or SAME (0)."""
        a = n.attrs
        if not isinstance(a, (ConvAttrs, PoolAttrs)) or not n.input_shapes or len(n.input_shapes[0]) != 4:
            return xs, 1
        h, w = n.input_shapes[0][2], n.input_shapes[0][3]
        oh, ow = n.output_shapes[0][2], n.output_shapes[0][3]
        top, left, bottom, right = a.padding
        # ceil mode: the window's last positions read past the padded input, as padding at the end
        bottom = max(bottom, (oh - 1) * a.stride[0] + (a.kernel[0] - 1) * a.dilation[0] + 1 - h - top)
        right = max(right, (ow - 1) * a.stride[1] + (a.kernel[1] - 1) * a.dilation[1] + 1 - w - left)
        pads = (top, left, bottom, right)
        counted = isinstance(a, PoolAttrs) and a.mode is PoolMode.AVG and a.count_include_pad
        if pads == (0, 0, 0, 0):
            return xs, 1
        if pads == same_padding((h, w), a.kernel, a.stride, a.dilation) and not counted:
            return xs, 0
        padding = self.data["padding"]
        if isinstance(a, ConvAttrs):
            op_type, value = padding["conv"], 0.0
        elif a.mode is PoolMode.MAX:
            op_type, value = padding["pool:max"], -math.inf
        else:
            op_type, value = padding["pool:avg"], 0.0
        src = xs[0] if xs else None
        shape = (1, h + top + bottom, w + left + right, n.input_shapes[0][1])
        pad = _Op(op_type, n, [], [src], shape, nhwc=True,
                  facts={"rank": 4, "pad_value_finite": int(math.isfinite(value))})
        self.ops.append(pad)
        return [pad, *xs[1:]], 1

    # -- the converter's passes ----------------------------------------------------------------------------------

    def _uses(self) -> dict[int, int]:
        uses: dict[int, int] = {}
        for op in self.ops:
            for x in dict.fromkeys(op.inputs):
                if x is not None:
                    uses[id(x)] = uses.get(id(x), 0) + 1
        for r in self.graph.outputs:
            out, _, _ = self._source(r)
            if out is not None:
                uses[id(out)] = uses.get(id(out), 0) + 1
        return uses

    def _merge_into(self, op: _Op, into: _Op) -> None:
        """Remove ``op``: ``into`` computes its nodes, its users read ``into``."""
        self._remove(op, into)

    def _fold_and_fuse(self) -> None:
        """Constant steps into the affine op before them (or after them: see :meth:`_fold_forward`), activations into
        the op before them."""
        while self._fold_and_fuse_once():
            pass

    def _fold_and_fuse_once(self) -> bool:
        folds = frozenset(self.data["folds"]["into"])
        acts: Mapping[str, str] = self.data["fused_activations"]["activations"]
        fusable = frozenset(self.data["fused_activations"]["into"])
        changed = False
        for op in list(self.ops):
            if len(op.inputs) != 1:
                continue
            p = op.inputs[0]
            if p is not None and self._uses().get(id(p), 0) == 1 and p.fused is None:
                if op.fold and op.fused is None and p.type in folds:
                    self._merge_into(op, p)
                    changed = True
                    continue
                if op.type in acts and p.type in fusable:
                    p.fused = acts[op.type]
                    self._merge_into(op, p)
                    changed = True
                    continue
            changed |= self._fold_forward(op, folds)
        return changed

    def _fold_forward(self, op: _Op, folds: frozenset[str]) -> bool:
        """A single-use constant step into the affine op that reads it (TFLite's FuseBinaryOpToFollowingAffineOp):
        a scale always, a shift only into an op with VALID padding (SAME padding would pad the shifted input with
        zeros)."""
        if not op.fold or op.fused is not None or self._uses().get(id(op), 0) != 1 or op not in self.ops:
            return False
        users = [o for o in self.ops if op in o.inputs]
        if len(users) != 1 or users[0].type not in folds or users[0].inputs[:1] != [op]:
            return False
        user = users[0]
        if op.fold == "bias" and not user.facts.get("valid", 1):
            return False
        if user.type == "FULLY_CONNECTED" and len(user.shape) != len(op.shape):
            return False  # a layer that flattens its input first keeps the step before it
        if user.type != "FULLY_CONNECTED" and not op.facts.get("scalar"):
            return False  # a convolution takes a scalar step only, not a per-channel one
        user.inputs[0] = op.inputs[0]
        self.ops = [o for o in self.ops if o is not op]
        user.nodes[:0] = op.nodes
        for ref, producer in list(self.out.items()):
            if producer is op:
                self.out[ref] = user
        return True

    def _simplify_layout(self) -> None:
        """The converter's layout clean-up, to a fixed point: transposes composed, identities dropped, pushed after
        binary element-wise operators (:meth:`_push_transposes`); a transpose that only
        moves unit axes is a reshape; a reshape of a single-use reshape is merged into it, a reshape to its input's
        shape vanishes, one that drops the unit axes of a single-use mean is folded into it; a concatenation takes
        the inputs of a single-use concatenation along the same axis among its inputs."""
        passes = (self._double_transposes, self._push_transposes, self._transpose_to_reshape, self._merge_reshapes,
                  self._flatten_concats, self._pad_into_conv, self._hoist_scalar_steps)
        while any(step() for step in passes):
            pass

    def _push_transposes(self) -> bool:
        """The converter's PushTransposeThroughEwise: a binary element-wise op whose inputs are transposes with one
        permutation (one of them used once), or a single-use transpose and a constant, runs on the untransposed
        tensors and the transpose moves after it."""
        ewise = frozenset(self.data["layout"]["transpose_through"])
        uses = self._uses()
        for op in self.ops:
            if op.type not in ewise or not op.inputs or len(op.inputs) > 2 or op.fused is not None:
                continue
            ts = [x for x in op.inputs if x is not None and x.type == "TRANSPOSE" and "perm" in x.facts]
            if len(ts) != len(op.inputs) or len({t.facts["perm"] for t in ts}) != 1:
                continue
            if len(ts) == 2 and ts[0] is ts[1]:
                continue
            if not any(uses.get(id(t), 0) == 1 for t in ts) or (len(ts) == 1 and not op.facts.get("const")):
                continue
            moved = next(t for t in ts if uses.get(id(t), 0) == 1)
            op.inputs = [t.inputs[0] for t in ts]
            op.shape, op.nhwc = self._in_shape(moved), not op.nhwc
            for t in ts:
                if t is not moved and uses.get(id(t), 0) == 1:
                    self._remove(t, op)
            users = [o for o in self.ops if op in o.inputs]
            self.ops.remove(moved)
            self.ops.insert(self.ops.index(op) + 1, moved)
            moved.inputs = [op]
            for o in users:
                o.inputs = [moved if x is op else x for x in o.inputs]
            for ref, producer in list(self.out.items()):
                if producer is op:
                    self.out[ref] = moved
            moved.shape, moved.nhwc = _permute(op.shape, moved.facts["perm"]), not op.nhwc
            return True
        return False

    def _double_transposes(self) -> bool:
        """A transpose of a single-use transpose is one transpose of the composed permutation, none for the
        identity; also across single-use operators that any layout suits (a zero pad, whose pads it permutes)."""
        uses = self._uses()
        transparent = frozenset(self.data["layout"]["transpose_transparent"])
        for t2 in self.ops:
            if t2.type != "TRANSPOSE" or len(t2.inputs) != 1 or "perm" not in t2.facts:
                continue
            path: list[_Op] = []
            t1 = t2.inputs[0]
            while t1 is not None and t1.type in transparent and len(t1.inputs) == 1 and uses.get(id(t1), 0) == 1:
                path.append(t1)
                t1 = t1.inputs[0]
            if t1 is None or t1.type != "TRANSPOSE" or uses.get(id(t1), 0) != 1 or "perm" not in t1.facts:
                continue
            combined = tuple(t1.facts["perm"][i] for i in t2.facts["perm"])
            if path:
                for q in path:
                    q.shape, q.nhwc = _permute(q.shape, t2.facts["perm"]), not q.nhwc
                path[-1].inputs = list(t1.inputs)
                self._remove(t1, path[-1])
                t2.inputs = [path[0]]
            else:
                t2.inputs = list(t1.inputs)
                self._remove(t1, t2)
            if combined == tuple(range(len(combined))):
                self._remove(t2, t2.inputs[0])
            else:
                t2.facts["perm"] = combined
            return True
        return False

    def _hoist_scalar_steps(self) -> bool:
        """An attention's scaling of its query and key (``hoist`` in its lowering) after single-use reshapes and
        transposes runs before them (they are views torch replays at the scaling)."""
        uses = self._uses()
        moving = frozenset(("RESHAPE", "TRANSPOSE"))
        for op in self.ops:
            if not op.facts.get("hoist") or len(op.inputs) != 1:
                continue
            chain: list[_Op] = []
            x = op.inputs[0]
            while x is not None and x.type in moving and len(x.inputs) == 1 and uses.get(id(x), 0) == 1:
                chain.insert(0, x)
                x = x.inputs[0]
            if not chain:
                continue
            users = [o for o in self.ops if op in o.inputs]
            op.inputs = list(chain[0].inputs)
            chain[0].inputs = [op]
            for o in users:
                o.inputs = [chain[-1] if i is op else i for i in o.inputs]
            for ref, producer in list(self.out.items()):
                if producer is op:
                    self.out[ref] = chain[-1]
            self.ops = [o for o in self.ops if o not in chain]
            at = self.ops.index(op) + 1
            self.ops[at:at] = chain
            op.shape = self._in_shape(chain[0]) if chain[0].inputs else op.shape
            op.facts["hoist"] = 0  # moved once
            return True
        return False

    def _pad_into_conv(self) -> bool:
        """A single-use zero pad of the spatial axes feeding a convolution that pads nothing itself becomes the
        convolution's padding: SAME when it is TFLite's SAME padding (the pad is dropped), else it stays."""
        uses = self._uses()
        for pad in self.ops:
            spatial = pad.facts.get("spatial_pads")
            if pad.type != "PAD" or spatial is None or uses.get(id(pad), 0) != 1:
                continue
            users = [o for o in self.ops if pad in o.inputs]
            if len(users) != 1 or users[0].inputs[:1] != [pad] or "window" not in users[0].facts:
                continue
            conv = users[0]
            if not conv.facts.get("valid") or conv.facts.get("padded"):
                continue
            (top, bottom), (left, right) = spatial
            h, w, kernel, stride, dilation = conv.facts["window"]
            size = (h - top - bottom, w - left - right)
            if (top, left, bottom, right) != same_padding(size, kernel, stride, dilation):
                continue
            conv.facts["valid"] = 0
            conv.inputs[0] = pad.inputs[0]
            self.ops = [o for o in self.ops if o is not pad]
            conv.nodes[:0] = pad.nodes
            return True
        return False

    def _transpose_to_reshape(self) -> bool:
        for op in self.ops:
            if op.type == "TRANSPOSE" and op.inputs and _unit_move(self._in_shape(op), op.facts.get("perm")):
                op.type = "RESHAPE"
                return True
        return False

    def _merge_reshapes(self) -> bool:
        uses = self._uses()
        for op in self.ops:
            if op.type != "RESHAPE" or len(op.inputs) != 1:
                continue
            p = op.inputs[0]
            if op.shape == self._in_shape(op):
                self._remove(op, p)
                return True
            if p is None or uses.get(id(p), 0) != 1:
                continue
            if p.type == "RESHAPE":
                op.inputs = list(p.inputs)
                self._remove(p, op)
                return True
            if p.type == "TRANSPOSE" and len(self._in_shape(op)) >= 5 and _squeezes(self._in_shape(op), op.shape):
                p.shape = op.shape  # TFLite writes a transpose of 5+ axes without its unit axes
                self._remove(op, p)
                return True
            axes = p.facts.get("axes")
            if p.type == "MEAN" and axes is not None and p.facts.get("keepdims") and op.shape == tuple(
                    d for i, d in enumerate(p.shape) if i not in axes):
                p.shape, p.facts["keepdims"] = op.shape, 0
                self._remove(op, p)
                return True
        binary = frozenset(self.data["layout"]["transpose_through"])
        for op in self.ops:
            if op.type != "RESHAPE" or len(op.inputs) != 1 or uses.get(id(op), 0) != 1:
                continue
            users = [o for o in self.ops if op in o.inputs]
            x, before = op.inputs[0], self._in_shape(op)
            if len(users) != 1:
                continue
            user = users[0]
            if user.type == "FULLY_CONNECTED" and op.shape[-1:] == before[-1:] and (
                    len(op.shape) == 2 or self._single_reshape_user(user, uses)):
                # the layer flattens its input itself, or keeps its leading axes for the reshape after it
                self._remove(op, x)
                return True
            if (user.type in binary and len(user.inputs) == 2 and len(user.shape) <= 4
                    and _leading_units(before, op.shape)):
                self._remove(op, x)  # implicit broadcasting prepends the unit axes
                return True
        return False

    def _single_reshape_user(self, op: _Op, uses: Mapping[int, int]) -> bool:
        users = [o for o in self.ops if op in o.inputs]
        return uses.get(id(op), 0) == 1 and len(users) == 1 and users[0].type == "RESHAPE"

    def _flatten_concats(self) -> bool:
        uses = self._uses()
        for op in self.ops:
            if op.type != "CONCATENATION":
                continue
            for k, inner in enumerate(op.inputs):
                if (inner is not None and inner.type == "CONCATENATION" and uses.get(id(inner), 0) == 1
                        and inner.facts.get("axis") == op.facts.get("axis") and inner.nhwc == op.nhwc):
                    op.inputs[k:k + 1] = inner.inputs
                    self._remove(inner, op)
                    return True
        return False

    def _remove(self, op: _Op, replacement: _Op | None) -> None:
        """Drop ``op``: its users read ``replacement`` (None: a graph input), which computes its IR nodes (when
        None, the first operator that reads it)."""
        for other in self.ops:
            other.inputs = [replacement if x is op else x for x in other.inputs]
        for ref, producer in list(self.out.items()):
            if producer is op:
                self.out[ref] = replacement
        self.ops = [o for o in self.ops if o is not op]
        if not op.nodes:
            return
        owner = replacement
        if owner is None:
            owner = next((o for o in self.ops if replacement in o.inputs), None)
        if owner is None:
            owner = self.ops[-1]
        owner.nodes.extend(op.nodes)
        owner.nodes.sort(key=lambda n: self.order[n.name])

    def _in_shape(self, op: _Op) -> Shape:
        x = op.inputs[0] if op.inputs else None
        if x is not None:
            return x.shape
        perm = op.facts.get("perm") or _TO_NHWC
        inverse = tuple(perm.index(i) for i in range(len(perm)))
        return _permute(op.shape, inverse)


def _keys(node: Node) -> tuple[str, ...]:
    """The keys the litert rules list ``node`` under, most specific first: its label keys, with the mode of a pad or
    an upsampling (``pad:reflect``, ``upsample:bilinear``), the operation of a reduction (``reduce:sum``)."""
    keys = label_keys(node)
    mode = getattr(node.attrs, "mode", None)
    if node.kind in (OpKind.PAD, OpKind.UPSAMPLE) and isinstance(mode, str):
        return (f"{node.kind.value}:{mode}", *keys)
    if isinstance(node.attrs, ReduceAttrs):
        return (f"reduce:{node.attrs.op}", *keys)
    return keys


def _entry(table: Mapping[str, Any], node: Node) -> list[Mapping[str, Any]]:
    """The entry of a rule table for ``node`` (its full label, then its kind), as a list of operator specs."""
    for key in _keys(node):
        if key in table:
            return list(table[key])
    raise InvalidInputError(
        f"kernel rules 'litert' have no lowering for node {node.name!r} ({node_label(node)}); add one of "
        f"{list(_keys(node))} to edgeplan/data/kernel_rules/litert.json"
    )


def _unit_move(shape: Shape, perm: Iterable[int] | None) -> bool:
    """Whether permuting ``shape`` by ``perm`` keeps its non-unit axes in order (a reshape)."""
    if perm is None:
        return False
    perm = tuple(perm)
    if sorted(perm) != list(range(len(shape))):
        return False
    moved = [shape[p] for p in perm]
    return [d for d in shape if d != 1] == [d for d in moved if d != 1]


def _product_shapes(n: Node) -> dict[str, Shape]:
    """Shapes of the operators of a matrix product or an attention: its operands as 3-D batches (``a3``, ``b3``,
    ``q3``, ``kt3``, ``v3``), the scaled query and key (``q``, ``k``), the transposed key (``kt``), the scores
    (``s3``, ``s4``) and the products (``ab3``, ``o3``)."""
    shapes = [tuple(s) for s in n.input_shapes]
    if len(shapes) < 2 or any(len(s) < 2 for s in shapes[:2]):
        return {}

    def batch3(s: Shape) -> Shape:
        return (math.prod(s[:-2]), s[-2], s[-1])

    a, b = shapes[0], shapes[1]
    out: dict[str, Shape] = {"a3": batch3(a), "b3": batch3(b), "ab3": (*batch3(a)[:2], b[-1])}
    if n.kind is OpKind.ATTENTION and len(shapes) >= 3:
        q, k, v = shapes[0], shapes[1], shapes[2]
        kt = (*k[:-2], k[-1], k[-2])
        scores = (*q[:-1], k[-2])
        out.update(q=q, k=k, kt=kt, q3=batch3(q), kt3=batch3(kt), s4=scores, s3=batch3(scores), v3=batch3(v),
                   o3=(*batch3(q)[:2], v[-1]))
    return out


def _leading_units(before: Shape, after: Shape) -> bool:
    """Whether ``after`` is ``before`` (a matrix at least) with unit axes put in front."""
    return len(before) >= 2 and len(after) > len(before) and after[len(after) - len(before):] == before and all(
        d == 1 for d in after[:len(after) - len(before)])


def _squeezes(before: Shape, after: Shape) -> bool:
    """Whether ``after`` is ``before`` with unit axes dropped."""
    return [d for d in before if d != 1] == [d for d in after if d != 1] and len(after) < len(before)
