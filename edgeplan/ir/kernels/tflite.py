"""The TFLite GPU delegate's kernels (``tflite_gpu.json``): li2023 Algorithm 3.1 (fusion) and 3.2 (kernel selection).

The converter first folds batch norm into the convolution before it (``converter_folds``); the delegate then
merges linkable element-wise ops into the op producing their first input (:func:`_merge_nodes`, Alg. 3.1) and
picks a kernel per op, for a convolution one of Conv2D, Winograd, GroupedConv2D by the vendor's thresholds
(:func:`select_tflite_conv_kernel`, Alg. 3.2). Loads without torch or onnx.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.ir.graph import Graph, Node, Ref
from edgeplan.ir.kernels.groups import Group, fuse
from edgeplan.ir.kernels.rules import KernelRules, node_label, rule_files
from edgeplan.ir.ops import ConvAttrs, OpKind

__all__ = ["select_tflite_conv_kernel", "tflite_groups"]


def tflite_groups(graph: Graph, kept: Sequence[Node], rules: KernelRules, alias: Mapping[Ref, Ref]) -> list[Group]:
    """The kernels of a ``tflite-gpu`` profile for the nodes ``kept``, in execution order.

    Parameters
    ----------
    graph
        The whole graph (for uses, and the inputs and constants ready from the start).
    kept
        Its nodes that run, from :func:`~edgeplan.ir.kernels.groups.split_eliminated`.
    rules
        Rules of a ``tflite-gpu`` profile (its ``vendor`` setting picks the Alg. 3.2 thresholds).
    alias
        Eliminated identity nodes, from :func:`~edgeplan.ir.kernels.groups.bypass`.

    Raises
    ------
    UnsupportedOperatorError
        For an op the delegate has no kernel for (named, with its node).
    """
    groups = []
    for n in kept:
        op_type = rules.lookup("types", n)
        if op_type == "UNSUPPORTED":
            raise UnsupportedOperatorError(
                node_label(n), n.name, f"the TFLite GPU delegate has no kernel for it (profile {rules.profile})"
            )
        groups.append(Group([n], op_type))
    groups = fuse(groups, rules.fusions("converter_folds"), graph, alias)
    groups = _merge_nodes(graph, groups, frozenset(rules.data["linkable"]), alias)
    vendor = rules.data["vendors"][rules.settings["vendor"]]
    for g in groups:
        g.kind = _tflite_kernel(g, rules.data, vendor)
    return groups


def _merge_nodes(
    graph: Graph, groups: list[Group], linkable: frozenset[str], alias: Mapping[Ref, Ref]
) -> list[Group]:
    """li2023 Algorithm 3.1 (TFLite ``MergeNodes``): fuse a linkable op into the op that produces its first input.

    ``cur`` (one output tensor) and the next op are merged when the next op is the only user of that tensor and
    uses it once, as its first input, is linkable (element-wise, one output), and all of its inputs are ready at
    ``cur``'s position. The merged op stays at ``cur``'s position and is tried again, so chains fuse. TFLite's
    ``IsReady`` checks every input of the next op (the paper's listing shows the first only, which is always
    ready); merging an op whose other input is produced later would run it before that input exists.
    """
    nodes = list(groups)
    ready = {Ref(n.name, 0) for n in graph.nodes if n.kind in (OpKind.INPUT, OpKind.CONSTANT)}
    i = 0
    while i < len(nodes):
        cur = nodes[i]
        ready.update(cur.outputs)
        if len(cur.outputs) != 1:
            i += 1
            continue
        out = cur.outputs[0]
        uses = [
            (j, k)
            for j in range(i + 1, len(nodes))
            for k, r in enumerate(nodes[j].inputs())
            if alias.get(r, r) == out
        ]
        if len(uses) != 1 or uses[0][1] != 0:
            i += 1
            continue
        nxt = nodes[uses[0][0]]
        if nxt.kind in linkable and len(nxt.outputs) == 1 and all(alias.get(r, r) in ready for r in nxt.inputs()):
            cur.nodes.extend(nxt.nodes)
            del nodes[uses[0][0]]
            continue  # try the merged node again (TFLite: i -= 1)
        i += 1
    return nodes


def select_tflite_conv_kernel(attrs: ConvAttrs, output_hw: tuple[int, int], vendor: str) -> str:
    """li2023 Algorithm 3.2: the TFLite GPU kernel of a convolution on a GPU of ``vendor``.

    Parameters
    ----------
    attrs
        The convolution.
    output_hw
        Output height and width.
    vendor
        A vendor of ``tflite_gpu.json`` (``adreno``, ``adreno5xx``, ``mali``, ``powervr``, ``amd``).

    Returns
    -------
    str
        ``DepthwiseConv2D``, ``GroupedConv2D``, ``Winograd`` or ``Conv2D``.
    """
    data = rule_files()["tflite_gpu.json"]
    if vendor not in data["vendors"]:
        raise InvalidInputError(f"unknown GPU vendor {vendor!r}; known: {', '.join(data['vendors'])}")
    return _select_conv(attrs, output_hw, data, data["vendors"][vendor])


def _select_conv(a: ConvAttrs, output_hw: tuple[int, int], data: Mapping[str, Any], vendor: Mapping[str, int]) -> str:
    sel = data["conv_selection"]
    if a.depthwise:
        return str(data["kernels"]["depthwise"])
    mult = sel["group_channel_multiple"]
    # CheckGroupedConv2D: TFLite's weights hold the input channels of one group (OHWI, I = in / groups).
    if a.groups != 1 and (a.in_channels // a.groups) % mult == 0 and (a.out_channels // a.groups) % mult == 0:
        return "GroupedConv2D"
    if (
        a.groups != 1
        or list(a.kernel) != sel["winograd_kernel"]
        or list(a.stride) != sel["winograd_stride"]
        or list(a.dilation) != sel["winograd_dilation"]
    ):
        return "Conv2D"
    div, tile = sel["depth_divisor"], sel["tile"]
    src_depth, dst_depth = math.ceil(a.in_channels / div), math.ceil(a.out_channels / div)
    if src_depth < vendor["min_src_depth"] or dst_depth < vendor["min_dst_depth"]:
        return "Conv2D"
    total_tiles = math.ceil(output_hw[0] / tile) * math.ceil(output_hw[1] / tile)
    return "Winograd" if total_tiles >= vendor["min_total_tiles"] else "Conv2D"


def _tflite_kernel(g: Group, data: Mapping[str, Any], vendor: Mapping[str, int]) -> str:
    lead = g.lead
    if isinstance(lead.attrs, ConvAttrs):
        out = lead.output_shapes[0]
        return _select_conv(lead.attrs, (out[2], out[3]), data, vendor)
    return str(data["kernels"].get(g.kind, g.kind))
