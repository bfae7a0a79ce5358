"""edgeplan's synthetic spaces (``synthetic-wide:SEED``, ``synthetic-aligned:SEED``, ``synthetic-heads:SEED``):
sampled as documented,
independent of li2023's space, built node for node by the direct builder, usable as zoo strings and ranges, and
reported by ``reproduce li2023`` §5.3."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from synthetic_check import direct_graph_checked

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.synthetic import STRIDES, SyntheticArch, build_synthetic, sample_synthetic
from edgeplan.frontends.zoo import load_graph
from edgeplan.ir.ops import OpKind
from edgeplan.measure.model_sets import expand_models
from edgeplan.measure.op_dataset import DATASET_FORMAT

#: Channel ranges by the block's output resolution, as the module docstring states them.
RANGES = {112: (16, 128), 56: (24, 256), 28: (32, 512), 14: (64, 1024), 7: (128, 1536)}


@cache
def _archs() -> tuple[SyntheticArch, ...]:
    return tuple(sample_synthetic(seed, "wide") for seed in range(400))


def test_wide_architectures_have_aligned_widths_in_their_stage_ranges() -> None:
    for arch in _archs():
        assert arch.space == "wide" and arch.name == f"synthetic-wide:{arch.seed}"
        assert 16 <= arch.stem_channels <= 64 and arch.stem_channels % 8 == 0
        assert 512 <= arch.head_channels <= 2048 and arch.head_channels % 8 == 0
        size, channels = 112, arch.stem_channels
        for block, stride in zip(arch.blocks, STRIDES, strict=True):
            size //= stride
            assert block.stride == stride and block.in_channels == channels
            if block.kind in ("conv", "dwsep", "bottleneck"):
                low, high = RANGES[size]
                assert low <= block.out_channels <= high and block.out_channels % 8 == 0
            else:
                assert block.out_channels == block.in_channels
            if block.kind == "conv":
                assert block.kernel in (1, 3)
                assert block.groups is None or (block.groups % 4 == 0 and channels % block.groups == 0
                                                and block.out_channels % block.groups == 0)
            if block.kind == "bottleneck":
                assert block.expansion in (1, 3, 6) and (block.expansion == 1 or channels * block.expansion <= 3072)
            channels = block.out_channels


def test_wide_sampling_covers_what_it_is_for() -> None:
    """Dense and grouped convolutions both occur, dense ones at the zoo's widths; kinds follow their weights."""
    blocks = [b for arch in _archs() for b in arch.blocks]
    kinds = Counter(b.kind for b in blocks)
    assert kinds["conv"] > kinds["bottleneck"] > max(kinds["dwsep"], kinds["pool"], kinds["split"])
    convs = [b for b in blocks if b.kind == "conv"]
    dense = [b for b in convs if b.groups is None]
    assert 0.4 < len(dense) / len(convs) < 0.75  # dense with probability 1/2, and when no group count divides
    assert sum(1 for b in dense if b.in_channels >= 256 and b.out_channels >= 256) > 50


def test_wide_seeds_are_deterministic_and_independent_of_li2023s() -> None:
    assert sample_synthetic(7, "wide") == sample_synthetic(7, "wide")
    assert sample_synthetic(7, "wide").blocks != sample_synthetic(7).blocks
    assert sample_synthetic(0).space == "li2023" and sample_synthetic(0).name == "synthetic:0"
    with pytest.raises(InvalidInputError, match="unknown synthetic space"):
        sample_synthetic(0, "narrow")


#: Seed 0 of the wide space, as sampled when the space was made.
PINNED_0: tuple[int, int, list[tuple[str, int, int, int | None]]] = (40, 1992, [
    ("bottleneck", 16, 1, 3), ("conv", 208, 2, 3), ("split", 208, 2, None), ("bottleneck", 344, 1, 3),
    ("pool", 344, 2, 1), ("pool", 344, 1, 1), ("dwsep", 136, 2, 5), ("conv", 680, 1, 1), ("conv", 336, 1, 3)])


def test_seed_0_gives_the_pinned_wide_architecture() -> None:
    """Guards the 'same network on every machine' promise of the wide space too."""
    arch = sample_synthetic(0, "wide")
    summary = [(b.kind, b.out_channels, b.stride, b.kernel) for b in arch.blocks]
    assert (arch.stem_channels, arch.head_channels, summary) == PINNED_0


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_wide_direct_graph_equals_the_traced_graph(seed: int) -> None:
    import torch

    from edgeplan.frontends.direct import synthetic_graph
    from edgeplan.frontends.torch_frontend import graph_from_torch

    module, shapes = build_synthetic(seed, "wide")
    assert shapes == ((1, 3, 224, 224),)
    with torch.no_grad():
        assert module(torch.randn(*shapes[0])).shape == (1, 1000)
    traced = graph_from_torch(module, [torch.randn(*shapes[0])], name=f"synthetic-wide:{seed}")
    direct = synthetic_graph(seed, "wide")
    assert direct.nodes == traced.nodes and direct.outputs == traced.outputs and direct.name == traced.name
    assert load_graph(f"synthetic-wide:{seed}") is direct


def test_wide_zoo_strings_and_ranges() -> None:
    assert expand_models(["synthetic-wide:3-5", "synthetic:1-2", "synthetic-wide:4"]) == [
        "synthetic-wide:3", "synthetic-wide:4", "synthetic-wide:5", "synthetic:1", "synthetic:2"]
    assert expand_models(["set:synthetic-wide"]) == [f"synthetic-wide:{i}" for i in range(300)]
    with pytest.raises(InvalidInputError, match="synthetic-wide:LOW-HIGH"):
        expand_models(["synthetic-wide:5-3"])
    for bad in ("synthetic-wide:x", "synthetic-wide:-2"):
        with pytest.raises(InvalidInputError, match="non-negative integer"):
            load_graph(bad)


def _record(model: str, rng: np.random.Generator, wide: bool) -> dict[str, Any]:
    """A made-up measured network of one dense 3x3 conv: time grows with FLOPs, less than linearly for wide ones."""
    c = int(rng.integers(64, 512)) if wide else int(rng.integers(8, 80))
    size = 14
    flops = 2 * size * size * c * c * 9
    ms = 0.02 + 2e-8 * flops ** 0.9
    node = {"name": "c", "op": "conv2d", "input_shapes": [[1, c, size, size]], "output_shapes": [[1, c, size, size]],
            "attrs": {"in_channels": c, "out_channels": c, "kernel": [3, 3], "stride": [1, 1], "groups": 1},
            "flops": flops, "params": c * c * 9}
    op = {"kernel": "c", "kind": "aten::conv2d", "nodes": ["c"], "ms": ms, "min_ms": ms, "iqr_rel": 0}
    return {"model": model, "latency_ms": ms + 0.3, "latency_min_ms": ms + 0.3, "op_sum_ms": ms, "ops": [op],
            "nodes": {"c": node}}


@pytest.mark.slow
def test_reproduce_li2023_reports_the_wide_space_beside_the_papers(tmp_path: Path) -> None:
    from experiments.li2023 import format_report, reproduce

    rng = np.random.default_rng(0)
    records = [_record(f"synthetic:{i}", rng, False) for i in range(40)]
    records += [_record(f"synthetic:{900 + i}", rng, False) for i in range(5)]
    records += [_record(f"synthetic-wide:{i}", rng, True) for i in range(35)]
    records += [_record(f"torchvision:net{i}", rng, True) for i in range(6)]
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"format": DATASET_FORMAT, "scenario": "torch-fp32-2t", "device": {"threads": 2}}) + "\n")
        for r in records:
            f.write(json.dumps(r) + "\n")
    result = reproduce(methods=("lasso",), data_file=path, statistic="median")
    # the paper's protocol is unchanged: wide networks are neither training, test nor zoo networks there
    assert (result["train"], result["test"], result["zoo"], result["wide"]) == (40, 5, 6, 35)
    wide = result["5.3-wide"]["lasso"]
    assert wide["few"]["networks"] == 30 and wide["zoo"]["models"] == 6 and result["spaces"] == {"synthetic-wide": 35}
    assert set(wide["few"]["zoo"]) == {"synthetic-wide"} and wide["by_space"] == {}  # one space: no per-space fit
    # the zoo's wide convolutions lie outside the narrow training set; the wide networks cover them
    assert wide["zoo"]["mape"] < result["5.3"]["lasso"]["mape"]
    text = "\n".join(format_report(result))
    assert "synthetic spaces (35 synthetic-wide networks" in text and "30 wide" in text
    # with both spaces: trained on all, on the 900 and each space, and on the first 30 of each alone
    records += [_record(f"synthetic-aligned:{i}", rng, True) for i in range(32)]
    path.unlink()
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"format": DATASET_FORMAT, "scenario": "torch-fp32-2t", "device": {"threads": 2}}) + "\n")
        for r in records:
            f.write(json.dumps(r) + "\n")
    both = reproduce(methods=("lasso",), data_file=path, statistic="median")
    assert both["spaces"] == {"synthetic-wide": 35, "synthetic-aligned": 32} and both["wide"] == 67
    lasso = both["5.3-wide"]["lasso"]
    assert set(lasso["by_space"]) == set(lasso["few"]["zoo"]) == {"synthetic-wide", "synthetic-aligned"}
    text = "\n".join(format_report(both))
    assert "900 + aligned" in text and "30 aligned" in text and "32 synthetic-aligned" in text


# --- the aligned space (``synthetic-aligned:SEED``) -------------------------------------------------------------


@cache
def _aligned_archs() -> tuple[SyntheticArch, ...]:
    return tuple(sample_synthetic(seed, "aligned") for seed in range(300))


def test_aligned_widths_are_multiples_of_16_to_64_in_the_wide_ranges() -> None:
    alignments: Counter[int] = Counter()
    for arch in _aligned_archs():
        assert arch.space == "aligned" and arch.name == f"synthetic-aligned:{arch.seed}"
        assert 16 <= arch.stem_channels <= 64 and arch.stem_channels % 16 == 0
        assert 512 <= arch.head_channels <= 2048 and arch.head_channels % 16 == 0
        size = 112
        for block, stride in zip(arch.blocks, STRIDES, strict=True):
            size //= stride
            if block.kind in ("conv", "dwsep", "bottleneck"):
                low, high = RANGES[size]
                assert low <= block.out_channels <= high and block.out_channels % 16 == 0
                alignments[min(64, int(np.gcd(block.out_channels, 64)))] += 1
    total = sum(alignments.values())
    assert alignments[64] / total > 0.5 and alignments[16] / total > 0.05  # 64 drawn w.p. 1/2 (and by chance)


def test_aligned_grouped_convolutions_have_the_zoos_group_counts() -> None:
    """Any common divisor with at least 4 channels per group: ResNeXt's many narrow groups, RegNet's wide ones."""
    grouped = [b for arch in _aligned_archs() for b in arch.blocks if b.kind == "conv" and b.groups]
    assert len(grouped) > 200
    for b in grouped:
        assert b.in_channels % b.groups == 0 and b.out_channels % b.groups == 0
        assert min(b.in_channels, b.out_channels) // b.groups >= 4 and b.groups >= 2
    assert any(b.groups > 64 for b in grouped) and any(b.groups % 4 for b in grouped)  # beyond li2023's 4k <= 64
    assert any(min(b.in_channels, b.out_channels) // b.groups >= 128 for b in grouped)


def test_aligned_seeds_are_their_own_draws_and_build_like_the_traced_module() -> None:
    import torch

    from edgeplan.frontends.direct import synthetic_graph
    from edgeplan.frontends.torch_frontend import graph_from_torch

    assert sample_synthetic(5, "aligned") == sample_synthetic(5, "aligned")
    assert sample_synthetic(5, "aligned").blocks != sample_synthetic(5, "wide").blocks
    arch = sample_synthetic(3, "aligned")
    assert any(b.kind == "conv" and b.groups for b in arch.blocks)  # a grouped convolution is built too
    module, shapes = build_synthetic(3, "aligned")
    traced = graph_from_torch(module, [torch.randn(*shapes[0])], name="synthetic-aligned:3")
    direct = synthetic_graph(3, "aligned")
    assert direct.nodes == traced.nodes and direct.outputs == traced.outputs
    assert load_graph("synthetic-aligned:3") is direct
    assert expand_models(["synthetic-aligned:2-3"]) == ["synthetic-aligned:2", "synthetic-aligned:3"]
    assert expand_models(["set:synthetic-aligned"]) == [f"synthetic-aligned:{i}" for i in range(300)]


#: Seed 0 of the aligned space, as sampled when the space was made (its networks are measured under their names).
PINNED_ALIGNED_0: tuple[int, int, list[tuple[str, int, int, int | None, int | None]]] = (64, 896, [
    ("bottleneck", 32, 1, 3, None), ("bottleneck", 128, 2, 7, None), ("bottleneck", 320, 2, 7, None),
    ("dwsep", 64, 1, 7, None), ("bottleneck", 704, 2, 3, None), ("conv", 192, 1, 1, None), ("conv", 672, 2, 3, 4),
    ("bottleneck", 1536, 1, 5, None), ("dwsep", 640, 1, 7, None)])


def test_seed_0_gives_the_pinned_aligned_architecture() -> None:
    arch = sample_synthetic(0, "aligned")
    summary = [(b.kind, b.out_channels, b.stride, b.kernel, b.groups) for b in arch.blocks]
    assert (arch.stem_channels, arch.head_channels, summary) == PINNED_ALIGNED_0


# --- the heads space (``synthetic-heads:SEED``) ---------------------------------------------------------------------


@cache
def _heads_archs() -> tuple[SyntheticArch, ...]:
    return tuple(sample_synthetic(seed, "heads") for seed in range(300))


def _multiple_of_16_in(value: int, low: int, high: int) -> bool:
    return value % 16 == 0 and low <= value <= high


def test_heads_classifiers_are_sampled_in_their_documented_ranges() -> None:
    for arch in _heads_archs():
        assert arch.space == "heads" and arch.name == f"synthetic-heads:{arch.seed}"
        assert _multiple_of_16_in(arch.head_channels, *((64, 512) if arch.flatten else (512, 2048))), arch
        assert arch.classifier_inputs == arch.head_channels * (49 if arch.flatten else 1)
        assert len(arch.hidden) <= 2 and all(_multiple_of_16_in(w, 256, 4096) for w in arch.hidden), arch
        assert arch.classes == 1000 or _multiple_of_16_in(arch.classes, 64, 4096), arch
        for block in arch.blocks:  # the aligned space's body
            assert block.out_channels % 16 == 0 or block.kind in ("pool", "split"), arch


def test_heads_sampling_covers_the_zoos_classifiers() -> None:
    """Both readouts and every hidden-layer count occur, output widths other than 1000 too, and the inputs reach
    VGG's 25,088 and the widths AlexNet's 4,096."""
    archs = _heads_archs()
    combos = Counter((a.flatten, len(a.hidden)) for a in archs)
    assert set(combos) == {(f, n) for f in (False, True) for n in range(3)} and min(combos.values()) >= 20
    assert 0.35 < sum(a.classes != 1000 for a in archs) / len(archs) < 0.65
    assert max(a.classifier_inputs for a in archs) >= 20000
    assert max(w for a in archs for w in a.hidden) >= 3500 and min(w for a in archs for w in a.hidden) <= 300


def test_heads_seeds_are_their_own_draws() -> None:
    assert sample_synthetic(5, "heads") == sample_synthetic(5, "heads")
    same = sum(sample_synthetic(s, "heads").blocks == sample_synthetic(s, "aligned").blocks for s in range(50))
    assert same == 0
    for space in ("li2023", "wide", "aligned"):  # the other spaces keep their one classifier
        arch = sample_synthetic(7, space)
        assert (arch.flatten, arch.hidden, arch.classes, arch.classifier_inputs) == (False, (), 1000,
                                                                                     arch.head_channels)


@pytest.mark.parametrize("seed", [1, 3])
def test_heads_direct_graph_equals_the_traced_graph(seed: int) -> None:
    arch = sample_synthetic(seed, "heads")
    assert arch.hidden  # seed 1 flattens the map, seed 3 pools it; both have two hidden layers
    direct = direct_graph_checked(seed, "heads")
    linears = [n.attrs for n in direct.nodes if n.kind is OpKind.LINEAR]
    widths = [arch.classifier_inputs, *arch.hidden, arch.classes]
    assert [(a.in_features, a.out_features) for a in linears] == list(pairwise(widths))
    assert expand_models(["synthetic-heads:2-3"]) == ["synthetic-heads:2", "synthetic-heads:3"]
    assert expand_models(["set:synthetic-heads"]) == [f"synthetic-heads:{i}" for i in range(300)]


#: Seed 1 of the heads space, as sampled when the space was made (its networks are measured under their names).
PINNED_HEADS_1 = (32, 288, True, (2944, 1280), 448, [
    ("bottleneck", 80, 1, 7, None), ("pool", 80, 2, 1, None), ("split", 80, 2, None, None), ("pool", 80, 1, 1, None),
    ("dwsep", 928, 2, 7, None), ("bottleneck", 64, 1, 5, None), ("split", 64, 2, None, None),
    ("bottleneck", 1536, 1, 3, None), ("dwsep", 704, 1, 5, None)])


def test_seed_1_gives_the_pinned_heads_architecture() -> None:
    arch = sample_synthetic(1, "heads")
    summary = [(b.kind, b.out_channels, b.stride, b.kernel, b.groups) for b in arch.blocks]
    assert (arch.stem_channels, arch.head_channels, arch.flatten, arch.hidden, arch.classes, summary) == PINNED_HEADS_1
