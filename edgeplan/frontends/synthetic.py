"""The synthetic NAS space of li2023 (§4.3.2): 9 sampled blocks in sequence, seeded.

Li et al., "Predicting Inference Latency of Neural Architectures on Mobile Devices" (ICPE 2023), build a synthetic
dataset of 1000 networks: a sequence of 9 blocks "following the design of sequential connections of blocks in
MobileNetV2", each block's kind and parameters sampled uniformly among

1. ``conv``: a convolution, kernel 3, 5 or 7, optionally grouped with ``4k`` groups (1 <= k <= 16);
2. ``dwsep``: a depthwise-separable convolution, kernel 3, 5 or 7;
3. ``bottleneck``: a MobileNetV2 linear bottleneck, kernel 3, 5 or 7, expansion 1, 3 or 6, optional
   squeeze-and-excite;
4. ``pool``: average or max pooling, window 1x1 or 3x3;
5. ``split``: a split into 2, 3 or 4 parts, an element-wise operation on each part, and a concatenation;

with output channels C1..C5 uniform in [8, 80], C6..C9 in [80, 400] and a head of C10 in [1200, 1800] channels.
The paper leaves the rest open; the choices made here are:

- Input 224x224x3. Stem: 3x3 conv, stride 2, 32 channels, BN, ReLU6 (the MobileNetV2 stem).
- Block strides ``(1, 2, 2, 1, 2, 1, 2, 1, 1)``: with the stem this downsamples 224 -> 112 -> 56 -> 28 -> 14 -> 7,
  as MobileNetV2 does (its stage strides 1, 2, 2, 2, 1, 2, 1), ending on a 7x7 map.
- Convolutions are followed by BN and ReLU6 (MobileNetV2's activation); the bottleneck's projection is linear (BN,
  no activation) and has a residual connection when its stride is 1 and its input and output channels agree.
- ``conv``: groups are sampled uniformly among ``None`` (dense) and every ``4k`` (1 <= k <= 16) that divides both
  the input and the output channels.
- ``dwsep``: depthwise kxk conv + BN + ReLU6, then pointwise 1x1 conv + BN + ReLU6.
- ``bottleneck``: squeeze-and-excite (Hu et al.) after the depthwise conv, as in MnasNet / MobileNetV3: global
  average pool, 1x1 conv to ``max(8, expanded // 4)`` channels, ReLU, 1x1 conv back, sigmoid, multiply.
- ``pool``: padding ``window // 2``; average pooling excludes the padding (``count_include_pad=False``, TFLite's
  SAME average pool). No BN or activation.
- ``split``: the channels are split into near-equal parts (the first ``C mod s`` parts get one more channel); each
  part gets one element-wise op sampled among ``relu``, ``add`` (the part plus itself) and ``mul`` (the part times
  itself); the parts are concatenated back.
- Pooling and split blocks keep the channel count: the output channels sampled for their position are not used
  (:attr:`SyntheticBlock.out_channels` records the real count). A split block at a stride-2 position starts with a
  1x1 max pool of stride 2 (plain subsampling) so that every architecture ends on the same 7x7 map.
- Head: 1x1 conv to C10 channels + BN + ReLU6, global average pooling, linear layer to 1000 classes.

**The wide space** (``synthetic-wide:SEED``, edgeplan's, not the paper's). li2023 §5.3 trains on its synthetic
networks and tests on real-world ones, and observes the dataset shift this creates: the real-world convolutions are
wider and faster per operation than the synthetic ones. The zoo's CNNs (torchvision, timm) shift further than the
paper's mobile networks: ResNets, VGGs, RegNets and ResNeXts run dense and grouped convolutions of 64-2048 channels
at 7-112 pixels, where li2023's space has at most 80 channels in its first five blocks (down to the first 14x14
one) and at most 400 after. The wide space keeps the paper's structure (stem, the same five block kinds, strides and
head) and samples the widths the zoo uses:

- Channels log-uniform and rounded to a multiple of 8 (the zoo's widths are multiples of 8 almost everywhere; the
  paper's space, uniform over integers, covers the unaligned ones): the stem in [16, 64]; the block at 112x112 in
  [16, 128]; 56x56 in [24, 256]; 28x28 in [32, 512]; 14x14 in [64, 1024]; 7x7 in [128, 1536]; the head in
  [512, 2048].
- Block kinds are drawn with weights conv 3, bottleneck 2, dwsep 1, pool 1, split 1 (the zoo's time goes mostly
  to dense convolutions, then to inverted bottlenecks).
- A ``conv`` block's kernel is 1 or 3 (the dense kernels of the zoo's bodies; 5 and 7 remain in the depthwise
  kernels of ``dwsep`` and ``bottleneck`` blocks, as in EfficientNet and MixNet). It is dense with probability
  1/2, else grouped with ``4k`` groups as in the paper's space (ResNeXt- and RegNet-like grouped convolutions;
  aligned widths admit many group counts, which would otherwise crowd out the dense convolutions).
- A ``bottleneck``'s expansion is 1, 3 or 6 as in the paper, capped so that the expanded width stays at most
  3072.

A wide seed is an independent draw: ``synthetic-wide:5`` shares nothing with ``synthetic:5``.

**The aligned space** (``synthetic-aligned:SEED``, edgeplan's). The wide space's widths are multiples of 8, and
mostly of 8 only; the zoo's are mostly multiples of 32 or 64, and the CPU's convolution kernels, which block
channels by 8 to 64, run those faster (on this machine the zoo's 3x3 convolutions of 1e8-3e8 FLOPs: a median 186
GFLOP/s at multiples of 64, 143 GFLOP/s at multiples of 8 only). Its grouped convolutions also stop at 64 groups,
where RegNet and ResNeXt run up to hundreds of groups of 4-256 channels. The aligned space is the wide space with

- each width rounded to a multiple of an alignment drawn per width from 16, 32 and 64 (64 with probability 1/2),
  in the same log-uniform ranges;
- a grouped ``conv`` block's group count drawn uniformly among the divisors of the two channel counts' greatest
  common divisor that leave at least 4 channels per group (so group widths from 4 to half the channels).

**The heads space** (``synthetic-heads:SEED``, edgeplan's). Every network of the other spaces ends on a linear
layer to 1000 classes from a global average, so a predictor trained on them has seen fully connected layers of one
output width only, and of at most 2048 inputs: the zoo's VGGs and AlexNet, whose classifiers read the flattened
feature map (9,216 or 25,088 inputs) through two hidden layers of 4,096, are out of its range, and how an FC
layer's time grows with its output width is not identified at all. The heads space is the aligned space's body with
a classifier sampled as well:

- the classifier reads the global average (as in the other spaces) or, with probability 1/2, the flattened 7x7
  map (VGG's and AlexNet's classifiers), whose head conv then has [64, 512] channels (3,136-25,088 inputs);
- 0, 1 or 2 hidden linear layers, each followed by ReLU, of widths in [256, 4096];
- the output layer has 1000 classes with probability 1/2, else a width in [64, 4096];

the widths log-uniform and aligned as the aligned space's. A heads seed draws from its own stream
(``default_rng([seed, 0x68656164])``), so ``synthetic-heads:5`` shares nothing with ``synthetic-aligned:5``.

**The stages space** (``synthetic-stages:SEED``, edgeplan's). Real CNNs are built of stages of identical blocks
(ResNet-50's 3, 4, 6 and 3 bottlenecks, MobileNetV2's 1-4 per stage), so most of a zoo CNN's operations run right
after the same operation, at the same shapes, ran earlier in the forward pass (67% of the torchvision and timm CNNs'
ops, against 8% in the other spaces' networks), and on a CPU such a repeat runs faster than the first of its kind
(0.85x on the Zen 5 file; see :data:`edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`). A predictor that learns the
repeats' speed from the other spaces sees few of them, at few shapes. The stages space is the aligned space's body
(widths, alignments, kinds, group counts) with stages:

- after a ``conv``, ``dwsep`` or ``bottleneck`` block, 0 to 4 copies of it (uniformly), each at stride 1 with the
  block's output channels as input and output, as the later blocks of a real stage are;
- a ``conv`` or ``dwsep`` copy adds its input to its output (a residual, as ResNet's blocks do); a ``bottleneck``
  copy has the bottleneck's residual, its expansion capped for its input as the first one's is;
- ``pool`` and ``split`` blocks are not repeated;

so a network has 9 to 45 blocks. A stages seed draws from its own stream (``default_rng([seed, 0x73746167])``).

**The modern space** (``synthetic-modern:SEED``, edgeplan's). The zoo's newer CNNs run operations none of the
other spaces has: ConvNeXt's blocks spend most of their time in linear layers over every pixel of a channels-last
map (3136 rows at 56x56), between a LayerNorm and a GELU; EfficientNet, MobileNetV3 and RegNetY activate with SiLU
or hard-swish; ResNets and VGGs with an in-place ReLU over whole maps (the other spaces' in-place ReLUs are their
squeeze-and-excite gates', at 1x1). A predictor that never saw those prices them by their category's other ops:
trained on li2023's networks and the stages space, the Zen 5 file's ConvNeXts are predicted at 0.51-0.63x their
measured time (``benchmarks/bench_li2023_zoo_bias.py --worst``). The modern space is the stages space with

- one activation per network for every convolution's, drawn uniformly among ReLU6, ReLU, SiLU, hard-swish (all
  in place) and GELU;
- a sixth block kind, ``convnext`` (torchvision's ConvNeXt block), drawn with weight 2 (conv 3, bottleneck 2,
  convnext 2, dwsep 1, pool 1, split 1): at a stride-2 position or a change of width, a downsampling convolution
  (kernel and stride 2, or 1x1) with batch norm first; then a 7x7 depthwise convolution, a permute to channels
  last, a LayerNorm, a linear layer to ``expansion`` (2, 3 or 4, the expanded width at most 3072) times the width,
  GELU, a linear layer back, a permute back, a per-channel scale (layer scale) and the residual; repeated as the
  stages space repeats its blocks, the copies without the downsampling.

**The mixed space** (``synthetic-mixed:SEED``, edgeplan's). Trained on 30 networks of one of the spaces above, the
zoo's CNNs built of blocks none of those 30 has are mispredicted most (30 stages networks on the Zen 5 keep-memory
file: ConvNeXts at 0.53-0.61x, VGG's 2x2 max pools and DenseNets' 49-part concatenations far below their time,
RegNets at 0.79-0.90x; ``benchmarks/bench_li2023_zoo_bias.py``). The mixed space puts the zoo's block families into
every draw, so that few networks cover them all: it is the modern space (activation per network, aligned widths,
stages of 0 to 4 copies) with the heads space's classifiers and

- block kinds drawn with weights conv 2, resnet 2, bottleneck 2, convnext 1, dense 1, dwsep 1, pool 1, split 1;
- ``resnet``: the bottleneck of ResNet-50, ResNeXt and RegNet: 1x1 conv to ``width``, 3x3 conv with the stride
  and groups, optional squeeze-and-excite (RegNetY, probability 1/3), 1x1 conv to the output width; the shortcut a
  1x1 conv with batch norm where the stride or the width changes, added in place, then the activation. ``width`` is
  1/4 (ResNet), 1/2 (ResNeXt) or 1 (RegNet) of the output width, rounded down to a multiple of the group width,
  which is drawn among 8, 16, 24, 32, 48, 64, 128 channels and dense (those not above the width);
- ``dense``: a DenseNet-BC block: ``layers`` layers, each the concatenation of the block's input and every earlier
  layer's output (the first reads the input alone), batch norm, activation, 1x1 conv to 4 x ``growth`` channels,
  batch norm, activation, 3x3 conv to ``growth`` (12, 16, 24, 32 or 48) channels; then the transition: the
  concatenation of all, batch norm, activation, 1x1 conv to the block's width and, at a stride of 2, a 2x2 average
  pool. 2 to 6, 12, 24, 48 or 32 layers on a 112, 56, 28, 14 or 7 pixel input (DenseNet-121 runs 6, 12, 24 and
  16, DenseNet-201 up to 48), and at most 3072 concatenated channels;
- a ``pool`` block at a stride of 2 may also have a 2x2 window (unpadded, VGG's max pool).

**The normalization-free space** (``synthetic-nf:SEED``, edgeplan's). NF-ResNets and NFNets standardize every
convolution's weight at every call (timm's ``ScaledStdConv2d``: a batch norm in training mode over each filter's
fan-in, which eager PyTorch runs on the weight at each forward pass) and have no batch norm after it. No other
space has that operation, and it is a third of those networks' eager latency (``nf_resnet50`` 18.9 of 63.5 ms,
``dm_nfnet_f0`` 34.5 of 96.0 ms on the Zen 5 keep-memory file); the IR folds it away, as any computation on
constants, and a latency model lists it as unpredicted. The nf space is the mixed space (its own stream) in which
each ``conv``, ``dwsep``, ``bottleneck``, ``convnext`` and ``resnet`` block (and its copies) draws, after its other
parameters, whether its convolutions with batch norm are weight-standardized instead (``std``, probability 1/2):
the convolution, without bias, of the standardized weight (epsilon :data:`STD_EPS`, no gain), then the activation.
The stem, the head and the dense blocks keep their batch norms.

Sampling uses only ``numpy.random.default_rng(seed)`` (the heads, stages, modern, mixed and nf spaces'
``default_rng([seed, 0x68656164])``, ``default_rng([seed, 0x73746167])``, ``default_rng([seed, 0x6d6f6465])``,
``default_rng([seed, 0x6d697864])`` and ``default_rng([seed, 0x6e66726d])``;
``integers``, and ``uniform`` for the edgeplan spaces' widths),
so a seed gives the same architecture on every machine (NumPy does not formally promise stream stability across
versions; a golden-architecture test per space guards it).
:func:`sample_synthetic` does not import torch.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from edgeplan.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = [
    "BLOCK_KINDS",
    "DENSE_BOTTLENECK",
    "ELEMENTWISE_OPS",
    "SPACES",
    "STRIDES",
    "SyntheticArch",
    "SyntheticBlock",
    "build_synthetic",
    "family_of",
    "pool_padding",
    "sample_synthetic",
]

BLOCK_KINDS: tuple[str, ...] = ("conv", "dwsep", "bottleneck", "pool", "split")
"""The five block kinds of li2023 §4.3.2, in the paper's order."""

ELEMENTWISE_OPS: tuple[str, ...] = ("relu", "add", "mul")
"""Element-wise operations of a split block: ``relu(x)``, ``x + x``, ``x * x``."""

INPUT_SIZE = 224
STEM_CHANNELS = 32
NUM_CLASSES = 1000
STRIDES: tuple[int, ...] = (1, 2, 2, 1, 2, 1, 2, 1, 1)
"""Stride of each of the 9 blocks (the stem has stride 2 on top)."""

_KERNELS = (3, 5, 7)
_EXPANSIONS = (1, 3, 6)
_POOL_KINDS = ("avg", "max")
_POOL_WINDOWS = (1, 3)
_SPLITS = (2, 3, 4)
_SMALL_CHANNELS = (8, 80)  # C1..C5
_LARGE_CHANNELS = (80, 400)  # C6..C9
_HEAD_CHANNELS = (1200, 1800)  # C10
_NUM_SMALL = 5
_MAX_GROUP_K = 16

SPACES: tuple[str, ...] = ("li2023", "wide", "aligned", "heads", "stages", "modern", "mixed", "nf")
"""The synthetic spaces: li2023's (``synthetic:SEED``) and edgeplan's wide, aligned, heads, stages, modern, mixed and
nf ones (``synthetic-wide:SEED``, ``synthetic-aligned:SEED``, ``synthetic-heads:SEED``, ``synthetic-stages:SEED``,
``synthetic-modern:SEED``, ``synthetic-mixed:SEED``, ``synthetic-nf:SEED``)."""

ACTIVATIONS: tuple[str, ...] = ("relu6", "relu", "silu", "hardswish", "gelu")
"""The convolutions' activations of the modern space (every other space's is ReLU6)."""

_WIDE_STEM = (16, 64)
_WIDE_CHANNELS = {112: (16, 128), 56: (24, 256), 28: (32, 512), 14: (64, 1024), 7: (128, 1536)}
_WIDE_HEAD = (512, 2048)
_WIDE_CONV_KERNELS = (1, 3)
_WIDE_KINDS = ("conv",) * 3 + ("dwsep",) + ("bottleneck",) * 2 + ("pool", "split")  # drawn uniformly: the weights
_WIDE_MAX_HIDDEN = 3072
_ALIGN = 8
_ALIGNED_ALIGNS = (16, 32, 64, 64)  # drawn uniformly: 64 with probability 1/2
_MIN_GROUP_WIDTH = 4
_HEADS_STREAM = 0x68656164  # "head": the heads space's seeds draw from their own streams
_STAGES_STREAM = 0x73746167  # "stag": the stages space's
_STAGE_KINDS = ("conv", "dwsep", "bottleneck", "convnext")  # the kinds the stages and modern spaces repeat
_MODERN_STREAM = 0x6d6f6465  # "mode": the modern space's
_MODERN_KINDS = _WIDE_KINDS + ("convnext",) * 2
_CONVNEXT_EXPANSIONS = (2, 3, 4)
_CONVNEXT_KERNEL = 7
_MIXED_STREAM = 0x6d697864  # "mixd": the mixed space's
_NF_STREAM = 0x6e66726d  # "nfrm": the normalization-free space's
_STD_KINDS = ("conv", "dwsep", "bottleneck", "convnext", "resnet")  # the kinds whose convolutions have batch norms
_MIXED_KINDS = ("conv",) * 2 + ("resnet",) * 2 + ("bottleneck",) * 2 + ("convnext", "dense", "dwsep", "pool",
                                                                          "split")
_MIXED_STAGE_KINDS = ("conv", "dwsep", "bottleneck", "convnext", "resnet")
_RESNET_RATIOS = (0.25, 0.5, 1.0)  # bottleneck width / output width: ResNet's, ResNeXt's (32x4d), RegNet's
_GROUP_WIDTHS = (8, 16, 24, 32, 48, 64, 128, 0)  # channels per group of a resnet block's 3x3 conv; 0: dense
_DENSE_GROWTHS = (12, 16, 24, 32, 48)
_DENSE_MAX_LAYERS = {112: 6, 56: 12, 28: 24, 14: 48, 7: 32}  # by the block's input side
_DENSE_MAX_CHANNELS = 3072  # the block's concatenated output
_MIXED_POOL_WINDOWS = (1, 2, 3)  # at a stride of 2 (2: VGG's and DenseNet's 2x2 windows, unpadded)
DENSE_BOTTLENECK = 4
"""A dense block layer's 1x1 convolution has this many times the growth rate of channels (DenseNet-BC)."""
STD_EPS = 1e-5
"""The epsilon of the nf space's weight standardization (added to each filter's variance)."""
_MAX_COPIES = 4
_FLAT_HEAD = (64, 512)  # head conv channels of a classifier on the flattened 7x7 map
_HIDDEN_FC = (256, 4096)
_MAX_HIDDEN_FC = 2
_CLASSES = (64, 4096)
FINAL_MAP = INPUT_SIZE // 32
"""Side of every synthetic network's last feature map (7)."""


@dataclass(frozen=True)
class SyntheticBlock:
    """One block of a synthetic architecture.

    Attributes
    ----------
    kind
        One of :data:`BLOCK_KINDS`, or ``convnext`` (the modern and mixed spaces'), ``resnet`` or ``dense`` (the
        mixed space's).
    in_channels, out_channels
        Channels in and out; equal for ``pool`` and ``split`` blocks.
    stride
        1 or 2, fixed by the block's position (:data:`STRIDES`).
    kernel
        Convolution kernel (3, 5, 7) for ``conv``, ``dwsep`` and ``bottleneck``, 3 for ``resnet`` and ``dense``,
        7 for ``convnext``; pooling window (1, 3; 2 at a stride of 2 in the mixed space) for ``pool``; ``None`` for
        ``split``.
    groups
        Number of groups of a ``conv`` block (a multiple of 4 up to 64; in the aligned space any divisor of both
        channel counts), or ``None`` for a dense conv and for other kinds.
    expansion
        Expansion rate (1, 3, 6) of a ``bottleneck``, (2, 3, 4) of a ``convnext``, else ``None``.
    se
        Whether a ``bottleneck`` has squeeze-and-excite (always ``False`` for other kinds).
    pool
        ``"avg"`` or ``"max"`` for a ``pool`` block, else ``None``.
    splits
        Number of parts (2, 3, 4) of a ``split`` block, else ``None``.
    elementwise
        The element-wise op of each part of a ``split`` block (from :data:`ELEMENTWISE_OPS`), else ``None``.
    residual
        Whether a ``conv`` or ``dwsep`` block adds its input to its output (the stages and modern spaces' copies;
        always ``False`` elsewhere). A ``bottleneck``'s residual follows from its stride and channels, a
        ``convnext`` and a ``resnet`` block always have one.
    width
        The channels of a ``resnet`` block's grouped 3x3 convolution (the mixed space's), else ``None``.
    layers, growth
        A ``dense`` block's layer count and growth rate (the mixed space's), else ``None``.
    std
        Whether the block's convolutions with batch norm standardize their weights instead (the nf space's:
        NF-ResNet's and NFNets' weight-standardized convolution, no batch norm after it).
    """

    kind: str
    in_channels: int
    out_channels: int
    stride: int
    kernel: int | None = None
    groups: int | None = None
    expansion: int | None = None
    se: bool = False
    pool: str | None = None
    splits: int | None = None
    elementwise: tuple[str, ...] | None = None
    residual: bool = False
    width: int | None = None
    layers: int | None = None
    growth: int | None = None
    std: bool = False


@dataclass(frozen=True)
class SyntheticArch:
    """A sampled synthetic architecture.

    Attributes
    ----------
    seed
        The seed it was sampled from.
    blocks
        The blocks in order: 9, but in the stages and modern spaces, whose copies follow the block they repeat.
    head_channels
        C10, the channels of the final 1x1 conv.
    space
        The space it was sampled from (:data:`SPACES`).
    stem_channels
        Output channels of the stem (32 in li2023's space).
    flatten
        Whether the classifier reads the flattened :data:`FINAL_MAP` x :data:`FINAL_MAP` map (the heads space's
        VGG-like heads) instead of its global average.
    hidden
        Widths of the hidden linear layers (each followed by ReLU) before the output layer; empty but in the heads
        space.
    classes
        Width of the output layer (1000 but in the heads space).
    stages
        The stages, modern and mixed spaces': per sampled block, the blocks of its stage (itself and its copies, 1
        to 5), so that ``blocks`` splits into 9 stages; empty in the other spaces, where every block stands alone.
    activation
        The convolutions' activation (:data:`ACTIVATIONS`): ReLU6 but in the modern and mixed spaces.
    """

    seed: int
    blocks: tuple[SyntheticBlock, ...]
    head_channels: int
    space: str = "li2023"
    stem_channels: int = STEM_CHANNELS
    flatten: bool = False
    hidden: tuple[int, ...] = ()
    classes: int = NUM_CLASSES
    stages: tuple[int, ...] = ()
    activation: str = "relu6"

    @property
    def classifier_inputs(self) -> int:
        """Inputs of the first linear layer: the head width, times the map's pixels for a flattening head."""
        return self.head_channels * (FINAL_MAP * FINAL_MAP if self.flatten else 1)

    @property
    def name(self) -> str:
        """The zoo string of the architecture: ``synthetic:SEED`` or ``synthetic-{space}:SEED``."""
        return f"{family_of(self.space)}:{self.seed}"


def family_of(space: str) -> str:
    """The zoo family of a synthetic space: ``synthetic`` for li2023's, ``synthetic-{space}`` for edgeplan's."""
    return "synthetic" if space == "li2023" else f"synthetic-{space}"


def sample_synthetic(seed: int, space: str = "li2023") -> SyntheticArch:
    """Sample the architecture of a seed from a synthetic NAS space.

    Parameters
    ----------
    seed
        A non-negative integer; the same seed always gives the same architecture.
    space
        ``li2023`` (the paper's space, default), ``wide``, ``aligned``, ``heads``, ``stages``, ``modern``,
        ``mixed`` or ``nf`` (see the module docstring).

    Returns
    -------
    SyntheticArch
        The blocks and the head width.

    Raises
    ------
    InvalidInputError
        If ``seed`` is not a non-negative integer, or ``space`` is unknown.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidInputError(f"synthetic seed must be a non-negative integer, got {seed!r}")
    if space not in SPACES:
        raise InvalidInputError(f"unknown synthetic space {space!r}; choose one of {', '.join(SPACES)}")
    import numpy as np

    streams = {"heads": [seed, _HEADS_STREAM], "stages": [seed, _STAGES_STREAM], "modern": [seed, _MODERN_STREAM],
               "mixed": [seed, _MIXED_STREAM], "nf": [seed, _NF_STREAM]}
    rng = np.random.default_rng(streams.get(space, seed))
    if space in ("mixed", "nf"):
        return _sample_mixed(rng, seed, space)
    if space != "li2023":
        return _sample_wide(rng, seed, space)
    blocks: list[SyntheticBlock] = []
    channels = STEM_CHANNELS
    for position, stride in enumerate(STRIDES):
        block = _sample_block(rng, position, channels, stride)
        blocks.append(block)
        channels = block.out_channels
    head = _uniform(rng, *_HEAD_CHANNELS)
    return SyntheticArch(seed=seed, blocks=tuple(blocks), head_channels=head)


def _sample_wide(rng: np.random.Generator, seed: int, space: str = "wide") -> SyntheticArch:
    """An architecture of the wide, the aligned, the heads, the stages or the modern space (see the module
    docstring)."""
    aligned = space in ("aligned", "heads", "stages", "modern")
    staged = space in ("stages", "modern")
    activation = str(_pick(rng, ACTIVATIONS)) if space == "modern" else "relu6"

    def width(low: int, high: int) -> int:
        return _aligned(rng, low, high, int(_pick(rng, _ALIGNED_ALIGNS)) if aligned else _ALIGN)

    stem = width(*_WIDE_STEM)
    blocks: list[SyntheticBlock] = []
    stages: list[int] = []
    channels, size = stem, INPUT_SIZE // 2
    for stride in STRIDES:
        size //= stride
        kind = str(_pick(rng, _MODERN_KINDS if space == "modern" else _WIDE_KINDS))
        base = SyntheticBlock(kind, in_channels=channels, out_channels=width(*_WIDE_CHANNELS[size]), stride=stride)
        block = _wide_block(rng, base, aligned)
        blocks.append(block)
        channels = block.out_channels
        if staged:
            copies = int(rng.integers(_MAX_COPIES + 1)) if kind in _STAGE_KINDS else 0
            blocks += [_copy(block)] * copies
            stages.append(1 + copies)
    if space != "heads":
        return SyntheticArch(seed=seed, blocks=tuple(blocks), head_channels=width(*_WIDE_HEAD), space=space,
                             stem_channels=stem, stages=tuple(stages), activation=activation)
    flatten, head, hidden, classes = _sample_classifier(rng, width)
    return SyntheticArch(seed=seed, blocks=tuple(blocks), head_channels=head, space=space, stem_channels=stem,
                         flatten=flatten, hidden=hidden, classes=classes)


def _wide_block(rng: np.random.Generator, base: SyntheticBlock, aligned: bool) -> SyntheticBlock:
    """The parameters of a block of the wide space and those built on it, its kind, widths and stride drawn."""
    if base.kind == "conv":
        kernel = int(_pick(rng, _WIDE_CONV_KERNELS))
        valid = (_divisor_groups(base.in_channels, base.out_channels) if aligned
                 else _valid_groups(base.in_channels, base.out_channels))
        grouped = bool(rng.integers(2)) and bool(valid)
        return replace(base, kernel=kernel, groups=valid[int(rng.integers(len(valid)))] if grouped else None)
    if base.kind == "bottleneck":
        block = _sample_bottleneck(rng, base)
        cap = max(e for e in _EXPANSIONS if e == 1 or base.in_channels * e <= _WIDE_MAX_HIDDEN)
        return replace(block, expansion=min(block.expansion or 1, cap))
    if base.kind == "convnext":
        expansion = int(_pick(rng, _CONVNEXT_EXPANSIONS))
        cap = max(e for e in _CONVNEXT_EXPANSIONS if e == 2 or base.out_channels * e <= _WIDE_MAX_HIDDEN)
        return replace(base, kernel=_CONVNEXT_KERNEL, expansion=min(expansion, cap))
    return _KIND_SAMPLERS[base.kind](rng, base)


def _sample_classifier(rng: np.random.Generator, width: Callable[[int, int], int]
                       ) -> tuple[bool, int, tuple[int, ...], int]:
    """The heads space's classifier: whether it flattens the map, the head conv's width, the hidden layers' widths
    and the output width."""
    flatten = bool(rng.integers(2))
    head = width(*(_FLAT_HEAD if flatten else _WIDE_HEAD))
    hidden = tuple(width(*_HIDDEN_FC) for _ in range(int(rng.integers(_MAX_HIDDEN_FC + 1))))
    classes = NUM_CLASSES if rng.integers(2) else width(*_CLASSES)
    return flatten, head, hidden, classes


def _sample_mixed(rng: np.random.Generator, seed: int, space: str = "mixed") -> SyntheticArch:
    """An architecture of the mixed space or of the nf space (the mixed space's draws, and after each block of a
    kind with batch norms whether its convolutions standardize their weights: see the module docstring)."""
    activation = str(_pick(rng, ACTIVATIONS))

    def width(low: int, high: int) -> int:
        return _aligned(rng, low, high, int(_pick(rng, _ALIGNED_ALIGNS)))

    stem = width(*_WIDE_STEM)
    blocks: list[SyntheticBlock] = []
    stages: list[int] = []
    channels, size = stem, INPUT_SIZE // 2
    for stride in STRIDES:
        side, size = size, size // stride
        kind = str(_pick(rng, _MIXED_KINDS))
        base = SyntheticBlock(kind, in_channels=channels, out_channels=width(*_WIDE_CHANNELS[size]), stride=stride)
        if kind == "resnet":
            block = _sample_resnet(rng, base)
        elif kind == "dense":
            block = _sample_dense(rng, base, side)
        elif kind == "pool":
            window = int(_pick(rng, _MIXED_POOL_WINDOWS if stride == 2 else _POOL_WINDOWS))
            block = replace(base, out_channels=channels, kernel=window, pool=str(_pick(rng, _POOL_KINDS)))
        else:
            block = _wide_block(rng, base, aligned=True)
        if space == "nf" and kind in _STD_KINDS:
            block = replace(block, std=bool(rng.integers(2)))
        blocks.append(block)
        channels = block.out_channels
        copies = int(rng.integers(_MAX_COPIES + 1)) if kind in _MIXED_STAGE_KINDS else 0
        blocks += [_copy(block)] * copies
        stages.append(1 + copies)
    flatten, head, hidden, classes = _sample_classifier(rng, width)
    return SyntheticArch(seed=seed, blocks=tuple(blocks), head_channels=head, space=space, stem_channels=stem,
                         flatten=flatten, hidden=hidden, classes=classes, stages=tuple(stages),
                         activation=activation)


def _sample_resnet(rng: np.random.Generator, base: SyntheticBlock) -> SyntheticBlock:
    """A ResNet, ResNeXt or RegNet bottleneck: its 3x3 conv's width (a ratio of the output width, a multiple of the
    group width, which is drawn among those not above that width), groups and squeeze-and-excite (RegNetY's, with
    probability 1/3)."""
    target = max(_ALIGN, base.out_channels * _RESNET_RATIOS[int(rng.integers(len(_RESNET_RATIOS)))])
    group_width = int(_pick(rng, tuple(g for g in _GROUP_WIDTHS if g <= target)))  # 0 (dense) always fits
    unit = group_width or _ALIGN
    inner = unit * max(1, int(target // unit))  # not above the target: a bottleneck never widens
    groups = inner // group_width if group_width and inner > group_width else None
    return replace(base, kernel=3, width=inner, groups=groups, se=bool(rng.integers(3) == 0))


def _sample_dense(rng: np.random.Generator, base: SyntheticBlock, side: int) -> SyntheticBlock:
    """A DenseNet block on a ``side`` x ``side`` input: its growth rate and layer count (at least 2, at most the
    side's :data:`_DENSE_MAX_LAYERS` and what keeps the concatenation within :data:`_DENSE_MAX_CHANNELS`)."""
    growth = int(_pick(rng, _DENSE_GROWTHS))
    most = max(2, min(_DENSE_MAX_LAYERS[side], (_DENSE_MAX_CHANNELS - base.in_channels) // growth))
    return replace(base, kernel=3, layers=int(rng.integers(2, most + 1)), growth=growth)


def _copy(block: SyntheticBlock) -> SyntheticBlock:
    """A later block of the stage ``block`` starts (the stages and modern spaces): stride 1, its output channels in
    and out, a residual (a bottleneck's and a convnext block's are their own); a bottleneck's expansion capped for
    its new input."""
    copy = replace(block, in_channels=block.out_channels, stride=1, residual=block.kind in ("conv", "dwsep"))
    if block.kind == "bottleneck":
        cap = max(e for e in _EXPANSIONS if e == 1 or block.out_channels * e <= _WIDE_MAX_HIDDEN)
        copy = replace(copy, expansion=min(block.expansion or 1, cap))
    return copy


def _aligned(rng: np.random.Generator, low: int, high: int, align: int = _ALIGN) -> int:
    """A multiple of ``align`` in ``[low, high]``, log-uniform (the multiples of ``align`` nearest the ends when
    ``align`` does not divide them; ``low`` and ``high`` are multiples of 8)."""
    import numpy as np

    value = float(np.exp(rng.uniform(np.log(low), np.log(high))))
    if align == _ALIGN:
        return int(min(high, max(low, _ALIGN * round(value / _ALIGN))))
    lo, hi = max(align, -(-low // align) * align), max(align, high // align * align)
    return int(min(hi, max(lo, align * round(value / align))))


def _uniform(rng: np.random.Generator, low: int, high: int) -> int:
    """An integer uniform in ``[low, high]`` (both included)."""
    return int(rng.integers(low, high + 1))


def _pick(rng: np.random.Generator, options: tuple[int, ...] | tuple[str, ...]) -> int | str:
    """An element of ``options`` chosen uniformly."""
    return options[int(rng.integers(len(options)))]


def _valid_groups(in_channels: int, out_channels: int) -> tuple[int, ...]:
    """The group numbers ``4k`` (1 <= k <= 16) that divide both channel counts."""
    candidates = (4 * k for k in range(1, _MAX_GROUP_K + 1))
    return tuple(g for g in candidates if in_channels % g == 0 and out_channels % g == 0)


def _divisor_groups(in_channels: int, out_channels: int) -> tuple[int, ...]:
    """The group numbers (at least 2) that divide both channel counts and leave at least 4 channels per group of
    each: the aligned space's grouped convolutions."""
    common = math.gcd(in_channels, out_channels)
    return tuple(g for g in range(2, common + 1)
                 if common % g == 0 and min(in_channels, out_channels) // g >= _MIN_GROUP_WIDTH)


def _sample_block(rng: np.random.Generator, position: int, in_channels: int, stride: int) -> SyntheticBlock:
    """Sample the block at ``position`` (0-based): its kind, output channels, then kind-specific parameters."""
    kind = str(_pick(rng, BLOCK_KINDS))
    low, high = _SMALL_CHANNELS if position < _NUM_SMALL else _LARGE_CHANNELS
    out_channels = _uniform(rng, low, high)
    base = SyntheticBlock(kind, in_channels=in_channels, out_channels=out_channels, stride=stride)
    return _KIND_SAMPLERS[kind](rng, base)


def _sample_conv(rng: np.random.Generator, base: SyntheticBlock) -> SyntheticBlock:
    kernel = int(_pick(rng, _KERNELS))
    valid = _valid_groups(base.in_channels, base.out_channels)
    choice = int(rng.integers(len(valid) + 1))  # 0: dense, i > 0: valid[i - 1]
    return replace(base, kernel=kernel, groups=valid[choice - 1] if choice else None)


def _sample_dwsep(rng: np.random.Generator, base: SyntheticBlock) -> SyntheticBlock:
    return replace(base, kernel=int(_pick(rng, _KERNELS)))


def _sample_bottleneck(rng: np.random.Generator, base: SyntheticBlock) -> SyntheticBlock:
    kernel = int(_pick(rng, _KERNELS))
    expansion = int(_pick(rng, _EXPANSIONS))
    return replace(base, kernel=kernel, expansion=expansion, se=bool(rng.integers(2)))


def _sample_pool(rng: np.random.Generator, base: SyntheticBlock) -> SyntheticBlock:
    pool = str(_pick(rng, _POOL_KINDS))
    window = int(_pick(rng, _POOL_WINDOWS))
    return replace(base, out_channels=base.in_channels, kernel=window, pool=pool)


def _sample_split(rng: np.random.Generator, base: SyntheticBlock) -> SyntheticBlock:
    splits = int(_pick(rng, _SPLITS))
    ops = tuple(str(_pick(rng, ELEMENTWISE_OPS)) for _ in range(splits))
    return replace(base, out_channels=base.in_channels, splits=splits, elementwise=ops)


_KIND_SAMPLERS: dict[str, Callable[[np.random.Generator, SyntheticBlock], SyntheticBlock]] = {
    "conv": _sample_conv,
    "dwsep": _sample_dwsep,
    "bottleneck": _sample_bottleneck,
    "pool": _sample_pool,
    "split": _sample_split,
}


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


def pool_padding(window: int) -> int:
    """A pool block's padding.

    Parameters
    ----------
    window
        The pooling window's side.

    Returns
    -------
    int
        ``window // 2`` for the odd windows, 0 for the mixed space's 2x2 ones (VGG's, unpadded).
    """
    return 0 if window % 2 == 0 else window // 2


def _elementwise(op: str, x: torch.Tensor) -> torch.Tensor:
    """Apply one of :data:`ELEMENTWISE_OPS` to ``x``."""
    if op == "relu":
        return x.relu()
    if op == "add":
        return x + x
    return x * x
