"""edgeplan's stages space (``synthetic-stages:SEED``): the aligned space's blocks followed by copies, as real CNNs'
stages; sampled as documented, built node for node by the direct builder, and as rich in repeated operations as
the zoo's CNNs are. And the modern space (``synthetic-modern:SEED``): the stages space with ConvNeXt blocks and
other activations."""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest
from synthetic_check import direct_graph_checked

from edgeplan.frontends.synthetic import STRIDES, SyntheticArch, SyntheticBlock, build_synthetic, sample_synthetic
from edgeplan.frontends.zoo import load_graph
from edgeplan.ir.ops import OpKind
from edgeplan.measure.model_sets import expand_models, model_set

#: The kinds a stage repeats; pool and split blocks stand alone.
STAGE_KINDS = ("conv", "dwsep", "bottleneck", "convnext")


@cache
def _archs(space: str = "stages") -> tuple[SyntheticArch, ...]:
    return tuple(sample_synthetic(seed, space) for seed in range(300))


def _stages(arch: SyntheticArch) -> list[list[SyntheticBlock]]:
    """The blocks grouped into stages: a sampled block and the copies after it."""
    assert sum(arch.stages) == len(arch.blocks) and len(arch.stages) == len(STRIDES)
    ends = [sum(arch.stages[:i + 1]) for i in range(len(arch.stages))]
    return [list(arch.blocks[end - n:end]) for n, end in zip(arch.stages, ends, strict=True)]


def _is_copy(first: SyntheticBlock, block: SyntheticBlock) -> bool:
    """Whether ``block`` is a later block of the stage ``first`` starts: ``first`` at stride 1 on its own output,
    a residual but for a bottleneck (whose residual follows from its shapes), whose expansion may be capped lower."""
    if block.kind != first.kind or block.stride != 1 or block.in_channels != first.out_channels:
        return False
    if block.kind in ("bottleneck", "convnext"):
        assert first.expansion is not None and block.expansion is not None
        return (not block.residual and (block.kernel, block.se, block.out_channels)
                == (first.kernel, first.se, first.out_channels) and block.expansion <= first.expansion)
    return block.residual and (block.kernel, block.groups, block.out_channels) == (first.kernel, first.groups,
                                                                                     first.out_channels)


@pytest.mark.parametrize("space", ["stages", "modern"])
def test_stages_are_the_aligned_blocks_followed_by_0_to_4_copies(space: str) -> None:
    copies: Counter[int] = Counter()
    for arch in _archs(space):
        assert arch.space == space and arch.name == f"synthetic-{space}:{arch.seed}"
        stages = _stages(arch)
        firsts = [stage[0] for stage in stages]
        # the sampled blocks are an aligned-space body: 9 of them at li2023's strides, none a residual
        assert tuple(b.stride for b in firsts) == STRIDES and not any(b.residual for b in firsts), arch
        for stage in stages:
            assert all(_is_copy(stage[0], b) for b in stage[1:]), stage
            if stage[0].kind in STAGE_KINDS:
                copies[len(stage) - 1] += 1
            else:
                assert len(stage) == 1, stage
        for block in arch.blocks:  # expanded widths stay within the aligned space's cap
            if block.kind == "bottleneck" and block.expansion != 1:
                assert block.in_channels * (block.expansion or 1) <= 3072, block
            if block.kind == "convnext":
                assert block.expansion in (2, 3, 4) and block.out_channels * block.expansion <= 3072, block
        channels = arch.stem_channels
        for block in arch.blocks:  # the blocks chain
            assert block.in_channels == channels, arch
            channels = block.out_channels
    assert set(copies) == set(range(5)) and min(copies.values()) > 0.15 * sum(copies.values())


def test_a_stages_network_repeats_operations_as_the_zoos_cnns_do() -> None:
    """About half of a stages network's ops run after the same op (key and features) ran before, nearer the zoo
    CNNs' 67% than the aligned space's tenth."""
    from edgeplan.costmodels.opwise.graph_ops import graph_ops

    def repeated(space: str) -> float:
        ops = [o for seed in range(20) for o in graph_ops(load_graph(f"synthetic-{space}:{seed}"), "torch-eager")[0]]
        return sum(o.context[0] > 0 for o in ops) / len(ops)

    assert repeated("stages") > 0.4 and repeated("aligned") < 0.15


@pytest.mark.parametrize("seed", [1, 2])
def test_stages_direct_graph_equals_the_traced_graph(seed: int) -> None:
    import torch

    from edgeplan.frontends.direct import synthetic_graph
    from edgeplan.frontends.torch_frontend import graph_from_torch

    arch = sample_synthetic(seed, "stages")
    copied = {stage[0].kind for stage in _stages(arch) if len(stage) > 1}
    assert copied >= ({"bottleneck"} if seed == 1 else {"conv", "dwsep"})  # every kind of copy is covered
    module, shapes = build_synthetic(seed, "stages")
    traced = graph_from_torch(module, [torch.randn(*shapes[0])], name=f"synthetic-stages:{seed}")
    direct = synthetic_graph(seed, "stages")
    assert direct.nodes == traced.nodes and direct.outputs == traced.outputs
    copies = {f"block{i}_{b.kind}" for i, b in enumerate(arch.blocks, start=1) if b.residual}
    adds = {n.name.split("/")[0] for n in direct.nodes if n.kind is OpKind.ELTWISE and n.attrs.op.value == "add"}
    assert copies and copies <= adds  # every conv or dwsep copy ends on its residual add
    assert load_graph(f"synthetic-stages:{seed}") is direct


def test_stages_seeds_are_their_own_draws_and_usable_as_zoo_strings() -> None:
    assert sample_synthetic(5, "stages") == sample_synthetic(5, "stages")
    assert sum(_stages(sample_synthetic(s, "stages"))[0][0] == sample_synthetic(s, "aligned").blocks[0]
               for s in range(50)) < 10
    assert expand_models(["synthetic-stages:2-3"]) == ["synthetic-stages:2", "synthetic-stages:3"]
    assert model_set("synthetic-stages") == [f"synthetic-stages:{i}" for i in range(300)]
    for space in ("li2023", "wide", "aligned", "heads"):  # no other space has stages or a residual conv or dwsep
        assert not any(sample_synthetic(s, space).stages or any(b.residual for b in sample_synthetic(s, space).blocks)
                       for s in range(30))


#: Seed 0 of the stages space, as sampled when the space was made (its networks are measured under their names):
#: stem, head, and per block (kind, out channels, stride, kernel, groups, residual).
PINNED_STAGES_0 = (64, 768, [
    ("conv", 64, 1, 3, None, False), ("conv", 64, 1, 3, None, True), ("conv", 64, 1, 3, None, True),
    ("conv", 64, 1, 3, None, True), ("split", 64, 2, None, None, False), ("split", 64, 2, None, None, False),
    ("conv", 96, 1, 1, None, False), ("conv", 96, 1, 1, None, True), ("split", 96, 2, None, None, False),
    ("bottleneck", 256, 1, 5, None, False), ("split", 256, 2, None, None, False), ("split", 256, 1, None, None, False),
    ("split", 256, 1, None, None, False)])


def test_seed_0_gives_the_pinned_stages_architecture() -> None:
    arch = sample_synthetic(0, "stages")
    summary = [(b.kind, b.out_channels, b.stride, b.kernel, b.groups, b.residual) for b in arch.blocks]
    assert (arch.stem_channels, arch.head_channels, summary) == PINNED_STAGES_0
    assert arch.stages == (4, 1, 1, 2, 1, 1, 1, 1, 1)


def test_modern_networks_draw_their_activation_and_convnext_blocks() -> None:
    archs = _archs("modern")
    assert set(Counter(a.activation for a in archs)) == {"relu6", "relu", "silu", "hardswish", "gelu"}
    assert all(a.activation == "relu6" for a in _archs("stages"))
    kinds = Counter(b.kind for a in archs for stage in _stages(a) for b in stage[:1])
    assert 0.15 < kinds["convnext"] / sum(kinds.values()) < 0.35  # weight 2 of 10
    assert sum(b.kind == "convnext" for a in _archs("stages") for b in a.blocks) == 0


@pytest.mark.parametrize("seed", [1, 5, 13])
def test_modern_direct_graph_equals_the_traced_graph(seed: int) -> None:
    """Seed 1 activates with hard-swish, 5 with ReLU6, 13 with GELU; all three run ConvNeXt blocks: linear layers
    over channels-last maps between a LayerNorm and a GELU, as torchvision's ConvNeXt does."""
    arch = sample_synthetic(seed, "modern")
    assert any(b.kind == "convnext" for b in arch.blocks)
    direct = direct_graph_checked(seed, "modern")
    kinds = Counter(n.kind for n in direct.nodes)
    assert kinds[OpKind.LAYER_NORM] and kinds[OpKind.PERMUTE] and kinds[OpKind.LINEAR] > 1
    rows = [n.output_shapes[0] for n in direct.nodes if n.kind is OpKind.LINEAR and len(n.output_shapes[0]) == 4]
    assert rows and all(shape[1] * shape[2] >= 49 for shape in rows)  # a linear layer over every pixel
    acts = {n.attrs.fn.value for n in direct.nodes if n.kind is OpKind.ACTIVATION}
    assert arch.activation in acts and "gelu" in acts
    assert expand_models(["synthetic-modern:2-3"]) == ["synthetic-modern:2", "synthetic-modern:3"]


#: Seed 1 of the modern space, as sampled when the space was made: activation, stem, head, stages, and per block
#: (kind, out channels, stride, kernel, expansion).
PINNED_MODERN_1 = ("hardswish", 64, 1664, (5, 2, 3, 1, 3, 2, 3, 1, 2), [
    ("bottleneck", 48, 1, 5, 3), ("bottleneck", 48, 1, 5, 3), ("bottleneck", 48, 1, 5, 3),
    ("bottleneck", 48, 1, 5, 3), ("bottleneck", 48, 1, 5, 3), ("dwsep", 128, 2, 7, None), ("dwsep", 128, 1, 7, None),
    ("convnext", 384, 2, 7, 3), ("convnext", 384, 1, 7, 3), ("convnext", 384, 1, 7, 3), ("conv", 480, 1, 1, None),
    ("conv", 576, 2, 1, None), ("conv", 576, 1, 1, None), ("conv", 576, 1, 1, None), ("conv", 64, 1, 1, None),
    ("conv", 64, 1, 1, None), ("bottleneck", 512, 2, 3, 1), ("bottleneck", 512, 1, 3, 1), ("bottleneck", 512, 1, 3, 1),
    ("split", 512, 1, None, None), ("bottleneck", 384, 1, 7, 6), ("bottleneck", 384, 1, 7, 6)])


def test_seed_1_gives_the_pinned_modern_architecture() -> None:
    arch = sample_synthetic(1, "modern")
    summary = [(b.kind, b.out_channels, b.stride, b.kernel, b.expansion) for b in arch.blocks]
    assert (arch.activation, arch.stem_channels, arch.head_channels, arch.stages, summary) == PINNED_MODERN_1
