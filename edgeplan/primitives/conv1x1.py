"""The conv-1x1 family: a ``1x1`` convolution is one GEMM of the kernel matrix with the image (no lowering).

``conv-1x1-gemm-{ab,abt,atb,atbt}-{ik,ki}`` as in the mulder2021 dataset: ``ki`` computes ``(k, pixels)``
(output ``chw``) with the kernel as ``A``; ``ik`` computes ``(pixels, k)`` (output ``hwc``) with the image as
``A``. A ``t`` marks an operand used transposed: the image operand is transposed exactly when its layout is not
the one the product needs (``chw`` is ``(c, pixels)``, ``hwc`` is ``(pixels, c)``), so the name fixes the input
layout; the kernel's flag fixes whether it is stored ``(k, c)`` or ``(c, k)``. At stride ``s > 1`` the image is
subsampled first (a strided copy).
"""

from __future__ import annotations

import torch

from edgeplan.primitives.base import Prepared, Primitive, PrimitiveInfo
from edgeplan.primitives.im2 import GemmOrder
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["Conv1x1Gemm", "variants"]

FAMILY = "conv-1x1"
RULE = Rule(kernel_sizes=frozenset({1}), zero_padding=True)


class Conv1x1Gemm(Primitive):
    """A ``1x1`` convolution as one GEMM in the given variant.

    Parameters
    ----------
    info
        The declaration.
    order
        The GEMM variant.
    """

    def __init__(self, info: PrimitiveInfo, order: GemmOrder) -> None:
        super().__init__(info)
        self.order = order
        self._hwc = info.input_layout is Layout.HWC

    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        km = weight.reshape(spec.k, spec.c)
        return (km.contiguous() if self.order.kernel_stored_k_first() else km.t().contiguous()), None

    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        sp, s, n = prepared.spec, prepared.spec.s, prepared.spec.out * prepared.spec.out
        if self._hwc:
            img = (x if s == 1 else x[::s, ::s]).reshape(n, sp.c)
        else:
            img = (x if s == 1 else x[:, ::s, ::s]).reshape(sp.c, n)
        a, b = (prepared.weight, img) if self.order.kernels_first else (img, prepared.weight)
        out = torch.mm(a.t() if self.order.ta else a, b.t() if self.order.tb else b)
        return out.view(self.output_layout.shape(sp.k, sp.out, sp.out))


def variants() -> tuple[Primitive, ...]:
    """The conv-1x1 primitives (8)."""
    result: list[Primitive] = []
    for out in ("ik", "ki"):
        for ops in ("ab", "abt", "atb", "atbt"):
            order = GemmOrder.parse(f"{ops}-{out}")
            image_t = order.tb if order.kernels_first else order.ta
            # the product needs (c, pixels) for ki and (pixels, c) for ik
            chw_input = image_t != order.kernels_first
            in_layout = Layout.CHW if chw_input else Layout.HWC
            out_layout = Layout.CHW if order.kernels_first else Layout.HWC
            kernel = "(k, c)" if order.kernel_stored_k_first() else "(c, k)"
            result.append(Conv1x1Gemm(PrimitiveInfo(
                f"conv-1x1-gemm-{order.name}", FAMILY, in_layout, out_layout, RULE,
                f"one GEMM {order.name} of the kernel matrix and the (subsampled) image",
                f"kernel matrix stored {kernel}"), order))
    return tuple(result)
