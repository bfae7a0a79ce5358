""":func:`compare_kernels`: where deduced kernels and the kernels a runtime reports disagree.

Pure: the runtime's kernels come in as :class:`~edgeplan.ir.kernels.Kernel` objects (for ONNX Runtime from
:func:`edgeplan.measure.kernel_check.onnxruntime_kernels`). Loads without torch or onnx.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from edgeplan.ir.kernels.result import Kernel, KernelDeduction

__all__ = ["KernelMismatch", "compare_kernels"]


@dataclass(frozen=True)
class KernelMismatch:
    """One disagreement between deduced and observed kernels; ``message`` says it in words."""

    what: str
    kind: str
    deduced: int | tuple[str, ...]
    observed: int | tuple[str, ...]
    message: str


def compare_kernels(
    deduced: KernelDeduction, observed: Sequence[Kernel], by_nodes: bool = True
) -> list[KernelMismatch]:
    """Compare deduced kernels with the kernels a runtime reports.

    Parameters
    ----------
    deduced
        From :func:`~edgeplan.ir.kernels.deduce_kernels`.
    observed
        The runtime's kernels (e.g. from :func:`edgeplan.measure.kernel_check.onnxruntime_kernels`); their
        ``nodes`` name IR nodes when ``by_nodes``.
    by_nodes
        Also compare which IR nodes each kernel covers (needs IR node names shared with the runtime's graph, as
        for a graph imported from the same ONNX file). Kernels with no nodes are compared by count only.

    Returns
    -------
    list[KernelMismatch]
        Empty when they agree: per kind, the count differs; per kernel, a deduced group of IR nodes that the
        runtime does not run as one kernel (or runs as another kind), and the reverse.
    """
    found: list[KernelMismatch] = []
    mine, theirs = Counter(k.kind for k in deduced.kernels), Counter(k.kind for k in observed)
    for kind in sorted(set(mine) | set(theirs)):
        if mine[kind] != theirs[kind]:
            found.append(KernelMismatch(
                "count", kind, mine[kind], theirs[kind],
                f"{kind}: {mine[kind]} kernels deduced, {theirs[kind]} observed",
            ))
    if not by_nodes:
        return found
    seen = {frozenset(k.nodes): k for k in observed if k.nodes}
    for k in deduced.kernels:
        twin = seen.pop(frozenset(k.nodes), None) if k.nodes else None
        if k.nodes and twin is None:
            found.append(KernelMismatch(
                "grouping", k.kind, k.nodes, (), f"deduced {k.kind} over {list(k.nodes)} is not one observed kernel"
            ))
        elif twin is not None and twin.kind != k.kind:
            found.append(KernelMismatch(
                "kind", k.kind, k.nodes, twin.nodes, f"{list(k.nodes)}: deduced {k.kind}, observed {twin.kind}"
            ))
    for nodes, k in seen.items():
        found.append(KernelMismatch(
            "grouping", k.kind, (), tuple(sorted(nodes)), f"observed {k.kind} over {sorted(nodes)} was not deduced"
        ))
    return found
