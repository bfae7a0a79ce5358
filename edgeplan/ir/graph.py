"""The typed graph: frozen nodes in topological order, each with its shapes and derived work.

A :class:`Graph` is immutable. Frontends build it, passes return new graphs or annotations, and
:meth:`Graph.validate` checks every invariant and names the first node that breaks one; it never repairs.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from edgeplan.errors import InvalidGraphError
from edgeplan.ir import checks
from edgeplan.ir.metrics import node_flops, node_macs, node_params, numel
from edgeplan.ir.ops import ATTRS_BY_KIND, COMPUTE_KINDS, Attrs, DType, OpKind

__all__ = ["Graph", "GraphTotals", "Node", "Ref", "Shape"]

Shape = tuple[int, ...]


@dataclass(frozen=True, order=True)
class Ref:
    """A reference to output ``index`` of node ``node``."""

    node: str
    index: int = 0

    def __str__(self) -> str:
        return self.node if self.index == 0 else f"{self.node}:{self.index}"


@dataclass(frozen=True)
class Node:
    """One operator application.

    Parameters
    ----------
    name
        Unique name within the graph (the frontends use the module path where there is one).
    kind
        The operator kind.
    attrs
        Typed attributes; their class is fixed by ``kind`` (see :data:`~edgeplan.ir.ops.ATTRS_BY_KIND`).
    inputs
        The tensors consumed, as references to earlier nodes' outputs.
    input_shapes, output_shapes
        Shapes of the consumed and produced tensors (batch axis first).
    dtype
        Element type of the node's outputs and parameters.
    source
        The operator as the source framework named it (``aten.conv2d.default``, ``Conv``), for reports.
    """

    name: str
    kind: OpKind
    attrs: Attrs
    inputs: tuple[Ref, ...]
    input_shapes: tuple[Shape, ...]
    output_shapes: tuple[Shape, ...]
    dtype: DType = DType.FLOAT32
    source: str = ""

    @property
    def macs(self) -> int:
        """Multiply-accumulates (see :mod:`edgeplan.ir.metrics` for the convention)."""
        return node_macs(self)

    @property
    def flops(self) -> int:
        """Floating-point operations (see :mod:`edgeplan.ir.metrics`)."""
        return node_flops(self)

    @property
    def params(self) -> int:
        """Learnt parameters."""
        return node_params(self)

    @property
    def param_bytes(self) -> int:
        """Bytes of the learnt parameters at the node's dtype."""
        return self.params * self.dtype.size_bytes

    @property
    def activation_bytes(self) -> int:
        """Bytes of the tensors this node produces."""
        return sum(numel(s) for s in self.output_shapes) * self.dtype.size_bytes

    @property
    def input_bytes(self) -> int:
        """Bytes of the tensors this node consumes."""
        return sum(numel(s) for s in self.input_shapes) * self.dtype.size_bytes

    @property
    def is_compute(self) -> bool:
        """True for the multiply-accumulate kinds (conv, transposed conv, linear, matmul)."""
        return self.kind in COMPUTE_KINDS

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description with its shapes, attributes and derived work."""
        return {
            "name": self.name,
            "op": self.kind.value,
            "source": self.source,
            "inputs": [str(r) for r in self.inputs],
            "input_shapes": _plain(self.input_shapes),
            "output_shapes": _plain(self.output_shapes),
            "dtype": self.dtype.value,
            "attrs": {f.name: _plain(getattr(self.attrs, f.name)) for f in dataclasses.fields(self.attrs)},
            "macs": self.macs,
            "flops": self.flops,
            "params": self.params,
            "param_bytes": self.param_bytes,
            "activation_bytes": self.activation_bytes,
        }


@dataclass(frozen=True)
class GraphTotals:
    """Sums over all nodes of a graph."""

    nodes: int
    compute_nodes: int
    macs: int
    flops: int
    params: int
    param_bytes: int
    activation_bytes: int
    opaque: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Graph:
    """A model as a typed, immutable dataflow graph.

    Parameters
    ----------
    name
        What the graph was built from (a zoo string or a file name).
    nodes
        All nodes in topological order, graph inputs (kind ``input``) included.
    outputs
        The tensors the model returns.
    folded_ops
        Operators the source framework runs at every call that the IR folds away, by their source name
        (``expand``), in source order: computations on constants alone (parameters, buffers, literals: a ViT's
        class token expanded to the batch, a Swin block's attention mask), which become constant tensors, and
        identities (``x * 1``, ``x + 0``: NFNets' and MobileOne's), which become their input. Only the torch
        frontend fills it: eager PyTorch runs them, ONNX Runtime folds them when the session is built.
    folded_shapes
        For each of ``folded_ops``, in its order, the shapes of its tensor inputs and of its outputs, as
        (inputs, outputs): what a latency model prices the folded work by. Empty when the frontend recorded none.
    folded_at
        For each of ``folded_ops``, in its order, the number of the graph's nodes before it: where it runs among
        them. Empty when the frontend recorded none.
    fused_calls
        Calls that eager PyTorch may run as one operator where the IR has several nodes, as (module class or aten
        operator, names of the IR nodes the call computes): an ``nn.MultiheadAttention`` whose fast-path
        conditions hold (the fast path enabled when the graph was built, self-attention on a batched input without
        a mask, batch first, an even number of heads, ...), which eval mode without gradients runs as one operator;
        and an operator the IR writes as a chain of nodes (``aten.conv1d``: the 2-D convolution between an
        unsqueeze and a squeeze; ``aten.repeat_interleave``). The kernel rules of a runtime say which it fuses.
        Only the torch frontend fills it.
    """

    name: str
    nodes: tuple[Node, ...]
    outputs: tuple[Ref, ...]
    folded_ops: tuple[str, ...] = ()
    fused_calls: tuple[tuple[str, tuple[str, ...]], ...] = ()
    folded_shapes: tuple[tuple[tuple[Shape, ...], tuple[Shape, ...]], ...] = ()
    folded_at: tuple[int, ...] = ()

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    @cached_property
    def _index(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    def node(self, name: str) -> Node:
        """The node called ``name``; :class:`KeyError` naming it when absent."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"graph {self.name!r} has no node {name!r}") from None

    @cached_property
    def consumers(self) -> dict[str, tuple[str, ...]]:
        """For every node name, the names of the nodes that consume one of its outputs (in order)."""
        users: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for ref in n.inputs:
                if ref.node in users and n.name not in users[ref.node]:
                    users[ref.node].append(n.name)
        return {k: tuple(v) for k, v in users.items()}

    @property
    def inputs(self) -> tuple[Node, ...]:
        """The graph inputs."""
        return tuple(n for n in self.nodes if n.kind is OpKind.INPUT)

    @property
    def compute_nodes(self) -> tuple[Node, ...]:
        """Nodes of the multiply-accumulate kinds."""
        return tuple(n for n in self.nodes if n.is_compute)

    @property
    def opaque_nodes(self) -> tuple[Node, ...]:
        """Nodes edgeplan does not model; every report lists them."""
        return tuple(n for n in self.nodes if n.kind is OpKind.OPAQUE)

    def totals(self) -> GraphTotals:
        """Sums of work and sizes over all nodes."""
        return GraphTotals(
            nodes=sum(1 for n in self.nodes if n.kind is not OpKind.INPUT),
            compute_nodes=len(self.compute_nodes),
            macs=sum(n.macs for n in self.nodes),
            flops=sum(n.flops for n in self.nodes),
            params=sum(n.params for n in self.nodes),
            param_bytes=sum(n.param_bytes for n in self.nodes),
            activation_bytes=sum(n.activation_bytes for n in self.nodes if n.kind is not OpKind.INPUT),
            opaque=tuple(f"{n.name} ({getattr(n.attrs, 'operator', '?')})" for n in self.opaque_nodes),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (what ``edgeplan inspect --json`` prints): ``model``, ``nodes``, ``outputs``,
        ``folded_ops``, ``folded_shapes`` (``inputs``, ``outputs``), ``folded_at``, ``fused_calls`` (``module``: the
        module class or aten operator, ``nodes``) and ``totals`` (macs, flops, params, bytes, opaque)."""
        totals = dataclasses.asdict(self.totals())
        totals["opaque"] = list(totals["opaque"])
        return {
            "model": self.name,
            "nodes": [n.to_dict() for n in self.nodes],
            "outputs": [str(r) for r in self.outputs],
            "folded_ops": list(self.folded_ops),
            "folded_shapes": [{"inputs": _plain(ins), "outputs": _plain(outs)} for ins, outs in self.folded_shapes],
            "folded_at": list(self.folded_at),
            "fused_calls": [{"module": cls, "nodes": list(names)} for cls, names in self.fused_calls],
            "totals": totals,
        }

    def validate(self) -> Graph:
        """Check every invariant and return ``self``.

        Raises
        ------
        InvalidGraphError
            Naming the first node that breaks an invariant: duplicate names, attributes of the wrong class for
            the kind, inputs that do not refer to an earlier node's output, input shapes that disagree with the
            producer, wrong arity, non-positive dimensions, or shapes inconsistent with the op (e.g. a
            convolution whose channels or output size do not follow from its attributes).
        """
        produced: dict[str, tuple[Shape, ...]] = {}
        for node in self.nodes:
            where = f"graph {self.name!r}, node {node.name!r} ({node.kind.value})"
            if node.name in produced:
                raise InvalidGraphError(f"{where}: duplicate node name")
            expected = ATTRS_BY_KIND[node.kind]
            if not isinstance(node.attrs, expected):
                raise InvalidGraphError(
                    f"{where}: attributes are {type(node.attrs).__name__}, expected {expected.__name__}"
                )
            if len(node.inputs) != len(node.input_shapes):
                raise InvalidGraphError(f"{where}: {len(node.inputs)} inputs but {len(node.input_shapes)} shapes")
            for ref, shape in zip(node.inputs, node.input_shapes, strict=True):
                if ref.node not in produced:
                    raise InvalidGraphError(f"{where}: input {ref} is not an earlier node")
                outs = produced[ref.node]
                if not 0 <= ref.index < len(outs):
                    raise InvalidGraphError(f"{where}: input {ref} has no output {ref.index}")
                if outs[ref.index] != shape:
                    raise InvalidGraphError(
                        f"{where}: input {ref} has shape {outs[ref.index]} but the node records {shape}"
                    )
            for shape in node.output_shapes:
                if any(d <= 0 for d in shape):
                    raise InvalidGraphError(f"{where}: output shape {shape} has a non-positive dimension")
            problem = checks.check_node(node)
            if problem:
                raise InvalidGraphError(f"{where}: {problem}")
            produced[node.name] = node.output_shapes
        if not self.outputs:
            raise InvalidGraphError(f"graph {self.name!r}: no outputs")
        for ref in self.outputs:
            if ref.node not in produced or ref.index >= len(produced[ref.node]):
                raise InvalidGraphError(f"graph {self.name!r}: output {ref} is not a node output")
        if self.folded_shapes and len(self.folded_shapes) != len(self.folded_ops):
            raise InvalidGraphError(f"graph {self.name!r}: {len(self.folded_ops)} folded operators but shapes for "
                                    f"{len(self.folded_shapes)}")
        if self.folded_at and len(self.folded_at) != len(self.folded_ops):
            raise InvalidGraphError(f"graph {self.name!r}: {len(self.folded_ops)} folded operators but positions "
                                    f"for {len(self.folded_at)}")
        return self


def _plain(value: Any) -> Any:
    """Enums as their values and tuples as lists, recursively: JSON-ready."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value
