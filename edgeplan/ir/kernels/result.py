"""What a kernel deduction returns: :class:`Kernel` and :class:`KernelDeduction`. Loads without torch or onnx."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

__all__ = ["Kernel", "KernelDeduction"]


@dataclass(frozen=True)
class Kernel:
    """One kernel the runtime executes.

    Parameters
    ----------
    name
        The IR ops it runs, joined by ``+`` (e.g. ``conv2d+batch_norm+relu``; see
        :func:`~edgeplan.ir.kernels.node_label`), or the runtime's own name for a kernel no IR node stands for
        (``ReorderOutput``).
    kind
        The runtime's kernel kind: an aten operator (``aten::conv2d``), an ONNX Runtime op type with its domain
        (``com.microsoft.FusedConv``), a TFLite GPU kernel (``Winograd``).
    nodes
        The IR nodes it covers, in execution order; empty for a kernel the runtime inserts (a layout reorder).
    noop
        True when the runtime dispatches the operator but no data is computed or moved (a view, eval dropout).
    """

    name: str
    kind: str
    nodes: tuple[str, ...]
    noop: bool = False


@dataclass(frozen=True)
class KernelDeduction:
    """The kernels a runtime profile executes for a graph, and the IR nodes it does not execute at all.

    Parameters
    ----------
    graph
        Name of the graph.
    profile
        The runtime profile (see :func:`~edgeplan.ir.kernels.profiles`).
    kernels
        Kernels in execution order.
    eliminated
        ``(node, reason)`` for every IR node that no kernel runs (dropout removed by an exporter, a constant).
    """

    graph: str
    profile: str
    kernels: tuple[Kernel, ...]
    eliminated: tuple[tuple[str, str], ...] = ()

    def kernel_of(self, node: str) -> Kernel | None:
        """The kernel that runs IR node ``node``; None when it was eliminated or is a graph input."""
        return self._by_node.get(node)

    def counts(self) -> dict[str, int]:
        """Number of kernels per kind."""
        return dict(Counter(k.kind for k in self.kernels))

    @property
    def _by_node(self) -> dict[str, Kernel]:
        return {n: k for k in self.kernels for n in k.nodes}
