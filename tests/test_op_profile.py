"""Per-op latency measurement (li2023 data): scenarios, model sets, profiler matching, campaigns and datasets."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from edgeplan.cli.main import main
from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir.kernels import Kernel, KernelDeduction
from edgeplan.measure import Store, TimingConfig
from edgeplan.measure.model_sets import expand_models, model_set
from edgeplan.measure.op_campaign import OpCampaignOptions, OpExportOptions
from edgeplan.measure.op_dataset import SIGNIFICANT_DIGITS
from edgeplan.measure.op_timing import ProfileCalls
from edgeplan.measure.scenarios import SCENARIOS, get_scenario

CELL = "nb201:|nor_conv_3x3~0|+|avg_pool_3x3~0|nor_conv_1x1~1|+|skip_connect~0|none~1|nor_conv_3x3~2|"
FAST = TimingConfig(warmup=1, min_repeats=3, max_repeats=3, max_time_s=5.0)

# A value read back from a dataset file keeps SIGNIFICANT_DIGITS significant digits: its relative error.
FILE = 10.0 ** (1 - SIGNIFICANT_DIGITS)


# --- scenarios and model sets -----------------------------------------------------------------------------------


def test_scenarios_cover_runtimes_threads_and_int8() -> None:
    assert set(SCENARIOS) == {"torch-fp32-1t", "torch-fp32-2t", "ort-fp32-1t", "ort-fp32-2t", "ort-int8-1t",
                              "ort-int8-2t", "litert-fp32-1t", "litert-fp32-2t", "litert-int8-1t"}
    s = get_scenario("ort-int8-2t")
    assert (s.runtime, s.threads, s.dtype) == ("onnxruntime", 2, "int8")
    assert get_scenario("torch-fp32-1t").kernel_profile == "torch-eager"
    assert get_scenario("ort-int8-2t").kernel_profile == "onnxruntime-int8"
    assert get_scenario("litert-int8-1t").kernel_profile == "litert-xnnpack-int8"
    assert get_scenario("litert-fp32-2t").kernel_profile == "litert-xnnpack"
    with pytest.raises(InvalidInputError, match="unknown scenario 'tflite'.*torch-fp32-1t"):
        get_scenario("tflite")


def test_model_sets_and_ranges() -> None:
    assert expand_models(["synthetic:3-5", "synthetic:4", "torchvision:resnet18"]) == [
        "synthetic:3", "synthetic:4", "synthetic:5", "torchvision:resnet18"]
    assert len(model_set("synthetic")) == 1000
    timm = model_set("timm-cnns")
    assert len(timm) >= 40 and all(m.startswith("timm:") for m in timm)
    tv = model_set("torchvision-cnns")
    assert "torchvision:resnet50" in tv and not any("vit_" in m or "swin" in m for m in tv)
    assert expand_models(["set:timm-cnns"]) == timm
    transformers = model_set("timm-transformers")
    assert len(transformers) == 29 and "timm:vit_tiny_patch16_224" in transformers and not set(transformers) & set(timm)
    nb = model_set("nb201-sample")
    assert len(set(nb)) == 200 and nb == model_set("nb201-sample") and all(m.startswith("nb201:|") for m in nb)
    with pytest.raises(InvalidInputError, match="empty range"):
        expand_models(["synthetic:9-3"])
    with pytest.raises(InvalidInputError, match="unknown model set 'cnn'"):
        expand_models(["set:cnn"])


# --- matching profiler events to kernels ------------------------------------------------------------------------


@dataclass
class _Range:
    start: int
    end: int

    def elapsed_us(self) -> int:
        return self.end - self.start


@dataclass
class _Event:
    name: str
    input_shapes: Sequence[Any]
    time_range: _Range


@dataclass
class _Node:
    input_shapes: tuple[tuple[int, ...], ...]


class _Graph:
    name = "g"

    def __init__(self, nodes: dict[str, _Node]) -> None:
        self._nodes = nodes

    def node(self, name: str) -> _Node:
        return self._nodes[name]


def test_events_are_matched_by_kind_and_shape_when_the_order_differs() -> None:
    from edgeplan.measure.torch_op_profile import _match_run

    kernels = (Kernel("conv2d", "aten::conv2d", ("a",)), Kernel("conv2d", "aten::conv2d", ("b",)),
               Kernel("relu", "aten::relu", ("c",)))
    graph = _Graph({"a": _Node(((1, 3, 8, 8),)), "b": _Node(((1, 4, 8, 8),)), "c": _Node(((1, 4, 8, 8),))})
    deduction = KernelDeduction("g", "torch-eager", kernels)
    # The runtime ran b's branch first.
    events = [_Event("aten::conv2d", [[1, 4, 8, 8], [4, 4, 3, 3]], _Range(0, 5)),
              _Event("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3]], _Range(5, 7)),
              _Event("aten::relu", [[1, 4, 8, 8]], _Range(7, 8))]
    matched, _ = _match_run(events, deduction, graph)  # type: ignore[arg-type]
    assert [round(ms * 1000) for ms in matched] == [2, 5, 1]
    with pytest.raises(MeasurementError, match="profiled but not deduced: aten::add x1"):
        _match_run([*events, _Event("aten::add", [], _Range(8, 9))], deduction, graph)  # type: ignore[arg-type]
    # An event whose recorded shape fits no kernel (a scalar operand, a list) takes the kernel of its kind left over.
    odd = [events[0], _Event("aten::conv2d", [[7], [1, 3, 8, 8]], _Range(5, 8)), events[2]]
    matched, _ = _match_run(odd, deduction, graph)  # type: ignore[arg-type]
    assert [round(ms * 1000) for ms in matched] == [3, 5, 1]
    # Operators the IR elides as aliases (a contiguous copy, a cat of one tensor) add their time to the one before.
    elided = {"aten::contiguous": "", "aten::cat": ""}
    in_order = [events[1], events[0], events[2]]
    for e, t in zip(in_order, (0, 2, 7), strict=True):
        e.time_range = _Range(t, t + e.time_range.elapsed_us())
    more = [*in_order, _Event("aten::contiguous", [[1, 4, 8, 8]], _Range(8, 11)),
            _Event("aten::cat", [[], []], _Range(11, 15))]
    matched, _ = _match_run(more, deduction, graph, elided)  # type: ignore[arg-type]
    assert [round(ms * 1000) for ms in matched] == [2, 5, 8]
    # Not elidable: an add the IR does not have.
    with pytest.raises(MeasurementError, match="profiled but not deduced: aten::add x1"):
        _match_run([*more, _Event("aten::add", [], _Range(20, 21))], deduction, graph, elided)  # type: ignore[arg-type]
    # A leftover event whose shape cannot be the kernel's is refused, not matched.
    wrong = [events[0], _Event("aten::conv2d", [[9, 9, 9, 9]], _Range(5, 8)), events[2]]
    with pytest.raises(MeasurementError, match="cannot be matched"):
        _match_run(wrong, deduction, graph)  # type: ignore[arg-type]


def test_a_surplus_of_a_deduced_kind_is_found_in_order() -> None:
    from edgeplan.measure.torch_op_profile import _match_run

    # DenseNet: the IR has conv -> bn -> cat; eager also runs a cat of one tensor (and a contiguous copy after it).
    kernels = (Kernel("conv2d", "aten::conv2d", ("a",)), Kernel("bn", "aten::batch_norm", ("b",)),
               Kernel("cat", "aten::cat", ("c",)))
    graph = _Graph({"a": _Node(((1, 3, 8, 8),)), "b": _Node(((1, 4, 8, 8),)), "c": _Node(((1, 4, 8, 8),))})
    deduction = KernelDeduction("g", "torch-eager", kernels)
    elided = {"aten::cat": "", "aten::contiguous": ""}
    events = [_Event("aten::conv2d", [[1, 3, 8, 8]], _Range(0, 10)), _Event("aten::cat", [[], []], _Range(10, 13)),
              _Event("aten::contiguous", [[1, 4, 8, 8]], _Range(13, 20)),
              _Event("aten::batch_norm", [[1, 4, 8, 8]], _Range(20, 21)),
              _Event("aten::cat", [[], []], _Range(21, 25))]
    matched, _ = _match_run(events, deduction, graph, elided)  # type: ignore[arg-type]
    assert [round(ms * 1000) for ms in matched] == [20, 1, 4]  # nothing lost: 25 us in all
    # A walk that cannot align (a surplus cat before any operator it could belong to) is refused.
    early = [_Event("aten::cat", [[], []], _Range(0, 1)), *[e for e in events if e.name != "aten::contiguous"][0:1],
             events[3], events[4]]
    with pytest.raises(MeasurementError, match="do not match"):
        _match_run(early, deduction, graph, elided)  # type: ignore[arg-type]


def test_operators_on_constants_alone_are_timed_as_folded_work() -> None:
    from edgeplan.measure.torch_op_profile import _match_run

    # A ViT: eager expands the class token (a parameter) at every call; the IR folds it into a constant. EdgeNeXt
    # even runs a conv on constants alone (its positional encoding), beside the model's own conv.
    kernels = (Kernel("conv2d", "aten::conv2d", ("a",)), Kernel("cat", "aten::cat", ("b",)))
    graph = _Graph({"a": _Node(((1, 3, 8, 8),)), "b": _Node(((1, 1, 4), (1, 64, 4)))})
    deduction = KernelDeduction("g", "torch-eager", kernels)
    events = [_Event("aten::conv2d", [[1, 8, 4, 4], [4, 8, 1, 1]], _Range(0, 3)),
              _Event("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3]], _Range(3, 13)),
              _Event("aten::expand", [[1, 1, 4], []], _Range(13, 14)),
              _Event("aten::cat", [[], []], _Range(14, 16))]
    allowance = {"aten::expand": 1, "aten::conv2d": 1, "aten::index": 2}  # index was cached: at most, not exactly
    matched, work = _match_run(events, deduction, graph, None, allowance)  # type: ignore[arg-type]
    assert [round(ms * 1000) for ms in matched] == [10, 2] and round(work * 1000) == 4
    # Without the allowance, or beyond it, the surplus is refused as before.
    with pytest.raises(MeasurementError, match="profiled but not deduced: aten::conv2d x1, aten::expand x1"):
        _match_run(events, deduction, graph)  # type: ignore[arg-type]
    with pytest.raises(MeasurementError, match="profiled but not deduced: aten::expand x1"):
        _match_run([*events, _Event("aten::expand", [[1, 1, 4], []], _Range(16, 17))], deduction, graph, None,
                   allowance)  # type: ignore[arg-type]


def test_a_fused_fast_path_is_refused_with_its_reason() -> None:
    from edgeplan.ir.kernels import load_rules
    from edgeplan.measure.torch_op_profile import _match_run

    kernels = (Kernel("linear", "aten::linear", ("a",)), Kernel("attention", "aten::scaled_dot_product_attention",
                                                               ("b",)))
    graph = _Graph({"a": _Node(((1, 5, 16),)), "b": _Node(((1, 2, 5, 8),) * 3)})
    deduction = KernelDeduction("g", "torch-eager", kernels)
    events = [_Event("aten::_native_multi_head_attention", [[1, 5, 16]] * 3, _Range(0, 9))]
    unknown = load_rules("torch-eager").data["not_deduced"]
    with pytest.raises(MeasurementError, match="nn.MultiheadAttention through its fused fast path"):
        _match_run(events, deduction, graph, None, None, unknown)  # type: ignore[arg-type]


def test_identities_the_ir_drops_are_timed_as_folded_work() -> None:
    import torch
    from torch import nn

    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.measure.torch_op_profile import profile_torch_ops

    class Scaled(nn.Module):  # NFNets multiply by a gain of 1.0; eager runs it, the IR writes the input
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.conv(x * 1.0)) + 0

    m, x = Scaled().eval(), torch.randn(1, 3, 16, 16)
    graph = graph_from_torch(m, (x,))
    assert graph.folded_ops == ("mul", "add") and [n.kind.value for n in graph.nodes] == ["input", "conv2d",
                                                                                          "activation"]
    runs = profile_torch_ops(m, (x,), deduce_kernels(graph, "torch-eager"), graph, threads=1,
                             calls=ProfileCalls(runs=2))
    assert [o.kind for o in runs.ops] == ["aten::conv2d", "aten::relu"]
    assert len(runs.folded_ms) == 2 and all(ms > 0 for ms in runs.folded_ms)

    class Cast(nn.Module):  # EVA's type_as to the dtype it has; a permutation that keeps every axis
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            return torch.relu(y.type_as(x).permute(0, 1, 2, 3).to(torch.float32))

    m = Cast().eval()
    graph = graph_from_torch(m, (x,))
    assert set(graph.folded_ops) <= {"type_as", "permute", "to"} and "permute" in graph.folded_ops
    assert [n.kind.value for n in graph.nodes] == ["input", "conv2d", "activation"]
    runs = profile_torch_ops(m, (x,), deduce_kernels(graph, "torch-eager"), graph, threads=1,
                             calls=ProfileCalls(runs=2))
    assert [o.kind for o in runs.ops] == ["aten::conv2d", "aten::relu"]
    assert len(runs.folded_ms) == 2 and all(ms >= 0 for ms in runs.folded_ms)  # their time, of no op's


def test_operators_the_ir_writes_as_several_nodes_are_one_eager_kernel_each() -> None:
    import torch
    from torch import nn

    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.measure.torch_op_profile import profile_torch_ops

    class Mixed(nn.Module):  # ECA's conv1d, NextViT's avg_pool1d, GC ViT's repeats, MobileOne's out += 0, EfficientViT
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.pool = nn.Conv1d(1, 1, 3, padding=1, bias=False), nn.AvgPool1d(2)
            self.proj = nn.Conv2d(4, 8, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.proj(x)
            y += 0
            w = torch.sigmoid(self.conv(y.mean((2, 3)).view(1, 1, -1))).view(1, -1, 1, 1)
            with torch.autocast("cpu", enabled=False):
                z = y * w
            t = self.pool(z.flatten(2)).repeat_interleave(2, dim=2).repeat_interleave(1, dim=0)
            return t.repeat(1, 2, 1)

    m, x = Mixed().eval(), torch.randn(1, 4, 8, 8)
    graph = graph_from_torch(m, (x,))
    assert set(graph.folded_ops) == {"add_", "repeat_interleave"}
    runs = profile_torch_ops(m, (x,), deduce_kernels(graph, "torch-eager"), graph, threads=1,
                             calls=ProfileCalls(runs=2))
    kinds = [o.kind for o in runs.ops]
    for kind in ("aten::conv1d", "aten::avg_pool1d", "aten::repeat_interleave", "aten::repeat"):
        assert kinds.count(kind) == 1
    conv = next(o for o in runs.ops if o.kind == "aten::conv1d")
    assert conv.nodes == ("conv/unsqueeze", "conv", "conv/squeeze") and conv.median_ms > 0
    assert len(runs.folded_ms) == 2


def test_multi_head_attention_on_its_fast_path_is_one_eager_kernel() -> None:
    import torch
    from torch import nn

    from edgeplan.costmodels.opwise.features import category, lead_node
    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.measure.op_profile import _node_dicts
    from edgeplan.measure.torch_op_profile import profile_torch_ops

    class Block(nn.Module):
        def __init__(self, batch_first: bool) -> None:
            super().__init__()
            self.ln = nn.LayerNorm(32)
            self.att = nn.MultiheadAttention(32, 4, batch_first=batch_first)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.ln(x)
            return x + self.att(y, y, y, need_weights=False)[0]

    for batch_first, shape in ((True, (1, 10, 32)), (False, (10, 1, 32))):
        m, x = Block(batch_first).eval(), torch.randn(*shape)
        graph = graph_from_torch(m, (x,))
        deduction = deduce_kernels(graph, "torch-eager")
        runs = profile_torch_ops(m, (x,), deduction, graph, threads=1, calls=ProfileCalls(runs=2))
        kinds = [o.kind for o in runs.ops]
        if batch_first:  # the fast path: every node of the call in one kernel, led by its attention
            assert [c for c, _ in graph.fused_calls] == ["MultiheadAttention"]
            assert kinds == ["aten::layer_norm", "aten::_native_multi_head_attention", "aten::add"]
            fused = runs.ops[1]
            assert set(fused.nodes) == set(graph.fused_calls[0][1]) and len(fused.nodes) > 20
            nodes = _node_dicts(graph, runs.ops)
            lead = lead_node([nodes[n] for n in fused.nodes], fused.kind)
            assert lead["op"] == "attention" and category(lead, fused.kind) == "attention"
        else:  # sequence first: PyTorch runs the module op by op, as the IR has it
            assert graph.fused_calls == () and "aten::scaled_dot_product_attention" in kinds
            assert kinds.count("aten::linear") == 2
    # With the fast path turned off, batch first too runs op by op, and the graph says so.
    m, x = Block(True).eval(), torch.randn(1, 10, 32)
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        graph = graph_from_torch(m, (x,))
        runs = profile_torch_ops(m, (x,), deduce_kernels(graph, "torch-eager"), graph, threads=1,
                                 calls=ProfileCalls(runs=1))
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    assert graph.fused_calls == () and [o.kind for o in runs.ops].count("aten::linear") == 2


def test_a_transformer_with_folded_work_profiles_in_eager_pytorch() -> None:
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir import graph_to_dict
    from edgeplan.measure.op_profile import profile_model

    graph = load_graph("timm:vit_tiny_patch16_224")
    assert graph.folded_ops == ("expand",)  # the class token
    assert graph_to_dict(graph)["folded_ops"] == ["expand"]
    profile = profile_model("timm:vit_tiny_patch16_224", get_scenario("torch-fp32-1t"), runs=1, plain_per_run=1)
    assert profile.folded_work_ms is not None and profile.folded_work_ms > 0
    assert profile.extra()["folded_work_ms"] == profile.folded_work_ms
    assert sum(o.kind == "aten::unbind" for o in profile.ops) == 12
    assert sum(o.kind == "aten::scaled_dot_product_attention" for o in profile.ops) == 12


def test_onnxruntime_kernels_are_traced_to_the_float_nodes() -> None:
    import onnx
    from onnx import helper

    from edgeplan.measure.kernel_check import onnxruntime_kernel_origins

    def node(op: str, ins: list[str], outs: list[str], name: str, domain: str = "") -> onnx.NodeProto:
        return helper.make_node(op, ins, outs, name=name, domain=domain)

    original = helper.make_model(helper.make_graph(
        [node("Conv", ["x", "w"], ["c"], "conv"), node("Relu", ["c"], ["r"], "relu"),
         node("Add", ["r", "x"], ["a"], "add"), node("Constant", [], ["k"], "const")],
        "m", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (1, 8, 4, 4))],
        [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, (1, 8, 4, 4))]))
    # NCHWc: reorder of the input, the conv renamed after its activation's tensor, reorder back, the add.
    nchwc = helper.make_graph(
        [node("ReorderInput", ["x"], ["t0"], "ReorderInput", "com.microsoft.nchwc"),
         node("Conv", ["t0", "t1"], ["t2"], "r_nchwc", "com.microsoft.nchwc"),
         node("ReorderOutput", ["t2"], ["r"], "ReorderOutput_token_3", "com.microsoft.nchwc"),
         node("Add", ["r", "x"], ["a"], "add"), node("Mystery", ["zz"], ["yy"], "fresh")], "o", [], [])
    known = {"conv", "relu", "add"}
    got = onnxruntime_kernel_origins(helper.make_model(nchwc), original, known)
    assert got == {"ReorderInput": ("conv",), "r_nchwc": ("conv", "relu"), "ReorderOutput_token_3": ("relu",),
                   "add": ("add",), "fresh": ()}
    # int8: QLinear kernels keep the float node's name with a token, Q/DQ the tensor's.
    int8 = helper.make_graph(
        [node("QuantizeLinear", ["x", "s", "z"], ["x_QuantizeLinear_Output"], "x_QuantizeLinear"),
         node("QLinearConv", ["x_QuantizeLinear_Output"], ["conv"], "conv_token_4", "com.microsoft"),
         node("DequantizeLinear", ["conv"], ["r_DequantizeLinear"], "r_DequantizeLinear"),
         node("QuantizeLinear", ["r_DequantizeLinear"], ["q9"], "brand_new")], "q", [], [])
    got = onnxruntime_kernel_origins(helper.make_model(int8), original, known)
    assert got == {"x_QuantizeLinear": ("conv",), "conv_token_4": ("conv",), "r_DequantizeLinear": ("relu",),
                   "brand_new": ("relu",)}


def test_torch_ops_profile_every_deduced_kernel() -> None:
    import torch

    from edgeplan.frontends.torch_frontend import graph_from_torch
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.measure.torch_op_profile import profile_torch_ops

    class Branchy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.b = torch.nn.Conv2d(8, 8, 1)
            self.bn = torch.nn.BatchNorm2d(8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.bn(self.a(x))) + self.b(x)

    module, x = Branchy().eval(), torch.randn(1, 8, 16, 16)
    graph = graph_from_torch(module, (x,))
    deduction = deduce_kernels(graph, "torch-eager")
    measured = profile_torch_ops(module, (x,), deduction, graph, threads=1,
                                 calls=ProfileCalls(runs=4, warmup=1, plain_per_run=2))
    ops, plain = measured.ops, measured.plain_ms
    assert [o.kind for o in ops] == [k.kind for k in deduction.kernels]
    assert len(plain) == 8 and all(t > 0 for t in plain)
    assert all(o.median_ms > 0 and o.iqr_rel >= 0 and o.ratio is None for o in ops)
    assert measured.reference_ms == [] and measured.reference_profiled_ms == []
    calls: list[str] = []
    ref_module = torch.nn.ReLU()
    hook = module.register_forward_hook(lambda *_: calls.append("model"))
    try:
        paired = profile_torch_ops(module, (x,), deduction, graph, threads=1,
                                   calls=ProfileCalls(runs=3, warmup=1, plain_per_run=2),
                                   reference=lambda: calls.append("ref") or ref_module(x))
    finally:
        hook.remove()
    # The reference runs once per warm-up, then twice before every plain and every profiled call: the first untimed,
    # so that the timed one never runs straight after the measured model (whose data would slow it down).
    assert calls == ["model", "ref"] + ["ref", "ref", "model"] * (3 * 2 + 3)
    assert len(paired.reference_ms) == len(paired.plain_ms) == 6 and len(paired.reference_profiled_ms) == 3
    assert all(o.ratio is not None and o.ratio > 0 and o.min_ratio is not None for o in paired.ops if not o.noop)
    conv = next(o for o in ops if o.kind == "aten::conv2d")
    assert conv.nodes and all(n in {nd.name for nd in graph.nodes} for n in conv.nodes)
    other = deduce_kernels(graph_from_torch(torch.nn.Sequential(torch.nn.ReLU()), (x,)), "torch-eager")
    with pytest.raises(MeasurementError, match="do not match"):
        profile_torch_ops(module, (x,), other, graph, threads=1, calls=ProfileCalls(runs=1, warmup=0))


def test_kernels_of_nodes_ort_saved_without_a_name_are_matched_in_order() -> None:
    from onnx import helper

    from edgeplan.measure.ort_op_profile import _name_unnamed_nodes, _ort_timings

    graph = helper.make_graph([  # ORT's decomposed HardSwish: two nodes without names between two named ones
        helper.make_node("Gemm", ["x", "w"], ["a"], name="fc1"),
        helper.make_node("HardSigmoid", ["a"], ["h"]),
        helper.make_node("Mul", ["a", "h"], ["hs"]),
        helper.make_node("Gemm", ["hs", "w"], ["y"], name="fc2"),
    ], "g", [], [])
    model = helper.make_model(graph)
    unnamed = _name_unnamed_nodes(model)
    assert unnamed == {"HardSigmoid": ["HardSigmoid#0"], "Mul": ["Mul#0"]}
    assert [n.name for n in model.graph.node] == ["fc1", "HardSigmoid#0", "Mul#0", "fc2"]
    covered = {"fc1": ("fc1",), "HardSigmoid#0": ("hardswish",), "Mul#0": ("hardswish",), "fc2": ("fc2",)}
    kinds = {"fc1": "Gemm", "HardSigmoid#0": "HardSigmoid", "Mul#0": "Mul", "fc2": "Gemm"}

    def event(name: str, op: str) -> dict[str, object]:
        return {"cat": "Node", "name": f"{name}_kernel_time", "dur": 10.0, "args": {"op_name": op}}

    trace = [event(n, op) for _ in range(2) for n, op in
             (("fc1", "Gemm"), ("HardSigmoid_216", "HardSigmoid"), ("Mul_217", "Mul"), ("fc2", "Gemm"))]
    ops = _ort_timings(trace, covered, runs=1, warmup=1, what="m", kinds=kinds, unnamed=unnamed)
    assert [(o.kernel, o.kind, o.nodes) for o in ops[1:3]] == [("HardSigmoid_216", "HardSigmoid", ("hardswish",)),
                                                               ("Mul_217", "Mul", ("hardswish",))]
    extra = [*trace, event("Mul_300", "Mul"), event("Mul_300", "Mul")]  # counts disagree: left untraced
    assert all(not o.nodes for o in _ort_timings(extra, covered, 1, 1, "m", kinds, (), unnamed) if o.kind == "Mul")


def test_op_ratios_pair_each_run_with_the_reference_before_it() -> None:
    from edgeplan.measure.op_timing import OpTiming, with_ratios

    op = OpTiming("conv", "aten::conv2d", ("c",), 2.0, 0.1, 1.0)
    assert with_ratios(op, [1.0, 2.0, 4.0], []) is op
    # Runs 2x, 2x and 4x the reference just before them: the median ratio is 2 although the times vary 4-fold.
    got = with_ratios(op, [1.0, 2.0, 8.0], [0.5, 1.0, 2.0])
    assert got.ratio == pytest.approx(2.0) and got.min_ratio == pytest.approx(1.0 / 0.5)
    assert OpTiming.from_dict(got.to_dict()) == got
    assert "ratio" not in op.to_dict() and OpTiming.from_dict(op.to_dict()) == op
    # A reference time of zero (a clock too coarse) is skipped, never divided by.
    odd = with_ratios(op, [1.0, 3.0], [0.0, 1.0])
    assert odd.ratio == pytest.approx(3.0) and odd.min_ratio == pytest.approx(1.0)
    assert with_ratios(op, [1.0], [0.0]) is op


def test_ort_trace_is_split_into_runs() -> None:
    from edgeplan.measure.ort_op_profile import _ort_timings

    def node(name: str, dur: int) -> dict[str, Any]:
        return {"cat": "Node", "name": f"{name}_kernel_time", "dur": dur,
                "args": {"op_name": "Conv", "output_type_shape": [{"float": [1, 4, 8, 8]}]}}

    trace = [node("c", d) for d in (100, 10, 12, 11)] + [{"cat": "Session", "name": "model_run", "dur": 50}]
    (op,) = _ort_timings(trace, {"c": ("conv0",)}, runs=3, warmup=1, what="m")
    assert op.median_ms == pytest.approx(0.011) and op.nodes == ("conv0",) and op.kind == "Conv"
    assert op.shapes["output_type_shape"] == [{"float": [1, 4, 8, 8]}]
    with pytest.raises(MeasurementError, match="ran 4 times in 3 runs"):
        _ort_timings(trace, {}, runs=2, warmup=1, what="m")


# --- whole models, campaigns, datasets --------------------------------------------------------------------------


@pytest.mark.parametrize(("scenario", "plain"), [("torch-fp32-1t", 2), ("torch-fp32-1t", 0), ("ort-fp32-1t", 2),
                                               pytest.param("ort-int8-1t", 0, marks=pytest.mark.slow)])
def test_profile_model_in_each_runtime(scenario: str, plain: int, tmp_path: Path) -> None:
    from edgeplan.measure.op_profile import profile_model

    p = profile_model(CELL, get_scenario(scenario), runs=3, config=FAST, home=tmp_path, plain_per_run=plain)
    assert p.end_to_end.median_ms > 0 and p.ops and all(o.median_ms >= 0 for o in p.ops)
    assert p.end_to_end.repeats == (3 * plain if plain else FAST.max_repeats)
    kinds = {o.kind for o in p.ops}
    # Every kernel, ORT's included, is traced to IR nodes whose descriptions the profile keeps: it can train.
    assert p.nodes and all(o.nodes for o in p.ops) and all(n in p.nodes for o in p.ops for n in o.nodes)
    if scenario.startswith("torch"):
        assert "aten::conv2d" in kinds
    elif "int8" in scenario:
        assert "com.microsoft.QLinearConv" in kinds
        assert any(f.name.endswith(".int8.onnx") for f in (tmp_path / "onnx").iterdir())
    else:
        assert kinds & {"Conv", "com.microsoft.FusedConv", "com.microsoft.nchwc.Conv"}
    if scenario.startswith("ort"):
        from edgeplan.costmodels.opwise.ops import record_ops

        ops = record_ops({"model": CELL, "ops": [o.to_dict() for o in p.ops], "nodes": p.nodes}, "min")
        convs = [o for o in ops if "Conv" in o.kind and "Reorder" not in o.kind]
        assert convs and all(o.category in ("conv", "dwconv", "gconv") for o in convs)
        # The kernels ORT runs beside them (reorders, (de)quantizations, transposes) are element-wise ops.
        from edgeplan.costmodels.opwise.features import computes_product

        others = [o for o in ops if not computes_product(o.kind)]
        assert others and all(o.category not in ("conv", "dwconv", "gconv", "fc") for o in others)
    assert json.loads(json.dumps(p.extra()))["scenario"] == scenario


def test_campaign_resumes_and_exports_a_dataset(tmp_path: Path) -> None:
    from edgeplan.measure.op_campaign import export_dataset, run_op_campaign
    from edgeplan.measure.op_dataset import load_dataset

    scenario = get_scenario("torch-fp32-1t")
    other = "nb201:|skip_connect~0|+|nor_conv_1x1~0|none~1|+|none~0|none~1|avg_pool_3x3~2|"
    with Store.open(tmp_path / "store.sqlite") as store:
        with pytest.raises(InvalidInputError, match="no measurements in campaign"):
            export_dataset(store, scenario, tmp_path / "d.jsonl.gz")
        first = run_op_campaign(store, scenario, [CELL], home=tmp_path, options=OpCampaignOptions(runs=2, config=FAST))
        assert (first.done_now, first.remaining) == (1, 0)
        again = run_op_campaign(store, scenario, [CELL, other, "synthetic:x"], home=tmp_path,
                                options=OpCampaignOptions(runs=2, config=FAST))
        assert (again.done_before, again.done_now) == (1, 1)
        assert [f.key for f in again.failed] == ["synthetic:x"] and "seed" in again.failed[0].reason
        with pytest.raises(InvalidInputError):
            run_op_campaign(store, scenario, [CELL], home=tmp_path,  # other parameters
                            options=OpCampaignOptions(runs=3, config=FAST))
        n = export_dataset(store, scenario, tmp_path / "d.jsonl.gz", command="test")
        rep = run_op_campaign(store, scenario, [CELL], home=tmp_path,
                              options=OpCampaignOptions(runs=2, config=FAST, repeat="noise"))
        assert rep.campaign == "ops/torch-fp32-1t/noise" and rep.done_now == 1
        assert export_dataset(store, scenario, tmp_path / "r.jsonl.gz", repeat="noise") == 1
        with pytest.raises(InvalidInputError, match="repeat tag"):
            run_op_campaign(store, scenario, [CELL], options=OpCampaignOptions(repeat="a/b"))
    data = load_dataset(tmp_path / "d.jsonl.gz")
    assert n == 2 and data.models() == [CELL, other] and data.scenario == "torch-fp32-1t"
    assert data.provenance["device"]["threads"] == 1 and data.provenance["versions"]["torch"]
    rec = data.records[0]
    assert rec["latency_ms"] > 0 and rec["op_sum_ms"] == pytest.approx(sum(o["ms"] for o in rec["ops"]), rel=FILE)
    assert all(n in rec["nodes"] for o in rec["ops"] for n in o["nodes"])
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write(json.dumps({"format": "other"}) + "\n")
    with pytest.raises(InvalidInputError, match="not an edgeplan op-latency dataset"):
        load_dataset(bad)


@pytest.mark.slow
def test_export_merges_an_earlier_dataset_file(tmp_path: Path) -> None:
    from edgeplan.measure.op_campaign import export_dataset, run_op_campaign
    from edgeplan.measure.op_dataset import load_dataset

    scenario = get_scenario("torch-fp32-1t")
    other = "nb201:|skip_connect~0|+|nor_conv_1x1~0|none~1|+|none~0|none~1|avg_pool_3x3~2|"
    shipped = tmp_path / "shipped.jsonl.gz"
    with Store.open(tmp_path / "a.sqlite") as store:  # an earlier session's Store, gone after its export
        run_op_campaign(store, scenario, [CELL, other], home=tmp_path, options=OpCampaignOptions(runs=2, config=FAST))
        export_dataset(store, scenario, shipped, command="first")
    earlier = load_dataset(shipped)
    third = "nb201:|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    with Store.open(tmp_path / "b.sqlite") as store:
        run_op_campaign(store, scenario, [third, other], home=tmp_path, options=OpCampaignOptions(runs=2, config=FAST))
        # Refused: a file of another scenario, or one measured beside a reference model; the file is left alone.
        other_scenario = tmp_path / "other.jsonl.gz"
        with gzip.open(other_scenario, "wt") as f:
            f.write(json.dumps({**earlier.provenance, "scenario": "ort-fp32-1t"}) + "\n")
        with_reference = tmp_path / "ref.jsonl.gz"
        with gzip.open(with_reference, "wt") as f:
            f.write(json.dumps({**earlier.provenance, "reference": {"model": CELL, "ms": 1.0, "min_ms": 1.0}}) + "\n")
        before = shipped.read_bytes()
        with pytest.raises(InvalidInputError, match="holds scenario 'ort-fp32-1t'"):
            export_dataset(store, scenario, shipped, options=OpExportOptions(merge=other_scenario))
        with pytest.raises(InvalidInputError, match="beside the reference model"):
            export_dataset(store, scenario, shipped, options=OpExportOptions(merge=with_reference))
        with pytest.raises(InvalidInputError, match="does not exist"):
            export_dataset(store, scenario, shipped,
                           options=OpExportOptions(merge=tmp_path / "missing.jsonl.gz"))
        assert shipped.read_bytes() == before
        n = export_dataset(store, scenario, shipped, command="second",
                           options=OpExportOptions(merge=shipped))  # merged in place
        newer = {r.model: r.latency_ms for r in store.measurements(campaign="ops/torch-fp32-1t")}
    merged = load_dataset(shipped)
    assert n == 3 and merged.models() == [CELL, third, other]  # the earlier file's own model first
    assert merged.records[0] == earlier.records[0]
    # the Store's wins
    assert {r["model"]: r["latency_ms"] for r in merged.records[1:]} == pytest.approx(newer, rel=FILE)
    info = merged.provenance["merged"]
    assert (info["kept_models"], info["replaced_models"]) == (1, 1) and info["provenance"] == earlier.provenance
    assert merged.provenance["models"] == 3 and merged.provenance["export_command"] == "second"
    assert merged.provenance["measured_from"] == earlier.provenance["measured_from"]


@pytest.mark.slow
def test_a_paired_campaign_merges_into_an_unpaired_file_at_a_matched_scale(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset measured before the reference pairing takes paired rows at the scale its shared models give."""
    from edgeplan.measure import op_campaign as campaign
    from edgeplan.measure.op_campaign import export_dataset, run_op_campaign
    from edgeplan.measure.op_dataset import load_dataset

    scenario = get_scenario("torch-fp32-1t")
    other = "nb201:|skip_connect~0|+|nor_conv_1x1~0|none~1|+|none~0|none~1|avg_pool_3x3~2|"
    third = "nb201:|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    shipped = tmp_path / "unpaired.jsonl.gz"
    with Store.open(tmp_path / "a.sqlite") as store:
        run_op_campaign(store, scenario, [CELL, other], home=tmp_path, options=OpCampaignOptions(runs=2, config=FAST))
        export_dataset(store, scenario, shipped, command="unpaired")
    earlier = {r["model"]: r for r in load_dataset(shipped).records}
    with Store.open(tmp_path / "b.sqlite") as store:
        run_op_campaign(store, scenario, [CELL, other, third], home=tmp_path,
                        options=OpCampaignOptions(runs=2, plain_per_run=1, reference=CELL))
        paired = {r.model: r.extra["reference"] for r in store.measurements(campaign="ops/torch-fp32-1t")}
        before = shipped.read_bytes()
        monkeypatch.setattr(campaign, "MIN_MATCHED", 3)
        with pytest.raises(InvalidInputError, match="shares 2 models .* at least 3"):
            export_dataset(store, scenario, shipped, options=OpExportOptions(merge=shipped))
        assert shipped.read_bytes() == before  # refused: the file is left alone
        monkeypatch.setattr(campaign, "MIN_MATCHED", 2)
        assert export_dataset(store, scenario, shipped, options=OpExportOptions(merge=shipped)) == 3
    merged = load_dataset(shipped)
    scale = merged.provenance["reference"]
    factors = [earlier[m]["latency_ms"] / paired[m]["ratio"] for m in (CELL, other)]
    assert scale["ms"] == pytest.approx(sum(factors) / 2, rel=FILE)  # the median of the two shared models' factors
    assert scale["matched"]["models"] == 2 and scale["matched"]["file"] == str(shipped)
    rows = {r["model"]: r for r in merged.records}
    assert rows[third]["latency_ms"] == pytest.approx(paired[third]["ratio"] * scale["ms"], rel=FILE)
    assert rows[third]["latency_min_ms"] == pytest.approx(paired[third]["min_ratio"] * scale["min_ms"], rel=FILE)
    assert scale["matched"]["match_on"] is None


@pytest.mark.slow
def test_match_on_restricts_the_models_a_matched_scale_comes_from(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """--match-on: the scale comes from the named models only; where no scale is matched it is refused."""
    from edgeplan.measure import op_campaign as campaign
    from edgeplan.measure.op_campaign import export_dataset, run_op_campaign
    from edgeplan.measure.op_dataset import load_dataset

    scenario = get_scenario("torch-fp32-1t")
    other = "nb201:|skip_connect~0|+|nor_conv_1x1~0|none~1|+|none~0|none~1|avg_pool_3x3~2|"
    shipped = tmp_path / "unpaired.jsonl.gz"
    with Store.open(tmp_path / "a.sqlite") as store:
        run_op_campaign(store, scenario, [CELL, other], home=tmp_path, options=OpCampaignOptions(runs=2, config=FAST))
        export_dataset(store, scenario, shipped, command="unpaired")
        with pytest.raises(InvalidInputError, match="--match-on .* drop --match-on"):
            export_dataset(store, scenario, tmp_path / "x.jsonl.gz",
                           options=OpExportOptions(merge=shipped, match_on=[CELL]))
    earlier = {r["model"]: r for r in load_dataset(shipped).records}
    monkeypatch.setattr(campaign, "MIN_MATCHED", 1)
    with Store.open(tmp_path / "b.sqlite") as store:
        run_op_campaign(store, scenario, [CELL, other], home=tmp_path,
                        options=OpCampaignOptions(runs=2, plain_per_run=1, reference=CELL))
        paired = {r.model: r.extra["reference"] for r in store.measurements(campaign="ops/torch-fp32-1t")}
        before = shipped.read_bytes()
        with pytest.raises(InvalidInputError, match="shares 0 models .* among the 1 --match-on models"):
            export_dataset(store, scenario, shipped, options=OpExportOptions(merge=shipped, match_on=["synthetic:5"]))
        assert shipped.read_bytes() == before
        assert export_dataset(store, scenario, shipped, options=OpExportOptions(merge=shipped, match_on=[other])) == 2
    merged = load_dataset(shipped)
    scale = merged.provenance["reference"]
    # from `other` alone
    assert scale["ms"] == pytest.approx(earlier[other]["latency_ms"] / paired[other]["ratio"], rel=FILE)
    assert scale["matched"]["models"] == 1 and scale["matched"]["match_on"] == 1
    rows = {r["model"]: r for r in merged.records}
    assert rows[other] == earlier[other]  # the bridge keeps the file's row
    # the rest is replaced
    assert rows[CELL]["latency_ms"] == pytest.approx(paired[CELL]["ratio"] * scale["ms"], rel=FILE)
    assert merged.provenance["merged"]["bridge_models"] == 1 and merged.provenance["models"] == 2


@pytest.mark.parametrize("scenario", ["torch-fp32-1t", pytest.param("ort-fp32-1t", marks=pytest.mark.slow)])
def test_campaign_with_a_reference_exports_normalised_times(scenario: str, tmp_path: Path) -> None:
    from edgeplan.measure.op_campaign import export_dataset, run_op_campaign
    from edgeplan.measure.op_dataset import load_dataset

    s = get_scenario(scenario)
    other = "nb201:|skip_connect~0|+|nor_conv_1x1~0|none~1|+|none~0|none~1|avg_pool_3x3~2|"
    with Store.open(tmp_path / "store.sqlite") as store:
        with pytest.raises(InvalidInputError, match="plain_per_run >= 1"):
            run_op_campaign(store, s, [CELL], home=tmp_path,
                            options=OpCampaignOptions(runs=2, plain_per_run=0, reference=CELL))
        with pytest.raises(InvalidInputError, match="reference model 'resnet9000'"):
            run_op_campaign(store, s, [CELL], home=tmp_path,
                            options=OpCampaignOptions(runs=2, plain_per_run=1, reference="resnet9000"))
        rep = run_op_campaign(store, s, [CELL, other], home=tmp_path,
                              options=OpCampaignOptions(runs=2, plain_per_run=2, reference=CELL))
        assert rep.done_now == 2 and not rep.failed
        with pytest.raises(InvalidInputError):  # a resumed campaign keeps its reference
            run_op_campaign(store, s, [CELL], home=tmp_path, options=OpCampaignOptions(runs=2, plain_per_run=2))
        # A campaign an earlier edgeplan measured, timing the reference straight after each call, is not resumed.
        with sqlite3.connect(tmp_path / "store.sqlite") as db:
            db.execute("UPDATE campaigns SET params = ? WHERE name = ?", (json.dumps(
                {"scenario": scenario, "runs": 2, "plain_per_run": 2, "reference": CELL}), f"ops/{scenario}"))
        with pytest.raises(InvalidInputError, match="timed the reference right after each call"):
            run_op_campaign(store, s, [other], home=tmp_path,
                            options=OpCampaignOptions(runs=2, plain_per_run=2, reference=CELL))
        with sqlite3.connect(tmp_path / "store.sqlite") as db:
            db.execute("UPDATE campaigns SET params = ? WHERE name = ?", (json.dumps(
                {"scenario": scenario, "runs": 2, "plain_per_run": 2, "reference": CELL, "reference_warm": True}),
                f"ops/{scenario}"))
        raw = {r.model: r for r in store.measurements(campaign=f"ops/{scenario}")}
        run_op_campaign(store, s, [other], home=tmp_path,
                        options=OpCampaignOptions(runs=2, plain_per_run=2, reference=CELL, repeat="again"))
        export_dataset(store, s, tmp_path / "d.jsonl.gz")
        export_dataset(store, s, tmp_path / "r.jsonl.gz", repeat="again")
        # A repeat whose reference was timed another way than its main campaign's is not exported at its scale.
        with sqlite3.connect(tmp_path / "store.sqlite") as db:
            db.execute("UPDATE campaigns SET params = ? WHERE name = ?", (json.dumps(
                {"scenario": scenario, "runs": 2, "plain_per_run": 2, "reference": CELL}), f"ops/{scenario}"))
        with pytest.raises(InvalidInputError, match="straight after each call .*not comparable"):
            export_dataset(store, s, tmp_path / "refused.jsonl.gz", repeat="again")
        assert not (tmp_path / "refused.jsonl.gz").exists()
        # Nor merged into, or put on the scale of, a file whose reference was timed the earlier way.
        with gzip.open(tmp_path / "d.jsonl.gz", "rt") as f:
            header, *rest = f.read().splitlines()
        assert json.loads(header)["reference"]["warm"] is True
        old = json.loads(header)
        old["reference"].pop("warm")
        with gzip.open(tmp_path / "old.jsonl.gz", "wt") as f:
            f.write("\n".join([json.dumps(old), *rest]) + "\n")
        with sqlite3.connect(tmp_path / "store.sqlite") as db:
            db.execute("UPDATE campaigns SET params = ? WHERE name = ?", (json.dumps(
                {"scenario": scenario, "runs": 2, "plain_per_run": 2, "reference": CELL, "reference_warm": True}),
                f"ops/{scenario}"))
        for kwargs in ({"merge": tmp_path / "old.jsonl.gz"}, {"scale_from": tmp_path / "old.jsonl.gz"}):
            with pytest.raises(InvalidInputError, match="straight after each call .*not comparable"):
                export_dataset(store, s, tmp_path / "refused.jsonl.gz", options=OpExportOptions(**kwargs))
        # ... unless the scales are matched on models measured in both (at least MIN_MATCHED of them)
        with pytest.raises(InvalidInputError, match="give them with --match-on"):
            export_dataset(store, s, tmp_path / "refused.jsonl.gz",
                           options=OpExportOptions(scale_from=tmp_path / "old.jsonl.gz"))
        with pytest.raises(InvalidInputError, match="timed otherwise, and it shares 2 models"):
            export_dataset(store, s, tmp_path / "refused.jsonl.gz",
                           options=OpExportOptions(scale_from=tmp_path / "old.jsonl.gz", match_on=[CELL, other]))
        assert not (tmp_path / "refused.jsonl.gz").exists()
        from edgeplan.measure import op_campaign as campaign_module

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(campaign_module, "MIN_MATCHED", 2)
            export_dataset(store, s, tmp_path / "matched.jsonl.gz",
                           options=OpExportOptions(scale_from=tmp_path / "old.jsonl.gz", match_on=[CELL, other]))
        matched = load_dataset(tmp_path / "matched.jsonl.gz").provenance["reference"]
        # the old file holds the same measurements, so the matched latency is its own reference latency
        assert matched["ms"] == pytest.approx(old["reference"]["ms"], rel=FILE) and matched["warm"] is True
        assert matched["scale_from"]["matched"]["models"] == 2
    data, again = load_dataset(tmp_path / "d.jsonl.gz"), load_dataset(tmp_path / "r.jsonl.gz")
    scale = data.provenance["reference"]
    assert scale["model"] == CELL and scale["models"] == 2 and scale["from_campaign"] == f"ops/{scenario}"
    refs = [raw[m].extra["reference"] for m in (CELL, other)]
    assert scale["ms"] == pytest.approx(sum(r["ms"] for r in refs) / 2, rel=FILE)  # the median of two
    # The repeat converts its ratios with the main campaign's reference latency.
    assert again.provenance["reference"] == {**scale}
    for rec in data.records:
        ref = raw[rec["model"]].extra["reference"]
        assert rec["latency_ms"] == pytest.approx(ref["ratio"] * scale["ms"], rel=FILE)
        assert rec["latency_min_ms"] == pytest.approx(ref["min_ratio"] * scale["min_ms"], rel=FILE)
        assert rec["raw_latency_ms"] == pytest.approx(raw[rec["model"]].latency_ms, rel=FILE)
        assert rec["op_sum_ms"] == pytest.approx(sum(o["ms"] for o in rec["ops"]), rel=FILE)
        for o in rec["ops"]:
            assert o["ms"] == pytest.approx(o["ratio"] * scale["ms"], rel=FILE) and "raw_ms" in o
    # A model that is its own reference runs at one reference: ratio 1 up to the noise between two calls.
    cell = next(r for r in data.records if r["model"] == CELL)
    assert 0.5 < cell["latency_ms"] / scale["ms"] < 2.0


def test_cli_profile_ops_and_export(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from edgeplan.measure.op_campaign import export_dataset

    home = str(tmp_path)
    data = tmp_path / "d.jsonl.gz"
    assert main(["--home", home, "profile", "ops", "--scenario", "torch-fp32-1t"]) != 0
    assert "no models given" in capsys.readouterr().err
    code = main(["--home", home, "profile", "ops", CELL, "--scenario", "torch-fp32-1t", "--runs", "2", "--json",
                 "--export", str(data)])
    report = json.loads(capsys.readouterr().out)[0]
    assert code == 0 and report["done_now"] == 1 and report["export"]["models"] == 1
    assert main(["--home", home, "profile", "ops", CELL, "--scenario", "torch-fp32-1t", "--runs", "2", "--export",
                 str(data)]) == 0  # measured already: written again
    assert f"1 models of torch-fp32-1t written to {data}" in capsys.readouterr().out
    assert main(["--home", home, "profile", "ops", CELL, "--scenario", "torch-fp32-1t", "--runs", "2",
                 "--scale-from", str(data)]) != 0
    assert "add --export FILE" in capsys.readouterr().err
    with Store.open(tmp_path / "store.sqlite") as store:
        with pytest.raises(InvalidInputError, match="no measurements"):  # nothing in the Store for that scenario
            export_dataset(store, get_scenario("ort-int8-1t"), data, options=OpExportOptions(merge=data))
        merged_in_place = OpExportOptions(merge=data)
        assert export_dataset(store, get_scenario("torch-fp32-1t"), data, options=merged_in_place) == 1  # not doubled
        before = data.read_bytes()
        with pytest.raises(InvalidInputError, match="drop --match-on"):  # no scale to match
            export_dataset(store, get_scenario("torch-fp32-1t"), data,
                           options=OpExportOptions(merge=data, match_on=["synthetic:0"]))
    assert data.read_bytes() == before


def test_cli_ops_profile_exits_non_zero_when_a_model_is_not_measured(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    """A model the scenario cannot run is named with its reason, the others are stored, and the exit code says so
    (a script chaining ``ops profile`` and ``ops export`` used to see success with 0 of 1 models measured)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 4, 4))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 8, 4, 4))])
    onnx_file = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(onnx_file))
    home = str(tmp_path / "home")
    args = ["--home", home, "profile", "ops", str(onnx_file), CELL, "--scenario", "torch-fp32-1t", "--runs", "2"]
    assert main(args) != 0
    captured = capsys.readouterr()
    assert f"not measured: {onnx_file}" in captured.out and "eager PyTorch cannot run it" in captured.out
    assert "1 model(s) could not be measured (named above)" in captured.err
    with Store.open(tmp_path / "home" / "store.sqlite") as store:
        assert [m.model for m in store.measurements()] == [CELL]
    assert main([*args, "--json"]) != 0  # the JSON report holds the reason; nothing is measured twice
    report = json.loads(capsys.readouterr().out)[0]
    assert report["done_before"] == 1 and report["failed"][0]["key"].startswith(f"{onnx_file}|")  # and its digest
    # Other settings are another campaign: the message names those that add to this one, and the options that
    # measure anew (the CLI has no campaign names).
    assert main(["--home", home, "profile", "ops", CELL, "--scenario", "torch-fp32-1t", "--runs", "3"]) == 2
    err = capsys.readouterr().err
    assert "measured with --runs 2 (3 plain runs per profiled run) and no --reference" in err and "--repeat TAG" in err
    assert "campaign name" not in err


@pytest.mark.slow
def test_an_onnx_file_of_the_users_is_predicted_and_profiled_in_onnx_runtime(tmp_path: Path) -> None:
    """ONNX Runtime devices used to refuse a user's ONNX file. It is now traced as the zoo's exports are, even with
    its nodes unnamed or named alike: the same network predicts the same latency as its zoo string, fp32 and int8;
    a file that is not ONNX gets the frontend's one-line error."""
    import onnx

    from edgeplan.decisions.predict import predict_models
    from edgeplan.frontends.onnx_export import cache_export
    from edgeplan.frontends.zoo import build_model
    from edgeplan.measure.op_profile import profile_model

    zoo = build_model(CELL)
    named = tmp_path / "cell.onnx"
    cache_export(zoo.module, zoo.example_inputs(), named)
    model = onnx.load(str(named))
    for i, node in enumerate(model.graph.node):
        node.name = "" if i % 2 else "same"  # an exporter may leave nodes unnamed, or name several alike
    unnamed = tmp_path / "unnamed.onnx"
    onnx.save(model, str(unnamed))
    home = tmp_path / "home"
    for device in ("ort-fp32-1t", "ort-int8-1t"):
        own, ref = predict_models([str(unnamed), CELL], device=device, home=home)
        assert not own.prediction.unpredicted and own.model == str(unnamed)
        assert own.prediction.latency_ms == pytest.approx(ref.prediction.latency_ms, rel=1e-9)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(InvalidInputError, match="is not a valid ONNX model"):
        predict_models([str(garbage)], device="ort-fp32-1t", home=home)
    profile = profile_model(str(unnamed), get_scenario("ort-int8-1t"), runs=2, home=home, plain_per_run=1)
    assert profile.ops and all(o.nodes for o in profile.ops) and profile.end_to_end.median_ms > 0


def test_a_model_with_its_weights_in_an_external_file_profiles_in_onnx_runtime(tmp_path: Path) -> None:
    """A model over 2 GB keeps its weights in a file beside it (torchvision's RegNetY-128GF); the graph ORT writes
    after its optimizations refers to that file by a name it does not have beside it. Matching kernels reads the
    graphs without their weights, so such a model is profiled (it used to stop a campaign with onnx's error)."""
    import onnx

    from edgeplan.frontends.onnx_export import cache_export
    from edgeplan.frontends.zoo import build_model
    from edgeplan.measure.ort_op_profile import onnx_input_names, profile_onnxruntime_ops, random_feed

    zoo = build_model(CELL)
    inline = tmp_path / "inline.onnx"
    cache_export(zoo.module, zoo.example_inputs(), inline)
    external = tmp_path / "model" / "cell.onnx"
    external.parent.mkdir()
    onnx.save_model(onnx.load(str(inline)), str(external), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="cell.onnx.data")  # weights over 1 kB, as a large export writes them
    assert (external.parent / "cell.onnx.data").stat().st_size > 0
    feed = random_feed(onnx_input_names(external), [tuple(x.shape) for x in zoo.example_inputs()])
    once = ProfileCalls(runs=1, warmup=0)
    runs = {p.name: profile_onnxruntime_ops(p, feed, threads=1, calls=once) for p in (inline, external)}
    kernels = {name: sorted((o.kind, o.nodes) for o in r.ops) for name, r in runs.items()}
    assert kernels["cell.onnx"] and kernels["cell.onnx"] == kernels["inline.onnx"]  # traced as the inline copy


CELLS = [CELL, "nb201:|nor_conv_1x1~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_1x1~1|none~2|",
         "nb201:|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_1x1~0|skip_connect~1|avg_pool_3x3~2|"]


def _profiled_dataset(tmp_path: Path, scenario: str, runs: int, reference: str | None = None) -> Path:
    """Three NB201 cells measured in ``scenario`` through the CLI and exported; the home is ``tmp_path``."""
    home = str(tmp_path)
    data = tmp_path / f"{scenario}.jsonl.gz"
    assert main(["--home", home, "profile", "ops", *CELLS, "--scenario", scenario, "--runs", str(runs), "--json",
                 "--export", str(data), *(["--reference", reference] if reference else [])]) == 0
    return data


@pytest.mark.slow
def test_cli_fit_then_predict_with_breakdown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = str(tmp_path)
    data = _profiled_dataset(tmp_path, "torch-fp32-1t", runs=3)
    device = tmp_path / "devices" / "mine"
    assert main(["ops", "fit", "--data", str(data), "--method", "lasso", "--out", str(device), "--json",
                 "--min-samples", "3"]) == 0
    capsys.readouterr()
    fitted = json.loads((device / "lasso.json").read_text())["info"]
    assert fitted["command"].startswith("edgeplan ops fit --data ") and "--min-samples 3" in fitted["command"]
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "lasso", "--json",
                 "--breakdown"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["model"] == CELL and result["latency_ms"] > 0 and result["unpredicted_ops"] == []
    assert any(o["kernel"] == "aten::conv2d" and o["ms"] > 0 for o in result["ops"])
    assert result["latency_ms"] == pytest.approx(result["overhead_ms"] + sum(o["ms"] for o in result["ops"]))
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "lasso", "--breakdown"]) == 0
    assert "per-op predictions" in capsys.readouterr().out
    # a kernel the cells never ran (ResNet-18's max pooling) is priced by its category's predictor, and said so
    assert main(["--home", home, "predict", "torchvision:resnet18", "--device", "mine", "--method", "lasso",
                 "--json"]) == 0
    (resnet,) = json.loads(capsys.readouterr().out)
    assert {"kernel": "aten::max_pool2d", "predictor": "category pool", "count": 1} in [
        {k: v for k, v in e.items() if k != "ms"} for e in resnet["stand_in_ops"]]
    assert main(["--home", home, "predict", "torchvision:resnet18", "--device", "mine", "--method", "lasso"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "ops priced by a stand-in" in text and "1 x aten::max_pool2d by category pool" in text
    # Keyed per implementation: NB201's convolutions (16 channels at 32x32, one thread) run natively, and say so.
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "lasso", "--json",
                 "--breakdown"]) == 0
    (by_impl,) = json.loads(capsys.readouterr().out)
    convs = [o for o in by_impl["ops"] if o["kernel"] == "aten::conv2d"]
    assert convs and {o["key"] for o in convs} == {"aten::conv2d:native|conv"} and by_impl["unpredicted_ops"] == []
    # The predictors take the op's context too; from fewer than 900 networks no network feature
    saved = json.loads((tmp_path / "devices" / "mine" / "lasso.json").read_text())
    assert saved["features"]["conv"][-2:] == ["same_op_before", "same_kind_before"]
    assert saved["info"]["network"].startswith("auto: none") and saved["threads"] == 1
    # a profile fitted under another name is timed in its model's scenario (a calibrated device is refused:
    # tests/test_calibrate.py)
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "lasso", "--measure", "1",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["measured_ms"] > 0
    assert main(["ops", "fit", "--data", str(data), "--method", "lasso", "--out",
                 str(tmp_path / "devices" / "torch-fp32-1t"), "--min-samples", "3", "--json"]) == 0
    capsys.readouterr()
    assert main(["--home", home, "predict", CELL, "--device", "torch-fp32-1t", "--method", "lasso", "--measure", "2",
                 "--breakdown", "--json"]) == 0
    (both,) = json.loads(capsys.readouterr().out)
    assert both["measured_ms"] > 0 and all(o["measured_ms"] is not None and o["measured_ms"] >= 0 for o in both["ops"])
    assert both["measured_reference"] is None  # data measured without a reference: times as measured
    assert main(["--home", home, "predict", CELL, "--device", "nowhere"]) != 0
    assert "unknown device 'nowhere'" in capsys.readouterr().err
    assert main(["--home", home, "predict", CELL, "--device", "mine", "--method", "gbdt"]) != 0
    assert "has no 'gbdt' predictors" in capsys.readouterr().err


def test_an_onnx_file_of_the_users_over_the_size_limit_is_refused_by_size(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The traced copy is one protobuf file (at most 2 GB): a larger model gets a message, not protobuf's error."""
    import torch

    from edgeplan.decisions.predict import predict_models
    from edgeplan.frontends.onnx_export import cache_export
    from edgeplan.measure import ort_op_profile

    path = tmp_path / "conv.onnx"
    cache_export(torch.nn.Conv2d(3, 8, 3).eval(), (torch.randn(1, 3, 16, 16),), path)
    monkeypatch.setattr(ort_op_profile, "_INLINE_LIMIT", 100)
    with pytest.raises(InvalidInputError, match=r"GB with its weights; ONNX Runtime devices take ONNX files up to"):
        predict_models([str(path)], device="ort-fp32-1t", home=tmp_path / "home")
    assert not list((tmp_path / "home").glob("onnx/file-*"))


@pytest.mark.slow
def test_retrace_mends_an_ort_datasets_origins_and_keeps_its_times(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    """A dataset traced before the tracing improved (an op traced back to the model's input, as ViT's attention
    products and int8 DenseNet's dequantizations were) is traced again without re-measuring."""
    import gzip

    from edgeplan.measure.op_dataset import load_dataset, retrace_dataset

    data = _profiled_dataset(tmp_path, "ort-fp32-1t", runs=2)
    capsys.readouterr()
    good = load_dataset(data)
    record = good.records[0]
    lines = [json.dumps(good.provenance)]
    ruined = dict(record, ops=[dict(record["ops"][0], nodes=sorted(record["nodes"])), *record["ops"][1:]])
    lines += [json.dumps(r) for r in [ruined, *good.records[1:]]]
    with gzip.open(data, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    out = tmp_path / "retraced.jsonl.gz"
    report = retrace_dataset(data, out, [record["model"]], home=tmp_path)
    assert (report.models, report.ops_changed, list(report.skipped)) == (1, 1, [])
    mended = load_dataset(out)
    assert mended.records == good.records and mended.provenance["retraced"]["ops_changed"] == 1
    assert load_dataset(data).records[0]["ops"][0]["nodes"] == sorted(record["nodes"])  # --out: the input stays
    with pytest.raises(InvalidInputError, match="holds no synthetic:0"):
        retrace_dataset(data, data, ["synthetic:0"], home=tmp_path)
    # Node descriptions of other nodes than the IR's now (another export): the model is not retraced.
    name = record["ops"][0]["nodes"][0]
    other = dict(record, nodes=dict(record["nodes"], **{name: dict(record["nodes"][name], output_shapes=[[9]])}))
    with gzip.open(data, "wt", encoding="utf-8") as f:
        f.write("\n".join([json.dumps(good.provenance), json.dumps(other)]) + "\n")
    before = data.read_bytes()
    with pytest.raises(InvalidInputError, match="no model could be retraced"):
        retrace_dataset(data, data, home=tmp_path)
    assert data.read_bytes() == before
    torch_data = tmp_path / "torch.jsonl.gz"
    with gzip.open(torch_data, "wt", encoding="utf-8") as f:
        f.write(json.dumps(dict(good.provenance, runtime="torch")) + "\n")
    with pytest.raises(InvalidInputError, match="only ONNX Runtime datasets"):
        retrace_dataset(torch_data, torch_data, home=tmp_path)


@pytest.mark.slow
def test_onnxruntime_int8_data_trains_and_predicts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = str(tmp_path)
    data = _profiled_dataset(tmp_path, "ort-int8-1t", runs=2, reference=CELLS[0])
    capsys.readouterr()
    assert main(["ops", "fit", "--data", str(data), "--method", "lasso", "--out",
                 str(tmp_path / "devices" / "ort-int8-1t"), "--min-samples", "2", "--json"]) == 0
    capsys.readouterr()
    # Measured beside a reference: the model knows it, and --measure times the reference beside the model too.
    fitted = json.loads((tmp_path / "devices" / "ort-int8-1t" / "lasso.json").read_text())
    assert fitted["info"]["reference"]["model"] == CELLS[0] and fitted["info"]["reference"]["min_ms"] > 0
    # Prediction reads the kernels from ORT's optimized int8 graph (QLinearConv, QuantizeLinear, ...), not rules.
    assert main(["--home", home, "predict", CELLS[1], "--device", "ort-int8-1t", "--method", "lasso", "--json",
                 "--breakdown", "--measure", "1"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    kinds = {o["kernel"] for o in result["ops"]}
    assert "com.microsoft.QLinearConv" in kinds and "QuantizeLinear" in kinds
    assert result["latency_ms"] > 0 and result["measured_ms"] > 0
    assert all(o["measured_ms"] is not None for o in result["ops"])
    assert result["measured_reference"] == CELLS[0]  # paired with the reference the model's data was measured beside
    assert main(["--home", home, "predict", CELLS[1], "--device", "ort-int8-1t", "--method", "lasso",
                 "--measure", "1"]) == 0
    assert f"paired with the reference {CELLS[0]}" in " ".join(capsys.readouterr().out.split())
    from edgeplan.costmodels.opwise.graph_ops import graph_ops
    from edgeplan.frontends.zoo import load_graph

    with pytest.raises(InvalidInputError, match="reads its kernels from ORT's optimizer"):
        graph_ops(load_graph(CELLS[1]), "onnxruntime-int8")


def test_onnxruntime_conv_walk_back_takes_the_unclaimed_branch() -> None:
    import onnx
    from onnx import helper

    from edgeplan.measure.kernel_check import onnxruntime_kernel_origins

    # relu(conv_a(x) + conv_b(x)): ORT runs conv_a alone and fuses conv_b with the add (Sum) and the relu.
    original = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "wa"], ["ca"], name="conv_a"),
         helper.make_node("Conv", ["x", "wb"], ["cb"], name="conv_b"),
         helper.make_node("Add", ["ca", "cb"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["r"], name="relu")],
        "m", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (1, 8, 4, 4))],
        [helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, (1, 8, 4, 4))]))
    optimized = helper.make_graph(
        [helper.make_node("Conv", ["t0", "w0"], ["ca"], name="conv_a", domain="com.microsoft.nchwc"),
         helper.make_node("Conv", ["t1", "w1", "b", "ca"], ["t2"], name="r_nchwc", domain="com.microsoft.nchwc")],
        "o", [], [])
    got = onnxruntime_kernel_origins(helper.make_model(optimized), original, {"conv_a", "conv_b", "add", "relu"})
    assert got == {"conv_a": ("conv_a",), "r_nchwc": ("conv_b", "add", "relu")}


def test_a_fused_kernel_reading_a_renamed_tensor_stops_at_its_neighbours() -> None:
    """ORT renames some tensors around what it fuses (ViT's MatmulTransposeFusion reads ``.../Reshape_6``, which
    the original calls ``.../Reshape_6_output_0``): the walk back from such a kernel ran to the model's input."""
    import onnx
    from onnx import helper

    from edgeplan.measure.kernel_check import onnxruntime_kernel_origins, onnxruntime_kernels

    ops = [("Relu", "x", "a", "n1"), ("Neg", "a", "b", "n2"), ("Abs", "b", "c", "n3"), ("Sigmoid", "c", "y", "n4")]
    original = helper.make_model(helper.make_graph(
        [helper.make_node(op, [i], [o], name=n) for op, i, o, n in ops], "m",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (1, 8))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (1, 8))]))
    optimized = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="n1"), helper.make_node("Neg", ["a"], ["b_renamed"], name="n2"),
         helper.make_node("AbsSigmoid", ["b_renamed"], ["y"], name="fused", domain="com.example")], "o", [], []))
    got = onnxruntime_kernel_origins(optimized, original, {"n1", "n2", "n3", "n4"})
    assert got == {"n1": ("n1",), "n2": ("n2",), "fused": ("n3", "n4")}
    assert [k.nodes for k in onnxruntime_kernels(original, optimized)] == [("n1",), (), ("n3", "n4")]


def test_an_edited_onnx_file_is_measured_again_and_exported_once(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    """A user's file is keyed by its bytes too: the campaign used to call an edited file measured already."""
    import torch

    from edgeplan.frontends.onnx_export import cache_export
    from edgeplan.measure.op_dataset import load_dataset

    path = tmp_path / "net.onnx"
    home = str(tmp_path / "home")
    args = ["--home", home, "profile", "ops", str(path), "--scenario", "ort-fp32-1t", "--runs", "2", "--json"]
    for width in (8, 32):
        cache_export(torch.nn.Sequential(torch.nn.Conv2d(3, width, 3), torch.nn.ReLU()).eval(),
                     (torch.randn(1, 3, 32, 32),), path)
        assert main(args) == 0
        assert json.loads(capsys.readouterr().out)[0]["done_now"] == 1
    assert main(args) == 0 and json.loads(capsys.readouterr().out)[0]["done_now"] == 0  # unchanged: not again
    out = tmp_path / "d.jsonl.gz"
    assert main([*args, "--export", str(out)]) == 0
    (record,) = load_dataset(out).records
    assert record["model"] == str(path) and any(n["output_shapes"][0][1] == 32 for n in record["nodes"].values())


def test_a_profile_fitted_on_cnns_is_extended_with_other_models_on_its_scale(capsys: pytest.CaptureFixture[str],
                                                                             tmp_path: Path) -> None:
    """`profile ops --export --scale-from` puts another Store's models on a dataset's scale (same reference model);
    `ops fit --extend` adds predictors for their new op kinds to the profile fitted on that dataset."""
    from edgeplan.costmodels.opwise.model import LatencyModel
    from edgeplan.measure.op_campaign import export_dataset
    from edgeplan.measure.op_dataset import load_dataset

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    other = "nb201:|skip_connect~0|+|nor_conv_1x1~0|none~1|+|none~0|none~1|avg_pool_3x3~2|"
    third = "nb201:|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    paired = ["--scenario", "torch-fp32-1t", "--reference", CELL, "--runs", "2", "--json"]
    base, ext = tmp_path / "base.jsonl.gz", tmp_path / "ext.jsonl.gz"
    assert main(["--home", a, "profile", "ops", CELL, other, third, *paired, "--export", str(base)]) == 0
    one = tmp_path / "one.jsonl.gz"
    assert main(["--home", a, "profile", "ops", third, *paired, "--export", str(one)]) == 0
    assert load_dataset(one).models() == [third]  # at the whole campaign's reference latency, as the others
    assert load_dataset(one).provenance["reference"] == load_dataset(base).provenance["reference"]
    assert main(["--home", b, "profile", "ops", "synthetic:3", *paired, "--export", str(ext), "--scale-from",
                 str(base)]) == 0
    capsys.readouterr()
    scale, ours = load_dataset(base).provenance["reference"], load_dataset(ext).provenance["reference"]
    assert ours["ms"] == scale["ms"] and ours["scale_from"]["file"] == str(base)
    own = tmp_path / "own.jsonl.gz"
    assert main(["--home", b, "profile", "ops", "synthetic:3", *paired, "--export", str(own)]) == 0
    capsys.readouterr()
    (row,), (own_row,) = load_dataset(ext).records, load_dataset(own).records
    own_scale = load_dataset(own).provenance["reference"]
    assert own_scale["ms"] == ours["scale_from"]["campaign_reference_ms"]
    for key, ms in (("latency_ms", "ms"), ("latency_min_ms", "min_ms")):  # B's ratios, at A's reference latency
        assert row[key] / own_row[key] == pytest.approx(scale[ms] / own_scale[ms], rel=2 * FILE)
    assert main(["--home", b, "profile", "ops", "synthetic:3", *paired, "--export", str(tmp_path / "x.jsonl.gz"),
                 "--scale-from", str(tmp_path / "missing.jsonl.gz")]) != 0
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "x.jsonl.gz").exists()
    with Store.open(Path(b) / "store.sqlite") as store:  # the library's export: --only, --merge
        scenario = get_scenario("torch-fp32-1t")
        with pytest.warns(UserWarning, match="are not measured in campaign 'ops/torch-fp32-1t' and are left out"):
            export_dataset(store, scenario, tmp_path / "some.jsonl.gz",
                           options=OpExportOptions(only=["synthetic:3", "synthetic:4"]))
        for kwargs, message in [({"scale_from": base, "merge": base}, "drop --scale-from"),
                                ({"only": [third]}, "none of the 1 models to export")]:
            with pytest.raises(InvalidInputError, match=message):
                export_dataset(store, scenario, tmp_path / "x.jsonl.gz",
                               options=OpExportOptions(**kwargs))  # type: ignore[arg-type]
    # only the named models join a merged file; it keeps its own rows of the others the Store holds
    assert main(["--home", a, "profile", "ops", "synthetic:3", *paired]) == 0  # A holds synthetic:3 now
    capsys.readouterr()
    merged = tmp_path / "merged.jsonl.gz"
    with Store.open(Path(a) / "store.sqlite") as store:
        export_dataset(store, get_scenario("torch-fp32-1t"), merged,
                       options=OpExportOptions(merge=one, only=["synthetic:3"]))
    rows = {r["model"]: r for r in load_dataset(merged).records}
    assert list(rows) == [third, "synthetic:3"]
    assert rows[third] == load_dataset(one).records[0]  # the file's row, though the Store holds the model too

    devices = Path(a) / "devices"
    fit = ["--home", a, "ops", "fit", "--method", "lasso", "--min-samples", "2"]
    assert main([*fit, "--data", str(base), "--out", str(devices / "cnn")]) == 0
    capsys.readouterr()
    assert main([*fit, "--data", str(ext), "--extend", "cnn", "--out", str(devices / "wider"), "--json"]) != 0
    assert "from 3 models at more than one shape: nothing to add" in capsys.readouterr().err  # one model only
    assert not (devices / "wider").exists()
    cnn = LatencyModel.load(devices / "cnn" / "lasso.json")
    wider = cnn.extended(load_dataset(ext).records, min_samples=2, min_models=1, info={"extended": "cnn"})
    added = sorted(wider.info["extensions"][-1]["added_ops_per_key"])
    assert "*|dwconv" in added  # NB201 cells have no depthwise convolution; synthetic:3 has
    wider.save(devices / "wider")

    def predictors(device: str) -> dict[str, str]:
        assert main(["--home", a, "predict", "synthetic:3", "--device", device, "--method", "lasso", "--breakdown",
                     "--json"]) == 0
        (result,) = json.loads(capsys.readouterr().out)
        return {o["op"]: o["predicted_by"] for o in result["ops"]}

    narrow, wide = predictors("cnn"), predictors("wider")
    assert set(added) & set(wide.values())  # some ops now have predictors of their own kind
    assert any(narrow[name] != wide[name] for name in wide)
    for args, message in [(["--data", str(own), "--extend", "cnn"], "--scale-from"),
                          (["--data", str(ext), "--extend", "nowhere"], "unknown device 'nowhere'")]:
        assert main([*fit, *args, "--out", str(devices / "bad")]) != 0
        assert message in capsys.readouterr().err
    assert not (devices / "bad").exists()
