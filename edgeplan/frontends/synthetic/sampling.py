"""Sampling an architecture of a synthetic space from a seed, with NumPy only (torch is not imported)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.synthetic.space import (
    _ALIGN,
    _ALIGNED_ALIGNS,
    _CLASSES,
    _CONVNEXT_EXPANSIONS,
    _CONVNEXT_KERNEL,
    _DENSE_GROWTHS,
    _DENSE_MAX_CHANNELS,
    _DENSE_MAX_LAYERS,
    _EXPANSIONS,
    _FLAT_HEAD,
    _GROUP_WIDTHS,
    _HEAD_CHANNELS,
    _HEADS_STREAM,
    _HIDDEN_FC,
    _KERNELS,
    _LARGE_CHANNELS,
    _MAX_COPIES,
    _MAX_GROUP_K,
    _MAX_HIDDEN_FC,
    _MIN_GROUP_WIDTH,
    _MIXED_KINDS,
    _MIXED_POOL_WINDOWS,
    _MIXED_STAGE_KINDS,
    _MIXED_STREAM,
    _MODERN_KINDS,
    _MODERN_STREAM,
    _NF_STREAM,
    _NUM_SMALL,
    _POOL_KINDS,
    _POOL_WINDOWS,
    _RESNET_RATIOS,
    _SMALL_CHANNELS,
    _SPLITS,
    _STAGE_KINDS,
    _STAGES_STREAM,
    _STD_KINDS,
    _WIDE_CHANNELS,
    _WIDE_CONV_KERNELS,
    _WIDE_HEAD,
    _WIDE_KINDS,
    _WIDE_MAX_HIDDEN,
    _WIDE_STEM,
    ACTIVATIONS,
    BLOCK_KINDS,
    ELEMENTWISE_OPS,
    INPUT_SIZE,
    NUM_CLASSES,
    SPACES,
    STEM_CHANNELS,
    STRIDES,
    SyntheticArch,
    SyntheticBlock,
)

if TYPE_CHECKING:
    import numpy as np


__all__ = ["sample_synthetic"]

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
