"""What a graph runtime that simplifies multiplications by zero still executes.

Eager PyTorch runs every node of a graph, even ``x * 0`` and the branches only it consumes. Graph compilers
(TensorFlow's Grappler and the TFLite converter, ONNX Runtime's optimizers, TorchScript freezing) simplify
arithmetic and remove dead code before running anything. NAS-Bench-201 makes the difference large: its ``none``
edge is ``x.mul(0.)``, so a cell whose output node only receives ``none`` edges outputs zeros, and every branch
that only feeds ``none`` edges computes nothing the output uses.

:func:`executed_nodes` applies these rules, in this order:

1. ``x * 0`` (an element-wise multiply by the number 0, or by a zero tensor) is a zero constant that does not
   depend on ``x``;
2. ``x + 0``, ``0 + x`` and ``x - 0`` are ``x`` itself (no kernel); the sum or product of zeros is zero;
3. dead code elimination: only nodes the outputs depend on run (zero constants never do);
4. when no output depends on a graph input any more, the converter folds the whole network into a constant and
   nothing runs.

Operators with weights on a zero input (a convolution of a node that only receives ``none`` edges) still run:
rule 4 is the only constant folding. That is what HELP's Pixel 3 measurements of all 15,625 NAS-Bench-201
networks show: every network it times below 0.5 ms (273 of them) is one whose output does not depend on its
input, and the other 20 devices of the dataset time none of those below 1 ms
(``tests/test_fold.py`` checks both); a cell that reduces to its input costs Pixel 3 little more than the
skeleton, while a convolution of a zero node costs it as much as one of a live node. Whether a device simplifies
is therefore not assumed: :func:`edgeplan.costmodels.opwise.calibrate.calibrate` tries both deductions on the measured
samples and keeps this one only where it predicts them clearly better (``python -m experiments.li2023 --nb201``
shows where it is chosen).
"""

from __future__ import annotations

from edgeplan.ir.graph import Graph, Node
from edgeplan.ir.ops import EltwiseAttrs, EltwiseOp, OpKind

__all__ = ["executed_nodes"]


def _zero_const(node: Node) -> bool:
    a = node.attrs
    return isinstance(a, EltwiseAttrs) and a.op is EltwiseOp.MUL and len(node.inputs) == 1 and a.const_value == 0


def executed_nodes(graph: Graph) -> frozenset[str]:
    """The names of the nodes of ``graph`` a zero-simplifying graph runtime executes (rules in the module doc).

    Parameters
    ----------
    graph
        A validated IR graph.

    Returns
    -------
    frozenset[str]
        Executed nodes (graph inputs excluded); empty when the network folds into a constant.
    """
    zero: set[str] = set()
    alias: dict[str, str] = {}  # node -> the node whose value it passes on unchanged
    depends: dict[str, bool] = {}
    operands: dict[str, list[str]] = {}  # node -> its non-zero inputs, aliases resolved

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    for node in graph.nodes:
        inputs = [resolve(r.node) for r in node.inputs]
        live = [i for i in inputs if i not in zero]
        operands[node.name] = live
        if node.kind is OpKind.INPUT:
            depends[node.name] = True
            continue
        a = node.attrs
        if isinstance(a, EltwiseAttrs) and node.kind is OpKind.ELTWISE:
            if _zero_const(node) or (a.op is EltwiseOp.MUL and len(live) < len(inputs)):
                zero.add(node.name)
                continue
            if a.op in (EltwiseOp.ADD, EltwiseOp.SUB):
                if not live and (len(inputs) == 2 or a.const_value == 0):  # 0 + 0, or 0 plus the number 0
                    zero.add(node.name)
                    continue
                # A zero plus another constant is an input-independent value like any other: it runs.
                passes = bool(live) and (
                    (len(inputs) == 2 and len(live) == 1 and (a.op is EltwiseOp.ADD or inputs[0] == live[0]))
                    or (len(inputs) == 1 and a.const_value == 0))
                if passes:
                    alias[node.name] = live[0]
                    continue
        depends[node.name] = any(depends.get(i, False) for i in live)

    outputs = [resolve(r.node) for r in graph.outputs]
    if not any(depends.get(o, False) for o in outputs if o not in zero):
        return frozenset()
    kinds = {n.name: n.kind for n in graph.nodes}
    executed: set[str] = set()
    stack = [o for o in outputs if o not in zero]
    while stack:
        name = stack.pop()
        if name in executed or kinds[name] is OpKind.INPUT:
            continue
        executed.add(name)
        stack.extend(operands[name])
    return frozenset(executed)
