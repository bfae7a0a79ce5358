"""ONNX frontend: an ``.onnx`` file (or a loaded ``onnx.ModelProto``) becomes a :class:`~edgeplan.ir.Graph`.

The model is loaded and checked, its dynamic dimensions are fixed (to 1, or to ``input_shapes``), and ONNX shape
inference gives every value a static shape. Constant sub-graphs (``Constant`` nodes, ``Shape -> Gather -> Concat``
chains, ``If`` on a constant condition, anything else whose inputs are all constant) are evaluated with the ONNX
reference evaluator and become constants, alternating with shape inference until nothing changes. Each remaining
ONNX node is then mapped to IR nodes by a small handler keyed by its ``op_type``:

=================================================  ==============================================================
ONNX                                               IR
=================================================  ==============================================================
Conv (1-D, 2-D), ConvTranspose (2-D)               ``conv2d``, ``conv_transpose2d`` (auto_pad, pads, groups, bias)
Gemm, MatMul with a constant 2-D weight            ``linear`` (MatMul + Add of a constant bias fuse into one)
MatMul of two activations (or constant @ x)        ``matmul`` (``contraction`` = K)
BatchNormalization, LayerNormalization             ``batch_norm``, ``layer_norm``
GroupNormalization, InstanceNormalization          ``group_norm``
Relu, Clip, HardSwish, HardSigmoid, Sigmoid, Tanh  ``activation`` (Clip 0..6 is relu6, else clip with its bounds)
LeakyRelu, Elu, Gelu, Softplus, Mish, Swish        ``activation``
Exp, Log, Sqrt, Abs, Neg, Reciprocal, Erf, Pow     ``activation`` (Pow needs a constant scalar exponent)
MaxPool, AveragePool (1-D, 2-D)                    ``pool2d`` (1-D: the 2-D one between an unsqueeze and a squeeze)
GlobalAveragePool, GlobalMaxPool                   ``global_pool``
Add, Sub, Mul, Div                                 ``eltwise`` (a constant operand is recorded as ``const_shape``)
Concat, Split, Slice                               ``concat``, ``split``, ``slice`` (one node per sliced axis)
Gather of constant indices                         ``slice`` (a scalar index squeezes the axis)
Flatten, Reshape, Squeeze, Unsqueeze, Transpose    ``flatten`` / ``reshape``, ``permute``
Pad, ReduceMean, ReduceSum/Max/Min/L2/Prod         ``pad``, ``mean``, ``reduce``
Softmax, LogSoftmax                                ``softmax``
Resize, Upsample, Dropout, LRN                     ``upsample``, ``dropout``, ``lrn``
Expand                                             ``expand`` (elided when the shape does not change)
Identity, Cast, CastLike                           elided (the output is the input)
=================================================  ==============================================================

A constant that an operator takes as a tensor (a concatenated class token, a constant first matmul operand, a
constant that broadcasts an activation to a larger shape) becomes a ``constant`` node. Any other operator, or a
variant the IR cannot express (a 3-D convolution, a negative slice step, a weight computed at run time, ...),
raises :class:`~edgeplan.errors.UnsupportedOperatorError` naming the operator and the node, or becomes an explicit
``opaque`` node with ``opaque=True``; nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping

from edgeplan.frontends.onnx_frontend.converter import Handler, _Converter
from edgeplan.frontends.onnx_frontend.layer_handlers import (
    _ACTIVATIONS,
    _activation,
    _clip,
    _conv,
    _conv_transpose,
    _gemm,
    _global_pool,
    _matmul,
    _norm,
    _pool,
    _pow,
)
from edgeplan.frontends.onnx_frontend.loading import PathOrModel, _load
from edgeplan.frontends.onnx_frontend.preparation import _prepare
from edgeplan.frontends.onnx_frontend.tensor_handlers import (
    _ELTWISE,
    _REDUCTIONS,
    _concat,
    _dropout,
    _eltwise,
    _expand,
    _flatten,
    _gather,
    _identity,
    _lrn,
    _pad,
    _reduce,
    _reshape,
    _resize,
    _slice,
    _softmax,
    _split,
    _transpose,
)
from edgeplan.ir import Graph, OpKind
from edgeplan.ir.ops import PoolMode

__all__ = ["SUPPORTED_OPS", "graph_from_onnx"]

#: The handler of each ONNX operator (default domain), keyed by ``op_type``.
_HANDLERS: dict[str, Handler] = {
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "BatchNormalization": _norm(OpKind.BATCH_NORM),
    "LayerNormalization": _norm(OpKind.LAYER_NORM),
    "GroupNormalization": _norm(OpKind.GROUP_NORM),
    "InstanceNormalization": _norm(OpKind.GROUP_NORM),
    **{op: _activation for op in _ACTIVATIONS},
    "Clip": _clip,
    "Pow": _pow,
    "MaxPool": _pool(PoolMode.MAX),
    "AveragePool": _pool(PoolMode.AVG),
    "GlobalAveragePool": _global_pool(PoolMode.AVG),
    "GlobalMaxPool": _global_pool(PoolMode.MAX),
    **{op: _eltwise for op in _ELTWISE},
    "Concat": _concat,
    "Split": _split,
    "Slice": _slice,
    "Gather": _gather,
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Squeeze": _reshape,
    "Unsqueeze": _reshape,
    "Transpose": _transpose,
    "Pad": _pad,
    "ReduceMean": _reduce,
    **{op: _reduce for op in _REDUCTIONS},
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "Resize": _resize,
    "Upsample": _resize,
    "Dropout": _dropout,
    "LRN": _lrn,
    "Expand": _expand,
    "Identity": _identity,
    "Cast": _identity,
    "CastLike": _identity,
}

#: The ONNX operators (default domain) the frontend maps to IR nodes; any other one is unsupported or opaque.
SUPPORTED_OPS: frozenset[str] = frozenset(_HANDLERS)


def graph_from_onnx(
    path_or_model: PathOrModel,
    name: str | None = None,
    opaque: bool = False,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> Graph:
    """Build the IR graph of an ONNX model.

    Parameters
    ----------
    path_or_model
        Path of an ``.onnx`` file (external data next to it is loaded), or an ``onnx.ModelProto``.
    name
        Name of the graph; the file name (or the ONNX graph name) by default.
    opaque
        Keep operators the IR does not model as explicit ``opaque`` nodes instead of raising.
    input_shapes
        Static shapes of graph inputs by name; other dynamic dimensions (a batch ``N``) become 1.

    Returns
    -------
    Graph
        A validated graph whose nodes are named after the ONNX nodes and whose ``source`` is the ONNX op type.

    Raises
    ------
    InvalidInputError
        The file is missing or not a valid ONNX model, ``input_shapes`` names no input, or a value's shape
        cannot be inferred.
    UnsupportedOperatorError
        An operator the IR does not model, when ``opaque`` is false.
    """
    model, default_name = _load(path_or_model)
    prepared = _prepare(model, dict(input_shapes or {}))
    return _Converter(prepared, opaque, _HANDLERS).run(name or default_name).validate()
