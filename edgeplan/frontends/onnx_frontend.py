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

import logging
import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.ir import DType, Graph, Node, OpKind, Ref, Shape
from edgeplan.ir.ops import (
    NO_ATTRS,
    Activation,
    ActivationAttrs,
    Attrs,
    AxisAttrs,
    ConstantAttrs,
    ConvAttrs,
    ConvTransposeAttrs,
    DropoutAttrs,
    EltwiseAttrs,
    EltwiseOp,
    FlattenAttrs,
    GlobalPoolAttrs,
    InputAttrs,
    LinearAttrs,
    LRNAttrs,
    MatMulAttrs,
    MeanAttrs,
    NormAttrs,
    OpaqueAttrs,
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

if TYPE_CHECKING:
    import numpy as np
    import onnx

__all__ = ["SUPPORTED_OPS", "graph_from_onnx"]

log = logging.getLogger(__name__)

PathOrModel = Union[str, "os.PathLike[str]", "onnx.ModelProto"]

#: ONNX ``TensorProto.DataType`` codes (fixed by the ONNX protobuf schema) of the element types the IR models.
_DTYPES: dict[int, DType] = {
    1: DType.FLOAT32,
    2: DType.UINT8,
    3: DType.INT8,
    6: DType.INT32,
    7: DType.INT64,
    9: DType.BOOL,
    10: DType.FLOAT16,
    11: DType.FLOAT64,
    16: DType.BFLOAT16,
}
_DEFAULT_DOMAINS = ("", "ai.onnx")
_MAX_ROUNDS = 64
#: Constants up to this many elements are given to shape inference with their values; larger ones (weights) only
#: with their shapes, which keeps inference fast and below protobuf's 2 GB limit.
_INFERENCE_VALUE_LIMIT = 4096


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
    return _Converter(prepared, opaque).run(name or default_name).validate()


# ---------------------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------------------


def _load(path_or_model: PathOrModel) -> tuple[onnx.ModelProto, str]:
    """Load and check the model; InvalidInputError for a missing, unreadable or corrupt file."""
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(path_or_model, onnx.ModelProto):
        _check_model(path_or_model, "the given ONNX model")
        return path_or_model, path_or_model.graph.name or "onnx_model"
    if not isinstance(path_or_model, (str, os.PathLike)):
        raise InvalidInputError(
            f"expected the path of an .onnx file or an onnx.ModelProto, got {type(path_or_model).__name__}"
        )
    path = Path(path_or_model)
    if not path.is_file():
        raise InvalidInputError(f"ONNX file {str(path)!r} does not exist (or is not a file); check the path")
    hint = "; re-export the model (edgeplan.frontends.onnx_export.export_onnx) or check the download"
    try:
        model = onnx.load(str(path))
    except DecodeError as e:
        raise InvalidInputError(f"{str(path)!r} is not a valid ONNX model (protobuf decoding failed: {e}){hint}") from e
    except onnx.checker.ValidationError as e:
        raise InvalidInputError(f"{str(path)!r}: cannot load its external data ({e}){hint}") from e
    except OSError as e:
        raise InvalidInputError(f"{str(path)!r} cannot be read: {e}") from e
    _check_model(model, repr(str(path)), hint, path)
    return model, path.name


def _check_model(model: onnx.ModelProto, what: str, hint: str = "", path: Path | None = None) -> None:
    """Run the ONNX checker (on the file when there is one: faster, and fine beyond protobuf's 2 GB)."""
    import onnx

    try:
        onnx.checker.check_model(str(path) if path is not None else model)
    except onnx.checker.ValidationError as e:
        raise InvalidInputError(f"{what} is not a valid ONNX model: {e}{hint}") from e
    except ValueError as e:  # a ModelProto over 2 GB cannot be checked in memory
        raise InvalidInputError(f"{what} cannot be checked in memory ({e}); pass the path of the file") from e
    if not model.graph.output:
        raise InvalidInputError(f"{what} is not a valid ONNX model: its graph has no outputs{hint}")


# ---------------------------------------------------------------------------------------------------------------
# Preparation: static input shapes, constant folding and shape inference
# ---------------------------------------------------------------------------------------------------------------

#: (ONNX element type, dims with None where unknown, or None when even the rank is unknown)
_ValueType = tuple[int, tuple[int | None, ...] | None]


class _Constants:
    """Constant tensors by value name: initializers (converted lazily) and folded values."""

    def __init__(self, protos: Iterable[onnx.TensorProto]) -> None:
        self.protos: dict[str, onnx.TensorProto] = {p.name: p for p in protos}
        self.arrays: dict[str, np.ndarray] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.arrays or name in self.protos

    def names(self) -> list[str]:
        """All constant names."""
        return list(self.protos) + [n for n in self.arrays if n not in self.protos]

    def array(self, name: str) -> np.ndarray:
        """The value of constant ``name``."""
        if name not in self.arrays:
            from onnx import numpy_helper

            self.arrays[name] = numpy_helper.to_array(self.protos[name])
        return self.arrays[name]

    def shape(self, name: str) -> Shape:
        """The shape of constant ``name``, without converting an initializer."""
        if name in self.arrays:
            return tuple(int(d) for d in self.arrays[name].shape)
        return tuple(int(d) for d in self.protos[name].dims)

    def tensor(self, name: str) -> onnx.TensorProto:
        """Constant ``name`` as a TensorProto."""
        if name in self.protos:
            return self.protos[name]
        from onnx import numpy_helper

        return numpy_helper.from_array(self.arrays[name], name)

    def add(self, name: str, value: np.ndarray) -> None:
        """Record a folded value."""
        self.arrays[name] = value
        self.protos.pop(name, None)


@dataclass
class _Prepared:
    """A model ready for conversion: remaining nodes, constants and the static type of every value."""

    model: onnx.ModelProto
    nodes: list[onnx.NodeProto]
    consts: _Constants
    types: dict[str, _ValueType]
    inputs: list[str]
    outputs: list[str]
    inference_problem: str = ""
    opsets: dict[str, int] = field(default_factory=dict)
    pool_fixes: dict[str, onnx.NodeProto] = field(default_factory=dict)
    hints: dict[str, _ValueType] = field(default_factory=dict)


def _prepare(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> _Prepared:
    """Inline local functions, fix the inputs' shapes and fold constants, alternating with shape inference."""
    if model.functions:
        import onnx.inliner

        model = onnx.inliner.inline_local_functions(model)
    consts = _Constants(model.graph.initializer)
    inputs = _static_inputs(model.graph, consts, input_shapes)
    prep = _Prepared(
        model=model,
        nodes=list(model.graph.node),
        consts=consts,
        types={},
        inputs=[vi.name for vi in inputs],
        outputs=[vi.name for vi in model.graph.output],
        opsets={o.domain or "": o.version for o in model.opset_import},
    )
    _infer(prep, inputs)
    for _ in range(_MAX_ROUNDS):
        # a pool's fix changes every shape after it, so it is re-inferred before anything else is folded
        if not (_mark_floor_pool(prep) or _hint_same_shape(prep) or _fold(prep)):
            return prep
        _infer(prep, inputs)
    log.warning("%s: still folding after %d rounds of folding and shape inference", model.graph.name, _MAX_ROUNDS)
    return prep


def _static_inputs(
    graph: onnx.GraphProto, consts: _Constants, input_shapes: dict[str, tuple[int, ...]]
) -> list[onnx.ValueInfoProto]:
    """The graph inputs (initializers excluded) with static shapes: from ``input_shapes``, else dynamic dims -> 1."""
    from onnx import helper

    real = [vi for vi in graph.input if vi.name not in consts]
    names = [vi.name for vi in real]
    unknown = sorted(set(input_shapes) - set(names))
    if unknown:
        raise InvalidInputError(f"input_shapes names {unknown}, which are not graph inputs; the inputs are {names}")
    fixed = []
    for vi in real:
        if not vi.type.HasField("tensor_type"):
            raise InvalidInputError(f"graph input {vi.name!r} is not a tensor; edgeplan models tensor inputs only")
        tt = vi.type.tensor_type
        given = input_shapes.get(vi.name)
        if given is not None:
            dims = _checked_shape(vi.name, given, len(tt.shape.dim) if tt.HasField("shape") else None)
        elif not tt.HasField("shape"):
            raise InvalidInputError(
                f"graph input {vi.name!r} has no shape in the file; pass input_shapes={{{vi.name!r}: (1, ...)}}"
            )
        else:
            dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim)
        fixed.append(helper.make_tensor_value_info(vi.name, tt.elem_type, dims))
    return fixed


def _checked_shape(name: str, shape: Sequence[int], rank: int | None) -> tuple[int, ...]:
    dims = tuple(shape)
    if not dims or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in dims):
        raise InvalidInputError(f"input_shapes[{name!r}] = {shape!r} must be a tuple of positive ints")
    if rank is not None and rank != len(dims):
        raise InvalidInputError(f"input_shapes[{name!r}] = {dims} has rank {len(dims)}, the model's input has {rank}")
    return dims


def _inference_model(prep: _Prepared, inputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    """The remaining graph with small constants as initializers and large ones as typed inputs."""
    from onnx import helper

    small, large = [], []
    for name in prep.consts.names():
        shape = prep.consts.shape(name)
        if math.prod(shape) <= _INFERENCE_VALUE_LIMIT:
            small.append(prep.consts.tensor(name))
        else:
            large.append(helper.make_tensor_value_info(name, _const_elem_type(prep.consts, name), shape))
    outputs = [_untyped_shape(vi) for vi in prep.model.graph.output]
    nodes = [prep.pool_fixes.get(n.output[0], n) for n in prep.nodes]
    hints = [helper.make_tensor_value_info(name, elem, dims) for name, (elem, dims) in prep.hints.items()]
    graph = helper.make_graph(nodes, prep.model.graph.name or "g", inputs + large, outputs, small, value_info=hints)
    return helper.make_model(graph, opset_imports=prep.model.opset_import, ir_version=prep.model.ir_version)


def _mark_floor_pool(prep: _Prepared) -> bool:
    """Fix the first ceil-mode pool whose last window along some axis would start in the right padding.

    The ONNX spec (and onnxruntime, and PyTorch) drop such a window, but ONNX shape inference (onnx 1.23) does
    not. Inference is given an equivalent-in-shape node instead: floor mode, with extra end padding on the axes
    that keep their last ceil-mode window. True if a pool was fixed (inference must run again).
    """
    for node in prep.nodes:
        if node.op_type in ("MaxPool", "AveragePool") and node.output[0] not in prep.pool_fixes:
            dims = prep.types.get(node.input[0], (0, None))[1]
            if dims is None or None in dims:
                continue
            fixed = _pool_fix(node, [int(d or 0) for d in dims[2:]])
            if fixed is not None:
                prep.pool_fixes[node.output[0]] = fixed
                return True
    return False


def _pool_fix(node: onnx.NodeProto, spatial: list[int]) -> onnx.NodeProto | None:
    """The floor-mode stand-in of a ceil-mode pool that drops a window, or None when it drops none."""
    from onnx import helper

    a = _attrs(node)
    if not int(a.get("ceil_mode", 0)) or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return None
    n = len(spatial)
    pads = _ints(a.get("pads", [0] * 2 * n)) if a.get("auto_pad", "NOTSET") == "NOTSET" else [0] * 2 * n
    kernel, strides = _ints(a["kernel_shape"]), _ints(a.get("strides", [1] * n))
    dilations = _ints(a.get("dilations", [1] * n))
    dropped = False
    for i, size in enumerate(spatial):
        span = size + pads[i] + pads[i + n] - dilations[i] * (kernel[i] - 1) - 1
        if span % strides[i] == 0:
            continue
        if -(-span // strides[i]) * strides[i] >= size + pads[i]:
            dropped = True  # floor mode gives the size without the dropped window
        else:
            pads[i + n] += strides[i] - span % strides[i]  # floor mode over a longer span gives the ceil size
    if not dropped:
        return None
    attrs = {**a, "ceil_mode": 0, "auto_pad": "NOTSET", "pads": pads}
    return helper.make_node(node.op_type, list(node.input), list(node.output), name=node.name, **attrs)


#: Operators whose (first) output has the shape and element type of their first input.
_SAME_SHAPE_OPS = frozenset(
    {"BatchNormalization", "LayerNormalization", "GroupNormalization", "InstanceNormalization", "LRN", "Dropout",
     "Softmax", "LogSoftmax", "Relu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "LeakyRelu", "Elu", "Gelu",
     "Softplus", "Mish", "Swish", "Clip", "Erf", "Identity"}
)


def _hint_same_shape(prep: _Prepared) -> bool:
    """Give shape inference the output type of shape-preserving ops it left unknown; True if any hint is new.

    onnx 1.23 infers nothing for some function ops (``GroupNormalization``), and then nothing downstream either.
    """
    known = {**prep.types, **prep.hints}
    new = False
    for node in prep.nodes:
        if node.op_type not in _SAME_SHAPE_OPS or node.domain not in _DEFAULT_DOMAINS or not node.output[0]:
            continue
        source, target = known.get(node.input[0]), known.get(node.output[0])
        if _static(source) and not _static(target) and source is not None:
            prep.hints[node.output[0]] = known[node.output[0]] = source
            new = True
    return new


def _static(value_type: _ValueType | None) -> bool:
    return value_type is not None and value_type[0] != 0 and value_type[1] is not None and None not in value_type[1]


def _drops_last_window(a: dict[str, Any], dims: tuple[int | None, ...]) -> bool:
    if not int(a.get("ceil_mode", 0)) or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return False
    spatial = [int(d or 0) for d in dims[2:]]
    n = len(spatial)
    pads = _ints(a.get("pads", [0] * 2 * n)) if a.get("auto_pad", "NOTSET") == "NOTSET" else [0] * 2 * n
    kernel, strides = _ints(a["kernel_shape"]), _ints(a.get("strides", [1] * n))
    dilations = _ints(a.get("dilations", [1] * n))
    for i, size in enumerate(spatial):
        span = size + pads[i] + pads[i + n] - dilations[i] * (kernel[i] - 1) - 1
        last_start = -(-span // strides[i]) * strides[i]
        if span % strides[i] and last_start >= size + pads[i]:
            return True
    return False


def _floor_copy(node: onnx.NodeProto) -> onnx.NodeProto:
    out = type(node)()
    out.CopyFrom(node)
    for a in out.attribute:
        if a.name == "ceil_mode":
            a.i = 0
    return out


def _untyped_shape(vi: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    """A copy of a graph output without its declared shape (which may be symbolic); inference sets it."""
    out = type(vi)()
    out.CopyFrom(vi)
    if out.type.HasField("tensor_type"):
        out.type.tensor_type.ClearField("shape")
    return out


def _const_elem_type(consts: _Constants, name: str) -> int:
    if name in consts.protos:
        return int(consts.protos[name].data_type)
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(consts.arrays[name].dtype))


def _infer(prep: _Prepared, inputs: list[onnx.ValueInfoProto]) -> None:
    """Run ONNX shape inference (strict first) and record every value's element type and shape."""
    from onnx import checker, shape_inference

    model = _inference_model(prep, inputs)
    prep.inference_problem = ""
    try:
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except (shape_inference.InferenceError, checker.ValidationError) as strict_error:
        prep.inference_problem = str(strict_error).strip()
        try:
            inferred = shape_inference.infer_shapes(model, data_prop=True)
        except (shape_inference.InferenceError, checker.ValidationError) as e:
            raise InvalidInputError(f"ONNX shape inference failed on {prep.model.graph.name!r}: {e}") from e
    g = inferred.graph
    prep.types = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        value_type = _value_type(vi)
        if _static(value_type) or not _static(prep.types.get(vi.name)):
            prep.types[vi.name] = value_type
    for name, value_type in prep.hints.items():
        if not _static(prep.types.get(name)):
            prep.types[name] = value_type


def _value_type(vi: onnx.ValueInfoProto) -> _ValueType:
    if not vi.type.HasField("tensor_type"):
        return 0, None
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return tt.elem_type, None
    dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim)
    return tt.elem_type, dims


def _fold(prep: _Prepared) -> bool:
    """Replace constant nodes by their values and inline ``If`` nodes on constant conditions; True if any."""
    kept: list[onnx.NodeProto] = []
    queue = deque(prep.nodes)
    changed = False
    while queue:
        node = queue.popleft()
        branch = _constant_branch(node, prep.consts)
        if branch is not None:
            queue.extendleft(reversed(branch))
            changed = True
            continue
        values = _fold_node(node, prep)
        if values is None:
            kept.append(node)
            continue
        for name, value in values.items():
            prep.consts.add(name, value)
        changed = True
    prep.nodes = kept
    return changed


def _constant_branch(node: onnx.NodeProto, consts: _Constants) -> list[onnx.NodeProto] | None:
    """The nodes of the branch an ``If`` takes on a constant condition, ending in Identity nodes to its outputs."""
    if node.op_type != "If" or node.domain not in _DEFAULT_DOMAINS or node.input[0] not in consts:
        return None
    from onnx import helper

    which = "then_branch" if bool(consts.array(node.input[0]).all()) else "else_branch"
    branch = next(helper.get_attribute_value(a) for a in node.attribute if a.name == which)
    for init in branch.initializer:
        consts.protos[init.name] = init
    tails = [
        helper.make_node("Identity", [out.name], [target], name=f"{node.name or target}/{which}")
        for out, target in zip(branch.output, node.output, strict=False)
        if target
    ]
    return [*branch.node, *tails]


def _fold_node(node: onnx.NodeProto, prep: _Prepared) -> dict[str, np.ndarray] | None:
    """The values of ``node``'s outputs when they are constant, else None."""
    if node.domain not in _DEFAULT_DOMAINS or any(a.type in (5, 10) for a in node.attribute):  # GRAPH(S) attrs
        return None
    if node.op_type in ("Shape", "Size") and node.input[0] not in prep.consts:
        return _fold_shape(node, prep.types.get(node.input[0]))
    if not all(name in prep.consts for name in node.input if name):
        return None
    return _evaluate(node, prep)


def _fold_shape(node: onnx.NodeProto, value_type: _ValueType | None) -> dict[str, np.ndarray] | None:
    """``Shape``/``Size`` of a value whose shape inference fixed completely."""
    import numpy as np
    from onnx import helper

    if value_type is None or value_type[1] is None or any(d is None for d in value_type[1]):
        return None
    dims = [int(d) for d in value_type[1] if d is not None]
    if node.op_type == "Size":
        return {node.output[0]: np.array(math.prod(dims), dtype=np.int64)}
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    return {node.output[0]: np.array(dims[start:end], dtype=np.int64)}


def _evaluate(node: onnx.NodeProto, prep: _Prepared) -> dict[str, np.ndarray] | None:
    """Evaluate a node with constant inputs with the ONNX reference evaluator (None when it cannot)."""
    import numpy as np
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
        return {node.output[0]: numpy_helper.to_array(node.attribute[0].t)}
    feeds = {name: prep.consts.array(name) for name in node.input if name}
    try:
        results = ReferenceEvaluator(node, opsets=prep.opsets).run(None, feeds)
    except Exception:  # noqa: BLE001 - the reference evaluator can fail in any way on an op it lacks;
        return None  # the node is then kept, and converted or reported by name like any other node
    return {name: np.asarray(value) for name, value in zip(node.output, results, strict=False) if name}


# ---------------------------------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------------------------------


class _NotModelled(Exception):
    """Raised by a handler for a variant of an operator the IR cannot express; the detail says which."""


class _Converter:
    """Builds IR nodes from the prepared ONNX nodes; the context every handler receives."""

    def __init__(self, prep: _Prepared, opaque: bool) -> None:
        self.prep = prep
        self.opaque = opaque
        self.nodes: list[Node] = []
        self.names: set[str] = set()
        self.values: dict[str, Ref] = {}
        self.ref_shapes: dict[Ref, Shape] = {}
        self.unmodelled: dict[str, tuple[str, str]] = {}
        self.skip: set[int] = set()
        self.consumers: dict[str, list[int]] = {}
        for index, node in enumerate(prep.nodes):
            for name in node.input:
                self.consumers.setdefault(name, []).append(index)

    # -- driving -----------------------------------------------------------------------------------------------

    def run(self, name: str) -> Graph:
        """Convert every node and return the (not yet validated) graph."""
        for index, value in enumerate(self.prep.inputs):
            self.add(value, OpKind.INPUT, InputAttrs(index=index), (), [value], source="input")
        for index, node in enumerate(self.prep.nodes):
            if index not in self.skip:
                self.convert(node)
        return Graph(name=name, nodes=tuple(self.nodes), outputs=tuple(self._output(v) for v in self.prep.outputs))

    def convert(self, node: onnx.NodeProto) -> None:
        """Map one ONNX node with its handler; unsupported operators raise or become opaque nodes."""
        handler = _HANDLERS.get(node.op_type) if node.domain in _DEFAULT_DOMAINS else None
        try:
            if handler is None:
                raise _NotModelled("")
            handler(self, node)
        except _NotModelled as e:
            self.unsupported(node, str(e))

    def unsupported(self, node: onnx.NodeProto, detail: str) -> None:
        """Raise UnsupportedOperatorError, or emit an ``opaque`` node when the converter is lenient."""
        operator = node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}::{node.op_type}"
        if not self.opaque:
            raise UnsupportedOperatorError(operator, _label(node), detail)
        inputs = [self.ref(v) for v in node.input if v and v not in self.prep.consts]
        self.emit(node, OpKind.OPAQUE, OpaqueAttrs(operator=operator), inputs, [v for v in node.output if v])

    def _output(self, value: str) -> Ref:
        return self.operand(value) if value in self.prep.consts else self._lookup(value)

    # -- values ------------------------------------------------------------------------------------------------

    def is_const(self, value: str) -> bool:
        """True when ``value`` is an initializer or a folded constant."""
        return value in self.prep.consts

    def const(self, value: str) -> np.ndarray | None:
        """The value of a constant, or None for an activation or an absent optional input."""
        return self.prep.consts.array(value) if value and value in self.prep.consts else None

    def const_shape(self, value: str) -> Shape:
        """The shape of a constant."""
        return self.prep.consts.shape(value)

    def ref(self, value: str) -> Ref:
        """The IR tensor of an activation; _NotModelled for a constant operand."""
        if value in self.prep.consts:
            raise _NotModelled(f"operand {value!r} is a constant, which this operator cannot take in the IR")
        return self._lookup(value)

    def operand(self, value: str) -> Ref:
        """The IR tensor of an activation, or of a ``constant`` node holding a constant operand."""
        if value not in self.prep.consts:
            return self._lookup(value)
        if value not in self.values:
            elem = _const_elem_type(self.prep.consts, value)
            if elem not in _DTYPES:
                raise _NotModelled(f"constant {value!r} has element type {elem}, which the IR does not model")
            shape = self.const_shape(value)
            self.add(value, OpKind.CONSTANT, ConstantAttrs(), (), [value], "Constant", [shape], _DTYPES[elem])
        return self.values[value]

    def _lookup(self, value: str) -> Ref:
        if value in self.values:
            return self.values[value]
        if value in self.unmodelled:
            op, node = self.unmodelled[value]
            detail = f"its output {value!r} is used; the IR models its main output only"
            raise UnsupportedOperatorError(op, node, detail)
        raise InvalidInputError(f"value {value!r} is used before it is produced; the ONNX graph is not sorted")

    def shape(self, value: str) -> Shape:
        """The static shape of a value; InvalidInputError naming it when inference could not fix it."""
        if value in self.prep.consts:
            return self.const_shape(value)
        dims = self.prep.types.get(value, (0, None))[1]
        if dims is None or any(d is None for d in dims):
            raise InvalidInputError(self._no_shape_message(value, dims))
        return tuple(int(d) for d in dims if d is not None)

    def _no_shape_message(self, value: str, dims: tuple[int | None, ...] | None) -> str:
        known = "unknown" if dims is None else str(tuple("?" if d is None else d for d in dims))
        msg = (
            f"the shape of ONNX value {value!r} cannot be inferred (got {known}); pass input_shapes= with the "
            f"static shape of each graph input {self.prep.inputs}"
        )
        if self.prep.inference_problem:
            msg += f" (strict shape inference reported: {self.prep.inference_problem.splitlines()[0]})"
        return msg

    def dtype(self, value: str) -> DType:
        """The element type of a value."""
        elem = self.prep.types.get(value, (0, None))[0]
        if elem not in _DTYPES:
            raise InvalidInputError(
                f"ONNX value {value!r} has element type {elem}, which edgeplan's IR does not model "
                f"(supported: {', '.join(d.value for d in DType)})"
            )
        return _DTYPES[elem]

    def consumer_nodes(self, value: str) -> list[tuple[int, onnx.NodeProto]]:
        """The nodes that read ``value``, with their indices."""
        return [(i, self.prep.nodes[i]) for i in self.consumers.get(value, [])]

    def is_graph_output(self, value: str) -> bool:
        """True when ``value`` is one of the model's outputs."""
        return value in self.prep.outputs

    # -- emitting ----------------------------------------------------------------------------------------------

    def add(
        self,
        hint: str,
        kind: OpKind,
        attrs: Attrs,
        inputs: Sequence[Ref],
        outputs: Sequence[str],
        source: str,
        output_shapes: Sequence[Shape] | None = None,
        dtype: DType | None = None,
    ) -> str:
        """Append an IR node named after ``hint`` (made unique) producing the ONNX values ``outputs``.

        ``output_shapes`` and ``dtype`` default to those of ``outputs``; an intermediate node of a chain (no ONNX
        value of its own) gives them explicitly.
        """
        shapes = tuple(output_shapes) if output_shapes is not None else tuple(self.shape(v) for v in outputs)
        if dtype is None:
            dtype = self.dtype(outputs[0]) if outputs else DType.FLOAT32
        name = self._unique(hint)
        node = Node(
            name=name,
            kind=kind,
            attrs=attrs,
            inputs=tuple(inputs),
            input_shapes=tuple(self.ref_shapes[r] for r in inputs),
            output_shapes=shapes,
            dtype=dtype,
            source=source,
        )
        self.nodes.append(node)
        for index, shape in enumerate(shapes):
            self.ref_shapes[Ref(name, index)] = shape
        for index, value in enumerate(outputs):
            self.values[value] = Ref(name, index)
        return name

    def emit(
        self,
        node: onnx.NodeProto,
        kind: OpKind,
        attrs: Attrs,
        inputs: Sequence[Ref],
        outputs: Sequence[str] | None = None,
        source: str | None = None,
    ) -> str:
        """Append the IR node of ``node`` (by default producing its first output only)."""
        outputs = list(outputs) if outputs is not None else [node.output[0]]
        for value in node.output:
            if value and value not in outputs:
                self.unmodelled[value] = (node.op_type, _label(node))
        return self.add(_label(node), kind, attrs, inputs, outputs, source or node.op_type)

    def alias(self, value: str, ref: Ref) -> None:
        """Make ``value`` another name of the IR tensor ``ref`` (elided ops)."""
        self.values[value] = ref

    def _unique(self, hint: str) -> str:
        name, k = hint, 1
        while name in self.names:
            name, k = f"{hint}_{k}", k + 1
        self.names.add(name)
        return name


def _label(node: onnx.NodeProto) -> str:
    """The ONNX node's name, or its first output's name when the node has none."""
    return node.name or (node.output[0] if node.output else node.op_type)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    from onnx import helper

    out: dict[str, Any] = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        out[a.name] = value.decode() if isinstance(value, bytes) else value
    return out


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]


def _const_ints(cv: _Converter, node: onnx.NodeProto, index: int, what: str) -> list[int] | None:
    """Optional input ``index`` as a list of ints: None when absent, _NotModelled when not constant."""
    if len(node.input) <= index or not node.input[index]:
        return None
    value = cv.const(node.input[index])
    if value is None:
        raise _NotModelled(f"its {what} ({node.input[index]!r}) are computed at run time, not constant")
    return _ints(value.reshape(-1).tolist())


def _const_float(cv: _Converter, node: onnx.NodeProto, index: int, what: str) -> float | None:
    """Optional scalar input ``index``: None when absent, _NotModelled when not constant."""
    if len(node.input) <= index or not node.input[index]:
        return None
    value = cv.const(node.input[index])
    if value is None or value.size != 1:
        raise _NotModelled(f"its {what} ({node.input[index]!r}) is not a constant scalar")
    return float(value.reshape(-1)[0])


def _spatial(cv: _Converter, node: onnx.NodeProto, value: str, what: str) -> Shape:
    """The shape of a 4-D NCHW tensor; _NotModelled for other ranks."""
    shape = cv.shape(value)
    if len(shape) != 4:
        raise _NotModelled(f"only 2-D {what} on 4-D NCHW tensors is modelled, the input has shape {shape}")
    return shape


def _pair(values: Sequence[int] | None, default: int) -> tuple[int, int]:
    if values is None:
        return default, default
    return int(values[0]), int(values[1])


def _window_pads(a: dict[str, Any], size: Shape, kernel: tuple[int, int], stride: tuple[int, int],
                 dilation: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding of a conv/pool window from ``auto_pad`` or ``pads``."""
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for axis in (0, 1):
            out = -(-size[axis] // stride[axis])
            total = max((out - 1) * stride[axis] + (kernel[axis] - 1) * dilation[axis] + 1 - size[axis], 0)
            small, large = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else large)
            end.append(large if auto == "SAME_UPPER" else small)
        return begin[0], begin[1], end[0], end[1]
    if auto == "VALID":
        return 0, 0, 0, 0
    pads = _ints(a.get("pads", [0, 0, 0, 0]))
    return pads[0], pads[1], pads[2], pads[3]


# ---------------------------------------------------------------------------------------------------------------
# Handlers: one small function per ONNX operator family
# ---------------------------------------------------------------------------------------------------------------

Handler = Callable[[_Converter, "onnx.NodeProto"], None]


def _weight_shape(cv: _Converter, node: onnx.NodeProto) -> Shape:
    if not cv.is_const(node.input[1]):
        raise _NotModelled("its weight is computed at run time; the IR models constant weights only")
    return cv.const_shape(node.input[1])


def _check_channels(node: onnx.NodeProto, have: int, expect: int, x: Shape, w: Shape) -> None:
    """InvalidInputError when an input does not fit its weight (e.g. wrong ``input_shapes``)."""
    if have != expect:
        raise InvalidInputError(
            f"ONNX node {_label(node)!r} ({node.op_type}): input of shape {x} does not fit its weight of shape {w} "
            f"({have} features where {expect} are expected); check input_shapes"
        )


def _has_input(node: onnx.NodeProto, index: int) -> bool:
    return len(node.input) > index and bool(node.input[index])


def _conv(cv: _Converter, node: onnx.NodeProto) -> None:
    if len(cv.shape(node.input[0])) == 3:
        _one_d(cv, node, OpKind.CONV2D, lambda x, a: _conv_attrs(cv, node, x, _one_d_weight(cv, node), a))
        return
    x = _spatial(cv, node, node.input[0], "convolution")
    cv.emit(node, OpKind.CONV2D, _conv_attrs(cv, node, x, _weight_shape(cv, node), _attrs(node)),
            [cv.ref(node.input[0])])


def _conv_attrs(cv: _Converter, node: onnx.NodeProto, x: Shape, w: Shape, a: dict[str, Any]) -> ConvAttrs:
    groups = int(a.get("group", 1))
    _check_channels(node, x[1], w[1] * groups, x, w)
    kernel = (w[2], w[3])
    stride, dilation = _pair(a.get("strides"), 1), _pair(a.get("dilations"), 1)
    return ConvAttrs(
        in_channels=x[1],
        out_channels=w[0],
        kernel=kernel,
        stride=stride,
        padding=_window_pads(a, x[2:], kernel, stride, dilation),
        dilation=dilation,
        groups=groups,
        bias=_has_input(node, 2),
    )


def _one_d_weight(cv: _Converter, node: onnx.NodeProto) -> Shape:
    w = _weight_shape(cv, node)
    if len(w) != 3:
        raise _NotModelled(f"a weight of shape {w} on a 3-D input")
    return (w[0], w[1], 1, w[2])


def _one_d(cv: _Converter, node: onnx.NodeProto, kind: OpKind,
           attrs_of: Callable[[Shape, dict[str, Any]], Attrs]) -> None:
    """A 1-D convolution or pooling on (N, C, L) as the 2-D one on (N, C, 1, L) between an unsqueeze and a squeeze
    (as the torch frontend writes it); ``attrs_of`` gets the 2-D input shape and the attributes made 2-D (a window
    of height 1, no padding on it). The 2-D node takes the ONNX node's name, which ONNX Runtime's kernels trace to."""
    x, out = cv.shape(node.input[0]), cv.shape(node.output[0])
    x2, out2 = (x[0], x[1], 1, x[2]), (out[0], out[1], 1, out[2])
    a = {k: ([1, *v] if k in ("kernel_shape", "strides", "dilations") else v) for k, v in _attrs(node).items()}
    if "pads" in a:
        a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    attrs = attrs_of(x2, a)
    label, dtype = _label(node), cv.dtype(node.output[0])
    for value in node.output[1:]:
        if value:
            cv.unmodelled[value] = (node.op_type, label)
    up = cv.add(f"{label}/unsqueeze", OpKind.RESHAPE, ReshapeAttrs(x2), [cv.ref(node.input[0])], [], "Unsqueeze",
                [x2], dtype)
    mid = cv.add(label, kind, attrs, [Ref(up, 0)], [], node.op_type, [out2], dtype)
    cv.add(f"{label}/squeeze", OpKind.RESHAPE, ReshapeAttrs(out), [Ref(mid, 0)], [node.output[0]], "Squeeze")


def _conv_transpose(cv: _Converter, node: onnx.NodeProto) -> None:
    x = _spatial(cv, node, node.input[0], "transposed convolution")
    w = _weight_shape(cv, node)
    a = _attrs(node)
    groups = int(a.get("group", 1))
    _check_channels(node, x[1], w[0], x, w)
    kernel = (w[2], w[3])
    stride, dilation = _pair(a.get("strides"), 1), _pair(a.get("dilations"), 1)
    out_pad = _pair(a.get("output_padding"), 0)
    y = cv.shape(node.output[0])
    if "output_shape" in a or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        padding, out_pad = _transpose_pads(a, x[2:], y[2:], kernel, stride, dilation, out_pad)
    elif a.get("auto_pad") == "VALID":
        padding = (0, 0, 0, 0)
    else:
        pads = _ints(a.get("pads", [0, 0, 0, 0]))
        padding = (pads[0], pads[1], pads[2], pads[3])
    attrs = ConvTransposeAttrs(
        in_channels=x[1],
        out_channels=w[1] * groups,
        kernel=kernel,
        stride=stride,
        padding=padding,
        output_padding=out_pad,
        dilation=dilation,
        groups=groups,
        bias=_has_input(node, 2),
    )
    cv.emit(node, OpKind.CONV_TRANSPOSE2D, attrs, [cv.ref(node.input[0])])


def _transpose_pads(a: dict[str, Any], size: Shape, out: Shape, kernel: tuple[int, int], stride: tuple[int, int],
                    dilation: tuple[int, int], out_pad: tuple[int, int]
                    ) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """Padding that yields the inferred output size (``output_shape`` or SAME auto_pad), as ONNX defines it."""
    begin, end, extra = [], [], []
    for axis in (0, 1):
        full = stride[axis] * (size[axis] - 1) + out_pad[axis] + (kernel[axis] - 1) * dilation[axis] + 1
        total = full - out[axis]
        extra.append(out_pad[axis] + max(-total, 0))
        total = max(total, 0)
        if a.get("auto_pad") == "SAME_UPPER":
            begin.append(total // 2)
            end.append(total - total // 2)
        else:
            begin.append(total - total // 2)
            end.append(total // 2)
    return (begin[0], begin[1], end[0], end[1]), (extra[0], extra[1])


def _gemm(cv: _Converter, node: onnx.NodeProto) -> None:
    a = _attrs(node)
    if int(a.get("transA", 0)):
        raise _NotModelled("transA=1 (a transposed activation operand) is not modelled")
    x, y = node.input[0], node.output[0]
    if cv.is_const(node.input[1]):
        w = cv.const_shape(node.input[1])
        _check_channels(node, cv.shape(x)[-1], w[1] if int(a.get("transB", 0)) else w[0], cv.shape(x), w)
        linear = LinearAttrs(in_features=cv.shape(x)[-1], out_features=cv.shape(y)[-1], bias=_has_input(node, 2))
        cv.emit(node, OpKind.LINEAR, linear, [cv.ref(x)])
        return
    inputs = [cv.operand(x), cv.ref(node.input[1])]
    product = MatMulAttrs(contraction=cv.shape(x)[-1])
    if not _has_input(node, 2):
        cv.emit(node, OpKind.MATMUL, product, inputs)
        return
    name = cv.add(f"{_label(node)}/matmul", OpKind.MATMUL, product, inputs, [], "Gemm", [cv.shape(y)], cv.dtype(y))
    _eltwise_emit(cv, node, EltwiseOp.ADD, Ref(name), node.input[2])


def _matmul(cv: _Converter, node: onnx.NodeProto) -> None:
    a, b = node.input[0], node.input[1]
    if cv.is_const(a) or not cv.is_const(b) or len(cv.const_shape(b)) != 2:
        # two activations; a constant that is not a 2-D weight stays a graph tensor (a ``constant`` node)
        product = MatMulAttrs(contraction=cv.shape(a)[-1])
        cv.emit(node, OpKind.MATMUL, product, [cv.operand(a), cv.operand(b)])
        return
    k, n = cv.const_shape(b)
    _check_channels(node, cv.shape(a)[-1], k, cv.shape(a), (k, n))
    bias_add = _bias_add(cv, node, n)
    if bias_add is None:
        cv.emit(node, OpKind.LINEAR, LinearAttrs(in_features=k, out_features=n, bias=False), [cv.ref(a)])
        return
    index, add = bias_add
    cv.skip.add(index)
    linear = LinearAttrs(in_features=k, out_features=n, bias=True)
    cv.emit(node, OpKind.LINEAR, linear, [cv.ref(a)], outputs=[add.output[0]], source="MatMul+Add")


def _bias_add(cv: _Converter, node: onnx.NodeProto, features: int) -> tuple[int, onnx.NodeProto] | None:
    """The Add of a constant bias that alone consumes a MatMul's output, to fuse into a linear node."""
    out = node.output[0]
    users = cv.consumer_nodes(out)
    if len(users) != 1 or cv.is_graph_output(out):
        return None
    index, add = users[0]
    if add.op_type != "Add" or add.domain not in _DEFAULT_DOMAINS or len(add.input) != 2:
        return None
    other = add.input[1] if add.input[0] == out else add.input[0]
    if other == out or not cv.is_const(other):
        return None
    bias = cv.const_shape(other)
    if math.prod(bias) != features or (bias and bias[-1] != features):
        return None
    if cv.shape(add.output[0]) != cv.shape(out):
        return None
    return index, add


def _norm(kind: OpKind) -> Handler:
    def handler(cv: _Converter, node: onnx.NodeProto) -> None:
        x = cv.shape(node.input[0])
        a = _attrs(node)
        eps = float(a.get("epsilon", 1e-5))
        if kind is OpKind.LAYER_NORM:
            axis = int(a.get("axis", -1))
            attrs = NormAttrs(channels=math.prod(x[axis % len(x):]), eps=eps, axis=axis)
        elif node.op_type == "InstanceNormalization":
            attrs = NormAttrs(channels=x[1], eps=eps, groups=x[1])
        elif node.op_type == "GroupNormalization":
            attrs = NormAttrs(channels=x[1], eps=eps, groups=int(a["num_groups"]))
        else:
            attrs = NormAttrs(channels=x[1], eps=eps)
        cv.emit(node, kind, attrs, [cv.ref(node.input[0])])

    return handler


#: Plain activations: (function, attribute holding alpha, default alpha).
_ACTIVATIONS: dict[str, tuple[Activation, str, float]] = {
    "Relu": (Activation.RELU, "", 0.0),
    "Sigmoid": (Activation.SIGMOID, "", 0.0),
    "Tanh": (Activation.TANH, "", 0.0),
    "HardSwish": (Activation.HARDSWISH, "", 0.0),
    "HardSigmoid": (Activation.HARDSIGMOID, "alpha", 0.2),
    "LeakyRelu": (Activation.LEAKY_RELU, "alpha", 0.01),
    "Elu": (Activation.ELU, "alpha", 1.0),
    "Gelu": (Activation.GELU, "", 0.0),
    "Softplus": (Activation.SOFTPLUS, "", 0.0),
    "Mish": (Activation.MISH, "", 0.0),
    "Swish": (Activation.SILU, "", 0.0),
    "Exp": (Activation.EXP, "", 0.0),
    "Log": (Activation.LOG, "", 0.0),
    "Sqrt": (Activation.SQRT, "", 0.0),
    "Abs": (Activation.ABS, "", 0.0),
    "Neg": (Activation.NEG, "", 0.0),
    "Reciprocal": (Activation.RECIPROCAL, "", 0.0),
    "Erf": (Activation.ERF, "", 0.0),
}


def _activation(cv: _Converter, node: onnx.NodeProto) -> None:
    fn, alpha_attr, default = _ACTIVATIONS[node.op_type]
    alpha = float(_attrs(node).get(alpha_attr, default)) if alpha_attr else 0.0
    cv.emit(node, OpKind.ACTIVATION, ActivationAttrs(fn=fn, alpha=alpha), [cv.ref(node.input[0])])


def _clip(cv: _Converter, node: onnx.NodeProto) -> None:
    a = _attrs(node)
    low = _const_float(cv, node, 1, "minimum")
    high = _const_float(cv, node, 2, "maximum")
    low = float(a["min"]) if low is None and "min" in a else low
    high = float(a["max"]) if high is None and "max" in a else high
    if low == 0.0 and high == 6.0:
        attrs = ActivationAttrs(fn=Activation.RELU6, low=0.0, high=6.0)
    else:
        attrs = ActivationAttrs(fn=Activation.CLIP, low=low, high=high)
    cv.emit(node, OpKind.ACTIVATION, attrs, [cv.ref(node.input[0])])


def _pow(cv: _Converter, node: onnx.NodeProto) -> None:
    exponent = _const_float(cv, node, 1, "exponent")
    if exponent is None:
        raise _NotModelled("a missing exponent")
    attrs = ActivationAttrs(fn=Activation.POW, alpha=exponent)
    cv.emit(node, OpKind.ACTIVATION, attrs, [cv.ref(node.input[0])])


def _pool(mode: PoolMode) -> Handler:
    def attrs_of(x: Shape, a: dict[str, Any]) -> PoolAttrs:
        kernel = _pair(a.get("kernel_shape"), 1)
        stride, dilation = _pair(a.get("strides"), 1), _pair(a.get("dilations"), 1)
        return PoolAttrs(
            mode=mode,
            kernel=kernel,
            stride=stride,
            padding=_window_pads(a, x[2:], kernel, stride, dilation),
            dilation=dilation,
            ceil_mode=bool(a.get("ceil_mode", 0)),
            count_include_pad=bool(a.get("count_include_pad", 0)) if mode is PoolMode.AVG else True,
        )

    def handler(cv: _Converter, node: onnx.NodeProto) -> None:
        if len(cv.shape(node.input[0])) == 3:
            _one_d(cv, node, OpKind.POOL2D, attrs_of)
            return
        x = _spatial(cv, node, node.input[0], "pooling")
        cv.emit(node, OpKind.POOL2D, attrs_of(x, _attrs(node)), [cv.ref(node.input[0])])

    return handler


def _global_pool(mode: PoolMode) -> Handler:
    def handler(cv: _Converter, node: onnx.NodeProto) -> None:
        cv.emit(node, OpKind.GLOBAL_POOL, GlobalPoolAttrs(mode=mode, keepdim=True), [cv.ref(node.input[0])])

    return handler


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
