"""edgeplan's mixed space (``synthetic-mixed:SEED``): the modern space with the zoo's other blocks (ResNet, ResNeXt
and RegNet bottlenecks, DenseNet blocks, 2x2 pools) and the heads space's classifiers; sampled as documented, built
node for node by the direct builder, and leaving every other space's seeds as they were."""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest
from synthetic_check import direct_graph_checked

from edgeplan.frontends.synthetic import ACTIVATIONS, SPACES, STRIDES, SyntheticArch, sample_synthetic
from edgeplan.ir.ops import OpKind
from edgeplan.measure.model_sets import expand_models, model_set


@cache
def _archs() -> tuple[SyntheticArch, ...]:
    return tuple(sample_synthetic(seed, "mixed") for seed in range(300))


def _firsts(arch: SyntheticArch) -> list[int]:
    """Indices of the sampled blocks (each stage's first)."""
    return [sum(arch.stages[:i]) for i in range(len(arch.stages))]


def test_mixed_networks_draw_every_kind_at_li2023s_strides_and_chain() -> None:
    kinds: Counter[str] = Counter()
    for arch in _archs():
        assert arch.space == "mixed" and arch.name == f"synthetic-mixed:{arch.seed}" and arch.activation in ACTIVATIONS
        assert len(arch.stages) == len(STRIDES) and sum(arch.stages) == len(arch.blocks)
        firsts = [arch.blocks[i] for i in _firsts(arch)]
        assert tuple(b.stride for b in firsts) == STRIDES
        kinds.update(b.kind for b in firsts)
        channels = arch.stem_channels
        for block in arch.blocks:
            assert block.in_channels == channels, arch
            channels = block.out_channels
    assert set(kinds) == {"conv", "resnet", "bottleneck", "convnext", "dense", "dwsep", "pool", "split"}
    assert 0.12 < kinds["resnet"] / sum(kinds.values()) < 0.25  # weight 2 of 11
    assert 0.05 < kinds["dense"] / sum(kinds.values()) < 0.15  # weight 1 of 11
    assert Counter(a.activation for a in _archs()).keys() == set(ACTIVATIONS)
    assert 0.3 < sum(a.flatten for a in _archs()) / len(_archs()) < 0.7  # the heads space's classifiers


def test_resnet_blocks_have_group_widths_and_stages_of_copies() -> None:
    group_widths: Counter[int] = Counter()
    for arch in _archs():
        for first, n in zip(_firsts(arch), arch.stages, strict=True):
            block = arch.blocks[first]
            if block.kind != "resnet":
                continue
            assert block.width is not None and block.kernel == 3 and block.width <= block.out_channels
            if block.groups:
                assert block.groups >= 2 and block.width % block.groups == 0
                group_widths[block.width // block.groups] += 1
            for copy in arch.blocks[first + 1:first + n]:  # a stage: stride 1 on its own width, identity shortcut
                assert (copy.kind, copy.stride, copy.in_channels, copy.out_channels, copy.width, copy.groups) == (
                    "resnet", 1, block.out_channels, block.out_channels, block.width, block.groups)
    assert set(group_widths) == {8, 16, 24, 32, 48, 64, 128}  # ResNeXt's 4-8 to RegNet's 8-256 channels per group
    assert {n for a in _archs() for n in a.stages} == set(range(1, 6))


def test_dense_blocks_concatenate_many_parts_within_the_width_cap() -> None:
    layers = []
    for arch in _archs():
        for block in arch.blocks:
            if block.kind == "dense":
                assert block.layers is not None and block.growth in (12, 16, 24, 32, 48)
                assert 2 <= block.layers and block.in_channels + block.layers * block.growth <= 3072
                layers.append(block.layers)
            if block.kind == "pool":  # 2x2 windows only where they halve the map
                assert block.kernel in ((1, 2, 3) if block.stride == 2 else (1, 3))
    assert max(layers) >= 40 and min(layers) == 2  # DenseNet-201's 48-part concatenations are in range
    windows = Counter(b.kernel for a in _archs() for b in a.blocks if b.kind == "pool" and b.stride == 2)
    assert windows[2] > 0


@pytest.mark.parametrize("seed", [7, 20, 27])
def test_mixed_direct_graph_equals_the_traced_graph(seed: int) -> None:
    """Seed 20 has ResNet bottlenecks with projections, groups and squeeze-and-excite, DenseNet blocks at strides 1
    and 2, ConvNeXt blocks and a flattening head; 7 and 27 have 2x2 pools."""
    arch = sample_synthetic(seed, "mixed")
    direct = direct_graph_checked(seed, "mixed")
    parts = [len(n.inputs) for n in direct.nodes if n.kind is OpKind.CONCAT]
    dense = [b for b in arch.blocks if b.kind == "dense"]
    assert len(parts) == sum(b.layers or 0 for b in dense) + sum(b.splits is not None for b in arch.blocks)
    if dense:
        assert max(parts) == 1 + max(b.layers or 0 for b in dense)  # the block's input and every layer's output
    windows = [n.attrs.kernel for n in direct.nodes if n.kind is OpKind.POOL2D]  # VGG's and DenseNet's 2x2
    halving = [b for b in arch.blocks if (b.kind == "pool" and b.kernel == 2) or (b.kind == "dense" and b.stride == 2)]
    assert windows.count((2, 2)) == len(halving) > 0


def test_mixed_seeds_are_their_own_draws_and_zoo_strings() -> None:
    assert "mixed" in SPACES
    assert sample_synthetic(5, "mixed") == sample_synthetic(5, "mixed")
    assert expand_models(["synthetic-mixed:2-3"]) == ["synthetic-mixed:2", "synthetic-mixed:3"]
    assert model_set("synthetic-mixed") == [f"synthetic-mixed:{i}" for i in range(300)]
    for space in ("li2023", "wide", "aligned", "heads", "stages", "modern"):  # no other space has the new kinds
        assert not any(b.kind in ("resnet", "dense") or (b.kernel == 2 and b.kind == "pool")
                       for s in range(50) for b in sample_synthetic(s, space).blocks)


#: Seed 20 of the mixed space, as sampled when the space was made (its networks are measured under their names):
#: activation, stem, head, stages, classifier, and per block of the first ten (kind, out channels, stride, kernel,
#: groups, width, layers, growth).
PINNED_MIXED_20 = ("hardswish", 32, 448, (3, 2, 3, 1, 1, 5, 1, 1, 3), True, (2688, 960), 1000, [
    ("resnet", 32, 1, 3, None, 24, None, None), ("resnet", 32, 1, 3, None, 24, None, None),
    ("resnet", 32, 1, 3, None, 24, None, None), ("resnet", 64, 2, 3, 4, 64, None, None),
    ("resnet", 64, 1, 3, 4, 64, None, None), ("convnext", 128, 2, 7, None, None, None, None),
    ("convnext", 128, 1, 7, None, None, None, None), ("convnext", 128, 1, 7, None, None, None, None),
    ("split", 128, 1, None, None, None, None, None), ("dense", 224, 2, 3, None, None, 10, 12)])


def test_seed_20_gives_the_pinned_mixed_architecture() -> None:
    arch = sample_synthetic(20, "mixed")
    summary = [(b.kind, b.out_channels, b.stride, b.kernel, b.groups, b.width, b.layers, b.growth)
               for b in arch.blocks[:10]]
    assert (arch.activation, arch.stem_channels, arch.head_channels, arch.stages, arch.flatten, arch.hidden,
            arch.classes, summary) == PINNED_MIXED_20
