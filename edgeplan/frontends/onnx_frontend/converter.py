"""The converter: builds IR nodes from the prepared ONNX nodes, and the helpers its handlers share."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.frontends.onnx_frontend.loading import _DEFAULT_DOMAINS, _DTYPES, _ints, _label
from edgeplan.frontends.onnx_frontend.preparation import _const_elem_type, _Prepared
from edgeplan.ir import DType, Graph, Node, OpKind, Ref, Shape
from edgeplan.ir.ops import (
    Attrs,
    ConstantAttrs,
    InputAttrs,
    OpaqueAttrs,
)

if TYPE_CHECKING:
    import numpy as np
    import onnx


__all__ = ["Handler"]

class _NotModelled(Exception):
    """Raised by a handler for a variant of an operator the IR cannot express; the detail says which."""


class _Converter:
    """Builds IR nodes from the prepared ONNX nodes; the context every handler receives."""

    def __init__(self, prep: _Prepared, opaque: bool, handlers: Mapping[str, Handler]) -> None:
        self.prep = prep
        self.handlers = handlers
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
        handler = self.handlers.get(node.op_type) if node.domain in _DEFAULT_DOMAINS else None
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


#: A handler maps one ONNX node to IR nodes through the converter, or raises ``_NotModelled``.
Handler = Callable[[_Converter, "onnx.NodeProto"], None]
