"""Values that flow through the ATen-to-IR conversion, shared by the converter and its operator handlers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgeplan.errors import UnsupportedOperatorError
from edgeplan.ir import DType, OpKind, Ref, Shape
from edgeplan.ir.ops import Attrs

__all__ = ["Act", "Call", "Chain", "Const", "Emit"]


@dataclass(frozen=True)
class Act:
    """An activation tensor: output ``ref`` of an IR node, with its shape and dtype."""

    ref: Ref
    shape: Shape
    dtype: DType


@dataclass(frozen=True)
class Const:
    """A constant tensor (parameter, buffer, or computed from constants only); ``value`` is kept for a one-element
    parameter or buffer (Gemma 4's clamp bounds), None otherwise."""

    shape: Shape
    value: float | None = None


@dataclass(frozen=True)
class Emit:
    """A handler's request to create an IR node of ``kind`` with ``attrs`` consuming ``inputs``."""

    kind: OpKind
    attrs: Attrs
    inputs: tuple[Act | Const, ...]  # constants are materialized as ``constant`` nodes


@dataclass(frozen=True)
class Chain:
    """A handler's request to write one operator as several IR nodes in a row (a 1-D convolution as a 2-D one on an
    unsqueezed tensor). The first step consumes its own ``inputs``; every later step consumes the output of the step
    before it (its ``inputs`` are ignored). ``shapes`` are the output shapes of every step but the last, whose shape
    is the operator's. Eager PyTorch runs the operator as one call, so the nodes are recorded as one of the graph's
    ``fused_calls``, under ``call`` (``aten.conv1d``)."""

    call: str
    steps: tuple[Emit, ...]
    shapes: tuple[Shape, ...]
    #: Each step's name under the operator's node name (``unsqueeze``); "" for the one step named after the operator.
    names: tuple[str, ...]


@dataclass
class Call:
    """One operator call: its name, resolved arguments and the shapes of its results."""

    op: str
    node_name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out_shapes: tuple[Shape, ...]

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        """Argument ``index`` (positional) or ``name`` (keyword), else ``default``."""
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(name, default)

    @property
    def x(self) -> Act:
        """The first argument, which must be an activation."""
        first = self.args[0]
        if not isinstance(first, Act):
            raise UnsupportedOperatorError(self.op, self.node_name, "first operand is not an activation tensor")
        return first

    @property
    def out(self) -> Shape:
        """Shape of the first result."""
        return self.out_shapes[0]
