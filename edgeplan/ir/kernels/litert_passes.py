"""The operators under construction of the LiteRT kernel deduction and the converter's own passes over them:
folds and fusions, transposes pushed and cancelled, pads merged, reshapes merged (:mod:`edgeplan.ir.kernels.litert`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.kernels.rules import KernelRules, label_keys, node_label
from edgeplan.ir.ops import (
    AxisAttrs,
    ConvAttrs,
    OpKind,
    PadAttrs,
    PermuteAttrs,
    PoolAttrs,
    ReduceAttrs,
    SliceAttrs,
)

__all__ = ["same_padding"]

Shape = tuple[int, ...]


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
    helper: str | None = None  # the name of a helper that is not the only one of its type (``OP.role``)

    @property
    def runtime_name(self) -> str:
        return "" if self.nodes else f"{self.helper or self.type}:{self.serves.name}"


_TO_NHWC = (0, 2, 3, 1)
_TO_NCHW = (0, 3, 1, 2)


def _permute(shape: Shape, perm: Sequence[int]) -> Shape:
    return tuple(shape[p] for p in perm)


class _Passes:
    """The converter's passes over :attr:`ops` (a mixin of the converter, which lowers the graph into them)."""

    graph: Graph
    rules: KernelRules
    data: Mapping[str, Any]
    alias: Mapping[Ref, Ref]
    order: dict[str, int]
    ops: list[_Op]
    out: dict[Ref, _Op | None]

    def _source(self, ref: Ref) -> tuple[_Op | None, bool, Shape]:
        raise NotImplementedError  # the converter's: the operator, layout and shape of an IR tensor

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
        """Remove ``op``: ``into`` computes its nodes, its users read ``into``, and it runs where ``op`` ran (the
        converter's rewrite creates the fused operator in place of the pattern's root, the last operator)."""
        self.ops.remove(into)
        self.ops.insert(self.ops.index(op), into)
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
        refused: Mapping[str, list[str]] = self.data["fused_activations"].get("not_into", {})
        changed = False
        uses: dict[int, int] | None = None  # counted again only after a rewrite
        for op in list(self.ops):
            if len(op.inputs) != 1:
                continue
            p = op.inputs[0]
            uses = self._uses() if uses is None else uses
            if p is not None and uses.get(id(p), 0) == 1 and p.fused is None:
                if op.fold and op.fused is None and p.type in folds:
                    self._merge_into(op, p)
                    changed, uses = True, None
                    continue
                if op.type in acts and p.type in fusable and op.type not in refused.get(p.type, ()):
                    p.fused = acts[op.type]
                    self._merge_into(op, p)
                    changed, uses = True, None
                    continue
            if op.fold and uses.get(id(op), 0) == 1 and self._fold_forward(op, folds):
                changed, uses = True, None
        return changed

    def _fold_forward(self, op: _Op, folds: frozenset[str]) -> bool:
        """A constant step used once (the caller checks) into the affine op that reads it (TFLite's
        FuseBinaryOpToFollowingAffineOp): a scale always, a shift only into an op with VALID padding (SAME padding
        would pad the shifted input with zeros)."""
        if not op.fold or op.fused is not None or op not in self.ops:
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
        binary element-wise operators (:meth:`_push_transposes`); a transpose that only moves unit axes is a reshape;
        a reshape of a reshape whose users all reshape is merged into it, a reshape to its input's shape vanishes and
        so does a reshape of a reshape back to that one's input shape, one that drops the unit axes of a single-use
        mean is folded into it; a concatenation takes the inputs of a single-use concatenation along the same axis
        among its inputs."""
        passes = (self._double_transposes, self._push_transposes, self._transpose_to_reshape, self._merge_reshapes,
                  self._flatten_concats, self._slice_concats, self._pad_into_conv, self._hoist_scalar_steps)
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
            if (p is not None and p.type == "RESHAPE" and len(p.inputs) == 1 and p.inputs[0] is not None
                    and op.shape == self._in_shape(p)):
                self._remove(op, p.inputs[0])  # a reshape back to the shape the reshape it reads started from
                if p in self.ops and not self._uses().get(id(p), 0):
                    self._remove(p, p.inputs[0])
                return True
            if p is not None and p.type == "RESHAPE" and uses.get(id(p), 0) > 1:
                users = [o for o in self.ops if p in o.inputs]
                if len(users) == uses[id(p)] and all(u.type == "RESHAPE" for u in users):
                    op.inputs = list(p.inputs)  # a reshape whose users all reshape: each reads its input
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
            if (user.type == "FULLY_CONNECTED" and op.shape[-1:] == before[-1:] and _units_only(before, op.shape)
                    and (len(op.shape) == 2 or self._single_reshape_user(user, uses))):
                # it moves or drops unit axes only: the layer reads them as rows itself, or keeps them for the
                # reshape after it
                self._remove(op, x)
                return True
            if (user.type in binary and (len(user.inputs) == 2 or user.facts.get("const")) and len(user.shape) <= 4
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

    def _slice_concats(self) -> bool:
        """A slice of a concatenation that lies within one of its inputs slices that input (StableHLO's
        slice-of-concatenate folding), or is that input when it covers all of it; a concatenation left without users
        is dropped (its IR nodes join its last input's operator)."""
        for op in self.ops:
            cat = op.inputs[0] if op.type == "SLICE" and len(op.inputs) == 1 else None
            if cat is None or cat.type != "CONCATENATION" or "range" not in op.facts or cat.nhwc != op.nhwc:
                continue
            axis, start, end = op.facts["range"]
            rank = len(cat.shape)
            if "axis" not in cat.facts or cat.facts["axis"] % rank != axis or any(x is None for x in cat.inputs):
                continue
            physical = _TO_NHWC.index(axis) if cat.nhwc and rank == 4 else axis
            offset = 0
            for x in cat.inputs:
                assert x is not None
                size = x.shape[physical]
                if offset <= start and end <= offset + size:
                    if (start, end) == (offset, offset + size):
                        self._remove(op, x)
                    else:
                        op.inputs, op.facts["range"] = [x], (axis, start - offset, end - offset)
                    if cat in self.ops and self._uses().get(id(cat), 0) == 0:
                        self._remove(cat, cat.inputs[-1])
                    return True
                offset += size
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
        if not op.inputs:  # it reads constants only
            return op.shape
        x = op.inputs[0]
        if x is not None:
            return x.shape
        if "perm" not in op.facts and op.type != "TRANSPOSE":  # it reads the graph's input as it is
            shapes = [s for r, s in zip(op.serves.inputs, op.serves.input_shapes, strict=False)
                      if self.graph.node(r.node).kind is OpKind.INPUT]
            if shapes:
                return tuple(shapes[0])
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
    kept = [p for p in perm if shape[p] != 1]  # the non-unit axes, in their new order
    return kept == sorted(kept)


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


def _units_only(before: Shape, after: Shape) -> bool:
    """Whether ``after`` has ``before``'s non-unit axes in their order (only unit axes moved, added or dropped)."""
    return [d for d in before if d != 1] == [d for d in after if d != 1]


def _squeezes(before: Shape, after: Shape) -> bool:
    """Whether ``after`` is ``before`` with unit axes dropped."""
    return _units_only(before, after) and len(after) < len(before)


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


def same_padding(size: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                 dilation: Sequence[int]) -> tuple[int, int, int, int]:
    """TFLite's SAME padding (top, left, bottom, right) of a window over ``size`` (H, W)."""
    pads = []
    for n, k, s, d in zip(size, kernel, stride, dilation, strict=True):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])
