"""An executable network whose conv layers run the primitives a selection plan chose (mulder2020 Fig. 2 step iv).

Every selected ``nn.Conv2d`` is replaced by a :class:`SelectedConv`; the rest of the model is untouched. Tensors keep
their logical NCHW shape everywhere, so every other layer computes exactly what it did; what changes is their
*memory order*. A :class:`SelectedConv` reads its input in its primitive's input layout (``chw``, ``hcw`` or
``hwc``: a free view when the memory is already in that order, otherwise a copy, which *is* the layout
transformation), runs the primitive and returns its output as an NCHW view of memory in the primitive's output
layout (``hwc`` is PyTorch's ``channels_last``, see :func:`batch_view`). The other layers then run on that memory
order as PyTorch decides: element-wise ops, batch norm, pooling and concatenation keep ``chw`` and
``channels_last``; ``hcw`` is no PyTorch memory format, so most kernels return it as ``chw``; a residual addition
takes the order PyTorch picks from its operands rather than the join layout the plan chose; flatten and linear
copy to ``chw``. So the copies made at run time are the plan's transformations where the flow is conv -> conv
through such layers, and may differ from them at joins and around ``hcw``; the measured latency includes whatever
was really done, never hidden.

Batch size 1 (the primitives convolve one 3-D input). The network runs on the CPU or on a CUDA device; there every
timed run ends with a synchronisation, and outputs are checked with TF32 off (the float32 arithmetic the primitives'
tolerances are stated for) while the timed runs keep PyTorch's defaults, the settings the tables were measured with.
"""

from __future__ import annotations

import copy
import functools
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from edgeplan.errors import InvalidInputError
from edgeplan.ir import Node
from edgeplan.ir.ops import Activation, ActivationAttrs, OpKind, PoolAttrs, PoolMode
from edgeplan.measure.harness import use_threads
from edgeplan.planners.pbqp.network import FlowOp
from edgeplan.primitives import get_primitive
from edgeplan.primitives.spec import ConvSpec

__all__ = ["LatencySummary", "SelectedConv", "batch_view", "build_selected_network", "from_memory",
           "measure_flow_costs", "measure_interleaved", "output_error", "to_memory"]

_TO_MEMORY = {"chw": (0, 1, 2), "hcw": (1, 0, 2), "hwc": (1, 2, 0)}
_FROM_MEMORY = {"chw": (0, 1, 2), "hcw": (1, 0, 2), "hwc": (2, 0, 1)}
_IDENTITY = (0, 1, 2)


def to_memory(x: torch.Tensor, layout: str) -> torch.Tensor:
    """The 3-D tensor of a logical ``(C, H, W)`` tensor, contiguous in ``layout`` (a view when already so)."""
    order = _TO_MEMORY[layout]
    return (x if order == _IDENTITY else x.permute(order)).contiguous()  # no call for nothing: layers pay per call


def from_memory(y: torch.Tensor, layout: str) -> torch.Tensor:
    """The logical ``(C, H, W)`` view of a tensor stored in ``layout``."""
    return y.permute(_FROM_MEMORY[layout])


def batch_view(y: torch.Tensor, layout: str) -> torch.Tensor:
    """The logical ``(1, C, H, W)`` view of a tensor stored in ``layout``.

    The batch axis is added before permuting, so that its stride is the whole tensor's size: an ``hwc`` tensor is
    then PyTorch's ``channels_last`` memory format, which its kernels recognise and keep (max pooling on it is
    far faster than on NCHW here); adding the axis after permuting gives a batch stride PyTorch does not accept
    as channels-last.
    """
    order = _FROM_MEMORY[layout]
    return y.unsqueeze(0) if order == _IDENTITY else y.unsqueeze(0).permute(0, *(d + 1 for d in order))


class SelectedConv(nn.Module):
    """A conv layer run by one primitive, with weights prepared once.

    Parameters
    ----------
    conv
        The layer it replaces (square kernel and stride, equal padding, one group, no dilation).
    primitive
        Name of the primitive (:func:`edgeplan.primitives.get_primitive`).
    im
        Side of the square input.
    """

    def __init__(self, conv: nn.Conv2d, primitive: str, im: int) -> None:
        super().__init__()
        self.primitive = get_primitive(primitive)
        pad = conv.padding
        if isinstance(pad, str) or len(set(pad)) != 1:
            raise InvalidInputError(f"{primitive}: padding {pad!r} is not one integer for both axes")
        self.spec = ConvSpec(conv.in_channels, conv.out_channels, im, conv.kernel_size[0], conv.stride[0],
                             padding=int(pad[0]))
        self.primitive.check(self.spec)
        if not self.primitive.supports_device(conv.weight.device):
            raise InvalidInputError(f"{primitive} does not run on {conv.weight.device} (oneDNN's primitives, "
                                    "torch-onednn-*, are CPU-only); choose another primitive for that layer")
        bias = conv.bias.detach() if conv.bias is not None else None
        self.prepared = self.primitive.prepare(conv.weight.detach(), bias, spec=self.spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Convolve a logical NCHW batch of one."""
        if x.dim() != 4 or x.shape[0] != 1:
            raise InvalidInputError(f"{self.primitive.name}: the selected network runs batch 1, got {tuple(x.shape)}")
        memory = to_memory(x[0], self.primitive.input_layout.value)
        y = self.primitive.execute(memory, self.prepared)
        return batch_view(y, self.primitive.output_layout.value)

    def extra_repr(self) -> str:
        """The primitive and layer."""
        return f"{self.primitive.name}, {self.spec.describe()}"


def build_selected_network(model: nn.Module, choices: Mapping[str, str], conv_inputs: Mapping[str, int]) -> nn.Module:
    """A copy of ``model`` whose chosen conv layers run their primitives.

    Parameters
    ----------
    model
        The original network (left unchanged).
    choices
        ``module path of a conv layer -> primitive`` (e.g. :meth:`SelectionPlan.choices`).
    conv_inputs
        Side of each chosen conv layer's square input, by module path.

    Returns
    -------
    torch.nn.Module
        The optimized network, in eval mode.

    Raises
    ------
    InvalidInputError
        A chosen name is not an ``nn.Conv2d`` of the model, or its primitive does not apply to it.
    """
    net = copy.deepcopy(model).eval()
    for name, primitive in choices.items():
        try:
            conv = net.get_submodule(name)
        except AttributeError as e:
            raise InvalidInputError(f"the plan's layer {name!r} is not a module of the model") from e
        if not isinstance(conv, nn.Conv2d):
            raise InvalidInputError(f"the plan's layer {name!r} is a {type(conv).__name__}, not a Conv2d")
        net.set_submodule(name, SelectedConv(conv, primitive, conv_inputs[name]))
    return net


def output_error(reference: torch.Tensor, outputs: torch.Tensor) -> float:
    """``max |a - b| / max |a|`` (the measure of the primitives' stated tolerances)."""
    scale = float(reference.abs().max())
    return float((outputs - reference).abs().max()) / (scale if scale > 0 else 1.0)



def _synchronizer(torch_device: torch.device) -> Callable[[], None]:
    """What ends a timed run on ``torch_device``: waiting for CUDA's queued kernels, nothing on the CPU."""
    if torch_device.type == "cuda":
        return functools.partial(torch.cuda.synchronize, torch_device)
    return lambda: None


@contextmanager
def _float32_arithmetic(torch_device: torch.device) -> Iterator[None]:
    """TF32 off for cuDNN convolutions and matmuls on CUDA (outputs are checked in float32), every setting put back
    as it was; nothing to change on the CPU.

    PyTorch 2.9 and later set TF32 per backend and operator (``fp32_precision``) and refuse to read the legacy
    ``allow_tf32`` flags once the two APIs disagree, so the new attributes are used where they exist. Neither way
    touches cuDNN's ``benchmark`` or ``deterministic`` settings.
    """
    if torch_device.type != "cuda":
        yield
        return
    cudnn: Any = torch.backends.cudnn
    matmul: Any = torch.backends.cuda.matmul
    if hasattr(getattr(cudnn, "conv", None), "fp32_precision") and hasattr(matmul, "fp32_precision"):
        saved = (cudnn.conv.fp32_precision, matmul.fp32_precision)
        cudnn.conv.fp32_precision, matmul.fp32_precision = "ieee", "ieee"
        try:
            yield
        finally:
            cudnn.conv.fp32_precision, matmul.fp32_precision = saved
        return
    legacy = (cudnn.allow_tf32, matmul.allow_tf32)
    cudnn.allow_tf32, matmul.allow_tf32 = False, False
    try:
        yield
    finally:
        cudnn.allow_tf32, matmul.allow_tf32 = legacy


@dataclass(frozen=True)
class LatencySummary:
    """Latency of one network variant: median and quartiles of its timed runs, in ms."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    runs: int


def measure_interleaved(variants: Mapping[str, nn.Module], x: torch.Tensor, *, threads: int, rounds: int = 15,
                        warmup: int = 2) -> dict[str, LatencySummary]:
    """Time several networks on the same input, interleaved round by round so that machine noise hits all alike.

    Parameters
    ----------
    variants
        Networks by label.
    x
        The input.
    threads
        Intra-op threads for the whole measurement.
    rounds
        Timed runs of each network (one per round).
    warmup
        Untimed runs of each network first.

    Returns
    -------
    dict
        A :class:`LatencySummary` per label. On a CUDA input every run ends with a device synchronisation.
    """
    samples: dict[str, list[float]] = {k: [] for k in variants}
    sync = _synchronizer(x.device)
    with use_threads(threads), torch.inference_mode():
        for net in variants.values():
            for _ in range(warmup):
                net(x)
        sync()
        for _ in range(rounds):
            for label, net in variants.items():
                start = time.perf_counter_ns()
                net(x)
                sync()
                samples[label].append((time.perf_counter_ns() - start) / 1e6)
    out = {}
    for label, values in samples.items():
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        out[label] = LatencySummary(statistics.median(values), q[0], q[2], len(values))
    return out


@dataclass(frozen=True)
class SelectionRun:
    """The selected network run for real next to PyTorch's default and the best single primitive.

    Parameters
    ----------
    threads
        Intra-op threads of every run.
    latency
        ``pytorch``, ``selected`` and (when one applies everywhere) ``single`` summaries.
    single_primitive
        The best single primitive by the plan's costs (``""`` when none applies to every layer).
    output_error
        ``max |y - y_ref| / max |y_ref|`` of ``selected`` and ``single`` against PyTorch's output.
    torch_device
        The torch device every variant ran on.
    """

    threads: int
    latency: dict[str, LatencySummary]
    single_primitive: str
    output_error: dict[str, float]
    torch_device: str = "cpu"

    @property
    def speedup(self) -> float:
        """PyTorch's median over the selected network's median."""
        return self.latency["pytorch"].median_ms / self.latency["selected"].median_ms


def run_selection(spec: str, choices: Mapping[str, str], conv_inputs: Mapping[str, int], single: str | None, *,
                  threads: int, rounds: int = 15, extra: Mapping[str, Mapping[str, str]] | None = None,
                  torch_device: str = "cpu") -> SelectionRun:
    """Build the selected network of a zoo model, check its outputs and time it against the baselines.

    Parameters
    ----------
    spec
        The zoo string.
    choices
        ``conv layer -> primitive`` of the plan.
    conv_inputs
        Input side of every selected layer.
    single
        The single primitive baseline for every layer of ``choices`` (``None``: no such baseline).
    threads
        Intra-op threads.
    rounds
        Interleaved timed runs of each variant.
    extra
        More selections to build and time beside them, by label (e.g. one made with predicted costs).
    torch_device
        Torch device of every variant: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns
    -------
    SelectionRun

    Raises
    ------
    InvalidInputError
        A chosen primitive does not run on ``torch_device`` (oneDNN's on CUDA), the model's input is not a batch of one,
        or ``spec`` is an ONNX file (no PyTorch modules to swap).
    MeasurementError
        CUDA asked for on a machine without it.
    """
    from edgeplan.frontends.zoo import build_model, is_onnx_path
    from edgeplan.measure.runners import torch_device as resolve

    if is_onnx_path(spec):
        raise InvalidInputError(f"{spec}: an ONNX file's primitives are selected from its graph, but running the "
                                "selection rebuilds the network's PyTorch modules; select it without --run, or give "
                                "the network as a zoo string (`edgeplan zoo`)")
    target = resolve(torch_device)
    zoo = build_model(spec)
    (x,) = zoo.example_inputs()
    if x.shape[0] != 1:
        raise InvalidInputError(f"{spec}: the selected network runs batch 1, the model's input is {tuple(x.shape)}")
    module, x = zoo.module.to(target), x.to(target)
    variants: dict[str, nn.Module] = {"pytorch": module,
                                      "selected": build_selected_network(module, choices, conv_inputs)}
    if single:
        variants["single"] = build_selected_network(module, {name: single for name in choices}, conv_inputs)
    for label, other in (extra or {}).items():
        variants[label] = build_selected_network(module, other, conv_inputs)
    with torch.inference_mode(), _float32_arithmetic(target):
        reference = module(x)
        errors = {label: output_error(reference, net(x)) for label, net in variants.items() if label != "pytorch"}
    latency = measure_interleaved(variants, x, threads=threads, rounds=rounds)
    return SelectionRun(threads, latency, single or "", errors, str(target))


def _flow_callable(node: Node, torch_device: torch.device) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """A torch function computing a layout-transparent IR node, or ``None`` when its time is taken as
    independent of the layout (activations other than ReLU, dropout, padding, LRN, element-wise with a constant)."""
    import torch.nn.functional as F

    attrs = node.attrs
    if node.kind is OpKind.POOL2D and isinstance(attrs, PoolAttrs) and attrs.padding[:2] == attrs.padding[2:]:
        kernel, stride, pad = attrs.kernel, attrs.stride, attrs.padding[:2]
        if attrs.mode is PoolMode.MAX:
            return lambda x: F.max_pool2d(x, kernel, stride, pad, attrs.dilation, ceil_mode=attrs.ceil_mode)
        summed = attrs.mode is PoolMode.SUM  # the window's sum: an average that divides by 1
        return lambda x: F.avg_pool2d(x, kernel, stride, pad, ceil_mode=attrs.ceil_mode,
                                      count_include_pad=attrs.count_include_pad or summed,
                                      divisor_override=1 if summed else None)
    if node.kind is OpKind.BATCH_NORM:
        c = int(node.input_shapes[0][1])
        mean, weight = torch.zeros(c, device=torch_device), torch.ones(c, device=torch_device)
        var, bias = torch.ones(c, device=torch_device), torch.zeros(c, device=torch_device)
        return lambda x: F.batch_norm(x, mean, var, weight, bias, training=False)
    if node.kind is OpKind.ACTIVATION and isinstance(attrs, ActivationAttrs) and attrs.fn is Activation.RELU:
        return torch.relu
    return None


def _in_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """A logical NCHW batch of one whose memory is in ``layout``."""
    return batch_view(to_memory(x[0], layout), layout)


def measure_flow_costs(flow: Sequence[FlowOp], *, threads: int, runs: int = 15,
                       torch_device: str = "cpu") -> npt.NDArray[np.float64]:
    """Time each layout-transparent layer on this machine in each of the three memory orders.

    Parameters
    ----------
    flow
        The layers (:attr:`SelectionStructure.flow`).
    threads
        Intra-op threads.
    runs
        Timed runs per layer and layout (median), after two warm-up runs; layers with the same kind, attributes
        and shape are timed once.
    torch_device
        Torch device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (each CUDA run ends with a synchronisation).

    Returns
    -------
    numpy.ndarray
        ``(len(flow), 3)`` ms in ``chw, hcw, hwc`` order; zeros for the layers taken as layout-independent.
    """
    from edgeplan.measure.runners import torch_device as resolve

    target = resolve(torch_device)
    sync = _synchronizer(target)
    out = np.zeros((len(flow), 3))
    cache: dict[tuple[object, ...], npt.NDArray[np.float64]] = {}
    gen = torch.Generator().manual_seed(0)
    with use_threads(threads), torch.inference_mode():
        for i, op in enumerate(flow):
            fn = _flow_callable(op.node, target)
            shape = tuple(op.node.input_shapes[0])
            if fn is None or len(shape) != 4 or shape[0] != 1:
                continue
            key = (op.node.kind, op.node.attrs, shape)
            if key not in cache:
                base = torch.randn(shape, generator=gen).to(target)
                row = []
                for layout in ("chw", "hcw", "hwc"):
                    x = _in_layout(base, layout)
                    for _ in range(2):
                        fn(x)
                    sync()
                    times = []
                    for _ in range(runs):
                        start = time.perf_counter_ns()
                        fn(x)
                        sync()
                        times.append((time.perf_counter_ns() - start) / 1e6)
                    row.append(statistics.median(times))
                cache[key] = np.array(row)
            out[i] = cache[key]
    return out
