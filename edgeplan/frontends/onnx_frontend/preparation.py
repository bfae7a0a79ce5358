"""Preparing an ONNX graph for conversion: static input shapes, constant folding and shape inference.

Shape inference and the folding of constant sub-graphs alternate until nothing changes.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.onnx_frontend.loading import _DEFAULT_DOMAINS, _attrs, _ints
from edgeplan.ir import Shape

if TYPE_CHECKING:
    import numpy as np
    import onnx

log = logging.getLogger(__name__)

_MAX_ROUNDS = 64
#: Constants up to this many elements are given to shape inference with their values; larger ones (weights) only
#: with their shapes, which keeps inference fast and below protobuf's 2 GB limit.
_INFERENCE_VALUE_LIMIT = 4096


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
