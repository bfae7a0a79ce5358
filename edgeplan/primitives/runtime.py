"""The runtime family: PyTorch's own convolution backends, declared as primitives.

Each calls one ATen operator directly, so the backend does not depend on PyTorch's dispatch heuristics (which
change with the thread count and the layer):

* ``torch-onednn-chw`` / ``torch-onednn-hwc``: ``aten.mkldnn_convolution`` (oneDNN) on an NCHW tensor, or on a
  channels-last one (the ``hwc`` input viewed as NHWC, no copy); the path ``F.conv2d`` takes by default on x86.
* ``torch-native-chw`` / ``torch-native-hwc``: ``aten.thnn_conv2d`` (``_slow_conv2d_forward``: PyTorch's own
  im2col + GEMM), the path ``F.conv2d`` takes under ``torch.backends.mkldnn.flags(enabled=False)``.
* ``torch-conv2d-chw``: ``torch.nn.functional.conv2d`` as a model would call it (whatever PyTorch dispatches to;
  cuDNN on CUDA).

On CUDA (``profile primitives --torch-device cuda``) the oneDNN pair does not apply; the native pair runs PyTorch's CUDA
im2col + GEMM. These are the only primitives that call a library convolution. The bias is passed to the operator.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["TorchConv", "variants"]

FAMILY = "runtime"


class TorchConv(Primitive):
    """One PyTorch convolution operator on a batch-1 NCHW or channels-last view of the input.

    Parameters
    ----------
    info
        The declaration (``chw`` or ``hwc`` in and out).
    backend
        ``"onednn"`` (``aten.mkldnn_convolution``), ``"native"`` (``aten.thnn_conv2d``) or ``"conv2d"``
        (``F.conv2d``).
    """

    fuses_bias = True

    def __init__(self, info: PrimitiveInfo, backend: str) -> None:
        super().__init__(info)
        self.backend = backend
        self._channels_last = info.input_layout is Layout.HWC

    def supports_dtype(self, dtype: torch.dtype) -> bool:
        """Whether the backend computes in ``dtype`` (oneDNN has no float64 convolution)."""
        if self.backend == "onednn":
            return dtype == torch.float32
        return super().supports_dtype(dtype)

    def supports_device(self, device: torch.device | str) -> bool:
        """oneDNN is a CPU library: its two primitives run on the CPU only; the others also on CUDA."""
        if self.backend == "onednn":
            return torch.device(device).type == "cpu"
        return super().supports_device(device)

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self._channels_last:
            return weight.contiguous(memory_format=torch.channels_last), None
        return weight.contiguous(), None

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, w, b = prepared.spec, prepared.weight, prepared.bias
        nchw = x.permute(2, 0, 1)[None] if self._channels_last else x[None]
        stride, pad = [sp.s, sp.s], [sp.pad, sp.pad]
        if self.backend == "onednn":
            y = torch.ops.aten.mkldnn_convolution(nchw, w, b, pad, stride, [1, 1], 1)
        elif self.backend == "native":
            y = torch.ops.aten.thnn_conv2d(nchw, w, [sp.f, sp.f], b, stride, pad)
        else:
            y = F.conv2d(nchw, w, b, stride=sp.s, padding=sp.pad)
        y = y[0]
        return y.permute(1, 2, 0).contiguous() if self._channels_last else y.contiguous()


def _onednn_available(spec: ConvSpec) -> bool:
    return bool(torch.backends.mkldnn.is_available())


def variants() -> tuple[Primitive, ...]:
    """PyTorch's backends as primitives (5)."""
    chw, hwc = Layout.CHW, Layout.HWC
    onednn = Rule(extra=_onednn_available, extra_text="PyTorch built with oneDNN")
    anything = Rule()
    return (
        TorchConv(PrimitiveInfo(
            "torch-onednn-chw", FAMILY, chw, chw, onednn,
            "PyTorch's oneDNN convolution (aten.mkldnn_convolution) on NCHW", "weights contiguous"), "onednn"),
        TorchConv(PrimitiveInfo(
            "torch-onednn-hwc", FAMILY, hwc, hwc, onednn,
            "PyTorch's oneDNN convolution (aten.mkldnn_convolution) on channels-last (NHWC)",
            "weights channels-last"), "onednn"),
        TorchConv(PrimitiveInfo(
            "torch-native-chw", FAMILY, chw, chw, anything,
            "PyTorch's native convolution without oneDNN (aten.thnn_conv2d) on NCHW", "weights contiguous"),
            "native"),
        TorchConv(PrimitiveInfo(
            "torch-native-hwc", FAMILY, hwc, hwc, anything,
            "PyTorch's native convolution without oneDNN (aten.thnn_conv2d) on channels-last (NHWC)",
            "weights channels-last"), "native"),
        TorchConv(PrimitiveInfo(
            "torch-conv2d-chw", FAMILY, chw, chw, anything,
            "torch.nn.functional.conv2d on NCHW, whichever backend PyTorch dispatches to", "weights contiguous"),
            "conv2d"),
    )
