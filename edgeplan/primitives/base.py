"""The common interface of every convolution primitive: declared layouts and rule, ``prepare`` and ``execute``.

A primitive is used in two steps:

1. ``prepared = prim.prepare(weight, bias, spec=spec)`` does once, per layer, everything that depends only on the
   weights and the layer configuration: kernel-matrix reshapes for the GEMM-based families, the Winograd kernel
   transform ``G g G^T``, the kernel spectrum of the FFT primitive, gather-index tables. It is **excluded from
   timing**; :attr:`PrimitiveInfo.prepared` says what it computes for each primitive.
2. ``y = prim.execute(x, prepared)`` convolves one input stored in the primitive's input layout and returns the
   output in its output layout, contiguous, bias added. This is the part that is timed: input padding, patch
   building, input and output transforms, the products and the final layout of the output are all inside it.

:meth:`Primitive.run` chains the two for convenience (tests, one-off use). Every tensor is 3-D (batch 1, no batch
axis); the weight is PyTorch's ``(k, c, f, f)`` cross-correlation kernel, as for
:func:`torch.nn.functional.conv2d`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

import torch

from edgeplan.errors import InvalidInputError
from edgeplan.primitives.spec import ConvSpec, Layout, Rule

__all__ = ["Prepared", "Primitive", "PrimitiveInfo"]


@dataclass(frozen=True)
class PrimitiveInfo:
    """What a primitive declares about itself.

    Parameters
    ----------
    name
        Unique name; the mulder2021 column name where the variant matches one of theirs (e.g.
        ``im2col-copy-self-ab-ki``).
    family
        Family as in mulder2020 Table 6 (``direct-sum2d``, ``im2``, ``kn2``, ``wino3``, ``wino5``, ``conv-1x1``,
        ``mec``) plus ``fft`` and ``runtime`` (PyTorch's own convolution backends).
    input_layout, output_layout
        Data layouts of the input it reads and the output it writes.
    rule
        Where it applies; :meth:`Primitive.check` refuses other layers.
    summary
        The algorithm in one line.
    prepared
        What :meth:`Primitive.prepare` computes once per layer (excluded from timing).
    rel_tolerance
        Largest expected error in float32 against the exact (float64) convolution, in the measure of
        :func:`~edgeplan.primitives.reference.relative_error` (``max |y - y_ref| / max |y_ref|`` unless
        cancellation makes every output small), on random layers with up to ``c f f ~ 2500`` products per output.
        Exact-arithmetic algorithms keep the default ``1e-5``; Winograd and FFT state their own.
    """

    name: str
    family: str
    input_layout: Layout
    output_layout: Layout
    rule: Rule
    summary: str
    prepared: str
    rel_tolerance: float = 1e-5


@dataclass(frozen=True, eq=False)
class Prepared:
    """The per-layer state :meth:`Primitive.prepare` computes once (weights transformed, tables built).

    Parameters
    ----------
    primitive
        Name of the primitive that prepared it (:meth:`Primitive.execute` refuses another's state).
    spec
        The layer configuration.
    dtype
        Floating dtype of the activations it expects.
    weight
        The weights in the primitive's own form (kernel matrix, Winograd-domain kernels, kernel spectrum, ...).
    bias
        The bias shaped to broadcast against the output in the output layout, or ``None``.
    aux
        An input-independent table (e.g. gather indices), or ``None``.
    """

    primitive: str
    spec: ConvSpec
    dtype: torch.dtype
    weight: torch.Tensor
    bias: torch.Tensor | None = None
    aux: torch.Tensor | None = None


class Primitive(abc.ABC):
    """A convolution implementation with declared layouts and applicability rule.

    Subclasses implement :meth:`_prepare` and :meth:`_execute`; this class validates inputs, enforces the rule
    and adds the bias.

    Parameters
    ----------
    info
        The declaration (name, family, layouts, rule, ...).
    """

    #: Whether :meth:`_execute` adds the bias itself (then ``Prepared.bias`` is the plain ``(k,)`` vector).
    fuses_bias: ClassVar[bool] = False

    #: The floating dtypes every primitive computes in (a subclass may narrow them, see :meth:`supports_dtype`).
    DTYPES: ClassVar[tuple[torch.dtype, ...]] = (torch.float32, torch.float64)

    def __init__(self, info: PrimitiveInfo) -> None:
        self.info = info

    def __repr__(self) -> str:
        i = self.info
        return f"<Primitive {i.name} ({i.family}, {i.input_layout.value}->{i.output_layout.value})>"

    @property
    def name(self) -> str:
        """The primitive's unique name."""
        return self.info.name

    @property
    def family(self) -> str:
        """The primitive's family."""
        return self.info.family

    @property
    def input_layout(self) -> Layout:
        """Layout of the input it reads."""
        return self.info.input_layout

    @property
    def output_layout(self) -> Layout:
        """Layout of the output it writes."""
        return self.info.output_layout

    @property
    def rule(self) -> Rule:
        """Where it applies."""
        return self.info.rule

    def applies(self, spec: ConvSpec) -> bool:
        """Whether the primitive applies to the layer ``spec``."""
        return self.info.rule.applies(spec)

    def supports_dtype(self, dtype: torch.dtype) -> bool:
        """Whether the primitive computes in ``dtype`` (float32 and float64 unless a subclass narrows it)."""
        return dtype in self.DTYPES

    def supports_device(self, device: torch.device | str) -> bool:
        """Whether the primitive runs on ``device`` (every one runs on the CPU; a subclass may refuse CUDA).

        Parameters
        ----------
        device
            A torch device or its name, e.g. ``"cpu"`` or ``"cuda:0"``.
        """
        return torch.device(device).type in ("cpu", "cuda")

    def check(self, spec: ConvSpec) -> None:
        """Refuse a layer the primitive does not apply to.

        Raises
        ------
        InvalidInputError
            Naming the primitive, the layer and the part of the rule it breaks.
        """
        broken = self.info.rule.violation(spec)
        if broken is not None:
            raise InvalidInputError(
                f"primitive {self.name} does not apply to layer {spec.describe()}: its rule is "
                f"'{self.info.rule.text}' and the layer breaks '{broken}'; choose an applicable primitive "
                "(edgeplan primitives list)")

    def spec_for(self, x: torch.Tensor, weight: torch.Tensor, *, stride: int = 1,
                 padding: int | None = None) -> ConvSpec:
        """The layer configuration of input ``x`` (in this primitive's input layout) and ``weight``.

        Parameters
        ----------
        x
            A 3-D square input in this primitive's input layout.
        weight
            The ``(k, c, f, f)`` kernel.
        stride
            Stride ``s``.
        padding
            Zero padding on every side; ``None`` is 'same'-style ``(f - 1) // 2``.

        Returns
        -------
        ConvSpec
            The layer.

        Raises
        ------
        InvalidInputError
            If ``x`` is not 3-D or ``weight`` is not a square ``(k, c, f, f)`` kernel.
        """
        if x.dim() != 3:
            raise InvalidInputError(f"{self.name}: expected a 3-D input in layout {self.input_layout.value} "
                                    f"(batch 1, no batch axis), got shape {tuple(x.shape)}")
        if weight.dim() != 4 or weight.shape[2] != weight.shape[3]:
            raise InvalidInputError(f"{self.name}: expected a square (k, c, f, f) weight, got shape "
                                    f"{tuple(weight.shape)}")
        dims = dict(zip(self.input_layout.value, x.shape, strict=True))
        if dims["h"] != dims["w"]:
            raise InvalidInputError(f"{self.name}: expected a square input, got shape {tuple(x.shape)} in "
                                    f"layout {self.input_layout.value}")
        k, _, f, _ = weight.shape
        return ConvSpec(c=int(dims["c"]), k=int(k), im=int(dims["h"]), f=int(f), s=stride, padding=padding)

    def prepare(self, weight: torch.Tensor, bias: torch.Tensor | None = None, *, spec: ConvSpec) -> Prepared:
        """Transform the weights once for this layer (excluded from timing).

        Parameters
        ----------
        weight
            PyTorch ``(k, c, f, f)`` kernel (cross-correlation, as :func:`torch.nn.functional.conv2d`).
        bias
            ``(k,)`` bias or ``None``.
        spec
            The layer configuration.

        Returns
        -------
        Prepared
            The state :meth:`execute` needs.

        Raises
        ------
        InvalidInputError
            If the primitive does not apply to ``spec``, the tensors do not match it or their dtype is not
            supported.
        """
        self.check(spec)
        if tuple(weight.shape) != spec.weight_shape:
            raise InvalidInputError(f"{self.name}: weight shape {tuple(weight.shape)} does not match layer "
                                    f"{spec.describe()} (expected {spec.weight_shape})")
        if not self.supports_dtype(weight.dtype):
            supported = ", ".join(str(d) for d in self.DTYPES if self.supports_dtype(d))
            raise InvalidInputError(f"{self.name}: weight dtype {weight.dtype} is not supported; convert the weight "
                                    f"and the input to one of {supported}")
        if bias is not None and (tuple(bias.shape) != (spec.k,) or bias.dtype != weight.dtype):
            raise InvalidInputError(f"{self.name}: bias must be a ({spec.k},) tensor of dtype {weight.dtype}, "
                                    f"got {tuple(bias.shape)} {bias.dtype}")
        with torch.no_grad():
            w, aux = self._prepare(weight.detach(), spec)
            b = None
            if bias is not None:
                b = bias.detach().contiguous()
                if not self.fuses_bias:
                    b = _bias_view(b, self.output_layout)
        return Prepared(primitive=self.name, spec=spec, dtype=weight.dtype, weight=w, bias=b, aux=aux)

    def execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        """Convolve one input (the timed step).

        Parameters
        ----------
        x
            The input, contiguous in this primitive's input layout.
        prepared
            What :meth:`prepare` returned for this layer.

        Returns
        -------
        torch.Tensor
            The output, contiguous in this primitive's output layout, bias added.

        Raises
        ------
        InvalidInputError
            If ``prepared`` belongs to another primitive or ``x`` does not match the layer.
        """
        if prepared.primitive != self.name:
            raise InvalidInputError(f"{self.name}: got the prepared state of {prepared.primitive}; "
                                    f"call {self.name}.prepare first")
        expected = prepared.spec.input_shape(self.input_layout)
        if tuple(x.shape) != expected or x.dtype != prepared.dtype:
            raise InvalidInputError(f"{self.name}: input {tuple(x.shape)} {x.dtype} does not match layer "
                                    f"{prepared.spec.describe()} (expected {expected} {prepared.dtype} in layout "
                                    f"{self.input_layout.value})")
        if torch.is_grad_enabled():  # a bare call (the campaigns' timed ones); under no_grad or inference_mode (a
            with torch.no_grad():  # selected network) the context's cost, paid per layer, is skipped
                return self._execute_with_bias(x, prepared)
        return self._execute_with_bias(x, prepared)

    def _execute_with_bias(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        """:meth:`_execute`, then the bias unless the primitive fused it."""
        out = self._execute(x, prepared)
        if prepared.bias is not None and not self.fuses_bias:
            out.add_(prepared.bias)
        return out

    def run(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *, stride: int = 1,
            padding: int | None = None) -> torch.Tensor:
        """Prepare and execute in one call.

        Parameters
        ----------
        x
            The input in this primitive's input layout.
        weight, bias
            PyTorch ``(k, c, f, f)`` kernel and optional ``(k,)`` bias.
        stride
            Stride ``s``.
        padding
            Zero padding on every side; ``None`` is 'same'-style ``(f - 1) // 2``.

        Returns
        -------
        torch.Tensor
            The output in this primitive's output layout.
        """
        spec = self.spec_for(x, weight, stride=stride, padding=padding)
        return self.execute(x, self.prepare(weight, bias, spec=spec))

    @abc.abstractmethod
    def _prepare(self, weight: torch.Tensor, spec: ConvSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Return ``(weight in the primitive's form, aux table or None)``."""

    @abc.abstractmethod
    def _execute(self, x: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        """Return the output in the output layout, contiguous and freshly allocated, bias not added."""


def _bias_view(bias: torch.Tensor, layout: Layout) -> torch.Tensor:
    if layout is Layout.CHW:
        return bias.view(-1, 1, 1)
    if layout is Layout.HCW:
        return bias.view(-1, 1)
    return bias
