"""ATen operators to IR nodes: the conversion of a captured ``torch.fx`` graph (see :mod:`torch_frontend`).

Values flowing through the conversion are activations (:class:`Act`, a reference to an IR node output with its
shape), constants (:class:`Const`: parameters, buffers and anything computed from them only) or plain Python
values. Every handler receives a :class:`Call` and returns an :class:`Emit` (a new IR node) or an existing value
(the operator is an alias, e.g. ``contiguous``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from edgeplan.errors import InvalidGraphError, UnsupportedOperatorError
from edgeplan.frontends import aten_handlers as h
from edgeplan.frontends.aten_values import Act, Call, Chain, Const, Emit
from edgeplan.ir import DType, Node, OpKind, Ref, Shape
from edgeplan.ir.ops import ConstantAttrs, InputAttrs, LRNAttrs, OpaqueAttrs

__all__ = ["Converter"]

_DTYPES = {
    "torch.float32": DType.FLOAT32,
    "torch.float16": DType.FLOAT16,
    "torch.bfloat16": DType.BFLOAT16,
    "torch.float64": DType.FLOAT64,
    "torch.int8": DType.INT8,
    "torch.qint8": DType.INT8,
    "torch.quint8": DType.UINT8,
    "torch.uint8": DType.UINT8,
    "torch.int32": DType.INT32,
    "torch.int64": DType.INT64,
    "torch.bool": DType.BOOL,
}

# Element-wise arithmetic whose handler returns its input for an identity (x * 1, x + 0).
_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "rsub"})

# Casts, views and copies whose handler returns their input when they change nothing (a cast to the dtype it has,
# EVA's rotary embedding's type_as; a permutation that keeps every axis, EfficientFormer-V2's; GC ViT's
# repeat_interleave of one repeat; Gemma 4's clamp to infinite bounds): eager still dispatches them.
_IDENTITY_CALLS = frozenset({"to", "type_as", "permute", "transpose", "swapaxes", "repeat_interleave", "clamp",
                             "clip", "clamp_min", "clamp_max", "hardtanh"})

# Operators that produce nothing the graph needs (runtime assertions, metadata checks).
_IGNORED = frozenset({"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size", "_assert_async"})

# Higher-order operators whose nested graph runs unchanged at inference: its nodes are inlined (Converter._inline).
_INLINED = frozenset({"wrap_with_autocast", "wrap_with_set_grad_enabled"})


@dataclass(frozen=True)
class _Nested:
    """A nested graph (a higher-order operator's body) read from the captured module."""

    graph: Any


# Modules whose ATen decomposition is collapsed back into one IR node.
_COLLAPSED_MODULES = {"LocalResponseNorm": OpKind.LRN}


def _shape_of(val: Any) -> Shape:
    return tuple(int(d) for d in val.shape)


def _meta_shapes(fx_node: Any) -> tuple[tuple[Shape, ...], DType | None]:
    val = fx_node.meta.get("val")
    if val is None:
        return (), None
    vals = val if isinstance(val, (tuple, list)) else (val,)
    shapes = tuple(_shape_of(v) if hasattr(v, "shape") else () for v in vals)
    first = next((v for v in vals if hasattr(v, "dtype")), None)
    dtype = _DTYPES.get(str(first.dtype), DType.FLOAT32) if first is not None else None
    return shapes, dtype


def _module_of(fx_node: Any) -> tuple[str, str]:
    """(path, class name) of the innermost module an fx node was traced in; ("", "") at the top level."""
    stack = fx_node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, cls = list(stack.values())[-1]
    cls_name = cls if isinstance(cls, str) else getattr(cls, "__qualname__", str(cls))
    return str(path), str(cls_name).rsplit(".", 1)[-1]


def _op_name(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return str(packet.__name__)
    return str(getattr(target, "__name__", target))


@dataclass
class Converter:
    """Converts one captured fx graph to IR nodes.

    Parameters
    ----------
    constants
        Placeholder names that are parameters, buffers or lifted constants, with their tensors.
    opaque
        Emit unknown operators as ``opaque`` nodes instead of raising.
    method
        How the graph was captured (recorded in the nodes' ``source``).

    Attributes
    ----------
    folded_ops
        The operators the IR folds away that eager PyTorch runs: on constants alone, or identities (the graph's
        ``folded_ops``).
    folded_shapes
        Their tensor inputs' and outputs' shapes, in the same order (the graph's ``folded_shapes``).
    folded_at
        For each, the number of IR nodes emitted before it (the graph's ``folded_at``).
    fused_calls
        Operators written as several IR nodes (:class:`Chain`: a 1-D convolution or pooling as a 2-D one between two
        reshapes), as (operator, node names): eager PyTorch runs each as one call (the graph's ``fused_calls``).
    """

    constants: dict[str, Any]
    opaque: bool = False
    method: str = "torch.export"
    nodes: list[Node] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    folded_ops: list[str] = field(default_factory=list)
    folded_shapes: list[tuple[tuple[Shape, ...], tuple[Shape, ...]]] = field(default_factory=list)
    folded_at: list[int] = field(default_factory=list)
    fused_calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)
    _n_inputs: int = 0

    def convert(self, fx_graph: Any) -> tuple[list[Node], list[Ref]]:
        """Convert every fx node; return the IR nodes and the graph outputs."""
        out = self._walk(fx_graph, None)
        return self.nodes, self._outputs(out)

    def _walk(self, fx_graph: Any, inline_args: list[Any] | None) -> Any:
        """Convert the nodes of ``fx_graph``; return its output argument (fx nodes). ``inline_args``: the values of
        its placeholders, for a nested graph inlined into the caller's (None: the top-level graph's inputs)."""
        groups = self._collapsed_groups(fx_graph)
        out: Any = ()
        for fx_node in fx_graph.nodes:
            if fx_node.op == "placeholder":
                if inline_args is None:
                    self._placeholder(fx_node)
                else:
                    self.values[fx_node.name] = inline_args.pop(0)
            elif fx_node.op == "get_attr":
                constant = self.constants.get(fx_node.name)
                owner = getattr(fx_graph, "owning_module", None)
                nested = getattr(getattr(owner, str(fx_node.target), None), "graph", None)
                if hasattr(constant, "shape"):
                    self.values[fx_node.name] = Const(_shape_of(constant))
                elif nested is not None:  # a higher-order operator's body (autocast, a control-flow branch)
                    self.values[fx_node.name] = _Nested(nested)
                else:
                    raise UnsupportedOperatorError(f"get_attr {fx_node.target}", fx_node.name,
                                                   "an attribute that is neither a tensor nor a nested graph")
            elif fx_node.op == "call_function":
                group = groups.get(fx_node.name)
                if group is None:
                    self.values[fx_node.name] = self._call(fx_node)
                elif fx_node is group[-1]:
                    self.values[fx_node.name] = self._collapse(group)
            elif fx_node.op == "output":
                out = fx_node.args[0]
            else:
                raise UnsupportedOperatorError(fx_node.op, fx_node.name, "only ATen-level graphs are supported")
        return out

    def _inline(self, op: str, fx_node: Any, args: tuple[Any, ...]) -> Any:
        """A higher-order operator that runs a nested graph unchanged at inference, the graph's nodes inlined: autocast
        switched off (EfficientViT's attention computes in float32 whatever the caller's autocast) and a grad mode
        (inference computes no gradients either way). Autocast switched on changes dtypes: refused."""
        if op == "wrap_with_autocast":
            enabled, rest = bool(args[2]), args[4:]
            if enabled:
                raise UnsupportedOperatorError(op, fx_node.name, f"autocast to {args[1]} inside the model changes "
                                               "its dtypes; export the model without it")
        else:
            rest = args[1:]
        nested = rest[0] if rest else None
        if not isinstance(nested, _Nested):
            raise UnsupportedOperatorError(op, fx_node.name, "no nested graph among its arguments")
        inner = replace(self, values={})  # shares the node list, names and folded or fused records
        out = inner._walk(nested.graph, list(rest[1:]))
        return inner._resolve(out)

    def _collapsed_groups(self, fx_graph: Any) -> dict[str, list[Any]]:
        by_module: dict[str, list[Any]] = {}
        for fx_node in fx_graph.nodes:
            if fx_node.op != "call_function":
                continue
            path, cls = _module_of(fx_node)
            if cls in _COLLAPSED_MODULES:
                by_module.setdefault(path, []).append(fx_node)
        return {n.name: group for group in by_module.values() for n in group}

    def _collapse(self, group: list[Any]) -> Any:
        inner = {n.name for n in group}
        sources = [a for n in group for a in n.all_input_nodes if a.name not in inner]
        x = self.values[sources[0].name]
        path, cls = _module_of(group[-1])
        shapes, _ = _meta_shapes(group[-1])
        module = _find_module_attrs(group)
        attrs = LRNAttrs(size=int(module.get("size", 5)), alpha=module.get("alpha", 1e-4),
                         beta=module.get("beta", 0.75), k=module.get("k", 1.0))
        return self._emit(Emit(_COLLAPSED_MODULES[cls], attrs, (x,)), path or group[-1].name, f"nn.{cls}", shapes)

    def _placeholder(self, fx_node: Any) -> None:
        if fx_node.name in self.constants:
            tensor = self.constants[fx_node.name]
            shape = _shape_of(tensor) if tensor is not None else _meta_shapes(fx_node)[0][0]
            self.values[fx_node.name] = Const(shape, _scalar_value(tensor))
            return
        shapes, dtype = _meta_shapes(fx_node)
        if not shapes:
            self.values[fx_node.name] = None
            return
        node = Node(
            name=self._unique(fx_node.name),
            kind=OpKind.INPUT,
            attrs=InputAttrs(index=self._n_inputs),
            inputs=(),
            input_shapes=(),
            output_shapes=shapes[:1],
            dtype=dtype or DType.FLOAT32,
            source="placeholder",
        )
        self._n_inputs += 1
        self.nodes.append(node)
        self.values[fx_node.name] = Act(Ref(node.name, 0), shapes[0], node.dtype)

    def _resolve(self, arg: Any) -> Any:
        if hasattr(arg, "op") and hasattr(arg, "name") and hasattr(arg, "meta"):
            return self.values[arg.name]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self._resolve(a) for a in arg)
        return arg

    def _call(self, fx_node: Any) -> Any:
        target = fx_node.target
        args = tuple(self._resolve(a) for a in fx_node.args)
        if target is operator.getitem:
            if isinstance(args[0], Act):  # one kept result of several (a pooling's indices are dropped)
                if args[1] != 0 and not fx_node.users:
                    return None
                if args[1] != 0:
                    raise UnsupportedOperatorError(f"result {args[1]} of {fx_node.args[0].name}", fx_node.name,
                                                   "only the first result of this operator is modelled")
                return args[0]
            return args[0][args[1]]
        op = _op_name(target)
        if op in _IGNORED:
            return None
        if op in _INLINED:
            return self._inline(op, fx_node, args)
        shapes, dtype = _meta_shapes(fx_node)
        if not _has_activation(args) and not _has_activation(tuple(fx_node.kwargs.values())):
            self._fold(op, args, shapes)
            return _const_result(fx_node, shapes)
        kwargs = {k: self._resolve(v) for k, v in fx_node.kwargs.items()}
        call = Call(op=op, node_name=fx_node.name, args=args, kwargs=kwargs, out_shapes=shapes)
        handler = h.HANDLERS.get(op)
        if handler is None:
            if not self.opaque:
                raise UnsupportedOperatorError(str(target), fx_node.name)
            acts = tuple(a for a in _flatten(args) if isinstance(a, Act))
            result: Any = Emit(OpKind.OPAQUE, OpaqueAttrs(operator=str(target)), acts)
        else:
            try:
                result = handler(call)
            except (TypeError, ValueError, IndexError) as e:  # arguments of a form the handler does not expect
                raise UnsupportedOperatorError(str(target), fx_node.name, f"a form of its arguments edgeplan "
                                               f"does not model ({type(e).__name__}: {e})") from e
        if isinstance(result, Const):  # made from an activation's shape alone (new_zeros): still run every call
            self._fold(op, args, shapes)
        elif op.rstrip("_") in _ARITHMETIC and isinstance(result, Act):  # an identity (x * 1): eager still runs it
            self._fold(op, args, shapes)  # add_ when eager adds in place (MobileOne)
        elif op in _IDENTITY_CALLS and isinstance(result, Act) and (dtype is None or result.dtype == dtype):
            self._fold(op, args, shapes)  # a cast to the dtype it has, or a view that changes nothing
        if not isinstance(result, (Emit, Chain)):
            return result
        path, cls = _module_of(fx_node)
        if path and cls in _LEAF_MODULES and path not in self._names:
            base = path
        else:
            base = f"{path}/{fx_node.name}" if path else fx_node.name
        if isinstance(result, Chain):
            return self._emit_chain(result, base, str(target), call.out_shapes, dtype)
        return self._emit(result, base, str(target), call.out_shapes, dtype)

    def _fold(self, op: str, args: tuple[Any, ...], shapes: tuple[Shape, ...]) -> None:
        """Record a folded operator ``op`` with its tensor arguments' and its results' shapes."""
        ins = tuple(a.shape for a in _flatten(args) if isinstance(a, (Act, Const)))
        self.folded_ops.append(op)
        self.folded_shapes.append((ins, tuple(s for s in shapes if s is not None)))
        self.folded_at.append(len(self.nodes))

    def _emit_chain(self, chain: Chain, base: str, source: str, shapes: tuple[Shape, ...],
                    dtype: DType | None) -> Any:
        """The chain's nodes in a row, one named ``base`` and the others under it; recorded as one fused call."""
        main = self._unique(base)
        names = [self._unique(f"{main}/{suffix}") if suffix else main for suffix in chain.names]
        value: Any = None
        for i, step in enumerate(chain.steps):
            inputs = step.inputs if i == 0 else (value,)
            out = chain.shapes[i:i + 1] if i < len(chain.steps) - 1 else shapes[:1]
            value = self._emit(Emit(step.kind, step.attrs, inputs), names[i], source, out, dtype, named=True)
        self.fused_calls.append((chain.call, tuple(names)))
        return value

    def _emit(self, emit: Emit, base: str, source: str, shapes: tuple[Shape, ...], dtype: DType | None = None,
              named: bool = False) -> Any:
        if not shapes:
            raise InvalidGraphError(f"node {base!r} ({source}) has no recorded output shape")
        inputs = tuple(self._materialize(a, base) if isinstance(a, Const) else a for a in emit.inputs)
        emit = Emit(emit.kind, emit.attrs, inputs)
        node = Node(
            name=base if named else self._unique(base),
            kind=emit.kind,
            attrs=emit.attrs,
            inputs=tuple(a.ref for a in inputs),
            input_shapes=tuple(a.shape for a in inputs),
            output_shapes=shapes,
            dtype=dtype or (inputs[0].dtype if inputs else DType.FLOAT32),
            source=source,
        )
        self.nodes.append(node)
        acts = [Act(Ref(node.name, i), s, node.dtype) for i, s in enumerate(shapes)]
        if emit.kind is OpKind.SPLIT or len(acts) > 1:
            return acts
        return acts[0]

    def _materialize(self, const: Const, base: str) -> Act:
        node = Node(self._unique(f"{base}/constant"), OpKind.CONSTANT, ConstantAttrs(), (), (), (const.shape,),
                    source="constant")
        self.nodes.append(node)
        return Act(Ref(node.name, 0), const.shape, node.dtype)

    def _unique(self, base: str) -> str:
        name, i = base, 1
        while name in self._names:
            name = f"{base}_{i}"
            i += 1
        self._names.add(name)
        return name

    def _outputs(self, out: Any) -> list[Ref]:
        refs: list[Ref] = []
        for item in _flatten((out,)):
            value = self._resolve(item)
            for v in _flatten((value,)):
                if isinstance(v, Act):
                    refs.append(v.ref)
        return refs


# Module classes whose forward is a single operator: their node takes the module's path as its name.
_LEAF_MODULES = frozenset(
    {
        "Conv2d", "ConvTranspose2d", "Linear", "BatchNorm2d", "BatchNorm1d", "LayerNorm", "GroupNorm", "ReLU",
        "ReLU6", "Hardswish", "Hardsigmoid", "Sigmoid", "SiLU", "GELU", "Tanh", "LeakyReLU", "ELU", "Mish",
        "Softplus", "Hardtanh", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "Dropout",
        "Dropout2d", "Flatten", "Softmax", "Upsample", "ZeroPad2d", "ConstantPad2d", "ReflectionPad2d",
        "ChannelShuffle", "Identity", "Conv1d", "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d",
        "RMSNorm",
    }
)


def _flatten(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_flatten(v))
        else:
            out.append(v)
    return out


def _scalar_value(tensor: Any) -> float | None:
    """The value of a one-element real tensor (a fake tensor of a traced graph has none: None)."""
    try:
        if tensor is not None and tensor.numel() == 1 and tensor.is_floating_point():
            return float(tensor.item())
    except Exception:  # noqa: BLE001 - fake or meta tensors cannot be read
        return None
    return None


def _has_activation(values: Sequence[Any]) -> bool:
    return any(isinstance(v, Act) for v in _flatten(values))


def _const_result(fx_node: Any, shapes: tuple[Shape, ...]) -> Any:
    if not shapes:
        return None
    if isinstance(fx_node.meta.get("val"), (tuple, list)):
        return [Const(s) for s in shapes]
    return Const(shapes[0])


def _find_module_attrs(group: list[Any]) -> dict[str, float]:
    """Recover LRN hyper-parameters from the decomposition: size from the pooling window, alpha, beta, k."""
    found: dict[str, float] = {}
    for n in group:
        name = _op_name(n.target)
        if name in ("avg_pool3d", "avg_pool2d") and len(n.args) > 1:
            window = n.args[1]
            found["size"] = int(window[0]) if isinstance(window, (list, tuple)) else int(window)
        elif name == "mul" and isinstance(n.args[1], (int, float)) and "alpha" not in found:
            found["alpha"] = float(n.args[1])  # the averaged squares times alpha
        elif name == "add" and isinstance(n.args[1], (int, float)):
            found["k"] = float(n.args[1])
        elif name == "pow" and isinstance(n.args[1], (int, float)):
            found["beta"] = float(n.args[1])
    return found

