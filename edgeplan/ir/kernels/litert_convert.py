"""The LiteRT converter replayed over a graph of the torch frontend: layouts, lowering into TFLite operators and
explicit pads, then the converter's passes (:mod:`edgeplan.ir.kernels.litert_passes`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from edgeplan.errors import UnsupportedOperatorError
from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.kernels.litert_folded import MASK_ROLE, FoldedChain, folded_chains
from edgeplan.ir.kernels.litert_layout import nhwc_nodes
from edgeplan.ir.kernels.litert_passes import (
    _TO_NCHW,
    _TO_NHWC,
    _entry,
    _facts,
    _keys,
    _Op,
    _Passes,
    _permute,
    _product_shapes,
    same_padding,
)
from edgeplan.ir.kernels.litert_patterns import fully_connected_views, l2_normalizations
from edgeplan.ir.kernels.litert_pool import POOL, avg_pool_form, window_padding
from edgeplan.ir.kernels.rules import KernelRules, label_keys, node_label
from edgeplan.ir.ops import (
    ConvAttrs,
    EltwiseAttrs,
    GlobalPoolAttrs,
    MeanAttrs,
    OpKind,
    PadAttrs,
    PoolAttrs,
    PoolMode,
    SliceAttrs,
    SplitAttrs,
)

__all__: list[str] = []

Shape = tuple[int, ...]




class _FoldedMasks:
    """The operators of the graph's folded masks (:func:`folded_chains`), each written where its folded operator
    ran (identical masks once), and the node that reads each; each serves that node, named ``OP.mask:node``."""

    def __init__(self, graph: Graph, rule: Mapping[str, Any] | None) -> None:
        self.pending: list[tuple[int, FoldedChain, int]] = []  # (nodes before it, chain, operator index)
        self.reader: dict[str, FoldedChain] = {}  # node name -> the mask it reads
        self.made: dict[tuple[Any, ...], list[_Op]] = {}  # a chain's key -> its operators
        self.serves: dict[tuple[Any, ...], Node] = {}
        for chain in folded_chains(graph, rule):
            at = chain.ops[-1].at
            node = next((n for n in graph.nodes[at:] if isinstance(n.attrs, EltwiseAttrs)
                         and n.attrs.const_shape == chain.shape and n.name not in self.reader), None)
            if node is None:
                continue
            self.reader[node.name] = chain
            if chain.key not in self.serves:
                self.serves[chain.key] = node
                self.made[chain.key] = []
                self.pending += [(op.at, chain, k) for k, op in enumerate(chain.ops)]
        self.pending.sort(key=lambda p: p[0])

    def due(self, index: int) -> list[_Op]:
        """The operators written before the graph's node at ``index`` (and not yet written)."""
        out = []
        while self.pending and self.pending[0][0] <= index:
            _, chain, k = self.pending.pop(0)
            made = self.made[chain.key]
            spec = chain.ops[k]
            made.append(_Op(spec.type, self.serves[chain.key], [], [made[j] for j in spec.reads], spec.shape,
                            helper=f"{spec.type}{MASK_ROLE}"))
            out.append(made[-1])
        return out

    def read_by(self, node: Node) -> _Op | None:
        """The last operator of the mask ``node`` reads, or None."""
        chain = self.reader.get(node.name)
        if chain is None:
            return None
        made = self.made.get(chain.key, [])
        return made[-1] if made and len(made) == len(chain.ops) else None


class _Converter(_Passes):
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
        self.shared: dict[tuple[Any, ...], _Op] = {}  # operators of constants only, by what they compute

    # -- driver --------------------------------------------------------------------------------------------------

    def run(self, kept: Sequence[Node]) -> list[_Op]:
        self.nhwc = nhwc_nodes(self.graph, kept, self.rules, self.alias)
        for n in self.graph.nodes:
            if n.kind is OpKind.INPUT:
                self.out[Ref(n.name, 0)] = None
        masks = _FoldedMasks(self.graph, self.data.get("folded_mask"))
        for n in kept:
            self.ops += masks.due(self.order[n.name])
            self._lower(n)
            read = masks.read_by(n)
            op = self.out.get(Ref(n.name, 0))
            if read is not None and op is not None:
                op.inputs.append(read)
        for r in self.graph.outputs:
            r = self.alias.get(r, r)
            if r in self.lazy:
                self.ops.append(self.lazy.pop(r))
                self.out[r] = self.ops[-1]
            self._output(r)
        l2_normalizations(self)
        self._simplify_layout()
        self._fold_and_fuse()
        fully_connected_views(self)
        self._simplify_layout()
        if self.rules.settings.get("dtype") == "int8":
            self._float_boundaries()
        return self.ops

    def _float_boundaries(self) -> None:
        """The quantizer's conversions (the rules' ``quantized``): an operator kept in float reads a ``DEQUANTIZE``
        of each int8 tensor, an int8 operator a ``QUANTIZE`` of each float one, each conversion written once per
        tensor, just before the first operator that reads it. A conversion serves the float operator's IR node
        (``DEQUANTIZE:node`` of its input, ``QUANTIZE:node`` of its output; ``QUANTIZE.counts:node`` of an average
        pooling's counts); the graph's inputs and outputs are int8."""
        floats = set(self.data["quantized"]["float_ops"])
        ops: list[_Op] = []
        made: dict[tuple[int, bool], _Op] = {}  # (producer or graph input, to float) -> its conversion

        def graph_inputs(reader: _Op) -> list[Ref]:
            """The graph inputs ``reader`` reads, in order (its operands without a producing operator)."""
            refs = [self.alias.get(r, r) for r in reader.serves.inputs]
            return [r for r in refs if self.nodes[r.node].kind is OpKind.INPUT]

        def converted(x: _Op | None, reader: _Op, to_float: bool, k: int = 0) -> _Op:
            key = (id(x) if x is not None else hash(tuple(graph_inputs(reader)[k:k + 1])), to_float)
            if key not in made:
                served = reader.serves if to_float else (x.serves if x is not None else reader.serves)
                shape = x.shape if x is not None else tuple(reader.serves.input_shapes[0])
                role = x.helper[len(x.type):] if x is not None and x.helper else ""
                made[key] = _Op("DEQUANTIZE" if to_float else "QUANTIZE", served, [], [x], shape,
                                nhwc=x.nhwc if x is not None else reader.nhwc,
                                helper=None if to_float or not role else f"QUANTIZE{role}")
                ops.append(made[key])
            return made[key]

        for op in self.ops:
            want = op.type in floats
            unfed = [i for i, x in enumerate(op.inputs) if x is None]  # the k-th reads the k-th graph input
            op.inputs = [converted(x, op, want, unfed.index(i) if x is None else 0)
                         if (x is not None and x.type in floats) != want else x for i, x in enumerate(op.inputs)]
            ops.append(op)
        for r in self.graph.outputs:
            x, _, _ = self._source(r)
            if x is not None and x.type in floats:
                converted(x, x, False)
        self.ops = ops

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
        if isinstance(a, SliceAttrs) and a.step == 1 and n.input_shapes:
            rank = len(n.input_shapes[0])
            facts["range"] = (a.axis % rank, a.start % max(n.input_shapes[0][a.axis % rank], 1), a.end)
        if len(specs) == 1 and specs[0].get("per_output"):
            self._per_output(n, str(specs[0]["op"]), xs, nhwc, facts)
            return
        if specs and all(spec.get("per_axis") for spec in specs):
            specs = self._per_axis(specs, n)
        applied = [k for k, spec in enumerate(specs) if self._applies(spec, n) and not self._skipped(spec, n)]
        computes = next((k for k in applied if specs[k].get("computes")), applied[-1] if applied else -1)
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
            share = self._share_key(spec, n, nhwc)
            if share in self.shared:  # the same operator over constants, written once (the converter's CSE)
                named[str(spec.get("id", f"${k}"))] = self.shared[share]
                continue
            last = k == applied[-1]
            fold = spec.get("fold")
            if last and len(applied) == 1 and const_fold is not None:
                fold = const_fold
            op = _Op(op_type, n, [n] if k == computes else [], list(ins), self._spec_shape(spec, n, shape, nhwc),
                     nhwc=nhwc and not spec.get("view") and spec.get("layout") != "nchw", fold=fold,
                     facts=dict(facts), helper=spec.get("name"))
            if spec.get("perm") in ("to_nchw", "to_nhwc"):
                op.facts["perm"] = _TO_NCHW if spec["perm"] == "to_nchw" else _TO_NHWC
            elif spec.get("perm") == "swap_last":
                rank = len(op.shape)
                op.facts["perm"] = (*range(rank - 2), rank - 1, rank - 2)
            elif spec.get("perm") == "shuffle":
                op.facts["perm"] = (0, 2, 1, 3, 4)
            if spec.get("hoist"):
                op.facts["hoist"] = 1
            if share is not None:
                self.shared[share] = op
            made.append(op)
            self.ops.append(op)
            named[str(spec.get("id", f"${k}"))] = op
            last_in = [op]
        if self._pending:
            made[-1].nodes[:0] = self._pending
            self._pending = []
        if not any(x is n for op in made for x in op.nodes):  # it was skipped: the last one made computes the node
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
        if kind == "logical":  # in the IR's layout, NCHW
            return tuple(n.output_shapes[0])
        if kind == "counts":  # a pooling's count of input positions per window: one channel
            return (1, *shape[1:3], 1) if nhwc else (1, 1, *shape[2:])
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
        operands, ``if: masked`` for an attention with a mask, ``if: unit_step`` / ``strided`` for a slice,
        ``if: unit_map`` / ``not_unit_map`` for a global pooling of a 1x1 map or a larger one, ``if: clip_low`` /
        ``clip_high`` for a clamp with that bound."""
        cond = spec.get("if")
        if cond is None:
            return True
        if cond.startswith("form:"):  # how the converter writes an average pooling (litert_pool)
            return avg_pool_form(n) == cond[len("form:"):]
        if cond in ("unit_window", "not_unit_window"):  # a max pooling that moves no axis after an average one
            a = n.attrs
            src = self.nodes.get(self.alias.get(n.inputs[0], n.inputs[0]).node) if n.inputs else None
            unit = (n.name in self.nhwc and isinstance(a, PoolAttrs) and a.mode is PoolMode.MAX
                    and a.kernel == a.stride == (1, 1) and not any(a.padding) and src is not None
                    and isinstance(src.attrs, PoolAttrs) and src.attrs.mode is PoolMode.AVG)
            return unit == (cond == "unit_window")
        if cond == "ceil_counted":  # an average pooling that counts a padding that ceil mode extends
            a = n.attrs
            return (isinstance(a, PoolAttrs) and a.mode is PoolMode.AVG and a.count_include_pad
                    and window_padding(n) != a.padding)
        if cond in ("unit_map", "not_unit_map"):  # a mean over 1x1 positions: the converter writes a sum
            unit = bool(n.input_shapes) and len(n.input_shapes[0]) == 4 and n.input_shapes[0][2:] == (1, 1)
            return unit == (cond == "unit_map")
        if cond == "affine":
            return bool(getattr(n.attrs, "affine", False))
        if cond in ("clip_low", "clip_high"):  # a clamp's lower and upper bounds
            return getattr(n.attrs, cond[len("clip_"):], None) is not None
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
    def _share_key(spec: Mapping[str, Any], n: Node, nhwc: bool) -> tuple[Any, ...] | None:
        """What an operator of constants only computes (``share: window``: a pooling's counts, by its input's size,
        window and padding), None for any other."""
        if spec.get("share") != "window" or not isinstance(n.attrs, PoolAttrs):
            return None
        a = n.attrs
        return (spec["op"], tuple(n.input_shapes[0][2:]), a.kernel, a.stride, a.dilation, window_padding(n), nhwc)

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
        a = n.attrs
        for k, i in enumerate(used):
            op = _Op(op_type, n, [n] if k == len(used) - 1 else [], list(xs), self._physical(Ref(n.name, i)),
                     nhwc=nhwc, facts=dict(facts))
            if isinstance(a, SplitAttrs) and not a.squeeze and n.input_shapes:
                start = sum(a.sizes[:i])
                op.facts["range"] = (a.axis % len(n.input_shapes[0]), start, start + a.sizes[i])
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
        if avg_pool_form(n) != POOL:  # the padding is the reduce window's, or the composite's
            return xs, 1
        h, w = n.input_shapes[0][2], n.input_shapes[0][3]
        top, left, bottom, right = pads = window_padding(n)
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

