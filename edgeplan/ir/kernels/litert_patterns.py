"""Two TFLite optimizer patterns replayed over the converter's operators (:mod:`edgeplan.ir.kernels.litert_convert`):
the reshapes around a fully connected layer, and L2 normalization written out as one operator."""

from __future__ import annotations

import math
from dataclasses import replace

from edgeplan.ir.kernels.litert_passes import _TO_NHWC, _Op, _Passes

__all__: list[str] = []

Shape = tuple[int, ...]


def fully_connected_views(p: _Passes) -> None:
    """The reshapes around a fully connected layer that a reshape follows.

    A linear layer is lowered on a matrix of rows, between a reshape to it and one back, which merge with the
    reshapes beside them; the converter then moves a reshape after the layer that keeps its features before it
    (TFLite's RemoveReshapeAfterFullyConnected: the layer keeps the leading axes; :func:`_moves_before`); one that
    changes its features leaves the layer on the matrix of rows. A layer with other readers too keeps them, and each
    such reshape gets a copy of the layer instead (the layer goes when no reader is left). The reshape its input
    needs is written before it (merged with a single-use reshape there, gone when it reshapes to the input's own
    shape, by the layout clean-up that follows).
    """
    uses = p._uses()
    for fc in [o for o in p.ops if o.type == "FULLY_CONNECTED" and len(o.inputs) == 1]:
        users = [o for o in p.ops if fc in o.inputs]
        before = p._in_shape(fc)
        if len(users) > 1 or uses.get(id(fc), 0) > 1:  # each reshape that keeps the features gets a copy
            copies = []
            for after in users:
                if after.type == "RESHAPE" and _moves_before(p, fc, after, before):
                    copies.append(replace(fc, nodes=[], inputs=[fc.inputs[0]], shape=after.shape,
                                          facts=dict(fc.facts)))
                    p.ops.insert(p.ops.index(after), copies[-1])
                    p._remove(after, copies[-1])
                    _view_input(p, copies[-1], (*after.shape[:-1], *before[-1:]), before)
            if copies and not p._uses().get(id(fc), 0):  # no reader left: the first copy computes its nodes
                copies[0].nodes[:0] = fc.nodes
                p.ops.remove(fc)
            continue
        if not users or users[0].type != "RESHAPE":
            continue
        after = users[0]
        if _moves_before(p, fc, after, before):
            view = (*after.shape[:-1], *before[-1:])
            fc.shape = after.shape
            p._remove(after, fc)
        elif after.shape[-1:] != fc.shape[-1:] and len(before) > 2:
            view = (math.prod(before[:-1]), *before[-1:])
            fc.shape = (view[0], *fc.shape[-1:])
        else:
            continue
        _view_input(p, fc, view, before)


def _moves_before(p: _Passes, fc: _Op, after: _Op, before: Shape) -> bool:
    """Whether the reshape ``after`` a fully connected layer moves before it: it keeps the features, and it either
    computes an IR node or (a lowering's reshape: a layer norm's view as rows) undoes the reshape the layer reads."""
    if after.shape[-1:] != fc.shape[-1:]:
        return False
    x = fc.inputs[0]
    return bool(after.nodes) or (x is not None and x.type == "RESHAPE" and len(x.inputs) == 1
                                 and p._in_shape(x) == (*after.shape[:-1], *before[-1:]))


def _view_input(p: _Passes, op: _Op, view: Shape, before: Shape) -> None:
    """A reshape of ``op``'s input (of shape ``before``) to ``view`` before it, unless they are equal."""
    if view != before:
        reshape = _Op("RESHAPE", op.serves, [], [op.inputs[0]], view, nhwc=op.nhwc)
        p.ops.insert(p.ops.index(op), reshape)
        op.inputs = [reshape]


def l2_normalizations(p: _Passes) -> None:
    """TFLite's L2 normalization pattern: ``x`` divided by the (broadcast) maximum of ``sqrt(sum(x * x))`` over its
    last axis (in its layout) and a bound, each step used once, is one ``L2_NORMALIZATION`` of ``x``, computing the
    steps' IR nodes."""
    uses = p._uses()
    for div in list(p.ops):
        if div.type != "DIV" or len(div.inputs) != 2 or div.inputs[0] is None:
            continue
        chain: list[_Op] = []
        b = div.inputs[1]
        for want in ("BROADCAST_TO", "MAXIMUM", "SQRT", "SUM", "MUL"):
            if b is not None and b.type == want and len(b.inputs) == 1 and uses.get(id(b), 0) == 1:
                chain.append(b)
                b = b.inputs[0]
            elif want != "BROADCAST_TO":
                break
        if (b is not div.inputs[0] or [c.type for c in chain][-4:] != ["MAXIMUM", "SQRT", "SUM", "MUL"]
                or not _last_axis(chain[-2])):
            continue
        div.type, div.inputs = "L2_NORMALIZATION", [b]
        p.ops = [o for o in p.ops if o not in chain]
        div.nodes = sorted([n for c in chain for n in c.nodes] + div.nodes, key=lambda n: p.order[n.name])
        for ref, producer in list(p.out.items()):
            if producer in chain:
                p.out[ref] = div


def _last_axis(total: _Op) -> bool:
    """Whether the sum ``total`` reduces the last axis of its tensor in its layout, or every axis."""
    attrs, shapes = total.serves.attrs, total.serves.input_shapes
    rank = len(shapes[0]) if shapes else 0
    if not rank or not hasattr(attrs, "axes"):
        return False
    axes = sorted(a % rank for a in attrs.axes)
    if total.nhwc and rank == 4:
        axes = sorted(_TO_NHWC.index(a) for a in axes)
    return axes in ([rank - 1], list(range(rank)))
