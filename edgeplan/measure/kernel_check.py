"""Checking deduced kernels against ONNX Runtime: run its graph optimizations and read the optimized graph.

:func:`check_onnxruntime` compares :func:`edgeplan.ir.kernels.deduce_kernels` for an ``onnxruntime`` profile with
the kernels of the graph ONNX Runtime writes to ``SessionOptions.optimized_model_filepath``
(:func:`onnxruntime_kernels`); :func:`onnxruntime_nchwc_block_size` says which NCHWc profile fits this CPU.
:func:`check_torch_implementations` compares the implementation deduced for each of a graph's eager PyTorch
convolutions (:mod:`edgeplan.ir.kernels.selection`) with the child operator ``torch.profiler`` records when it runs.
onnx, onnxruntime and torch are imported when a function needs them.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.ir.graph import Graph
from edgeplan.ir.kernels import (
    Kernel,
    KernelDeduction,
    KernelMismatch,
    KernelRules,
    compare_kernels,
    deduce_kernels,
    load_rules,
)
from edgeplan.ir.ops import OpKind

__all__ = [
    "INSERTED_KINDS",
    "ImplementationCheck",
    "check_onnxruntime",
    "check_torch_implementations",
    "onnx_graph",
    "onnxruntime_kernel_origins",
    "onnxruntime_kernels",
    "onnxruntime_kind",
    "onnxruntime_nchwc_block_size",
    "onnxruntime_optimized_kernels",
    "onnxruntime_optimized_model",
]


def onnx_graph(model: Any) -> Any:
    """``model`` (a path or an ``onnx.ModelProto``) as a ``ModelProto`` without the weights of a model stored with
    external data: kernel matching reads nodes, tensor names and shapes only. A model over 2 GB (torchvision's
    RegNetY-128GF) keeps its weights in a file beside it that the copy ORT writes after its optimizations refers
    to but does not have."""
    import onnx

    return model if isinstance(model, onnx.ModelProto) else onnx.load(str(model), load_external_data=False)


def onnxruntime_kind(node: Any) -> str:
    """The kind of an ONNX node as edgeplan names kernels: the op type, prefixed by a non-default domain
    (``Conv``, ``com.microsoft.FusedConv``, ``com.microsoft.nchwc.Conv``, ``com.microsoft.QLinearConv``)."""
    return f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


def onnxruntime_kernels(original: Any, optimized: Any) -> list[Kernel]:
    """The kernels of ONNX Runtime's optimized model, each with the original ONNX nodes it runs.

    Parameters
    ----------
    original, optimized
        The model given to ONNX Runtime and the one it wrote to ``SessionOptions.optimized_model_filepath``
        (paths or ``onnx.ModelProto``).

    Returns
    -------
    list[Kernel]
        One kernel per optimized node: ``kind`` is the op type prefixed by a non-default domain, ``nodes`` the
        original nodes between the kernel's inputs and outputs (found by following tensor names back; empty when
        ORT renamed the outputs, as in the NCHWc layout), ``name`` the optimized node's name.
    """

    orig, opt = onnx_graph(original), onnx_graph(optimized)
    producer = {t: n for n in orig.graph.node for t in n.output}
    produced, named = {t for n in opt.graph.node for t in n.output}, {n.name for n in opt.graph.node}
    kernels = []
    for n in opt.graph.node:
        kind = onnxruntime_kind(n)
        if kind == "com.microsoft.nchwc.Conv" and len(n.input) > 3 and n.input[3]:
            kind += "+Sum"
        if any(a.name == "activation" for a in n.attribute) and kind.startswith("com.microsoft.nchwc.Conv"):
            kind += "+" + next(a.s.decode() for a in n.attribute if a.name == "activation")
        kernels.append(Kernel(n.name, kind, _covered(n, producer, produced, named)))
    return kernels


def _covered(node: Any, producer: Mapping[str, Any], produced: Collection[str] = frozenset(),
             named: Collection[str] = frozenset()) -> tuple[str, ...]:
    """Original nodes between ``node``'s inputs and outputs, following tensor names back from its outputs.

    The walk also stops at a tensor another kernel of the optimized graph produces (``produced``: the outputs of
    all its kernels) and at an original node another kernel is named after (``named``: all their names): ORT
    renames some tensors around the nodes it fuses (ViT's ``MatmulTransposeFusion`` reads ``.../Reshape_6``, a
    tensor the original calls ``.../Reshape_6_output_0``), and the walk from such a kernel ran back to the
    model's input, giving one attention product the FLOPs of everything before it.
    """
    own = set(node.output)
    stop = set(node.input)
    covered: list[str] = []
    stack = [t for t in node.output if t]
    while stack:
        p = producer.get(stack.pop())
        if p is None or p.name in covered or (p.name in named and p.name != node.name):
            continue
        covered.append(p.name)
        stack.extend(t for t in p.input if t and t not in stop and (t not in produced or t in own))
    return tuple(reversed(covered))


def _nchwc_signature(deduced: KernelDeduction) -> list[Kernel]:
    """The deduced kernels with ``+Sum`` and ``+Activation`` appended to NCHWc convolutions, as ORT reports them.

    ORT names an NCHWc convolution ``Conv`` whatever it absorbed; :func:`onnxruntime_kernels` appends the ``Sum``
    input and the ``activation`` attribute so that counts per kind also compare what each one fused.
    """
    return [replace(k, kind=_nchwc_kind(k)) for k in deduced.kernels]


def _nchwc_kind(k: Kernel) -> str:
    if k.kind != "com.microsoft.nchwc.Conv":
        return k.kind
    ops = k.name.split("+")
    kind = k.kind + ("+Sum" if "add" in ops else "")
    acts = {"relu": "Relu", "relu6": "Clip", "clip": "Clip", "sigmoid": "Sigmoid", "tanh": "Tanh",
            "leaky_relu": "LeakyRelu", "hardsigmoid": "HardSigmoid"}
    act = next((acts[o] for o in reversed(ops) if o in acts), None)
    return kind + (f"+{act}" if act else "")


def _onnxruntime_rules(profile: str, caller: str) -> tuple[KernelRules, bool]:
    """The rules of ``profile`` and whether it has the NCHWc transform; refuses a profile of another family."""
    rules = load_rules(profile)
    if rules.family != "onnxruntime":
        raise InvalidInputError(f"{caller} needs an onnxruntime profile, got {profile!r}")
    return rules, bool(rules.settings.get("nchwc_block_size"))


def _optimized_model(onnx_path: str | Path, nchwc: bool) -> Any:
    """The ``onnx.ModelProto`` ONNX Runtime's CPU provider writes after its graph optimizations of ``onnx_path``.

    ``ORT_ENABLE_ALL`` (the default level, with NCHWc where the CPU has it) when ``nchwc``, else
    ``ORT_ENABLE_EXTENDED``.
    """
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "optimized.onnx"
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.optimized_model_filepath = str(out)
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL if nchwc else ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        )
        ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        return onnx_graph(out)


def onnxruntime_optimized_model(onnx_path: str | Path) -> Any:
    """The graph ONNX Runtime's CPU provider runs for ``onnx_path`` at its default level (NCHWc where the CPU has
    it, QDQ pairs fused into ``QLinear*`` kernels), as an ``onnx.ModelProto`` (without the weights of a model with
    external data, see :func:`onnx_graph`)."""
    return _optimized_model(onnx_path, True)


def onnxruntime_optimized_kernels(onnx_path: str | Path, profile: str = "onnxruntime") -> list[Kernel]:
    """Run ONNX Runtime's graph optimizations on ``onnx_path`` at the level ``profile`` is compared at.

    Parameters
    ----------
    onnx_path
        The exported model.
    profile
        An ``onnxruntime`` profile (see :func:`check_onnxruntime` for the level of each).

    Returns
    -------
    list[Kernel]
        The kernels of the optimized graph, from :func:`onnxruntime_kernels`.
    """

    _, nchwc = _onnxruntime_rules(profile, "onnxruntime_optimized_kernels")
    return onnxruntime_kernels(onnx_graph(onnx_path), _optimized_model(onnx_path, nchwc))


def check_onnxruntime(
    graph: Graph, onnx_path: str | Path, profile: str = "onnxruntime", by_nodes: bool | None = None
) -> list[KernelMismatch]:
    """Run ONNX Runtime's graph optimizations on ``onnx_path`` and compare its kernels with the deduced ones.

    Parameters
    ----------
    graph
        The IR of the model in ``onnx_path`` (from the ONNX frontend for node-level comparison, or from the torch
        frontend for counts only).
    onnx_path
        The exported model, as given to ONNX Runtime.
    profile
        ``onnxruntime`` (compared with ORT at ``ORT_ENABLE_EXTENDED``, which is the default level's result on
        CPUs without NCHWc kernels) or ``onnxruntime-nchwc8``/``-nchwc16`` (compared at the default level,
        ``ORT_ENABLE_ALL``: right only on a CPU with that NCHWc block size, see
        :func:`onnxruntime_nchwc_block_size`).
    by_nodes
        Compare covered IR nodes too; by default when ``graph``'s node names are those of the ONNX file and the
        profile keeps ORT's tensor names (not NCHWc).

    Returns
    -------
    list[KernelMismatch]
        Empty when the deduction matches ONNX Runtime.

    Raises
    ------
    InvalidInputError
        For an unknown profile or one of another runtime family.
    """

    rules, nchwc = _onnxruntime_rules(profile, "check_onnxruntime")
    original = onnx_graph(onnx_path)
    if by_nodes is None:
        names = {n.name for n in original.graph.node}
        by_nodes = not nchwc and all(n.name in names for n in graph.nodes if n.kind is not OpKind.INPUT)
    observed = onnxruntime_kernels(original, _optimized_model(onnx_path, nchwc))
    deduced = deduce_kernels(graph, rules)
    if nchwc:
        deduced = KernelDeduction(deduced.graph, deduced.profile, tuple(_nchwc_signature(deduced)), deduced.eliminated)
    return compare_kernels(deduced, observed, by_nodes=by_nodes)


@cache
def onnxruntime_nchwc_block_size() -> int | None:
    """The NCHWc block size of ONNX Runtime on this CPU: 8 (AVX2), 16 (AVX-512F), or None (no NCHWc kernels).

    Read from ORT's optimized graph of a probe: one 1x1 convolution with 8 output channels, whose NCHWc filter ORT
    pads to the block size. The matching profile is ``onnxruntime-nchwc{block}``.
    """
    import onnx
    import onnxruntime as ort
    from onnx import helper

    w = helper.make_tensor("w", onnx.TensorProto.FLOAT, (8, 16, 1, 1), [0.0] * 128)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv")
    graph = helper.make_graph(
        [node], "probe", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (1, 16, 4, 4))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (1, 8, 4, 4))], [w],
    )
    with tempfile.TemporaryDirectory() as folder:
        src, out = Path(folder) / "probe.onnx", Path(folder) / "probe.opt.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(src))
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(out)
        options.log_severity_level = 3
        ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
        opt = onnx.load(str(out))
    inits = {t.name: t.dims[0] for t in opt.graph.initializer}
    convs = [n for n in opt.graph.node if n.domain == "com.microsoft.nchwc" and n.op_type == "Conv"]
    return int(inits[convs[0].input[1]]) if convs else None


#: Suffixes ONNX Runtime's optimizers and quantizer append to the node and tensor names they derive from the
#: original ones (NCHWc transform, node splitting, QDQ insertion); stripped one at a time to find the origin.
_DERIVED_SUFFIX = re.compile(r"(_nchwc|_token_\d+|_(?:Quantize|Dequantize)Linear(?:_Output)?|_quantized|_output_\d+)$")

#: Ops ORT folds into a convolution kernel after it (NCHWc ``Conv``'s activation and ``Sum``, ``FusedConv``).
_CONV_EPILOGUE = {"Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Add", "Sum", "BatchNormalization"}

#: Optimized-graph kinds that a runtime inserts around the model's own ops (layout, precision).
INSERTED_KINDS = frozenset({"com.microsoft.nchwc.ReorderInput", "com.microsoft.nchwc.ReorderOutput", "QuantizeLinear",
                            "DequantizeLinear", "Transpose", "com.microsoft.QuantizeLinear",
                            "com.microsoft.DequantizeLinear"})


def onnxruntime_kernel_origins(optimized: Any, original: Any, known: Collection[str]) -> dict[str, tuple[str, ...]]:
    """The nodes of the original float model that each kernel of ONNX Runtime's optimized graph computes.

    Works for the float graph (fusions, NCHWc) and for the int8 one ORT makes of a QDQ model (``QLinearConv`` and
    friends keep the float node's name, ``Q``/``DQ`` the tensor's). For each optimized node: the original nodes
    between its inputs and outputs when the tensor names show them; else the original node or tensor its name, an
    output or an input is derived from (ORT's suffixes stripped), a tensor standing for its producer (or, for a
    model input or weight, its first consumer); a convolution kernel found through its activation or ``Sum`` is
    walked back to the ``Conv`` (the ops it absorbed follow it; when no unclaimed ``Conv`` is found it stays
    untraced, never featurized as its activation). A kernel the runtime inserted (a layout reorder,
    a (de)quantization, a transpose) gets the node whose tensor it converts, so that it has features; a node still
    untraced, the origin of its neighbour in the optimized graph.

    Parameters
    ----------
    optimized
        ORT's optimized model (``onnx.ModelProto`` or path).
    original
        The float model it was made from (for int8: the model before quantization).
    known
        Names of the nodes to keep (the IR's nodes, from :func:`edgeplan.frontends.onnx_frontend.graph_from_onnx`
        of ``original``); other original nodes (constants, eliminated identities) are dropped.

    Returns
    -------
    dict[str, tuple[str, ...]]
        Node names in execution order by optimized node name; empty when nothing could be traced.
    """

    orig, opt = onnx_graph(original), onnx_graph(optimized)
    by_name = {n.name: n for n in orig.graph.node}
    producer = {t: n for n in orig.graph.node for t in n.output}
    produced, named = {t for n in opt.graph.node for t in n.output}, {n.name for n in opt.graph.node}
    consumers: dict[str, list[Any]] = {}
    for n in orig.graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)

    def resolve(name: str) -> Any | None:
        while name:
            if name in by_name:
                return by_name[name]
            if name in producer:
                return producer[name]
            if consumers.get(name):
                return consumers[name][0]
            stripped = _DERIVED_SUFFIX.sub("", name)
            if stripped == name:
                return None
            name = stripped
        return None

    def inserted(n: Any) -> bool:
        # A Transpose of the model's own keeps its node's name; ORT's layout transposes get fresh ones.
        return onnxruntime_kind(n) in INSERTED_KINDS and not (n.op_type == "Transpose" and n.name in by_name)

    out: dict[str, tuple[str, ...]] = {}
    pending: list[tuple[Any, Any]] = []
    for n in opt.graph.node:
        nodes = [x for x in _covered(n, producer, produced, named) if x in known] if not inserted(n) else []
        if not nodes:
            anchor = next((a for a in map(resolve, [n.name, *n.output, *n.input]) if a is not None
                           and a.name in known), None)
            if anchor is not None and n.op_type in ("Conv", "FusedConv", "QLinearConv") and anchor.op_type != "Conv":
                pending.append((n, anchor))  # walked back to its Conv once every direct claim is known
                continue
            nodes = [anchor.name] if anchor is not None else []
        out[n.name] = tuple(nodes)
    claimed = {x for n in opt.graph.node if n.name in out and not inserted(n) for x in out[n.name]}
    lost: set[str] = set()
    for n, anchor in pending:
        chain = _walk_to_conv(anchor, producer, claimed)
        if chain is None:  # a convolution kernel without its Conv: left untraced, so the model is refused
            out[n.name] = ()
            lost.add(n.name)
            continue
        out[n.name] = tuple(x.name for x in reversed(chain) if x.name in known)
        claimed.update(out[n.name])
    # Still untraced (a node ORT named afresh between two others): the origin of its neighbour in the optimized
    # graph, the kernel producing its input first, else the one consuming its output.
    made_by = {t: n.name for n in opt.graph.node for t in n.output}
    used_by = {t: n.name for n in reversed(opt.graph.node) for t in n.input}
    for n in opt.graph.node:
        if not out[n.name] and n.name not in lost:
            near = [made_by.get(t) for t in n.input] + [used_by.get(t) for t in n.output]
            out[n.name] = next((out[x] for x in near if x is not None and out.get(x)), ())
    return {n.name: out[n.name] for n in opt.graph.node}


def _walk_to_conv(anchor: Any, producer: Mapping[str, Any], claimed: Collection[str]) -> list[Any] | None:
    """The chain from ``anchor`` (a fused activation or ``Add``) back through ORT's conv epilogue to a ``Conv`` no
    other kernel computes: at an ``Add``, the input whose chain reaches an unclaimed ``Conv``. None if there is none."""
    chain = [anchor]
    walk = anchor
    while walk.op_type in _CONV_EPILOGUE:
        inputs = [producer[t] for t in walk.input if t in producer]
        if walk.op_type in ("Add", "Sum"):
            for p in inputs:
                rest = [p] if p.op_type == "Conv" else (_walk_to_conv(p, producer, claimed) or [])
                if rest and rest[-1].op_type == "Conv" and rest[-1].name not in claimed:
                    return chain + rest
            return None
        if not inputs:
            return None
        walk = inputs[0]
        chain.append(walk)
        if walk.op_type == "Conv":
            return chain if walk.name not in claimed else None
    return None


@dataclass(frozen=True)
class ImplementationCheck:
    """One operation's deduced implementation against the one a run showed.

    Parameters
    ----------
    node
        The IR node (the first of its shapes in the graph).
    kind
        The runtime kernel kind (``aten::conv2d``).
    deduced
        The implementation the rules deduce (:func:`edgeplan.ir.kernels.selection.implementation`).
    observed
        The implementation whose child operators the profiler recorded, or None when it recorded none of any.
    children
        The child operators recorded under the call.
    """

    node: str
    kind: str
    deduced: str
    observed: str | None
    children: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        """Whether the run showed the deduced implementation."""
        return self.deduced == self.observed


def check_torch_implementations(graph: Graph, threads: int) -> list[ImplementationCheck]:
    """Run each convolution shape of ``graph`` alone in eager PyTorch at ``threads`` intra-op threads, under
    ``torch.profiler``, and compare the implementation it dispatched to with the deduced one.

    Each distinct convolution (channels, kernel, stride, dilation, groups, input shape) is built as a
    ``torch.nn.Conv2d`` with random weights, called once, then once more under the profiler; the implementation
    whose ``profiler`` operators (``edgeplan/data/kernel_rules/torch.json``) appear under the call is the observed
    one. The thread count is restored afterwards.

    Parameters
    ----------
    graph
        A graph with ``conv2d`` nodes.
    threads
        Intra-op threads to run (and deduce) at.

    Returns
    -------
    list[ImplementationCheck]
        One per distinct convolution, in graph order; :attr:`ImplementationCheck.agrees` is the verdict.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    from edgeplan.ir.kernels.selection import implementation, implementation_entries
    from edgeplan.ir.serialize import node_to_dict

    kind = "aten::conv2d"
    names = {str(e["implementation"]): set(e["profiler"]) for e in implementation_entries(kind)}
    before = torch.get_num_threads()
    out, seen = [], set()
    try:
        torch.set_num_threads(threads)
        for node in graph.nodes:
            if node.kind is not OpKind.CONV2D:
                continue
            lead = node_to_dict(node)
            a = lead["attrs"]
            shape = tuple(int(d) for d in lead["input_shapes"][0])
            signature = (shape, a["out_channels"], tuple(a["kernel"]), tuple(a["stride"]), tuple(a["dilation"]),
                         a["groups"])
            deduced = implementation(kind, lead, threads)
            if signature in seen or deduced is None:
                continue
            seen.add(signature)
            (kh, kw), (sh, sw), (dh, dw) = (tuple(int(v) for v in a[f]) for f in ("kernel", "stride", "dilation"))
            conv = torch.nn.Conv2d(shape[1], int(a["out_channels"]), (kh, kw), stride=(sh, sw),
                                   padding=((kh // 2) * dh, (kw // 2) * dw), dilation=(dh, dw),
                                   groups=int(a["groups"]), bias=bool(a.get("bias"))).eval()
            x = torch.randn(*shape)
            with torch.no_grad():
                conv(x)
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    conv(x)
            children = tuple(sorted({e.name for e in prof.events() if e.name.startswith("aten::")}))
            observed = next((n for n, ops in names.items() if ops & set(children)), None)
            out.append(ImplementationCheck(node.name, kind, deduced, observed, children))
    finally:
        torch.set_num_threads(before)
    return out
