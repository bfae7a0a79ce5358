""":func:`deduce_kernels`: the kernels a runtime profile executes for a graph, checked to cover every node.

Torch eager (one aten operator per node, but for the module calls it runs as one fused operator) is deduced here;
ONNX Runtime in :mod:`~edgeplan.ir.kernels.ort`, the TFLite GPU delegate in :mod:`~edgeplan.ir.kernels.tflite`, LiteRT
with XNNPACK in :mod:`~edgeplan.ir.kernels.litert`.
Loads without torch or onnx.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from edgeplan.errors import InvalidInputError
from edgeplan.ir.graph import Graph, Node
from edgeplan.ir.kernels.groups import Group, bypass, fill, split_eliminated
from edgeplan.ir.kernels.litert import litert_groups
from edgeplan.ir.kernels.ort import onnxruntime_groups
from edgeplan.ir.kernels.result import KernelDeduction
from edgeplan.ir.kernels.rules import KernelRules, load_rules
from edgeplan.ir.kernels.tflite import tflite_groups
from edgeplan.ir.ops import OpKind

__all__ = ["deduce_kernels"]


def deduce_kernels(graph: Graph, profile: str | KernelRules) -> KernelDeduction:
    """Deduce the kernels that runtime ``profile`` executes for ``graph``.

    Parameters
    ----------
    graph
        A validated graph (any frontend).
    profile
        A profile name (see :mod:`edgeplan.ir.kernels`; :func:`~edgeplan.ir.kernels.profiles` lists them) or
        rules from :func:`~edgeplan.ir.kernels.load_rules`.

    Returns
    -------
    KernelDeduction
        Kernels in execution order, and the eliminated nodes with their reasons. Every node but the graph
        inputs is in exactly one of them.

    Raises
    ------
    InvalidInputError
        Unknown profile, or a rule file without an entry for a node's kind.
    UnsupportedOperatorError
        An op the runtime cannot run (e.g. channel shuffle on the TFLite GPU delegate).
    """
    rules = load_rules(profile) if isinstance(profile, str) else profile
    kept, gone = split_eliminated(graph, rules)
    alias = bypass(graph, (name for name, _ in gone))
    if rules.family == "torch":
        groups = _torch_groups(graph, kept, rules)
    elif rules.family == "onnxruntime":
        groups = onnxruntime_groups(graph, kept, rules, alias)
    elif rules.family == "tflite-gpu":
        groups = tflite_groups(graph, kept, rules, alias)
    elif rules.family == "litert":
        groups = litert_groups(graph, kept, rules, alias)
    else:
        raise InvalidInputError(f"kernel rules of profile {rules.profile!r} name an unknown family {rules.family!r}")
    result = KernelDeduction(graph.name, rules.profile, tuple(g.to_kernel() for g in groups), tuple(gone))
    _check_partition(graph, result)
    return result


def _check_partition(graph: Graph, result: KernelDeduction) -> None:
    """Post-condition: every non-input node is in exactly one kernel or eliminated."""
    seen = Counter([n for k in result.kernels for n in k.nodes] + [n for n, _ in result.eliminated])
    for n in graph.nodes:
        if n.kind is not OpKind.INPUT and seen[n.name] != 1:
            raise InvalidInputError(
                f"kernel rules of profile {result.profile!r} put node {n.name!r} of graph {graph.name!r} in "
                f"{seen[n.name]} kernels instead of one; fix edgeplan/data/kernel_rules"
            )


def _torch_groups(graph: Graph, kept: Sequence[Node], rules: KernelRules) -> list[Group]:
    """Eager PyTorch: one aten operator per node, its kind from the node's aten source or the ``kinds`` table; the
    nodes of a fused module call (the graph's ``fused_calls`` of a class in the rules' ``fused_calls``) are one
    kernel, where its first node runs."""
    noop: Mapping[str, str] = rules.data["noop"]
    fused_kinds: Mapping[str, str] = rules.data.get("fused_calls", {})
    from_source = bool(rules.settings.get("kind_from_aten_source"))
    call_of = {name: i for i, (cls, names) in enumerate(graph.fused_calls) if cls in fused_kinds for name in names}
    calls: dict[int, Group] = {}
    groups = []
    for n in kept:
        if n.name in call_of:
            i = call_of[n.name]
            if i in calls:
                calls[i].nodes.append(n)
            else:
                cls = graph.fused_calls[i][0]
                path = graph.fused_calls[i][1][0].rsplit("/", 1)[0]
                calls[i] = Group([n], fused_kinds[cls], runtime_name=f"{cls}({path})")
                groups.append(calls[i])
            continue
        if from_source and n.source.startswith("aten."):
            kind = "aten::" + n.source.split(".")[1]
        else:
            kind = fill(rules.lookup("kinds", n), n)
        groups.append(Group([n], kind, noop=n.kind.value in noop))
    return groups
