"""Tests of the li2023 synthetic NAS space: sampling follows §4.3.2, is deterministic, and builds runnable networks."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import torch

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.synthetic import (
    BLOCK_KINDS,
    ELEMENTWISE_OPS,
    STRIDES,
    SyntheticArch,
    SyntheticBlock,
    build_synthetic,
    sample_synthetic,
)

NUM_ARCHS = 1000  # li2023's synthetic dataset size
CHANNEL_CHANGING = ("conv", "dwsep", "bottleneck")


@cache
def _archs() -> tuple[SyntheticArch, ...]:
    return tuple(sample_synthetic(seed) for seed in range(NUM_ARCHS))


def _blocks() -> list[tuple[int, SyntheticBlock]]:
    """(position, block) over all 1000 architectures."""
    return [(position, block) for arch in _archs() for position, block in enumerate(arch.blocks)]


def test_1000_seeds_give_1000_distinct_architectures() -> None:
    assert len({(arch.blocks, arch.head_channels) for arch in _archs()}) == NUM_ARCHS


def test_the_same_seed_gives_the_same_architecture() -> None:
    for seed in (0, 1, 7, 999, 123_456_789):
        assert sample_synthetic(seed) == sample_synthetic(seed)


def test_seed_0_gives_the_pinned_architecture() -> None:
    """Guards the 'same network on every machine' promise against a change of NumPy's random stream."""
    arch = sample_synthetic(0)
    summary = [(b.kind, b.out_channels, b.stride, b.kernel) for b in arch.blocks]
    assert summary == [
        ("split", 32, 1, None),
        ("conv", 9, 2, 3),
        ("split", 9, 2, None),
        ("pool", 9, 1, 3),
        ("dwsep", 67, 2, 7),
        ("conv", 206, 1, 7),
        ("bottleneck", 90, 2, 7),
        ("conv", 108, 1, 7),
        ("conv", 253, 1, 3),
    ]
    assert arch.blocks[0].elementwise == ("relu", "relu", "relu")
    assert arch.blocks[6].expansion == 6 and arch.blocks[6].se
    assert arch.head_channels == 1380


def test_every_architecture_has_nine_blocks_with_the_fixed_strides() -> None:
    for arch in _archs():
        assert len(arch.blocks) == 9
        assert tuple(block.stride for block in arch.blocks) == STRIDES


def test_the_five_kinds_are_sampled_uniformly() -> None:
    """9000 blocks, 1800 expected per kind; 5 standard deviations (about 190) of slack."""
    counts = Counter(block.kind for _, block in _blocks())
    assert set(counts) == set(BLOCK_KINDS)
    assert all(1610 <= count <= 1990 for count in counts.values()), counts


def test_channel_ranges_follow_li2023() -> None:
    """C1..C5 in [8, 80], C6..C9 in [80, 400] for channel-changing blocks, C10 in [1200, 1800]; bounds reached."""
    small = [b.out_channels for p, b in _blocks() if p < 5 and b.kind in CHANNEL_CHANGING]
    large = [b.out_channels for p, b in _blocks() if p >= 5 and b.kind in CHANNEL_CHANGING]
    heads = [arch.head_channels for arch in _archs()]
    assert (min(small), max(small)) == (8, 80)
    assert (min(large), max(large)) == (80, 400)
    assert (min(heads), max(heads)) == (1200, 1800)


def test_pool_and_split_blocks_keep_the_channel_count_and_blocks_chain() -> None:
    for arch in _archs():
        channels = 32  # the stem
        for block in arch.blocks:
            assert block.in_channels == channels
            if block.kind in ("pool", "split"):
                assert block.out_channels == block.in_channels
            channels = block.out_channels


def test_block_parameters_take_the_values_of_li2023() -> None:
    for _, b in _blocks():
        if b.kind in CHANNEL_CHANGING:
            assert b.kernel in (3, 5, 7)
        if b.kind == "conv" and b.groups is not None:
            assert b.groups % 4 == 0 and 4 <= b.groups <= 64
            assert b.in_channels % b.groups == 0 and b.out_channels % b.groups == 0
        if b.kind == "bottleneck":
            assert b.expansion in (1, 3, 6)
        else:
            assert b.expansion is None and not b.se
        if b.kind == "pool":
            assert b.pool in ("avg", "max") and b.kernel in (1, 3)
        if b.kind == "split":
            assert b.splits in (2, 3, 4) and b.elementwise is not None
            assert len(b.elementwise) == b.splits and set(b.elementwise) <= set(ELEMENTWISE_OPS)
        else:
            assert b.splits is None and b.elementwise is None


def test_options_within_a_kind_all_occur() -> None:
    blocks = [b for _, b in _blocks()]
    assert {b.kernel for b in blocks if b.kind == "dwsep"} == {3, 5, 7}
    assert {b.expansion for b in blocks if b.kind == "bottleneck"} == {1, 3, 6}
    assert {b.se for b in blocks if b.kind == "bottleneck"} == {True, False}
    assert {(b.pool, b.kernel) for b in blocks if b.kind == "pool"} == {("avg", 1), ("avg", 3), ("max", 1), ("max", 3)}
    assert {b.splits for b in blocks if b.kind == "split"} == {2, 3, 4}
    groups = {b.groups for b in blocks if b.kind == "conv"}
    assert None in groups and len(groups) > 3


@pytest.mark.parametrize("seed", [-1, True, 1.5, "3", None])
def test_a_bad_seed_is_rejected(seed: object) -> None:
    with pytest.raises(InvalidInputError, match="seed"):
        sample_synthetic(seed)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="seed"):
        build_synthetic(seed)  # type: ignore[arg-type]


def test_sampling_does_not_import_torch() -> None:
    code = (
        "import sys; from edgeplan.frontends.synthetic import sample_synthetic; "
        "[sample_synthetic(s) for s in range(5)]; assert 'torch' not in sys.modules, 'torch was imported'"
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def _expected_params(arch: SyntheticArch) -> int:
    """Parameter count of a synthetic network from its description (conv weights, BN affine, SE and FC biases)."""
    total = 3 * 32 * 9 + 2 * 32  # stem
    for b in arch.blocks:
        c_in, c_out = b.in_channels, b.out_channels
        if b.kind == "conv":
            assert b.kernel is not None
            total += c_in * c_out * b.kernel**2 // (b.groups or 1) + 2 * c_out
        elif b.kind == "dwsep":
            assert b.kernel is not None
            total += c_in * b.kernel**2 + 2 * c_in + c_in * c_out + 2 * c_out
        elif b.kind == "bottleneck":
            assert b.kernel is not None and b.expansion is not None
            hidden = c_in * b.expansion
            total += (c_in * hidden + 2 * hidden) if b.expansion != 1 else 0
            total += hidden * b.kernel**2 + 2 * hidden + hidden * c_out + 2 * c_out
            if b.se:
                squeezed = max(8, hidden // 4)
                total += hidden * squeezed + squeezed + squeezed * hidden + hidden
    last = arch.blocks[-1].out_channels
    return total + last * arch.head_channels + 2 * arch.head_channels + arch.head_channels * 1000 + 1000


def _run_recording_pool_input(module: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """Run ``module`` on ``x``; return the logits and the shape of the global pool's input."""
    seen: list[tuple[int, ...]] = []

    def record(_module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], _output: torch.Tensor) -> None:
        seen.append(tuple(inputs[0].shape))

    hook = module.get_submodule("global_pool").register_forward_hook(record)
    with torch.no_grad():
        logits = module(x)
    hook.remove()
    return logits, seen[0]


def test_a_sample_of_20_builds_and_runs_with_the_right_shapes() -> None:
    for seed in range(0, 1000, 50):
        module, shapes = build_synthetic(seed)
        assert shapes == ((1, 3, 224, 224),)
        assert not module.training
        assert sum(p.numel() for p in module.parameters()) == _expected_params(sample_synthetic(seed))
        logits, pooled = _run_recording_pool_input(module, torch.randn(*shapes[0]))
        assert logits.shape == (1, 1000)
        assert pooled == (1, sample_synthetic(seed).head_channels, 7, 7)


def test_block_modules_follow_the_description() -> None:
    """Grouped convs, residual bottlenecks and split sizes are built as sampled."""
    blocks = [(seed, i, b) for seed in range(300) for i, b in enumerate(sample_synthetic(seed).blocks, start=1)]
    grouped = next((s, i, b) for s, i, b in blocks if b.kind == "conv" and b.groups is not None)
    split = next((s, i, b) for s, i, b in blocks if b.kind == "split" and b.in_channels % b.splits != 0)
    for seed, index, block in (grouped, split):
        module, _ = build_synthetic(seed)
        built = module.get_submodule(f"block{index}_{block.kind}")
        if block.kind == "conv":
            assert built[0].groups == block.groups and built[0].kernel_size == (block.kernel, block.kernel)
        else:
            assert sum(built.sizes) == block.in_channels and len(built.sizes) == block.splits
            assert max(built.sizes) - min(built.sizes) == 1
