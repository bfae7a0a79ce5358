"""Folded work the LiteRT converter writes as operators (the rules' ``folded_mask``).

The torch frontend folds a computation on constants into a constant tensor and records its operators
(:attr:`~edgeplan.ir.Graph.folded_ops`, with their shapes and where they ran among the nodes). The TFLite converter
folds most of them too, but not a mask built by slice assignments into zeros (Swin's shifted-window attention
mask): :func:`folded_chains` replays the rules over the recorded operators and gives the TFLite operators of each
such mask, each with the operators of its chain it reads and where it runs among the graph's nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from edgeplan.ir.graph import Graph

__all__ = ["MASK_ROLE", "FoldedChain", "FoldedOp", "folded_chains"]

Shape = tuple[int, ...]

#: The role in the runtime name of a mask's operator (``SELECT.mask:node``, ``node`` the one that reads the mask).
MASK_ROLE = ".mask"


@dataclass(frozen=True)
class FoldedOp:
    """A TFLite operator written for folded work: its type, output shape, the operators of its chain it reads (by
    index) and the number of graph nodes before it."""

    type: str
    shape: Shape
    reads: tuple[int, ...]
    at: int


@dataclass(frozen=True)
class FoldedChain:
    """The operators of one mask and what it computes (its folded operators with their shapes: two chains with one
    key are one set of operators after the converter's common subexpression elimination)."""

    ops: tuple[FoldedOp, ...]
    key: tuple[Any, ...]

    @property
    def shape(self) -> Shape:
        """The mask's shape: its last operator's."""
        return self.ops[-1].shape


def folded_chains(graph: Graph, rule: Mapping[str, Any] | None) -> list[FoldedChain]:
    """The masks of ``graph``'s folded operators that ``rule`` (the rules' ``folded_mask``) says the converter writes
    as operators; none when the graph did not record where its folded operators ran."""
    n = len(graph.folded_ops)
    if not rule or not n or len(graph.folded_at) != n or len(graph.folded_shapes) != n:
        return []
    chains: list[FoldedChain] = []
    i = 0
    while i < n:
        if graph.folded_ops[i] != rule["start"] or not graph.folded_shapes[i][1]:
            i += 1
            continue
        chain, i = _chain(graph, rule, i)
        if chain is not None:
            chains.append(chain)
    return chains


def _chain(graph: Graph, rule: Mapping[str, Any], start: int) -> tuple[FoldedChain | None, int]:
    """The chain of the mask made at folded operator ``start``, and the index of the first operator after it."""
    mapped: Mapping[str, str] = rule["ops"]
    skipped = frozenset(rule["skip"])
    mask_shape = tuple(graph.folded_shapes[start][1][0])
    ops: list[FoldedOp] = []
    mask: int | None = None  # the operator that computes the mask (None: still the folded zeros)
    fills = 0
    rows: Shape | None = None  # the rows a fill assigns into (its first slice)
    i = start + 1
    while i < len(graph.folded_ops):
        name, (ins, outs), at = graph.folded_ops[i], graph.folded_shapes[i], graph.folded_at[i]
        if name == rule["fill"]:
            pattern = rule["fills"][min(fills, len(rule["fills"]) - 1)]
            first_pad = pattern.index("PAD") if "PAD" in pattern else len(pattern)
            for k, op_type in enumerate(pattern):
                reads: tuple[int, ...] = (len(ops) - 1,) if k else ()
                if mask is not None and k in (0, len(pattern) - 1):
                    reads = (*reads, mask)
                shape = tuple(rows or mask_shape) if k < first_pad else mask_shape
                ops.append(FoldedOp(op_type, shape, reads, at))
            mask = len(ops) - 1 if pattern else mask
            fills, rows = fills + 1, None
        elif name == "slice" and mask_shape in (tuple(s) for s in ins) and outs:
            rows = tuple(outs[0])
        elif name in skipped:
            pass
        elif name in mapped and outs:
            found = _producers(ops, [tuple(s) for s in ins])
            if not found:
                break  # it reads nothing of the mask: the chain ends
            ops.append(FoldedOp(mapped[name], tuple(outs[0]), found, at))
        else:
            break
        i += 1
    if not fills or not ops:
        return None, i
    key = tuple((graph.folded_ops[j], graph.folded_shapes[j]) for j in range(start, i))
    return FoldedChain(tuple(ops), key), i


def _producers(ops: list[FoldedOp], shapes: list[Shape]) -> tuple[int, ...]:
    """For each input shape, the latest operator of the chain with that output shape (each read once)."""
    reads: list[int] = []
    for shape in shapes:
        found = next((j for j in range(len(ops) - 1, -1, -1) if ops[j].shape == shape and j not in reads), None)
        if found is not None:
            reads.append(found)
    return tuple(reads)
