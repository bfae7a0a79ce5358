"""Read a LiteRT (``.tflite``) model: its operators as written in the file, and the model as an IR
:class:`~edgeplan.ir.Graph`.

A ``.tflite`` file is a flatbuffer of tensors, constant buffers and operators in execution order, each with its
builtin options (padding, strides, the fused activation). :func:`read_tflite`
(:mod:`edgeplan.frontends.tflite_file`) lists them (which of them the XNNPACK
delegate takes is :func:`edgeplan.measure.litert_delegate.delegated_ops`); :func:`graph_from_tflite` maps them
into the IR, one node per operator plus one ``activation`` node per fused activation, so that the kernel rules
can fuse them again as the runtime does.

LiteRT keeps activations in NHWC; the IR is NCHW, as PyTorch and ONNX are. Tensors read or written by a spatial
operator (convolutions, pooling, resizing) are NHWC, and so are the tensors that reach them through operators that
keep the layout (element-wise, padding, concatenation, slicing); their shapes and axes are turned to NCHW (a
``FULLY_CONNECTED`` over the last axis of a 4-D tensor is a 1x1 convolution of an NHWC one, as litert-torch writes a
ConvNeXt block's linear layers). Other
tensors (a model's NCHW input before the converter's first ``TRANSPOSE``, a flattened vector) keep their shapes.

A ``STABLEHLO_REDUCE_WINDOW`` over 2-D windows is a pooling node with its window and padding: a sum (``PoolMode.SUM``)
or a maximum. An average pooling that does not count its padding is written as two of them and a ``DIV``: the sum
of the input's windows, the sum of the same windows over a constant of ones (a ``constant`` node of shape
(1, 1, H, W)) that counts the input's positions in each, and the division of the one by the other.

A quantized file's ``QUANTIZE`` and ``DEQUANTIZE`` are ``convert`` nodes (the node's dtype is the output's): the
quantizer writes them around an operator it keeps in float (such a reduce window) and where an operator's input
must be requantized to the scale of its output (a concatenation's).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from edgeplan.errors import UnsupportedOperatorError
from edgeplan.frontends.tflite_file import TfliteModel, TfliteOp, TfliteTensor, buffer_bytes, read_tflite
from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.ops import (
    Activation,
    ActivationAttrs,
    AxisAttrs,
    ConstantAttrs,
    ConvAttrs,
    ConvertAttrs,
    ConvTransposeAttrs,
    DType,
    EltwiseAttrs,
    EltwiseOp,
    GlobalPoolAttrs,
    InputAttrs,
    LinearAttrs,
    MatMulAttrs,
    MeanAttrs,
    OpaqueAttrs,
    OpKind,
    PadAttrs,
    PermuteAttrs,
    PoolAttrs,
    PoolMode,
    ReduceAttrs,
    ReshapeAttrs,
    SliceAttrs,
    SplitAttrs,
    UpsampleAttrs,
)

__all__ = ["PAD_FOLDS_INTO", "SOURCE_PADDED", "TfliteModel", "TfliteOp", "TfliteTensor", "buffer_bytes",
           "folded_pads", "graph_from_tflite", "has_act_node", "read_tflite"]

Shape = tuple[int, ...]

_DTYPES = {"FLOAT32": DType.FLOAT32, "FLOAT16": DType.FLOAT16, "BFLOAT16": DType.BFLOAT16, "FLOAT64": DType.FLOAT64,
           "INT8": DType.INT8, "UINT8": DType.UINT8, "INT32": DType.INT32, "INT64": DType.INT64, "BOOL": DType.BOOL}
#: Operators whose 4-D activations are NHWC.
_SPATIAL = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "MAX_POOL_2D", "AVERAGE_POOL_2D",
                      "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH"})
#: Operators whose 4-D activations all have one layout.
_KEEP_LAYOUT = frozenset({"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "LOGISTIC", "RELU", "RELU6",
                          "RELU_N1_TO_1", "HARD_SWISH", "TANH", "GELU", "EXP", "LOG", "SQRT", "RSQRT", "ABS", "NEG",
                          "LEAKY_RELU", "ELU", "PRELU", "SQUARE", "SQUARED_DIFFERENCE", "PAD", "PADV2", "MIRROR_PAD",
                          "CONCATENATION", "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "QUANTIZE", "DEQUANTIZE"})
_NHWC_TO_NCHW = (0, 3, 1, 2)  # IR axis i is NHWC axis _NHWC_TO_NCHW[i]
_NCHW_AXIS = {0: 0, 1: 2, 2: 3, 3: 1}  # NHWC axis -> IR axis
_FUSED = {1: Activation.RELU, 3: Activation.RELU6, 4: Activation.TANH}  # ActivationFunctionType -> IR
_UNARY = {"LOGISTIC": Activation.SIGMOID, "RELU": Activation.RELU, "RELU6": Activation.RELU6,
          "HARD_SWISH": Activation.HARDSWISH, "TANH": Activation.TANH, "GELU": Activation.GELU, "EXP": Activation.EXP,
          "LOG": Activation.LOG, "SQRT": Activation.SQRT, "RSQRT": Activation.RSQRT, "ABS": Activation.ABS,
          "NEG": Activation.NEG, "LEAKY_RELU": Activation.LEAKY_RELU, "ELU": Activation.ELU}
_ELTWISE = {"ADD": EltwiseOp.ADD, "SUB": EltwiseOp.SUB, "MUL": EltwiseOp.MUL, "DIV": EltwiseOp.DIV}
_SQUARE = ActivationAttrs(Activation.POW, alpha=2.0)


#: The source suffix of a convolution node whose zero padding the file writes as a ``PAD`` before it.
SOURCE_PADDED = ":pad"

#: The operators a preceding zero padding is folded into: XNNPACK fuses it into them, and the IR (as PyTorch's)
#: writes it as their padding.
PAD_FOLDS_INTO = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D"})


def has_act_node(op: TfliteOp) -> bool:
    """Whether the IR of :func:`graph_from_tflite` writes ``op`` with a ``.act`` node after it: a fused activation,
    or the square of a ``SQUARED_DIFFERENCE``."""
    return bool(op.options.get("fusedActivationFunction")) or op.type == "SQUARED_DIFFERENCE"


def folded_pads(model: TfliteModel) -> dict[int, int]:
    """The ``PAD`` operators (zeros, height and width only) whose one reader is a ``VALID`` convolution, each with
    that convolution's index: XNNPACK runs the two as one padded convolution, and the IR writes them as one
    convolution node with that padding, as the torch frontend does."""
    readers: dict[int, list[int]] = {}
    for op in model.ops:
        for t in op.inputs:
            readers.setdefault(t, []).append(op.index)
    folded = {}
    for op in model.ops:
        if op.type != "PAD" or len(op.inputs) != 2 or len(op.outputs) != 1 or op.outputs[0] in model.outputs:
            continue
        users = readers.get(op.outputs[0], [])
        pads = model.tensors[op.inputs[1]].value or ()
        spatial = len(pads) == 8 and not any(pads[0:2]) and not any(pads[6:8])
        if len(users) == 1 and spatial:
            user = model.ops[users[0]]
            if user.type in PAD_FOLDS_INTO and user.inputs[0] == op.outputs[0] and user.options.get("padding") == 1:
                folded[op.index] = user.index
    return folded


# -------------------------------------------------------------------------------------------------------------------
# The model as an IR graph
# -------------------------------------------------------------------------------------------------------------------


def _nhwc_tensors(model: TfliteModel) -> set[int]:
    """The 4-D activation tensors in NHWC (see the module's docstring)."""
    def activations(op: TfliteOp) -> list[int]:
        return [t for t in (*op.inputs, *op.outputs) if t >= 0 and not model.tensors[t].constant
                and len(model.tensors[t].shape) == 4]

    nhwc: set[int] = set()
    for op in model.ops:
        spatial = op.type in _SPATIAL or _window_axes(op) == (1, 2)
        if spatial or (op.type == "FULLY_CONNECTED" and len(model.tensors[op.inputs[0]].shape) == 4
                       and len(model.tensors[op.outputs[0]].shape) == 4):
            nhwc.update(activations(op))
        elif op.type == "MEAN" and op.inputs and len(model.tensors[op.inputs[0]].shape) == 4:
            axes = model.tensors[op.inputs[1]].value or ()
            if {int(a) for a in axes} == {1, 2}:
                nhwc.add(op.inputs[0])
    changed = True
    while changed:
        changed = False
        for op in model.ops:
            if op.type in _KEEP_LAYOUT:
                ts = activations(op)
                if any(t in nhwc for t in ts) and not all(t in nhwc for t in ts):
                    nhwc.update(ts)
                    changed = True
    return nhwc


def _window_axes(op: TfliteOp) -> tuple[int, int] | None:
    """The spatial axes of a 4-D ``STABLEHLO_REDUCE_WINDOW``: (1, 2) when its window, strides and padding leave
    axes 0 and 3 alone (NHWC), (2, 3) when they leave axes 0 and 1 alone (NCHW), else None."""
    if op.type != "STABLEHLO_REDUCE_WINDOW":
        return None
    o = op.options
    dims, strides, pads = list(o.get("windowDimensions") or ()), list(o.get("windowStrides") or ()), list(
        o.get("padding") or ())
    if len(dims) != 4 or len(strides) != 4 or len(pads) != 8:
        return None

    def alone(axis: int) -> bool:
        return dims[axis] == strides[axis] == 1 and pads[2 * axis] == pads[2 * axis + 1] == 0

    if alone(0) and alone(3):
        return (1, 2)
    return (2, 3) if alone(0) and alone(1) else None


class _Builder:
    """Maps the operators of one model into IR nodes."""

    def __init__(self, model: TfliteModel, opaque: bool) -> None:
        self.model = model
        self.opaque = opaque
        self.nhwc = _nhwc_tensors(model)
        self.nodes: list[Node] = []
        self.ref: dict[int, Ref] = {}
        self.folded = folded_pads(model)  # pad op -> the convolution it is folded into
        self.pad_of: dict[int, TfliteOp] = {model.ops[c].inputs[0]: model.ops[p] for p, c in self.folded.items()}

    def shape(self, t: int) -> Shape:
        s = self.model.tensors[t].shape
        return tuple(s[i] for i in _NHWC_TO_NCHW) if t in self.nhwc else s

    def axis(self, t: int, axis: int) -> int:
        rank = len(self.model.tensors[t].shape)
        axis = axis % rank if rank else axis
        return _NCHW_AXIS[axis] if t in self.nhwc else axis

    def const(self, t: int) -> tuple[float, ...]:
        value = self.model.tensors[t].value
        if value is None:
            raise _NotModelled(f"tensor {self.model.tensors[t].name!r} is not a small constant")
        return value

    def activation_inputs(self, op: TfliteOp) -> list[int]:
        return [t for t in op.inputs if t >= 0 and not self.model.tensors[t].constant]

    def computed(self, ins: list[int]) -> list[int]:
        """``ins``, each a tensor some operator (or the model's input) computes; else the operator is not modelled."""
        missing = [t for t in ins if t not in self.ref]
        if missing:
            raise _NotModelled(f"input tensor {self.model.tensors[missing[0]].name!r} is computed by no operator")
        return ins

    def emit(self, op: TfliteOp, kind: OpKind, attrs: Any, inputs: Sequence[int] | None = None,
             input_refs: Sequence[Ref] | None = None, input_shapes: Sequence[Shape] | None = None) -> None:
        ins = self.computed(self.activation_inputs(op) if inputs is None else list(inputs))
        name = f"{op.type.lower()}_{op.index}"
        out = op.outputs[0]
        tensor = self.model.tensors[out]
        refs = tuple(input_refs) if input_refs is not None else tuple(self.ref[t] for t in ins)
        shapes = tuple(input_shapes) if input_shapes is not None else tuple(self.shape(t) for t in ins)
        node = Node(name, kind, attrs, refs, shapes,
                    tuple(self.shape(t) for t in op.outputs), _DTYPES.get(tensor.dtype, DType.FLOAT32), op.type)
        self.nodes.append(node)
        for k, t in enumerate(op.outputs):
            self.ref[t] = Ref(name, k)
        fused = op.options.get("fusedActivationFunction", 0)
        if fused:
            fn = _FUSED.get(fused)
            if fn is None:
                raise _NotModelled(f"fused activation {fused} has no IR activation")
            self.act(op, node, ActivationAttrs(fn))

    def act(self, op: TfliteOp, node: Node, attrs: ActivationAttrs) -> None:
        """The ``.act`` node after ``node`` (``op``'s): what ``op`` writes as its output (source ``OP:fused``)."""
        act = Node(f"{node.name}.act", OpKind.ACTIVATION, attrs, (Ref(node.name),), node.output_shapes[:1],
                   node.output_shapes[:1], node.dtype, f"{op.type}:fused")
        self.nodes.append(act)
        self.ref[op.outputs[0]] = Ref(act.name)

    def unsupported(self, op: TfliteOp, detail: str) -> None:
        name = f"{op.type.lower()}_{op.index}"
        if not self.opaque:
            raise UnsupportedOperatorError(op.type, name, detail)
        self.emit(op, OpKind.OPAQUE, OpaqueAttrs(op.type), [t for t in self.activation_inputs(op) if t in self.ref])


class _NotModelled(Exception):
    """An operator (or a setting of it) the IR does not model."""


def _window(b: _Builder, op: TfliteOp, kernel: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int],
                                                                           tuple[int, int, int, int]]:
    from edgeplan.ir.kernels.litert_passes import same_padding  # TFLite's SAME padding, as the rules compute it

    o = op.options
    stride = (int(o.get("strideH", 1)), int(o.get("strideW", 1)))
    dilation = (int(o.get("dilationHFactor", 1)), int(o.get("dilationWFactor", 1)))
    _, h, w, _ = b.model.tensors[op.inputs[0]].shape
    padding = same_padding((h, w), kernel, stride, dilation) if o.get("padding", 1) == 0 else (0, 0, 0, 0)
    return stride, dilation, padding


def _conv(b: _Builder, op: TfliteOp) -> None:
    x, w = op.inputs[0], op.inputs[1]
    ws = b.model.tensors[w].shape
    kernel = (ws[1], ws[2])
    stride, dilation, padding = _window(b, op, kernel)
    pad = b.pad_of.get(x)
    if pad is not None:  # a folded zero padding: the convolution reads the pad's input with that padding
        flat = [int(v) for v in b.const(pad.inputs[1])]
        x, padding = pad.inputs[0], (flat[2], flat[4], flat[3], flat[5])
    xs = b.model.tensors[x].shape
    depthwise = op.type == "DEPTHWISE_CONV_2D"
    c_in, c_out = xs[3], ws[3] if depthwise else ws[0]
    groups = c_in if depthwise else c_in // max(ws[3], 1)
    bias = len(op.inputs) > 2 and op.inputs[2] >= 0
    b.emit(op, OpKind.CONV2D, ConvAttrs(c_in, c_out, kernel, stride, padding, dilation, groups, bias), [x])
    if pad is not None:  # marked: its operator comes after the PAD the file writes
        at = next(i for i in range(len(b.nodes) - 1, -1, -1) if b.nodes[i].name == f"{op.type.lower()}_{op.index}")
        b.nodes[at] = replace(b.nodes[at], source=f"{op.type}{SOURCE_PADDED}")


def _transpose_conv(b: _Builder, op: TfliteOp) -> None:
    w, x = op.inputs[1], op.inputs[2]
    ws = b.model.tensors[w].shape
    o = op.options
    stride = (int(o.get("strideH", 1)), int(o.get("strideW", 1)))
    bias = len(op.inputs) > 3 and op.inputs[3] >= 0
    b.emit(op, OpKind.CONV_TRANSPOSE2D, ConvTransposeAttrs(ws[3], ws[0], (ws[1], ws[2]), stride, bias=bias), [x])


def _fully_connected(b: _Builder, op: TfliteOp) -> None:
    ws = b.model.tensors[op.inputs[1]].shape
    bias = len(op.inputs) > 2 and op.inputs[2] >= 0
    if op.inputs[0] in b.nhwc and op.outputs[0] in b.nhwc:  # over the channels of an NHWC tensor: a 1x1 conv
        b.emit(op, OpKind.CONV2D, ConvAttrs(ws[1], ws[0], (1, 1), bias=bias), [op.inputs[0]])
        return
    x = op.inputs[0]
    shape, out = b.shape(x), b.shape(op.outputs[0])
    if shape[:-1] != out[:-1] and x in b.ref:  # the layer flattens its input first (keep_num_dims false)
        flat = (math.prod(shape) // ws[1], ws[1])
        name = f"{op.type.lower()}_{op.index}.flatten"
        node = Node(name, OpKind.RESHAPE, ReshapeAttrs(flat), (b.ref[x],), (shape,), (flat,),
                    _DTYPES.get(b.model.tensors[x].dtype, DType.FLOAT32), f"{op.type}:flatten")
        b.nodes.append(node)
        b.emit(op, OpKind.LINEAR, LinearAttrs(ws[1], ws[0], bias), [x], input_refs=[Ref(name)], input_shapes=[flat])
        return
    b.emit(op, OpKind.LINEAR, LinearAttrs(ws[1], ws[0], bias), [x])


def _batch_matmul(b: _Builder, op: TfliteOp) -> None:
    xs = b.model.tensors[op.inputs[0]].shape
    contraction = xs[-2] if op.options.get("adjX") else xs[-1]
    b.emit(op, OpKind.MATMUL, MatMulAttrs(contraction), [t for t in op.inputs if t in b.ref])


def _eltwise(b: _Builder, op: TfliteOp, eltwise: EltwiseOp | None = None) -> None:
    nhwc = op.outputs[0] in b.nhwc and len(b.model.tensors[op.outputs[0]].shape) == 4

    def broadcast(t: int) -> Shape | None:
        """The NCHW shape an operand of lower rank than an NHWC output broadcasts as (it aligns with the output's
        trailing NHWC axes: padded to 4-D with leading ones, then turned to NCHW), or None for any other."""
        shape = b.model.tensors[t].shape
        if not nhwc or t in b.nhwc or len(shape) >= 4:
            return None
        return tuple(((1,) * (4 - len(shape)) + tuple(shape))[i] for i in _NHWC_TO_NCHW)

    consts = [t for t in op.inputs if b.model.tensors[t].constant]
    acts = b.activation_inputs(op)
    if not acts and len(consts) == 2:  # of two constants the converter did not fold: the first as a constant node
        name = f"{op.type.lower()}_{op.index}.const"
        b.nodes.append(Node(name, OpKind.CONSTANT, ConstantAttrs(), (), (), (b.shape(consts[0]),),
                            _DTYPES.get(b.model.tensors[consts[0]].dtype, DType.FLOAT32), f"{op.type}:const"))
        b.ref[consts[0]] = Ref(name)
        acts, consts = consts[:1], consts[1:]
    const_shape = b.shape(consts[0]) if consts else None
    if const_shape is not None and len(const_shape) == 4 and op.outputs[0] in b.nhwc:
        const_shape = tuple(const_shape[i] for i in _NHWC_TO_NCHW)  # a per-channel constant of an NHWC operand
    value = b.model.tensors[consts[0]].value if consts else None
    scalar = value[0] if value is not None and len(value) == 1 else None
    ins = b.computed(acts)
    refs, shapes = [b.ref[t] for t in ins], [b.shape(t) for t in ins]
    for k, t in enumerate(ins):  # the IR broadcasts NCHW: a reshape to the shape the operand broadcasts as
        shape = broadcast(t)
        if shape is not None:
            name = f"{op.type.lower()}_{op.index}.broadcast{k}"
            b.nodes.append(Node(name, OpKind.RESHAPE, ReshapeAttrs(shape), (refs[k],), (shapes[k],), (shape,),
                                _DTYPES.get(b.model.tensors[t].dtype, DType.FLOAT32), f"{op.type}:broadcast"))
            refs[k], shapes[k] = Ref(name), shape
    b.emit(op, OpKind.ELTWISE, EltwiseAttrs(eltwise or _ELTWISE[op.type], const_shape, scalar), ins, input_refs=refs,
           input_shapes=shapes)


def _squared_difference(b: _Builder, op: TfliteOp) -> None:
    """``(x - y)²`` (a LayerNorm's variance): the subtraction, then its square as a ``.act`` node joined to it,
    as a fused activation is (source ``SQUARED_DIFFERENCE:fused``)."""
    _eltwise(b, op, EltwiseOp.SUB)
    b.act(op, b.nodes[-1], _SQUARE)


def _unary(b: _Builder, op: TfliteOp) -> None:
    if op.type == "SQUARE":
        b.emit(op, OpKind.ACTIVATION, _SQUARE, [op.inputs[0]])
        return
    alpha = float(op.options.get("alpha", 0.0))
    b.emit(op, OpKind.ACTIVATION, ActivationAttrs(_UNARY[op.type], alpha=alpha), [op.inputs[0]])


def _convert(b: _Builder, op: TfliteOp) -> None:
    source = b.model.tensors[op.inputs[0]].dtype
    if source not in _DTYPES:
        raise _NotModelled(f"conversion from {source}")
    b.emit(op, OpKind.CONVERT, ConvertAttrs(_DTYPES[source]), [op.inputs[0]])


def _pool(b: _Builder, op: TfliteOp) -> None:
    kernel = (int(op.options["filterHeight"]), int(op.options["filterWidth"]))
    stride, _, padding = _window(b, op, kernel)
    mode = PoolMode.MAX if op.type == "MAX_POOL_2D" else PoolMode.AVG
    b.emit(op, OpKind.POOL2D, PoolAttrs(mode, kernel, stride, padding, count_include_pad=False), [op.inputs[0]])


#: The body of a ``STABLEHLO_REDUCE_WINDOW`` -> the pooling it computes, with its initial value.
_WINDOW_BODIES = {"ADD": (PoolMode.SUM, 0.0), "STABLEHLO_ADD": (PoolMode.SUM, 0.0),
                  "MAXIMUM": (PoolMode.MAX, -math.inf), "STABLEHLO_MAXIMUM": (PoolMode.MAX, -math.inf)}


def _reduce_window(b: _Builder, op: TfliteOp) -> None:
    """A 2-D sum or max over windows of a 4-D tensor (StableHLO ``reduce_window``): a pooling with its padding.

    An average pooling that does not count its padding is written as the sum of the input's windows divided by
    the sum of the same windows over a constant of ones (1, H, W, 1); that constant is a ``constant`` node."""
    o = op.options
    axes = _window_axes(op)
    body = tuple(o.get("body") or ())
    if axes is None or len(body) != 1 or body[0] not in _WINDOW_BODIES:
        raise _NotModelled("only a sum or a maximum over 2-D windows of a 4-D tensor is modelled")
    if any(d != 1 for d in o.get("baseDilations") or ()):
        raise _NotModelled("a reduce window with base dilations is not modelled")
    mode, init = _WINDOW_BODIES[body[0]]
    if b.model.tensors[op.inputs[1]].value not in ((init,), None):
        raise _NotModelled(f"the reduce window starts from {b.model.tensors[op.inputs[1]].value}, not {init}")
    h, w = axes
    dims, strides, pads = o["windowDimensions"], o["windowStrides"], o["padding"]
    dilations = list(o.get("windowDilations") or (1, 1, 1, 1))
    attrs = PoolAttrs(mode, (int(dims[h]), int(dims[w])), (int(strides[h]), int(strides[w])),
                      (int(pads[2 * h]), int(pads[2 * w]), int(pads[2 * h + 1]), int(pads[2 * w + 1])),
                      (int(dilations[h]), int(dilations[w])))
    x = op.inputs[0]
    if b.model.tensors[x].constant and x not in b.ref:  # the ones of an average's counts
        shape = b.model.tensors[x].shape
        if axes == (1, 2):
            shape = tuple(shape[i] for i in _NHWC_TO_NCHW)
        name = f"{op.type.lower()}_{op.index}.const"
        b.nodes.append(Node(name, OpKind.CONSTANT, ConstantAttrs(), (), (), (shape,),
                            _DTYPES.get(b.model.tensors[x].dtype, DType.FLOAT32), f"{op.type}:const"))
        b.emit(op, OpKind.POOL2D, attrs, [], input_refs=[Ref(name)], input_shapes=[shape])
        return
    b.emit(op, OpKind.POOL2D, attrs, [x])


def _reduce(b: _Builder, op: TfliteOp) -> None:
    x = op.inputs[0]
    axes = tuple(sorted(b.axis(x, int(a)) for a in b.const(op.inputs[1])))
    keep = bool(op.options.get("keepDims", False))
    if op.type == "MEAN" and x in b.nhwc and axes == (2, 3):
        b.emit(op, OpKind.GLOBAL_POOL, GlobalPoolAttrs(PoolMode.AVG, keep), [x])
    elif op.type == "MEAN":
        b.emit(op, OpKind.MEAN, MeanAttrs(axes, keep), [x])
    else:
        reduce_op = {"SUM": "sum", "REDUCE_MAX": "max", "REDUCE_MIN": "min", "REDUCE_PROD": "prod"}[op.type]
        b.emit(op, OpKind.REDUCE, ReduceAttrs(reduce_op, axes, keep), [x])


def _concat(b: _Builder, op: TfliteOp) -> None:
    out = op.outputs[0]
    for k, t in enumerate(op.inputs):  # a constant part (a ViT's class token): a constant node of its own
        if t >= 0 and b.model.tensors[t].constant and t not in b.ref:
            name = f"{op.type.lower()}_{op.index}.const{k}"
            b.nodes.append(Node(name, OpKind.CONSTANT, ConstantAttrs(), (), (), (b.shape(t),),
                                _DTYPES.get(b.model.tensors[t].dtype, DType.FLOAT32), f"{op.type}:const"))
            b.ref[t] = Ref(name)
    b.emit(op, OpKind.CONCAT, AxisAttrs(b.axis(out, int(op.options.get("axis", 0)))),
           [t for t in op.inputs if t >= 0])


def _slice(b: _Builder, op: TfliteOp) -> None:
    x = op.inputs[0]
    shape_in, shape_out = b.model.tensors[x].shape, b.model.tensors[op.outputs[0]].shape
    begin = [int(v) for v in b.const(op.inputs[1])]
    changed = [i for i, (n, m) in enumerate(zip(shape_in, shape_out, strict=False)) if n != m] or [0]
    axis = changed[0]
    step = 1
    if op.type == "STRIDED_SLICE" and len(op.inputs) > 3:
        step = int(b.const(op.inputs[3])[axis])
    start = begin[axis] % shape_in[axis] if shape_in[axis] else 0
    end = start + shape_out[axis] * step if axis < len(shape_out) else start + 1
    b.emit(op, OpKind.SLICE, SliceAttrs(b.axis(x, axis), start, end, step), [x])


def _split(b: _Builder, op: TfliteOp) -> None:
    x = op.inputs[1] if op.type == "SPLIT" else op.inputs[0]
    axis_t = op.inputs[0] if op.type == "SPLIT" else op.inputs[2]
    axis = int(b.const(axis_t)[0])
    sizes = tuple(b.model.tensors[t].shape[axis] for t in op.outputs)
    b.emit(op, OpKind.SPLIT, SplitAttrs(b.axis(x, axis), sizes), [x])


def _reshape(b: _Builder, op: TfliteOp) -> None:
    b.emit(op, OpKind.RESHAPE, ReshapeAttrs(b.shape(op.outputs[0])), [op.inputs[0]])


def _transpose(b: _Builder, op: TfliteOp) -> None:
    b.emit(op, OpKind.PERMUTE, PermuteAttrs(tuple(int(v) for v in b.const(op.inputs[1]))), [op.inputs[0]])


def _pad(b: _Builder, op: TfliteOp) -> None:
    x = op.inputs[0]
    flat = [int(v) for v in b.const(op.inputs[1])]
    pads = [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]
    if x in b.nhwc and len(pads) == 4:
        pads = [pads[i] for i in _NHWC_TO_NCHW]
    value = 0.0
    if op.type == "PADV2" and len(op.inputs) > 2:
        value = (b.model.tensors[op.inputs[2]].value or (0.0,))[0]
    mode = "reflect" if op.type == "MIRROR_PAD" and op.options.get("mode", 0) == 0 else (
        "symmetric" if op.type == "MIRROR_PAD" else "constant")
    b.emit(op, OpKind.PAD, PadAttrs(tuple(pads), mode, value), [x])


def _softmax(b: _Builder, op: TfliteOp) -> None:
    x = op.inputs[0]
    b.emit(op, OpKind.SOFTMAX, AxisAttrs(b.axis(x, -1)), [x])


def _resize(b: _Builder, op: TfliteOp) -> None:
    mode = "bilinear" if op.type == "RESIZE_BILINEAR" else "nearest"
    b.emit(op, OpKind.UPSAMPLE, UpsampleAttrs(mode, bool(op.options.get("alignCorners", False))), [op.inputs[0]])


_HANDLERS: dict[str, Callable[[_Builder, TfliteOp], None]] = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "TRANSPOSE_CONV": _transpose_conv,
    "FULLY_CONNECTED": _fully_connected, "BATCH_MATMUL": _batch_matmul,
    **dict.fromkeys(_ELTWISE, _eltwise), **dict.fromkeys((*_UNARY, "SQUARE"), _unary),
    "SQUARED_DIFFERENCE": _squared_difference,
    "MAX_POOL_2D": _pool, "AVERAGE_POOL_2D": _pool,
    **dict.fromkeys(("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"), _reduce),
    "CONCATENATION": _concat, "SLICE": _slice, "STRIDED_SLICE": _slice, "SPLIT": _split, "SPLIT_V": _split,
    "RESHAPE": _reshape, "TRANSPOSE": _transpose, "PAD": _pad, "PADV2": _pad, "MIRROR_PAD": _pad,
    "SOFTMAX": _softmax, "RESIZE_BILINEAR": _resize, "RESIZE_NEAREST_NEIGHBOR": _resize,
    "STABLEHLO_REDUCE_WINDOW": _reduce_window, "QUANTIZE": _convert, "DEQUANTIZE": _convert,
}


def graph_from_tflite(path: str | os.PathLike[str], *, name: str | None = None, opaque: bool = False) -> Graph:
    """The IR graph of a ``.tflite`` model's main subgraph.

    Parameters
    ----------
    path
        The ``.tflite`` file.
    name
        The graph's name (default: the path).
    opaque
        Keep an operator edgeplan does not know as an explicit ``opaque`` node instead of raising.

    Returns
    -------
    Graph
        One node per model input and per operator (``{type}_{index}``, e.g. ``conv_2d_3``, the index being the
        operator's position in the file), plus a node ``{type}_{index}.act`` for a fused activation and a reshape
        ``{type}_{index}.flatten`` before a fully connected layer that flattens its input (source
        ``{type}:fused``, ``{type}:flatten``; a ``SQUARED_DIFFERENCE`` is a subtraction with its square as such a
        ``.act`` node), and a reshape ``{type}_{index}.broadcast{k}`` of an element-wise
        operand of lower rank than its NHWC output, to the NCHW shape it broadcasts as (source ``{type}:broadcast``; a
        view of its shape for costing, not of its data order);
        a zero padding before a convolution is that convolution's padding
        (:func:`folded_pads`), as in PyTorch (source ``{type}:pad``).

    Raises
    ------
    UnsupportedOperatorError
        For an operator (or setting) edgeplan does not model, unless ``opaque``.
    """
    model = read_tflite(path)
    b = _Builder(model, opaque)
    for k, t in enumerate(model.inputs):
        tensor = model.tensors[t]
        node = Node(tensor.name or f"input_{k}", OpKind.INPUT, InputAttrs(k), (), (), (b.shape(t),),
                    _DTYPES.get(tensor.dtype, DType.FLOAT32), "input")
        b.nodes.append(node)
        b.ref[t] = Ref(node.name)
    for op in model.ops:
        if op.index in b.folded:
            continue
        handler = _HANDLERS.get(op.type)
        try:
            if handler is None:
                raise _NotModelled("")
            handler(b, op)
        except _NotModelled as e:
            b.unsupported(op, str(e))
    outputs = tuple(b.ref[t] for t in model.outputs if t in b.ref)
    return Graph(name or str(path), tuple(b.nodes), outputs).validate()
