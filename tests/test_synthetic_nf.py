"""edgeplan's normalization-free space (``synthetic-nf:SEED``): the mixed space in which blocks standardize their
convolutions' weights at every call (NF-ResNets' and NFNets' ``StdConv2d``) instead of batch-normalizing their
outputs; sampled as documented, built node for node (and folded operator for folded operator) by the direct
builder, and leaving the mixed space's seeds as they were."""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest
from synthetic_check import direct_graph_checked

from edgeplan.frontends.synthetic import SPACES, SyntheticArch, sample_synthetic
from edgeplan.ir.ops import OpKind
from edgeplan.measure.model_sets import model_set

_STD_KINDS = {"conv", "dwsep", "bottleneck", "convnext", "resnet"}


@cache
def _archs() -> tuple[SyntheticArch, ...]:
    return tuple(sample_synthetic(seed, "nf") for seed in range(300))


def test_half_the_blocks_with_batch_norms_standardize_their_weights() -> None:
    std: Counter[str] = Counter()
    every: Counter[str] = Counter()
    for arch in _archs():
        assert arch.space == "nf" and arch.name == f"synthetic-nf:{arch.seed}" and len(arch.stages) == 9
        first = 0
        for n in arch.stages:  # a stage's copies standardize as its first block does
            block = arch.blocks[first]
            assert {b.std for b in arch.blocks[first:first + n]} == {block.std}
            every[block.kind] += 1
            std[block.kind] += block.std
            first += n
        assert not any(b.std for b in arch.blocks if b.kind not in _STD_KINDS)
    for kind in _STD_KINDS:
        assert 0.35 < std[kind] / every[kind] < 0.65, kind
    assert set(every) == {"conv", "resnet", "bottleneck", "convnext", "dense", "dwsep", "pool", "split"}


def test_the_other_spaces_never_standardize() -> None:
    for space in SPACES:
        if space != "nf":
            assert not any(b.std for s in range(50) for b in sample_synthetic(s, space).blocks)
    assert sample_synthetic(3, "mixed") != sample_synthetic(3, "nf")  # its own stream


@pytest.mark.parametrize("seed", [3, 4])
def test_nf_direct_graph_equals_the_traced_graph_with_its_folded_operators(seed: int) -> None:
    """Seed 3 standardizes a ConvNeXt block's downsampling and a bottleneck; seed 4 fifteen blocks (42 convolutions)."""
    arch = sample_synthetic(seed, "nf")
    direct = direct_graph_checked(seed, "nf")
    convs = [n for n in direct.nodes if n.kind is OpKind.CONV2D]
    standardized = [n for n in convs if "/conv2d" in n.name]  # called as a function in its StdConv2d
    # every standardized convolution's weight is reshaped to (1, filters, fan_in), batch-normalized, reshaped back
    assert direct.folded_ops == ("reshape", "batch_norm", "reshape_as") * len(standardized)
    for conv, i in zip(standardized, range(1, len(direct.folded_ops), 3), strict=True):
        c = conv.attrs
        weight = (c.out_channels, c.in_channels // c.groups, *c.kernel)
        assert direct.folded_shapes[i] == (((1, weight[0], weight[1] * weight[2] * weight[3]),),) * 2
        assert direct.folded_shapes[i - 1][0] == (weight,)
    # no batch norm follows a standardized convolution; the stem, the head and dense blocks keep theirs
    assert sum(b.std for b in arch.blocks) > 0 and len(standardized) > 0
    norms = {n.name for n in direct.nodes if n.kind is OpKind.BATCH_NORM}
    assert "stem.1" in norms and "head_conv.1" in norms
    assert not any(n.inputs[0].node in {c.name for c in standardized} for n in direct.nodes
                   if n.kind is OpKind.BATCH_NORM)


def test_a_standardized_convolution_convolves_the_standardized_weight() -> None:
    import torch

    from edgeplan.frontends.synthetic import STD_EPS, build_synthetic

    module, _ = build_synthetic(3, "nf")
    convs = [m for m in module.modules() if type(m).__name__ == "StdConv2d"]
    assert convs
    conv = convs[0]
    x = torch.randn(1, conv.in_channels, 9, 9)
    w = conv.weight.reshape(conv.out_channels, -1)
    standardized = ((w - w.mean(1, keepdim=True)) / torch.sqrt(w.var(1, unbiased=False, keepdim=True) + STD_EPS))
    expected = torch.nn.functional.conv2d(x, standardized.reshape_as(conv.weight), None, conv.stride, conv.padding,
                                          conv.dilation, conv.groups)
    with torch.no_grad():
        assert torch.allclose(conv(x), expected, atol=1e-4)


def test_nf_seeds_are_zoo_strings_and_a_model_set() -> None:
    from edgeplan.frontends.zoo import load_graph

    assert "nf" in SPACES and model_set("synthetic-nf") == [f"synthetic-nf:{i}" for i in range(300)]
    assert load_graph("synthetic-nf:4").folded_ops[:3] == ("reshape", "batch_norm", "reshape_as")


#: Seed 4 of the nf space, as sampled when the space was made (its networks are measured under their names):
#: activation, stem, head, stages, and per block of the first eight (kind, out channels, stride, groups, std).
PINNED_NF_4 = ("hardswish", 32, 960, (4, 4, 1, 2, 1, 3, 1, 5, 1), [
    ("bottleneck", 64, 1, None, True), ("bottleneck", 64, 1, None, True), ("bottleneck", 64, 1, None, True),
    ("bottleneck", 64, 1, None, True), ("conv", 32, 2, None, False), ("conv", 32, 1, None, False),
    ("conv", 32, 1, None, False), ("conv", 32, 1, None, False)])


def test_seed_4_gives_the_pinned_nf_architecture() -> None:
    arch = sample_synthetic(4, "nf")
    summary = [(b.kind, b.out_channels, b.stride, b.groups, b.std) for b in arch.blocks[:8]]
    assert (arch.activation, arch.stem_channels, arch.head_channels, arch.stages, summary) == PINNED_NF_4
