"""Layer configurations, data layouts and applicability rules of the convolution primitives, and the layer shape of
an IR conv node they can run (no torch).

A layer is described as in mulder2020 §3.1 and the mulder2021 dataset: ``c`` input channels, ``k`` kernels
(output channels), a square ``im x im`` input, a square ``f x f`` kernel and a stride ``s``; batch 1, no
dilation, no groups.

Padding convention
------------------
``padding=None`` (the default, and what the mulder dataset's ``(c, k, im, f, s)`` rows mean) is 'same'-style
zero padding of ``p = (f - 1) // 2`` pixels on every side; an explicit ``padding=p`` pads ``p`` zeros on every
side. In both cases the output is square with side

    ``out = (im + 2 p - f) // s + 1``

exactly as :func:`torch.nn.functional.conv2d` computes it. For the odd kernels of the dataset, 'same' padding gives
``out = ceil(im / s)`` (``im`` itself at stride 1); for an even ``f`` it gives ``im - 1`` at stride 1.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from edgeplan.errors import InvalidInputError
from edgeplan.ir import Node
from edgeplan.ir.ops import ConvAttrs, OpKind

__all__ = ["LAYOUTS", "ConvSpec", "Layout", "Rule", "conv_refusal", "conv_shape"]


class Layout(str, enum.Enum):
    """A data layout of a 3-D activation (batch 1), named by its axes from outermost to innermost.

    ``chw`` is PyTorch's NCHW without the batch axis, ``hwc`` is channels-last (NHWC), ``hcw`` interleaves
    channels between rows (mulder2020's ``im x c x im``).
    """

    CHW = "chw"
    HCW = "hcw"
    HWC = "hwc"

    def shape(self, c: int, h: int, w: int) -> tuple[int, int, int]:
        """The tensor shape of a ``c x h x w`` activation stored in this layout.

        Parameters
        ----------
        c, h, w
            Channels, height and width.

        Returns
        -------
        tuple of int
            ``(c, h, w)``, ``(h, c, w)`` or ``(h, w, c)``.
        """
        if self is Layout.CHW:
            return (c, h, w)
        if self is Layout.HCW:
            return (h, c, w)
        return (h, w, c)

    @classmethod
    def parse(cls, value: str | Layout) -> Layout:
        """The layout named ``value`` (``"chw"``, ``"hcw"`` or ``"hwc"``).

        Raises
        ------
        InvalidInputError
            If ``value`` names no layout.
        """
        try:
            return cls(value)
        except ValueError as e:
            raise InvalidInputError(f"unknown data layout {value!r}; use one of chw, hcw, hwc") from e


#: The three layouts, in the order of the mulder2021 column names.
LAYOUTS: tuple[Layout, ...] = (Layout.CHW, Layout.HCW, Layout.HWC)


@dataclass(frozen=True)
class ConvSpec:
    """One convolutional layer configuration (batch 1, square input and kernel).

    Parameters
    ----------
    c
        Input channels.
    k
        Number of kernels (output channels).
    im
        Side of the square input.
    f
        Side of the square kernel.
    s
        Stride (both axes).
    padding
        Zero padding on every side; ``None`` means 'same'-style ``(f - 1) // 2`` (see the module docstring).

    Raises
    ------
    InvalidInputError
        If a size is not a positive integer, the padding is negative, or the output would be empty.
    """

    c: int
    k: int
    im: int
    f: int
    s: int = 1
    padding: int | None = None

    def __post_init__(self) -> None:
        for name in ("c", "k", "im", "f", "s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"layer {self.describe()}: {name} must be a positive integer, got {value!r}")
        if self.padding is not None and (isinstance(self.padding, bool) or not isinstance(self.padding, int)
                                         or self.padding < 0):
            raise InvalidInputError(f"layer {self.describe()}: padding must be None or an integer >= 0, "
                                    f"got {self.padding!r}")
        if self.im + 2 * self.pad < self.f:
            raise InvalidInputError(f"layer {self.describe()}: the {self.f}x{self.f} kernel is larger than the "
                                    f"padded {self.im + 2 * self.pad}x{self.im + 2 * self.pad} input; "
                                    "use a smaller kernel or more padding")

    @property
    def pad(self) -> int:
        """The zero padding actually applied on every side."""
        return (self.f - 1) // 2 if self.padding is None else self.padding

    @property
    def padded(self) -> int:
        """Side of the zero-padded input, ``im + 2 p``."""
        return self.im + 2 * self.pad

    @property
    def out(self) -> int:
        """Side of the square output, ``(im + 2 p - f) // s + 1``."""
        return (self.im + 2 * self.pad - self.f) // self.s + 1

    def input_shape(self, layout: Layout) -> tuple[int, int, int]:
        """Shape of the input tensor in ``layout``."""
        return layout.shape(self.c, self.im, self.im)

    def output_shape(self, layout: Layout) -> tuple[int, int, int]:
        """Shape of the output tensor in ``layout``."""
        return layout.shape(self.k, self.out, self.out)

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        """Shape of the PyTorch weight tensor, ``(k, c, f, f)``."""
        return (self.k, self.c, self.f, self.f)

    def describe(self) -> str:
        """A compact description such as ``c=64 k=128 im=56 f=3 s=1 p=same``."""
        pad = "same" if self.padding is None else str(self.padding)
        return f"c={self.c} k={self.k} im={self.im} f={self.f} s={self.s} p={pad}"


@dataclass(frozen=True)
class Rule:
    """Where a primitive applies: kernel sizes, strides, padding and an optional extra condition.

    Parameters
    ----------
    kernel_sizes
        The kernel sides ``f`` allowed; ``None`` allows any.
    strides
        The strides ``s`` allowed; ``None`` allows any.
    zero_padding
        Whether the layer must have no padding (``p = 0``).
    extra
        An extra predicate on the layer (e.g. a memory limit), or ``None``.
    extra_text
        The extra predicate in words; required when ``extra`` is given.
    """

    kernel_sizes: frozenset[int] | None = None
    strides: frozenset[int] | None = None
    zero_padding: bool = False
    extra: Callable[[ConvSpec], bool] | None = None
    extra_text: str = ""

    def __post_init__(self) -> None:
        if self.extra is not None and not self.extra_text:
            raise InvalidInputError("a Rule with an extra predicate needs extra_text to describe it")

    @property
    def text(self) -> str:
        """The rule in words, e.g. ``f = 3, s = 1``; ``any f, s`` when it allows every layer."""
        parts = []
        if self.kernel_sizes is not None:
            parts.append("f " + _set_text(self.kernel_sizes))
        if self.strides is not None:
            parts.append("s " + _set_text(self.strides))
        if self.zero_padding:
            parts.append("p = 0")
        if self.extra is not None:
            parts.append(self.extra_text)
        return ", ".join(parts) if parts else "any f, s"

    def violation(self, spec: ConvSpec) -> str | None:
        """The first part of the rule that ``spec`` breaks, in words, or ``None`` when it applies."""
        if self.kernel_sizes is not None and spec.f not in self.kernel_sizes:
            return "f " + _set_text(self.kernel_sizes)
        if self.strides is not None and spec.s not in self.strides:
            return "s " + _set_text(self.strides)
        if self.zero_padding and spec.pad != 0:
            return "p = 0"
        if self.extra is not None and not self.extra(spec):
            return self.extra_text
        return None

    def applies(self, spec: ConvSpec) -> bool:
        """Whether ``spec`` satisfies the rule."""
        return self.violation(spec) is None


def _set_text(values: frozenset[int]) -> str:
    ordered = sorted(values)
    if len(ordered) == 1:
        return f"= {ordered[0]}"
    return "in {" + ", ".join(str(v) for v in ordered) + "}"


def conv_shape(node: Node) -> tuple[int, int, int, int, int, int] | None:
    """``(c, k, im, f, s, padding)`` of a conv node the primitives can run, else ``None`` (:func:`conv_refusal` says
    why)."""
    attrs = node.attrs
    if node.kind is not OpKind.CONV2D or not isinstance(attrs, ConvAttrs) or conv_refusal(node) is not None:
        return None
    *_, h, _ = node.input_shapes[0]
    return (attrs.in_channels, attrs.out_channels, int(h), attrs.kernel[0], attrs.stride[0], attrs.padding[0])


def conv_refusal(node: Node) -> str | None:
    """Why no primitive can run a ``conv2d`` node (for example ``"depthwise"`` or ``"dilated"``), or ``None`` when
    :func:`conv_shape` gives it a shape; ``None`` also for a node that is not a ``conv2d``."""
    attrs = node.attrs
    if node.kind is not OpKind.CONV2D or not isinstance(attrs, ConvAttrs):
        return None
    *_, h, w = node.input_shapes[0]
    reasons = []
    if attrs.groups != 1:
        reasons.append("depthwise" if attrs.groups == attrs.in_channels else f"grouped ({attrs.groups} groups)")
    if attrs.dilation != (1, 1):
        reasons.append("dilated")
    if attrs.kernel[0] != attrs.kernel[1]:
        reasons.append(f"non-square kernel {attrs.kernel[0]}x{attrs.kernel[1]}")
    if attrs.stride[0] != attrs.stride[1]:
        reasons.append("unequal strides")
    if h != w:
        reasons.append(f"non-square input {h}x{w}")
    if len(set(attrs.padding)) != 1:
        reasons.append("unequal padding")
    return ", ".join(reasons) or None
