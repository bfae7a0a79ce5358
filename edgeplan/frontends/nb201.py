"""NAS-Bench-201 networks from their cell strings.

A NAS-Bench-201 architecture (Dong & Yang, "NAS-Bench-201: Extending the Scope of Reproducible Neural Architecture
Search", ICLR 2020; the topology search space of NATS-Bench) is one 4-node cell, written as

``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|``

where the ``j``-th ``+``-separated group lists the operations on the edges into node ``j`` (1, 2, 3), one per
source node ``0 .. j-1`` in order. The cell is stacked into a fixed skeleton (:func:`build_nb201`) that follows the
official code (``xautodl.models.cell_infers.tiny_network.TinyNetwork`` and ``cell_operations.py`` in
D-X-Y/AutoDL-Projects) so that parameter counts equal the ones the benchmark publishes.

:func:`parse_cell` is pure Python: it does not import torch.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from edgeplan.errors import InvalidInputError

if TYPE_CHECKING:
    import torch

__all__ = ["NB201_OPS", "Nb201Cell", "build_nb201", "parse_cell"]

NB201_OPS: tuple[str, ...] = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
"""The five operations of the NAS-Bench-201 search space, in the official order."""

_NUM_NODES = 4
_STEM_CHANNELS = 16
_CELLS_PER_STAGE = 5
_INPUT_SHAPE = (1, 3, 32, 32)
_FORM = "|op~0|+|op~0|op~1|+|op~0|op~1|op~2|"


@dataclass(frozen=True)
class Nb201Cell:
    """A parsed NAS-Bench-201 cell.

    Attributes
    ----------
    edges
        The six edges ``(op, src, dst)`` in the order of the cell string: ``(0,1), (0,2), (1,2), (0,3), (1,3),
        (2,3)``. ``op`` is one of :data:`NB201_OPS`.
    """

    edges: tuple[tuple[str, int, int], ...]

    def to_str(self) -> str:
        """Return the canonical cell string, the inverse of :func:`parse_cell`."""
        groups = []
        for dst in range(1, _NUM_NODES):
            tokens = [f"{op}~{src}" for op, src, d in self.edges if d == dst]
            groups.append("|" + "|".join(tokens) + "|")
        return "+".join(groups)

    def __str__(self) -> str:
        return self.to_str()


def parse_cell(cell: str) -> Nb201Cell:
    """Parse a NAS-Bench-201 cell string.

    Parameters
    ----------
    cell
        A string of the form ``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|`` with each ``op`` in :data:`NB201_OPS`.
        Parsing is strict: no whitespace, the three groups in order, each listing its sources ``0 .. j-1`` in
        order.

    Returns
    -------
    Nb201Cell
        The six edges of the cell.

    Raises
    ------
    InvalidInputError
        If the string is malformed; the message names the offending group or token and shows the expected form.
    """
    if not isinstance(cell, str):
        raise InvalidInputError(
            f"NAS-Bench-201 cell must be a string like {_FORM!r}, got {type(cell).__name__} {cell!r}"
        )
    groups = cell.split("+")
    if len(groups) != _NUM_NODES - 1:
        raise InvalidInputError(
            f"NAS-Bench-201 cell {cell!r} has {len(groups)} '+'-separated group(s), expected 3 "
            f"(one per node 1, 2, 3), of the form {_FORM!r}"
        )
    edges: list[tuple[str, int, int]] = []
    for dst, group in enumerate(groups, start=1):
        edges.extend(_parse_group(cell, group, dst))
    return Nb201Cell(edges=tuple(edges))


def _parse_group(cell: str, group: str, dst: int) -> list[tuple[str, int, int]]:
    """Parse the group of edges into node ``dst``, e.g. ``|nor_conv_3x3~0|skip_connect~1|`` for node 2."""
    if len(group) < 2 or not (group.startswith("|") and group.endswith("|")):
        raise InvalidInputError(
            f"NAS-Bench-201 cell {cell!r}: group {dst} {group!r} must start and end with '|' (expected form {_FORM!r})"
        )
    tokens = group[1:-1].split("|")
    if len(tokens) != dst:
        raise InvalidInputError(
            f"NAS-Bench-201 cell {cell!r}: group {dst} {group!r} has {len(tokens)} edge(s), expected {dst} "
            f"(one from each node 0..{dst - 1}; expected form {_FORM!r})"
        )
    return [_parse_token(cell, token, src, dst) for src, token in enumerate(tokens)]


def _parse_token(cell: str, token: str, src: int, dst: int) -> tuple[str, int, int]:
    """Parse one ``op~src`` token, checking the op name and that the source is the expected one."""
    where = f"NAS-Bench-201 cell {cell!r}: edge {src}->{dst} token {token!r}"
    op, sep, index = token.partition("~")
    if not sep:
        raise InvalidInputError(f"{where} must be 'op~{src}' (expected form {_FORM!r})")
    if op not in NB201_OPS:
        raise InvalidInputError(f"{where} has unknown op {op!r}; use one of {', '.join(NB201_OPS)}")
    if index != str(src):
        raise InvalidInputError(
            f"{where} has source {index!r}, expected {src}: edges into node {dst} list sources 0..{dst - 1} "
            f"in order (expected form {_FORM!r})"
        )
    return op, src, dst


def build_nb201(cell: str, num_classes: int = 10,
                official: bool = False) -> tuple[torch.nn.Module, tuple[tuple[int, ...], ...]]:
    """Build the NAS-Bench-201 network of a cell string, with random weights, in eval mode.

    The skeleton is the official ``TinyNetwork`` (C=16, N=5): a 3x3 stem conv (16 channels, no bias) + BN on a
    32x32 input; three stages of 5 cells with 16, 32 and 64 channels, joined by two ResNet basic blocks of stride
    2 (ReLU-Conv-BN twice, shortcut 2x2 average pooling + 1x1 conv); then BN + ReLU, global average pooling and a
    linear classifier. Cell operations: ``none`` is dropped (a node whose incoming edges are all ``none`` is the
    zero tensor, as the official ``Zero`` op gives), ``skip_connect`` is the identity, ``nor_conv_kxk`` is
    ReLU-Conv(no bias)-BN, ``avg_pool_3x3`` is a 3x3 average pool, stride 1, padding 1,
    ``count_include_pad=False``. Every BatchNorm is affine and tracks running statistics. A node is the sum of
    its incoming edges; the cell output is node 3. As in the official code every node is computed, even one that
    does not reach the output.

    Deviations from the official module, neither of which changes the parameters or the logits: ``none`` edges
    are dropped, where the official cell computes ``x.mul(0.)`` for each and adds it to the node's sum (so a
    latency measured on the official module includes those multiplies and additions); ``forward`` returns the
    logits alone (the official one returns ``(pooled_features, logits)``). With ``official=True`` (the zoo's
    ``nb201-official:CELL``) ``none`` edges are kept as the official ``x.mul(0.)`` terms: the network the
    published NAS-Bench-201 latency tables (HELP's) were measured on. Its node sums start from the first term,
    where the official Python ``sum`` first adds it to 0 (one scalar add per node, the same in every
    architecture, which the traced graph does not show either).

    Parameters
    ----------
    cell
        A NAS-Bench-201 cell string (see :func:`parse_cell`).
    num_classes
        Number of classes of the linear classifier: 10 (CIFAR-10, default), 100 (CIFAR-100) or 120
        (ImageNet16-120) in the benchmark; any positive integer is accepted.
    official
        Keep ``none`` edges as ``x.mul(0.)`` terms, as the official cell computes them.

    Returns
    -------
    module, input_shapes
        The network, and its example input shapes ``((1, 3, 32, 32),)``.

    Raises
    ------
    InvalidInputError
        If the cell string is malformed or ``num_classes`` is not a positive integer.
    """
    parsed = parse_cell(cell)
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise InvalidInputError(f"num_classes must be a positive integer, got {num_classes!r}")
    layers = _torch_layers()
    module = layers.network(parsed, num_classes, official)
    module.eval()
    return module, (_INPUT_SHAPE,)


class _Layers(NamedTuple):
    """Constructors of the torch modules, defined on first use so that this module loads without torch."""

    network: Callable[[Nb201Cell, int, bool], torch.nn.Module]


@functools.cache
def _torch_layers() -> _Layers:
    """Define the torch modules of the NAS-Bench-201 skeleton (imports torch)."""
    from torch import nn

    def relu_conv_bn(c_in: int, c_out: int, kernel: int, stride: int) -> nn.Module:
        return nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False),
            nn.BatchNorm2d(c_out, affine=True, track_running_stats=True),
        )

    class Zero(nn.Module):
        """The official ``none`` op at stride 1: ``x.mul(0.)``."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mul(0.0)

    def edge_op(op: str, channels: int) -> nn.Module:
        if op == "none":
            return Zero()
        if op == "skip_connect":
            return nn.Identity()
        if op == "nor_conv_1x1":
            return relu_conv_bn(channels, channels, 1, 1)
        if op == "nor_conv_3x3":
            return relu_conv_bn(channels, channels, 3, 1)
        if op == "avg_pool_3x3":
            return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        raise AssertionError(f"no module for op {op!r}")  # parse_cell admits only NB201_OPS

    class Cell(nn.Module):
        """One NAS-Bench-201 cell: node j is the sum of its non-``none`` incoming edges (all, if ``official``)."""

        def __init__(self, cell: Nb201Cell, channels: int, official: bool) -> None:
            super().__init__()
            live = [(op, src, dst) for op, src, dst in cell.edges if official or op != "none"]
            self.edges = nn.ModuleList(edge_op(op, channels) for op, _, _ in live)
            # incoming[j - 1]: (index into self.edges, source node) of the live edges into node j
            self.incoming = [
                [(index, src) for index, (_, src, d) in enumerate(live) if d == dst] for dst in range(1, _NUM_NODES)
            ]

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            nodes = [x]
            for inputs in self.incoming:
                terms = [self.edges[index](nodes[src]) for index, src in inputs]
                nodes.append(_sum(terms) if terms else x.mul(0.0))
            return nodes[-1]

    class ResidualReduction(nn.Module):
        """The official ``ResNetBasicblock`` with stride 2."""

        def __init__(self, c_in: int, c_out: int) -> None:
            super().__init__()
            self.conv_a = relu_conv_bn(c_in, c_out, 3, 2)
            self.conv_b = relu_conv_bn(c_out, c_out, 3, 1)
            self.downsample = nn.Sequential(
                nn.AvgPool2d(kernel_size=2, stride=2, padding=0),
                nn.Conv2d(c_in, c_out, kernel_size=1, stride=1, padding=0, bias=False),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.downsample(x) + self.conv_b(self.conv_a(x))

    def network(cell: Nb201Cell, num_classes: int, official: bool) -> nn.Module:
        c = _STEM_CHANNELS
        parts: dict[str, nn.Module] = {
            "stem_conv": nn.Conv2d(3, c, 3, padding=1, bias=False),
            "stem_bn": nn.BatchNorm2d(c),
        }
        for stage in range(1, 4):
            if stage > 1:
                parts[f"reduction{stage}"] = ResidualReduction(c, 2 * c)
                c *= 2
            for index in range(_CELLS_PER_STAGE):
                parts[f"stage{stage}_cell{index}"] = Cell(cell, c, official)
        parts["last_bn"] = nn.BatchNorm2d(c)
        parts["last_relu"] = nn.ReLU(inplace=True)
        parts["global_pool"] = nn.AdaptiveAvgPool2d(1)
        parts["flatten"] = nn.Flatten(1)
        parts["classifier"] = nn.Linear(c, num_classes)
        return nn.Sequential(OrderedDict(parts))

    return _Layers(network=network)


def _sum(terms: list[torch.Tensor]) -> torch.Tensor:
    """Sum a non-empty list of tensors left to right."""
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total
