"""The synthetic spaces' vocabulary: their names, block kinds, strides and width ranges, and the frozen
descriptions of a sampled block and architecture.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ACTIVATIONS",
    "BLOCK_KINDS",
    "DENSE_BOTTLENECK",
    "ELEMENTWISE_OPS",
    "FINAL_MAP",
    "INPUT_SIZE",
    "NUM_CLASSES",
    "SPACES",
    "STD_EPS",
    "STEM_CHANNELS",
    "STRIDES",
    "SyntheticArch",
    "SyntheticBlock",
    "family_of",
    "pool_padding",
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
    """The zoo family of a synthetic space: ``synthetic`` for li2023's, ``synthetic-{space}`` for edgeplan's.

    Parameters
    ----------
    space
        One of :data:`SPACES`.

    Returns
    -------
    str
        The family prefix of the space's zoo names (``synthetic-wide`` in ``synthetic-wide:5``).
    """
    return "synthetic" if space == "li2023" else f"synthetic-{space}"


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
