"""Two TFLite optimizer patterns replayed over the converter's operators (:mod:`edgeplan.ir.kernels.litert_convert`):
the reshapes around a fully connected layer, and L2 normalization written out as one operator."""

from __future__ import annotations

import math

from edgeplan.ir.kernels.litert_passes import _Op, _Passes

__all__: list[str] = []

Shape = tuple[int, ...]


def fully_connected_views(p: _Passes) -> None:
    """The reshapes around a fully connected layer that a reshape follows.

    A linear layer is lowered on a matrix of rows, between a reshape to it and one back, which merge with the
    reshapes beside them; the converter then moves a reshape after the layer that keeps its features before it
    (TFLite's RemoveReshapeAfterFullyConnected: the layer keeps the leading axes; :func:`_moves_before`), else the
    layer stays on the matrix of rows. A layer with other users too keeps them, and each such reshape gets a copy of
    the layer instead. The reshape its input needs is written before it (merged with a single-use reshape there, gone
    when it reshapes to the input's own shape, by the layout clean-up that follows).
    """
    uses = p._uses()
    for fc in [o for o in p.ops if o.type == "FULLY_CONNECTED" and len(o.inputs) == 1]:
        users = [o for o in p.ops if fc in o.inputs]
        before = p._in_shape(fc)
        if len(users) > 1 or uses.get(id(fc), 0) > 1:  # each reshape that keeps the features gets a copy
            for after in users:
                if after.type == "RESHAPE" and _moves_before(p, fc, after, before):
                    copy = _Op("FULLY_CONNECTED", fc.serves, [], [fc.inputs[0]], after.shape, nhwc=fc.nhwc,
                               facts=dict(fc.facts))
                    p.ops.insert(p.ops.index(after), copy)
                    p._remove(after, copy)
                    _view_input(p, copy, (*after.shape[:-1], *before[-1:]), before)
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
    """Whether the reshape ``after`` a fully connected layer moves before it: it keeps the features, and it is the
    model's own (a lowering's reshape, a layer norm's view as rows, moves only onto a reshape it undoes)."""
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
    """TFLite's L2 normalization pattern: ``x`` divided by the (broadcast) maximum of ``sqrt(sum(x * x))`` and a
    bound, each step used once, is one ``L2_NORMALIZATION`` of ``x``, computing the steps' IR nodes."""
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
        if b is not div.inputs[0] or [c.type for c in chain][-4:] != ["MAXIMUM", "SQRT", "SUM", "MUL"]:
            continue
        div.type, div.inputs = "L2_NORMALIZATION", [b]
        p.ops = [o for o in p.ops if o not in chain]
        div.nodes = sorted([n for c in chain for n in c.nodes] + div.nodes, key=lambda n: p.order[n.name])
        for ref, producer in list(p.out.items()):
            if producer in chain:
                p.out[ref] = div
