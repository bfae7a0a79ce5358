"""Named features of an operation (li2023 Table 3), and the predictor key an operation is predicted by.

An operation is a kernel the runtime runs (:class:`edgeplan.ir.kernels.Kernel`): one IR node in eager PyTorch, a
fused group elsewhere. Its features come from its first node (the one that gives it its kind: the convolution of
a fused conv+bn+relu) and its work from all its nodes. Node descriptions are the plain dicts of
:func:`edgeplan.ir.serialize.node_to_dict`, so features are computed the same way from a live graph and from a
stored dataset.

Categories and their features (li2023 Table 3, with height and width kept apart because not every input is
square, and a few additions marked +):

===============  ===================================================================================================
category         features
===============  ===================================================================================================
``conv``         in_h, in_w, in_c, out_h, out_w, stride, k_h, k_w, filters, input_size, output_size, kernel_size,
                 flops, and in_c_by8, in_c_by16, filters_by8, filters_by16 (+: whether each channel count is a
                 multiple of 8, of 16)
``dwconv``       the same (a depthwise convolution: groups == in_c)
``gconv``        the same and groups, and in_per_group, out_per_group, per_group_by8, per_group_by16,
                 per_group_by4, out_per_group_by4 (+: the channels of one group, in and out, whether a group's
                 input channels are a multiple of 8, of 16, of 4, and whether its output channels are a multiple
                 of 4)
``fc``           in_c, filters, param_size, flops (a linear layer over one vector; over more rows, H x W tokens as
                 ConvNeXt's or a sequence as a transformer's, it is a 1x1 ``conv`` over them)
``matmul``       batch, rows, in_c, filters, input_size, output_size, flops (+: a product of two activations,
                 ``batch`` products of (rows x in_c) by (in_c x filters); attention scores, einsums)
``attention``    batch, q_len, kv_len, in_c, filters, flops (+: scaled dot-product attention over ``batch`` heads,
                 queries and keys of in_c channels, values of filters)
``mean``         in_h, in_w, in_c, k_h, k_w, input_size, flops (global and adaptive pooling, means)
``pool``         in_h, in_w, in_c, out_h, out_w, stride, k_h, k_w, input_size, output_size, flops
``concat``       in_h, in_w, in_c, parts (+: the tensors joined; Table 3's "kernel size"), out_c, input_size,
                 output_size
``split``        the same, over the outputs
``pad``          in_h, in_w, in_c, out_h, out_w, pad_size, output_size
``elementwise``  in_h, in_w, in_c, input_size, inputs (+), output_size (+): activations, batch norm, add, mul,
                 views and everything else
``weight_norm``  filters, fan_in, input_size (+: the standardization of a convolution's weight, ``filters`` rows of
                 ``fan_in`` values, that eager PyTorch runs at every call of NF-ResNets and NFNets; the IR folds it,
                 :func:`edgeplan.costmodels.opwise.ops.folded_op_input` makes it an operation; ``input_size`` is
                 the weight's, without the gain NFNets pass beside it)
===============  ===================================================================================================

The alignment features (+) are edgeplan's. The CPU's convolution kernels block channels by 8 or 16 (AVX2's and
AVX-512's float lanes), and a count that is not a multiple of the block pays for a partial one: a tree cannot tell
a multiple of 16 from its neighbours by thresholds on the count itself. A grouped convolution's speed follows the
width of its groups more than their number (RegNet and ResNeXt run 16-64 groups of 8-256 channels, the synthetic
spaces mostly 2-8 groups), so its features include the channels of one group. oneDNN runs a grouped convolution with
its blocked direct kernel (channels blocked by 4, 8 or 16) only when a group's input and output channels are both
multiples of 4, and otherwise with im2col and GEMM, which can be several times slower at the same FLOPs; the by-4
features let a tree see which path a configuration takes.

Beyond Table 3, every operation has two features of its place in its network (:data:`CONTEXT_FEATURES`, set by
:func:`edgeplan.costmodels.opwise.ops.with_context` from the op order): how many ops before it in the same run are
the same op, and how many are of its kind.

Neither of the last two categories appears in li2023 or in the synthetic CNNs the shipped profiles are fitted on:
a model that has them (a vision transformer) gets them reported as unpredicted by name, not priced by another
category's predictor (the element-wise one knows nothing of an attention's work), unless its profile was
extended with data that holds them (:meth:`edgeplan.costmodels.opwise.model.LatencyModel.extended`; the shipped
``torch-fp32-1t`` and ``torch-fp32-2t`` are, with 30 vision transformers each).

The predictor key is ``{runtime kind}|{category}``: separate predictors for kernels the runtime runs differently
(``aten::max_pool2d`` and ``aten::avg_pool2d``; ``aten::conv2d`` as dense, depthwise or grouped convolution). A model
fitted with a thread count also keys by the implementation the runtime selects by shape (``aten::conv2d:native|conv``:
:meth:`edgeplan.costmodels.opwise.model.LatencyModel.key_of`, :mod:`edgeplan.ir.kernels.selection`).

A kernel traced to a convolution or linear layer that does not compute it (ONNX Runtime's ``QuantizeLinear`` of the
convolution's input, a layout ``Transpose``, an unfused ``BatchNormalization`` or ``LayerNormalization`` that the
int8 graph keeps beside it) is an ``elementwise`` operation over that layer's tensors: its kind's name says no
convolution or matrix product (:func:`computes_product`). Categorised by its node, it would get a convolution's
features (FLOPs, kernel size) and, when its own kind was never trained, a convolution predictor's time, many times
what an element-wise pass over the same tensors costs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from edgeplan.errors import InvalidInputError

__all__ = [
    "CATEGORY_FEATURES",
    "CONTEXT_CAPS",
    "CONTEXT_FEATURES",
    "LEGACY_FEATURES",
    "NETWORK_AUTO",
    "NETWORK_CHOICES",
    "NETWORK_FEATURES",
    "category",
    "computes_product",
    "features",
    "lead_node",
    "network_choice",
    "predictor_key",
]

_CONV = ("in_h", "in_w", "in_c", "out_h", "out_w", "stride", "k_h", "k_w", "filters", "input_size", "output_size",
         "kernel_size", "flops")
_ALIGNED = ("in_c_by8", "in_c_by16", "filters_by8", "filters_by16")
_GROUPS = ("groups", "in_per_group", "out_per_group", "per_group_by8", "per_group_by16", "per_group_by4",
           "out_per_group_by4")
_JOIN = ("in_h", "in_w", "in_c", "parts", "out_c", "input_size", "output_size")

#: Feature names of models saved before a model recorded its own: they predict with these.
LEGACY_FEATURES: dict[str, tuple[str, ...]] = {
    "conv": _CONV,
    "dwconv": _CONV,
    "gconv": (*_CONV, "groups"),
    "fc": ("in_c", "filters", "param_size", "flops"),
    "mean": ("in_h", "in_w", "in_c", "k_h", "k_w", "input_size", "flops"),
    "pool": ("in_h", "in_w", "in_c", "out_h", "out_w", "stride", "k_h", "k_w", "input_size", "output_size", "flops"),
    "concat": _JOIN,
    "split": _JOIN,
    "pad": ("in_h", "in_w", "in_c", "out_h", "out_w", "pad_size", "output_size"),
    "elementwise": ("in_h", "in_w", "in_c", "input_size", "inputs", "output_size"),
    "matmul": ("batch", "rows", "in_c", "filters", "input_size", "output_size", "flops"),
    "attention": ("batch", "q_len", "kv_len", "in_c", "filters", "flops"),
}

#: Feature names of every category, in vector order: the legacy ones, and the alignment features of convolutions.
CATEGORY_FEATURES: dict[str, tuple[str, ...]] = {
    **LEGACY_FEATURES,
    "conv": (*_CONV, *_ALIGNED),
    "dwconv": (*_CONV, *_ALIGNED),
    "gconv": (*_CONV, *_ALIGNED, *_GROUPS),
    "weight_norm": ("filters", "fan_in", "input_size"),
}

#: Features of an operation's place in its network, after its own (:func:`~edgeplan.costmodels.opwise.ops.
#: with_context`): how many operations before it in the same run have its predictor key and identical features
#: (``same_op_before``), and how many have its key (``same_kind_before``), each capped (:data:`CONTEXT_CAPS`). An
#: operation runs faster when the same kernel at the same shapes ran earlier in the same forward pass, and real-world
#: CNNs repeat their blocks far more than random networks do, so a predictor of the op alone prices them at the
#: synthetic networks' first-occurrence speed. Computed from the op order alone, the same way from a measured record
#: and from a graph to predict.
CONTEXT_FEATURES: tuple[str, ...] = ("same_op_before", "same_kind_before")

#: The cap of each context feature. The training networks hold few operations with many repeats, so larger counts
#: are lumped together at the cap; a higher cap does not predict real-world CNNs better.
CONTEXT_CAPS: dict[str, int] = {"same_op_before": 3, "same_kind_before": 8}

#: Features of the operation's whole network, after :data:`CONTEXT_FEATURES` (set by
#: :func:`edgeplan.costmodels.opwise.ops.with_context`, the same for every operation of a network; a model takes
#: them only when fitted with ``network=...``). Every operation of a network with a large memory footprint runs
#: slower than the same operation in a small one, as the allocator and the caches hold more; these features let a
#: predictor see that. ``network_distinct_mib`` (``network="distinct"``, also ``True``)
#: is log2 of the summed MiB of the distinct output sizes of the network's kernels (each size counted once: a proxy
#: for the memory the allocator must hold). ``network_total_mib`` (``network="total"``) adds the parameter bytes of
#: the network's kernels to those distinct output sizes: the memory a call touches, weights included, against the
#: caches. ``network_peak_mib`` (``network="peak"``) is log2 of the largest output of the network's kernels (MiB):
#: the slowdown follows the network's largest tensor better than its sum.
NETWORK_FEATURES: tuple[str, ...] = ("network_distinct_mib", "network_total_mib", "network_peak_mib")

#: Which of :data:`NETWORK_FEATURES` a model fitted with ``network=CHOICE`` takes (``True`` is ``distinct``).
NETWORK_CHOICES: dict[str, tuple[str, ...]] = {"distinct": ("network_distinct_mib",),
                                               "total": ("network_total_mib",),
                                               "peak": ("network_peak_mib",)}

_MEAN_OPS = {"global_pool", "adaptive_pool2d", "mean", "reduce"}

#: Categories of convolutions and matrix products: a kernel of them must compute one (:func:`computes_product`).
PRODUCT_CATEGORIES = ("conv", "dwconv", "gconv", "fc", "matmul", "attention")

#: Words in a kernel kind's name that say it computes a convolution or a matrix product, and whole names that do.
_PRODUCT_WORDS = ("conv", "gemm", "matmul", "attention")
_PRODUCT_NAMES = ("linear", "addmm", "mm", "bmm", "fully_connected")

#: Kernel kinds of one operator the IR writes as reshapes around its work (see :func:`lead_node`).
_LED_PAST_RESHAPES = re.compile(r"(pool1d(_with_indices)?|repeat|repeat_interleave)$")


def computes_product(kind: str) -> bool:
    """Whether a runtime kernel kind computes a convolution or matrix product, from its name (``aten::conv2d``,
    ``com.microsoft.QLinearConv``, ``com.microsoft.nchwc.Conv``, ``Gemm``, ``aten::mm``,
    ``aten::scaled_dot_product_attention``, ...; not ``QuantizeLinear``)."""
    base = kind.rsplit("::", 1)[-1].rsplit(".", 1)[-1].lower()
    return base in _PRODUCT_NAMES or any(w in base for w in _PRODUCT_WORDS)


def category(lead: Mapping[str, Any], kind: str | None = None) -> str:
    """The category of an operation whose first IR node is ``lead`` (a node dict), run as a kernel of ``kind``.

    Given ``kind``, a kernel traced to a convolution or linear layer that does not compute one is ``elementwise``
    (see the module docstring); without it, the category is the node's.
    """
    cat = _node_category(lead)
    if kind is not None and cat in PRODUCT_CATEGORIES and not computes_product(kind):
        return "elementwise"
    return cat


def _node_category(lead: Mapping[str, Any]) -> str:
    op = lead["op"]
    attrs = lead.get("attrs", {})
    if op in ("conv2d", "conv_transpose2d"):
        groups = int(attrs.get("groups", 1))
        if groups == 1:
            return "conv"
        return "dwconv" if groups == int(attrs.get("in_channels", 0)) else "gconv"
    if op == "linear":
        return "conv" if _rows(lead) > 1 else "fc"
    if op in ("matmul", "attention"):
        return str(op)
    if op in _MEAN_OPS:
        return "mean"
    if op == "pool2d":
        return "pool"
    if op in ("concat", "stack"):
        return "concat"
    if op == "split":
        return "split"
    if op == "pad":
        return "pad"
    if op == "weight_norm":
        return "weight_norm"
    return "elementwise"


def _rows(lead: Mapping[str, Any]) -> int:
    """Rows a linear layer multiplies: every axis but the last (1 for a batch-1 vector, H x W for ConvNeXt's
    channels-last tokens, the sequence of a transformer's, on whichever axis it lies: ``nn.MultiheadAttention``
    projects a (sequence, batch, channels) tensor)."""
    shapes = [s for s in lead.get("input_shapes", []) if s]
    return math.prod(int(d) for d in shapes[0][:-1]) if shapes else 1


def lead_node(nodes: Sequence[Mapping[str, Any]], kind: str | None = None) -> Mapping[str, Any]:
    """The node that gives an operation of ``nodes`` (execution order) its category: the first, except that a
    kernel computing a product (:func:`computes_product`) is led by its first convolution or product node, which
    need not come first: ONNX Runtime's ``FusedMatMul`` of attention scores runs the key's transpose, then the
    product (led by the transpose, it was an element-wise op priced at 0.03 ms). A kernel of attention is led by
    its attention node (eager PyTorch's fused ``nn.MultiheadAttention`` begins with its input projection, which a
    convolution's predictor would have priced). A kernel of one operator the IR writes as reshapes around its work
    (eager PyTorch's ``aten::avg_pool1d``: unsqueeze, 2-D pooling, squeeze; ``aten::repeat`` and
    ``aten::repeat_interleave``: unsqueeze, expand, merge) is led by its first node that is not a reshape.

    Parameters
    ----------
    nodes
        The operation's IR node dicts, in execution order (at least one).
    kind
        The runtime kernel kind, when known.

    Returns
    -------
    Mapping
        One of ``nodes``.
    """
    if kind is not None and computes_product(kind):
        attention = next((n for n in nodes if _node_category(n) == "attention"), None)
        if attention is not None and "attention" in kind.lower():  # its projections are not what it is
            return attention
        return next((n for n in nodes if _node_category(n) in PRODUCT_CATEGORIES), nodes[0])
    if kind is not None and _LED_PAST_RESHAPES.search(kind):
        return next((n for n in nodes if n["op"] != "reshape"), nodes[0])
    return nodes[0]


def predictor_key(kind: str, lead: Mapping[str, Any]) -> str:
    """The key of the predictor for an operation of runtime kind ``kind`` whose first IR node is ``lead``."""
    return f"{kind}|{category(lead, kind)}"


def _chw(shape: Sequence[int]) -> tuple[int, int, int]:
    """(channels, height, width) of a batch-first shape; missing axes count 1, axes beyond 4 fold into width."""
    c = int(shape[1]) if len(shape) > 1 else 1
    h = int(shape[2]) if len(shape) > 2 else 1
    w = math.prod(int(d) for d in shape[3:]) if len(shape) > 3 else 1
    return c, h, w


def _size(shapes: Sequence[Sequence[int]]) -> int:
    return sum(math.prod(int(d) for d in s) for s in shapes)


def features(nodes: Sequence[Mapping[str, Any]], kind: str | None = None) -> tuple[str, list[float]]:
    """The category and feature vector of an operation made of ``nodes`` (node dicts, execution order).

    Parameters
    ----------
    nodes
        The IR nodes the kernel runs; the lead (:func:`lead_node`, usually the first) gives the category and
        shapes, FLOPs are summed over all.
    kind
        The runtime kernel kind, when known: it can make the category ``elementwise`` (:func:`category`).

    Returns
    -------
    tuple[str, list[float]]
        The category and its features in :data:`CATEGORY_FEATURES` order.
    """
    lead = lead_node(nodes, kind)
    cat = category(lead, kind)
    attrs = lead.get("attrs", {})
    ins = [s for s in lead.get("input_shapes", []) if s]
    outs = lead.get("output_shapes", []) or [[1]]
    first_in = ins[0] if ins else [1]
    in_c, in_h, in_w = _chw(first_in)
    out_c, out_h, out_w = _chw(outs[0])
    kernel = attrs.get("kernel") or attrs.get("window") or attrs.get("kernel_size") or [1, 1]
    if isinstance(kernel, int):
        kernel = [kernel, kernel]
    stride = attrs.get("stride") or [1]
    stride = stride if isinstance(stride, int) else int(stride[0])
    flops = float(sum(int(n.get("flops", 0)) for n in nodes))
    value: dict[str, float] = {
        "in_h": in_h, "in_w": in_w, "in_c": in_c, "out_h": out_h, "out_w": out_w, "out_c": out_c,
        "stride": stride, "k_h": int(kernel[0]), "k_w": int(kernel[-1]),
        "filters": out_c, "input_size": _size(ins), "output_size": _size(outs),
        "kernel_size": int(lead.get("params", 0)), "param_size": int(lead.get("params", 0)), "flops": flops,
        "groups": int(attrs.get("groups", 1)), "inputs": len(ins),
    }
    if cat == "fc" or (cat == "conv" and lead["op"] == "linear"):
        value["in_c"] = int(first_in[-1])
        value["filters"] = int(outs[0][-1])
        if cat == "conv":  # a linear layer over H x W tokens is a 1x1 convolution over them
            value["in_h"] = value["out_h"] = int(first_in[1]) if len(first_in) == 4 else _rows(lead)
            value["in_w"] = value["out_w"] = int(first_in[2]) if len(first_in) == 4 else 1
            value["k_h"] = value["k_w"] = value["stride"] = 1
    if cat == "mean":
        value["k_h"], value["k_w"] = (in_h, in_w) if out_h * out_w == 1 else (kernel[0], kernel[-1])
    elif cat == "concat":
        value["in_c"] = sum(_chw(s)[0] for s in ins)
        value["parts"] = len(ins)
    elif cat == "split":
        value["out_c"] = out_c
        value["parts"] = len(outs)
    elif cat == "pad":
        value["pad_size"] = _size(outs) - _size(ins)
    elif cat == "weight_norm":  # the weight's (1, filters, fan_in) view; not the affine gain NFNets pass beside it
        value["fan_in"] = in_h * in_w
        value["input_size"] = _size(ins[:1])
    elif cat == "matmul":  # (..., rows, in_c) x (..., in_c, filters): the output's leading axes are the batch
        out = [int(d) for d in outs[0]] or [1]
        value["filters"] = out[-1]
        value["rows"] = out[-2] if len(out) > 1 else 1
        value["batch"] = math.prod(out[:-2])
        value["in_c"] = int(attrs.get("contraction") or first_in[-1])
    elif cat == "attention":  # query (..., q_len, in_c), key (..., kv_len, in_c), value (..., kv_len, filters)
        q = [int(d) for d in first_in]
        v = [int(d) for d in (ins[2] if len(ins) > 2 else first_in)]
        value["batch"] = math.prod(q[:-2])
        value["q_len"] = q[-2] if len(q) > 1 else 1
        value["kv_len"] = v[-2] if len(v) > 1 else 1
        value["in_c"], value["filters"] = q[-1], v[-1]
    groups = max(int(value["groups"]), 1)
    per_group, out_group = int(value["in_c"]) // groups, int(value["filters"]) // groups
    value.update({"in_c_by8": _multiple(value["in_c"], 8), "in_c_by16": _multiple(value["in_c"], 16),
                  "filters_by8": _multiple(value["filters"], 8), "filters_by16": _multiple(value["filters"], 16),
                  "in_per_group": value["in_c"] / groups, "out_per_group": value["filters"] / groups,
                  "per_group_by8": _multiple(per_group, 8), "per_group_by16": _multiple(per_group, 16),
                  "per_group_by4": _multiple(per_group, 4),
                  "out_per_group_by4": _multiple(out_group, 4)})
    return cat, [float(value[f]) for f in CATEGORY_FEATURES[cat]]


def _multiple(count: float, of: int) -> float:
    """1.0 when the channel count ``count`` is a multiple of ``of``, else 0.0."""
    return float(int(count) % of == 0)


#: ``network="auto"`` (:func:`network_choice`): the network feature it takes, and the fewest training networks it
#: takes it from. A network feature has one value per training network, so with few networks the trees can use it
#: to tell them apart rather than to learn how a network's size slows its operations; it helped the held-out networks
#: from li2023's 900 training networks on, and not from fewer (``docs/figures.md``).
NETWORK_AUTO: tuple[str, int] = ("peak", 900)


def network_choice(network: bool | str | None, networks: int | None = None) -> str | None:
    """:class:`~edgeplan.costmodels.opwise.estimator.OpLatencyEstimator`'s ``network`` as a key of
    :data:`NETWORK_CHOICES`.

    Parameters
    ----------
    network
        True (``distinct``), a key of :data:`NETWORK_CHOICES`, ``"auto"`` (:data:`NETWORK_AUTO`'s feature when
        fitted on at least its count of networks, else none), or False / None (no network feature).
    networks
        How many networks the model is fitted on (for ``"auto"``); None: as many as ``"auto"`` needs.

    Returns
    -------
    str or None

    Raises
    ------
    InvalidInputError
        For a name that is not a key of :data:`NETWORK_CHOICES` or ``"auto"``.
    """
    if network is True:
        return "distinct"
    if not network:
        return None
    if network == "auto":
        feature, fewest = NETWORK_AUTO
        return feature if networks is None or networks >= fewest else None
    if network not in NETWORK_CHOICES:
        raise InvalidInputError(f"unknown network feature {network!r}; choose one of {', '.join(NETWORK_CHOICES)}, "
                                "or auto")
    return str(network)
