"""Handlers of the ONNX operators that combine, cut, reshape, pad or reduce tensors."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from edgeplan.frontends.onnx_frontend.converter import (
    _const_float,
    _const_ints,
    _Converter,
    _NotModelled,
)
from edgeplan.frontends.onnx_frontend.loading import _attrs, _ints, _label
from edgeplan.ir import OpKind, Ref, Shape
from edgeplan.ir.ops import (
    NO_ATTRS,
    AxisAttrs,
    DropoutAttrs,
    EltwiseAttrs,
    EltwiseOp,
    FlattenAttrs,
    LRNAttrs,
    MeanAttrs,
    PadAttrs,
    PermuteAttrs,
    ReduceAttrs,
    ReshapeAttrs,
    SliceAttrs,
    SplitAttrs,
    UpsampleAttrs,
)

if TYPE_CHECKING:
    import onnx


_ELTWISE = {"Add": EltwiseOp.ADD, "Sub": EltwiseOp.SUB, "Mul": EltwiseOp.MUL, "Div": EltwiseOp.DIV}


def _eltwise(cv: _Converter, node: onnx.NodeProto) -> None:
    a, b = node.input[0], node.input[1]
    op = _ELTWISE[node.op_type]
    if cv.is_const(a) and cv.is_const(b):
        raise _NotModelled("both operands are constants that could not be folded")
    if not cv.is_const(a) and not cv.is_const(b):
        cv.emit(node, OpKind.ELTWISE, EltwiseAttrs(op=op), [cv.ref(a), cv.ref(b)])
        return
    act, const = (b, a) if cv.is_const(a) else (a, b)
    _eltwise_emit(cv, node, op, cv.ref(act), const)


def _eltwise_emit(cv: _Converter, node: onnx.NodeProto, op: EltwiseOp, act: Ref, const: str) -> None:
    """An element-wise op of an activation with a constant operand (recorded by its shape)."""
    if cv.is_const(const) and cv.ref_shapes[act] == cv.shape(node.output[0]):
        shape = cv.const_shape(const)
        value = None
        if math.prod(shape) == 1:  # a scalar: its value, for the runtimes that simplify on it (edgeplan.ir.fold)
            array = cv.const(const)
            value = float(array.reshape(-1)[0]) if array is not None and array.dtype.kind in "fiub" else None
        cv.emit(node, OpKind.ELTWISE, EltwiseAttrs(op=op, const_shape=shape, const_value=value), [act])
    else:  # an activation bias, or a constant that broadcasts the activation to a larger shape
        cv.emit(node, OpKind.ELTWISE, EltwiseAttrs(op=op), [act, cv.operand(const)])


def _concat(cv: _Converter, node: onnx.NodeProto) -> None:
    inputs = [cv.operand(v) for v in node.input if v]
    axis = int(_attrs(node)["axis"]) % len(cv.shape(node.output[0]))
    cv.emit(node, OpKind.CONCAT, AxisAttrs(axis=axis), inputs)


def _split(cv: _Converter, node: onnx.NodeProto) -> None:
    x = cv.shape(node.input[0])
    axis = int(_attrs(node).get("axis", 0)) % len(x)
    outputs = list(node.output)
    if not all(outputs):
        raise _NotModelled("an unnamed (dropped) split output is not modelled")
    sizes = tuple(cv.shape(v)[axis] for v in outputs)
    cv.emit(node, OpKind.SPLIT, SplitAttrs(axis=axis, sizes=sizes), [cv.ref(node.input[0])], outputs=outputs)


def _slice(cv: _Converter, node: onnx.NodeProto) -> None:
    x = cv.shape(node.input[0])
    pieces = _slice_pieces(cv, node, x)
    ref = cv.ref(node.input[0])
    shape = list(x)
    for k, (axis, start, end, step) in enumerate(pieces):
        shape[axis] = len(range(start, end, step))
        attrs = SliceAttrs(axis=axis, start=start, end=end, step=step)
        if k == len(pieces) - 1:
            cv.emit(node, OpKind.SLICE, attrs, [ref])
        else:
            hint = f"{_label(node)}/axis{axis}"
            dtype = cv.dtype(node.output[0])
            ref = Ref(cv.add(hint, OpKind.SLICE, attrs, [ref], [], node.op_type, [tuple(shape)], dtype))


def _slice_pieces(cv: _Converter, node: onnx.NodeProto, x: Shape) -> list[tuple[int, int, int, int]]:
    """(axis, start, end, step) per sliced axis, clamped, in axis order; the first axis when none slices."""
    a = _attrs(node)
    starts = _const_ints(cv, node, 1, "starts") or _ints(a.get("starts", []))
    ends = _const_ints(cv, node, 2, "ends") or _ints(a.get("ends", []))
    axes = _const_ints(cv, node, 3, "axes") or _ints(a.get("axes", range(len(starts))))
    steps = _const_ints(cv, node, 4, "steps") or [1] * len(starts)
    pieces = []
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise _NotModelled(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        axis %= len(x)
        if step <= 0:
            raise _NotModelled(f"step {step} along axis {axis}: only positive steps are modelled")
        dim = x[axis]
        start = min(max(start + dim if start < 0 else start, 0), dim)
        end = min(max(end + dim if end < 0 else end, 0), dim)
        pieces.append((axis, start, end, step))
    if not pieces:
        raise _NotModelled("a slice without axes is not modelled")
    pieces.sort()
    sliced = [p for p in pieces if p[1:] != (0, x[p[0]], 1)]
    return sliced or pieces[:1]


def _gather(cv: _Converter, node: onnx.NodeProto) -> None:
    """Gather of constant, evenly spaced indices from an activation: a slice, then a reshape for N-D indices.

    A scalar index squeezes the axis (``x[:, 0]``); an N-D index of the whole axis in order is only a reshape
    (how ``as_strided`` is exported).
    """
    x = cv.shape(node.input[0])
    axis = int(_attrs(node).get("axis", 0)) % len(x)
    index = cv.const(node.input[1])
    if index is None or index.size == 0:
        raise _NotModelled("only constant indices are modelled")
    picks = [int(i) % x[axis] for i in index.reshape(-1).tolist()]
    step = picks[1] - picks[0] if len(picks) > 1 else 1
    if step <= 0 or picks != list(range(picks[0], picks[0] + step * len(picks), step)):
        raise _NotModelled(f"indices {picks[:8]}... are not an ascending evenly spaced range")
    attrs = SliceAttrs(axis=axis, start=picks[0], end=picks[-1] + 1, step=step, squeeze=index.ndim == 0)
    ref = cv.ref(node.input[0])
    if index.ndim <= 1:
        cv.emit(node, OpKind.SLICE, attrs, [ref])
        return
    if picks != list(range(x[axis])):
        shape = (*x[:axis], len(picks), *x[axis + 1:])
        dtype = cv.dtype(node.output[0])
        ref = Ref(cv.add(f"{_label(node)}/slice", OpKind.SLICE, attrs, [ref], [], "Gather", [shape], dtype))
    cv.emit(node, OpKind.RESHAPE, ReshapeAttrs(shape=cv.shape(node.output[0])), [ref])


def _flatten(cv: _Converter, node: onnx.NodeProto) -> None:
    x = cv.shape(node.input[0])
    axis = int(_attrs(node).get("axis", 1)) % (len(x) + 1)
    if axis == 1:
        cv.emit(node, OpKind.FLATTEN, FlattenAttrs(start=1, end=-1), [cv.ref(node.input[0])])
    else:
        _reshape(cv, node)


def _reshape(cv: _Converter, node: onnx.NodeProto) -> None:
    attrs = ReshapeAttrs(shape=cv.shape(node.output[0]))
    cv.emit(node, OpKind.RESHAPE, attrs, [cv.ref(node.input[0])])


def _transpose(cv: _Converter, node: onnx.NodeProto) -> None:
    rank = len(cv.shape(node.input[0]))
    perm = tuple(_ints(_attrs(node).get("perm", range(rank - 1, -1, -1))))
    cv.emit(node, OpKind.PERMUTE, PermuteAttrs(dims=perm), [cv.ref(node.input[0])])


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def _pad(cv: _Converter, node: onnx.NodeProto) -> None:
    rank = len(cv.shape(node.input[0]))
    a = _attrs(node)
    flat = _const_ints(cv, node, 1, "pads")
    flat = flat if flat is not None else _ints(a.get("pads", []))
    value = _const_float(cv, node, 2, "padding value")
    axes = _const_ints(cv, node, 3, "axes")
    axes = [ax % rank for ax in axes] if axes is not None else list(range(rank))
    if len(flat) != 2 * len(axes):
        raise _NotModelled(f"pads {flat} do not match axes {axes}")
    per_axis = {ax: (flat[i], flat[i + len(axes)]) for i, ax in enumerate(axes)}
    pads = tuple(per_axis.get(ax, (0, 0)) for ax in range(rank))
    mode = str(a.get("mode", "constant"))
    attrs = PadAttrs(
        pads=pads, mode=_PAD_MODES.get(mode, mode), value=value if value is not None else float(a.get("value", 0.0))
    )
    cv.emit(node, OpKind.PAD, attrs, [cv.ref(node.input[0])])


_REDUCTIONS = {"ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min", "ReduceL2": "norm2", "ReduceProd": "prod"}


def _reduce(cv: _Converter, node: onnx.NodeProto) -> None:
    rank = len(cv.shape(node.input[0]))
    a = _attrs(node)
    axes = _const_ints(cv, node, 1, "axes")
    axes = axes if axes is not None else _ints(a.get("axes", []))
    if not axes and int(a.get("noop_with_empty_axes", 0)):
        cv.alias(node.output[0], cv.ref(node.input[0]))
        return
    norm = tuple(sorted(ax % rank for ax in axes)) if axes else tuple(range(rank))
    keep = bool(a.get("keepdims", 1))
    if node.op_type == "ReduceMean":
        cv.emit(node, OpKind.MEAN, MeanAttrs(axes=norm, keepdim=keep), [cv.ref(node.input[0])])
    else:
        attrs = ReduceAttrs(op=_REDUCTIONS[node.op_type], axes=norm, keepdim=keep)
        cv.emit(node, OpKind.REDUCE, attrs, [cv.ref(node.input[0])])


def _softmax(cv: _Converter, node: onnx.NodeProto) -> None:
    rank = len(cv.shape(node.input[0]))
    default = -1 if cv.prep.opsets.get("", 13) >= 13 else 1
    axis = int(_attrs(node).get("axis", default)) % rank
    cv.emit(node, OpKind.SOFTMAX, AxisAttrs(axis=axis), [cv.ref(node.input[0])])


_RESIZE_MODES = {"nearest": "nearest", "linear": "bilinear", "bilinear": "bilinear", "cubic": "bicubic"}


def _resize(cv: _Converter, node: onnx.NodeProto) -> None:
    a = _attrs(node)
    mode = str(a.get("mode", "nearest"))
    attrs = UpsampleAttrs(
        mode=_RESIZE_MODES.get(mode, mode),
        align_corners=a.get("coordinate_transformation_mode") == "align_corners",
    )
    cv.emit(node, OpKind.UPSAMPLE, attrs, [cv.ref(node.input[0])])


def _dropout(cv: _Converter, node: onnx.NodeProto) -> None:
    p = _const_float(cv, node, 1, "ratio")
    p = p if p is not None else float(_attrs(node).get("ratio", 0.5))
    cv.emit(node, OpKind.DROPOUT, DropoutAttrs(p=p), [cv.ref(node.input[0])])


def _lrn(cv: _Converter, node: onnx.NodeProto) -> None:
    a = _attrs(node)
    attrs = LRNAttrs(
        size=int(a["size"]),
        alpha=float(a.get("alpha", 1e-4)),
        beta=float(a.get("beta", 0.75)),
        k=float(a.get("bias", 1.0)),
    )
    cv.emit(node, OpKind.LRN, attrs, [cv.ref(node.input[0])])


def _expand(cv: _Converter, node: onnx.NodeProto) -> None:
    if cv.shape(node.output[0]) == cv.shape(node.input[0]):
        cv.alias(node.output[0], cv.ref(node.input[0]))
        return
    cv.emit(node, OpKind.EXPAND, NO_ATTRS, [cv.ref(node.input[0])])


def _identity(cv: _Converter, node: onnx.NodeProto) -> None:
    cv.alias(node.output[0], cv.ref(node.input[0]))
