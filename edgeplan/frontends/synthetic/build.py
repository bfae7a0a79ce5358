"""Building the torch module of a sampled synthetic architecture, with random weights."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from edgeplan.frontends.synthetic.sampling import sample_synthetic
from edgeplan.frontends.synthetic.space import (
    _CONVNEXT_KERNEL,
    DENSE_BOTTLENECK,
    INPUT_SIZE,
    STD_EPS,
    SyntheticArch,
    SyntheticBlock,
    pool_padding,
)

if TYPE_CHECKING:
    import torch


__all__ = ["build_synthetic"]

def build_synthetic(seed: int, space: str = "li2023") -> tuple[torch.nn.Module, tuple[tuple[int, ...], ...]]:
    """Build the network of a seed from a synthetic NAS space, with random weights, in eval mode.

    Parameters
    ----------
    seed
        A non-negative integer (see :func:`sample_synthetic`).
    space
        ``li2023`` (default) or one of edgeplan's spaces (:data:`SPACES`).

    Returns
    -------
    module, input_shapes
        The network (input ``(1, 3, 224, 224)``, output ``(1, classes)`` logits, 1000 classes but in the heads
        space) and its example input shapes.

    Raises
    ------
    InvalidInputError
        If ``seed`` is not a non-negative integer, or ``space`` is unknown.
    """
    arch = sample_synthetic(seed, space)
    module = _torch_layers().network(arch)
    module.eval()
    return module, ((1, 3, INPUT_SIZE, INPUT_SIZE),)


class _Layers(NamedTuple):
    """Constructors of the torch modules, defined on first use so that this module loads without torch."""

    network: Callable[[SyntheticArch], torch.nn.Module]


@functools.cache
def _torch_layers() -> _Layers:
    """Define the torch modules of the synthetic space (imports torch)."""
    import torch
    from torch import nn

    def activation(name: str) -> nn.Module:
        if name == "gelu":
            return nn.GELU()
        return {"relu6": nn.ReLU6, "relu": nn.ReLU, "silu": nn.SiLU, "hardswish": nn.Hardswish}[name](inplace=True)

    class StdConv2d(nn.Conv2d):
        """A convolution whose every filter is standardized (zero mean, unit variance over its fan-in) at every
        call, by a batch norm of the weight in training mode: timm's ``StdConv2d`` (NF-ResNet, NFNets without
        their gain), which eager PyTorch runs on the weight at each forward pass."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            weight = torch.nn.functional.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                                                    training=True, momentum=0.0, eps=STD_EPS).reshape_as(self.weight)
            return torch.nn.functional.conv2d(x, weight, None, self.stride, self.padding, self.dilation,
                                              self.groups)

    def conv_bn(c_in: int, c_out: int, kernel: int, stride: int, groups: int = 1, act: str | None = "relu6",
                padding: int | None = None, std: bool = False) -> nn.Module:
        pad = kernel // 2 if padding is None else padding
        if std:  # a weight-standardized convolution, no batch norm
            layers: list[nn.Module] = [StdConv2d(c_in, c_out, kernel, stride=stride, padding=pad, groups=groups,
                                                 bias=False)]
        else:
            layers = [nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=pad, groups=groups, bias=False),
                      nn.BatchNorm2d(c_out)]
        if act:
            layers.append(activation(act))
        return nn.Sequential(*layers)

    class Permute(nn.Module):
        """``x.permute(dims)``: to channels last and back, around a ConvNeXt block's LayerNorm and linear layers."""

        def __init__(self, dims: tuple[int, ...]) -> None:
            super().__init__()
            self.dims = dims

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.permute(x, self.dims)

    class ConvNeXt(nn.Module):
        """torchvision's ConvNeXt block (a downsampling conv first where the stride or the width changes)."""

        def __init__(self, block: SyntheticBlock) -> None:
            super().__init__()
            assert block.expansion is not None
            c = block.out_channels
            self.down = (conv_bn(block.in_channels, c, block.stride, block.stride, act=None, padding=0, std=block.std)
                         if block.stride != 1 or block.in_channels != c else None)
            self.block = nn.Sequential(
                nn.Conv2d(c, c, _CONVNEXT_KERNEL, padding=_CONVNEXT_KERNEL // 2, groups=c, bias=True),
                Permute((0, 2, 3, 1)),
                nn.LayerNorm(c, eps=1e-6),
                nn.Linear(c, block.expansion * c),
                nn.GELU(),
                nn.Linear(block.expansion * c, c),
                Permute((0, 3, 1, 2)),
            )
            self.layer_scale = nn.Parameter(torch.full((c, 1, 1), 1e-6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.down is not None:
                x = self.down(x)
            y = self.layer_scale * self.block(x)
            y += x
            return y

    class SqueezeExcite(nn.Module):
        """Squeeze-and-excite: x * sigmoid(W2 relu(W1 avgpool(x)))."""

        def __init__(self, channels: int) -> None:
            super().__init__()
            squeezed = max(8, channels // 4)
            self.gate = nn.Sequential(
                nn.AdaptiveAvgPool2d(1),
                nn.Conv2d(channels, squeezed, 1),
                nn.ReLU(inplace=True),
                nn.Conv2d(squeezed, channels, 1),
                nn.Sigmoid(),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.gate(x)

    class Bottleneck(nn.Module):
        """MobileNetV2 linear bottleneck, optionally with squeeze-and-excite."""

        def __init__(self, block: SyntheticBlock, act: str) -> None:
            super().__init__()
            assert block.kernel is not None and block.expansion is not None
            hidden = block.in_channels * block.expansion
            layers: list[nn.Module] = []
            if block.expansion != 1:
                layers.append(conv_bn(block.in_channels, hidden, 1, 1, act=act, std=block.std))
            layers.append(conv_bn(hidden, hidden, block.kernel, block.stride, groups=hidden, act=act, std=block.std))
            if block.se:
                layers.append(SqueezeExcite(hidden))
            layers.append(conv_bn(hidden, block.out_channels, 1, 1, act=None, std=block.std))
            self.body = nn.Sequential(*layers)
            self.residual = block.stride == 1 and block.in_channels == block.out_channels

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.body(x)
            return x + y if self.residual else y

    class SplitElementwise(nn.Module):
        """Split the channels into parts, apply an element-wise op to each part, concatenate."""

        def __init__(self, block: SyntheticBlock) -> None:
            super().__init__()
            assert block.splits is not None and block.elementwise is not None
            base, extra = divmod(block.in_channels, block.splits)
            self.sizes = [base + (1 if i < extra else 0) for i in range(block.splits)]
            self.ops = list(block.elementwise)
            self.subsample = nn.MaxPool2d(kernel_size=1, stride=2) if block.stride == 2 else nn.Identity()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            parts = torch.split(self.subsample(x), self.sizes, dim=1)
            return torch.cat([_elementwise(op, part) for op, part in zip(self.ops, parts, strict=True)], dim=1)

    class ResNetBlock(nn.Module):
        """A ResNet / ResNeXt / RegNet bottleneck (the mixed space's): 1x1 conv, grouped 3x3 conv (with the stride),
        optional squeeze-and-excite, 1x1 conv, the shortcut (a 1x1 conv with batch norm where the stride or the
        width changes) added in place, then the activation."""

        def __init__(self, block: SyntheticBlock, act: str) -> None:
            super().__init__()
            assert block.width is not None
            w = block.width
            layers: list[nn.Module] = [conv_bn(block.in_channels, w, 1, 1, act=act, std=block.std),
                                       conv_bn(w, w, 3, block.stride, groups=block.groups or 1, act=act,
                                               std=block.std)]
            if block.se:
                layers.append(SqueezeExcite(w))
            layers.append(conv_bn(w, block.out_channels, 1, 1, act=None, std=block.std))
            self.body = nn.Sequential(*layers)
            self.shortcut = (conv_bn(block.in_channels, block.out_channels, 1, block.stride, act=None, std=block.std)
                             if block.stride != 1 or block.in_channels != block.out_channels else None)
            self.act = activation(act)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.body(x)
            y += x if self.shortcut is None else self.shortcut(x)
            return self.act(y)

    class DenseLayer(nn.Module):
        """torchvision's DenseNet-BC layer: the concatenation of every earlier feature map (the block's input alone
        for the first layer), then batch norm,
        activation, 1x1 conv to 4 x growth channels, batch norm, activation, 3x3 conv to growth channels."""

        def __init__(self, c_in: int, growth: int, act: str) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.BatchNorm2d(c_in), activation(act), nn.Conv2d(c_in, DENSE_BOTTLENECK * growth, 1, bias=False),
                nn.BatchNorm2d(DENSE_BOTTLENECK * growth), activation(act),
                nn.Conv2d(DENSE_BOTTLENECK * growth, growth, 3, padding=1, bias=False))

        def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
            # the first layer reads the block's input itself (torchvision concatenates it alone: a copy)
            return self.body(features[0] if len(features) == 1 else torch.cat(features, 1))

    class DenseBlock(nn.Module):
        """A DenseNet block and its transition (the mixed space's): the layers, the concatenation of every feature
        map, batch norm, activation, a 1x1 conv to the block's width, and a 2x2 average pool at a stride of 2."""

        def __init__(self, block: SyntheticBlock, act: str) -> None:
            super().__init__()
            assert block.layers is not None and block.growth is not None
            self.layers = nn.ModuleList(DenseLayer(block.in_channels + i * block.growth, block.growth, act)
                                        for i in range(block.layers))
            total = block.in_channels + block.layers * block.growth
            transition: list[nn.Module] = [nn.BatchNorm2d(total), activation(act),
                                           nn.Conv2d(total, block.out_channels, 1, bias=False)]
            if block.stride == 2:
                transition.append(nn.AvgPool2d(2, 2))
            self.transition = nn.Sequential(*transition)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            features = [x]
            for layer in self.layers:
                features.append(layer(features))
            return self.transition(torch.cat(features, 1))

    class Residual(nn.Module):
        """``x + body(x)``: a stages-space copy of a ``conv`` or ``dwsep`` block."""

        def __init__(self, body: nn.Module) -> None:
            super().__init__()
            self.body = body

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.body(x)

    def block_module(block: SyntheticBlock, act: str) -> nn.Module:
        if block.residual:
            return Residual(block_module(replace(block, residual=False), act))
        if block.kind == "conv":
            assert block.kernel is not None
            return conv_bn(block.in_channels, block.out_channels, block.kernel, block.stride, block.groups or 1,
                           act=act, std=block.std)
        if block.kind == "dwsep":
            assert block.kernel is not None
            return nn.Sequential(
                conv_bn(block.in_channels, block.in_channels, block.kernel, block.stride, groups=block.in_channels,
                        act=act, std=block.std),
                conv_bn(block.in_channels, block.out_channels, 1, 1, act=act, std=block.std),
            )
        if block.kind == "bottleneck":
            return Bottleneck(block, act)
        if block.kind == "convnext":
            return ConvNeXt(block)
        if block.kind == "resnet":
            return ResNetBlock(block, act)
        if block.kind == "dense":
            return DenseBlock(block, act)
        if block.kind == "pool":
            assert block.kernel is not None
            pad = pool_padding(block.kernel)
            if block.pool == "avg":
                return nn.AvgPool2d(block.kernel, block.stride, padding=pad, count_include_pad=False)
            return nn.MaxPool2d(block.kernel, block.stride, padding=pad)
        return SplitElementwise(block)

    def network(arch: SyntheticArch) -> nn.Module:
        act = arch.activation
        parts: dict[str, nn.Module] = {"stem": conv_bn(3, arch.stem_channels, 3, 2, act=act)}
        for index, block in enumerate(arch.blocks, start=1):
            parts[f"block{index}_{block.kind}"] = block_module(block, act)
        last = arch.blocks[-1].out_channels
        parts["head_conv"] = conv_bn(last, arch.head_channels, 1, 1, act=act)
        if not arch.flatten:
            parts["global_pool"] = nn.AdaptiveAvgPool2d(1)
        parts["flatten"] = nn.Flatten(1)
        features = arch.classifier_inputs
        for index, hidden in enumerate(arch.hidden, start=1):
            parts[f"fc{index}"] = nn.Linear(features, hidden)
            parts[f"fc{index}_relu"] = nn.ReLU(inplace=True)
            features = hidden
        parts["classifier"] = nn.Linear(features, arch.classes)
        return nn.Sequential(OrderedDict(parts))

    return _Layers(network=network)


def _elementwise(op: str, x: torch.Tensor) -> torch.Tensor:
    """Apply one of :data:`ELEMENTWISE_OPS` to ``x``."""
    if op == "relu":
        return x.relu()
    if op == "add":
        return x + x
    return x * x
