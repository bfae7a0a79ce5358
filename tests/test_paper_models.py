"""Tests of the eshratifar2018 benchmark networks: shapes, sizes and layer counts from their papers."""

from __future__ import annotations

import itertools
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import torch
from torch import nn

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.paper_models import PAPER_MODELS, build_paper_model

NAMES = ("alexnet", "overfeat", "vgg16", "nin", "chair", "pix2pix")
OUTPUT_SHAPES = {
    "alexnet": [(1, 1000)],
    "overfeat": [(1, 1000)],
    "vgg16": [(1, 1000)],
    "nin": [(1, 1000)],
    "chair": [(1, 3, 128, 128), (1, 1, 128, 128)],
    "pix2pix": [(1, 3, 256, 256)],
}
# Layers that Table 4 of eshratifar2018 counts: conv, deconv, pooling, FC, activations, LRN (not BN, dropout, concat).
TABLE4_KINDS = (
    nn.Conv2d,
    nn.ConvTranspose2d,
    nn.Linear,
    nn.MaxPool2d,
    nn.AdaptiveAvgPool2d,
    nn.ReLU,
    nn.LeakyReLU,
    nn.Tanh,
    nn.LocalResponseNorm,
)


@cache
def _built(name: str) -> tuple[nn.Module, tuple[tuple[int, ...], ...]]:
    return build_paper_model(name)


@cache
def _run(name: str) -> tuple[list[tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """Output shapes and the output shape of every named leaf module of one forward pass."""
    module, shapes = _built(name)
    seen: dict[str, tuple[int, ...]] = {}
    hooks = [
        leaf.register_forward_hook(lambda _m, _i, out, key=key: seen.__setitem__(key, tuple(out.shape)))
        for key, leaf in module.named_modules()
        if not list(leaf.children())
    ]
    with torch.no_grad():
        out = module(*(torch.randn(*shape) for shape in shapes))
    for hook in hooks:
        hook.remove()
    outputs = list(out) if isinstance(out, tuple) else [out]
    return [tuple(o.shape) for o in outputs], seen


def _params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _conv(c_in: int, c_out: int, k: int, groups: int = 1) -> int:
    return c_in * c_out * k * k // groups + c_out


def _fc(n_in: int, n_out: int) -> int:
    return n_in * n_out + n_out


def test_the_six_models_of_table_4_are_listed_with_citations() -> None:
    assert tuple(PAPER_MODELS) == NAMES
    for description in PAPER_MODELS.values():
        assert any(str(year) in description for year in range(2012, 2018))


@pytest.mark.parametrize("name", ["resnet18", "", "alex net", None, ["vgg16"]])
def test_an_unknown_name_is_rejected_listing_the_valid_ones(name: object) -> None:
    with pytest.raises(InvalidInputError) as info:
        build_paper_model(name)  # type: ignore[arg-type]
    assert repr(name) in str(info.value)
    assert all(valid in str(info.value) for valid in NAMES)


def test_listing_the_models_does_not_import_torch() -> None:
    code = (
        "import sys; from edgeplan.frontends.paper_models import PAPER_MODELS; "
        "assert len(PAPER_MODELS) == 6; assert 'torch' not in sys.modules, 'torch was imported'"
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_names_are_case_insensitive() -> None:
    module, shapes = build_paper_model("NiN")
    assert shapes == ((1, 3, 224, 224),)
    assert isinstance(module, nn.Module)


@pytest.mark.parametrize("name", NAMES)
def test_each_model_builds_in_eval_mode_and_runs(name: str) -> None:
    module, _ = _built(name)
    assert not any(m.training for m in module.modules())
    outputs, _ = _run(name)
    assert outputs == OUTPUT_SHAPES[name]


def test_input_shapes_are_the_papers() -> None:
    expected = {
        "alexnet": ((1, 3, 227, 227),),
        "overfeat": ((1, 3, 231, 231),),
        "vgg16": ((1, 3, 224, 224),),
        "nin": ((1, 3, 224, 224),),
        "chair": ((1, 809), (1, 4), (1, 12)),
        "pix2pix": ((1, 3, 256, 256),),
    }
    assert {name: _built(name)[1] for name in NAMES} == expected


@pytest.mark.parametrize(
    ("name", "table4_layers"),
    [("alexnet", 21), ("vgg16", 37), ("nin", 29), ("pix2pix", 32)],
)
def test_layer_counts_match_table_4_of_eshratifar2018(name: str, table4_layers: int) -> None:
    """The classifiers' counts include the final softmax, which the modules leave out."""
    module, _ = _built(name)
    softmax = 0 if name == "pix2pix" else 1
    assert sum(isinstance(m, TABLE4_KINDS) for m in module.modules()) + softmax == table4_layers


def test_alexnet_matches_the_paper() -> None:
    """Krizhevsky et al. 2012: 55x55x96 after conv1, 6x6x256 after pool5, "60 million parameters"."""
    _, seen = _run("alexnet")
    assert seen["conv1"] == (1, 96, 55, 55)
    assert seen["pool2"] == (1, 256, 13, 13)
    assert seen["pool5"] == (1, 256, 6, 6)
    convs = _conv(3, 96, 11) + _conv(96, 256, 5, 2) + _conv(256, 384, 3) + _conv(384, 384, 3, 2)
    expected = convs + _conv(384, 256, 3, 2) + _fc(9216, 4096) + _fc(4096, 4096) + _fc(4096, 1000)
    params = _params(_built("alexnet")[0])
    assert params == expected == 60_965_224
    assert abs(params / 60e6 - 1) < 0.02


def test_overfeat_fast_matches_table_1_of_its_paper() -> None:
    """Sermanet et al. 2014, Table 1: spatial sizes 231 -> 56 -> 28 -> 24 -> 12 -> 12 -> 12 -> 6 and the widths."""
    _, seen = _run("overfeat")
    layers = ("conv1", "pool1", "conv2", "pool2", "conv3", "conv4", "conv5", "pool5")
    assert [seen[k][2] for k in layers] == [56, 28, 24, 12, 12, 12, 12, 6]
    convs = _conv(3, 96, 11) + _conv(96, 256, 5) + _conv(256, 512, 3) + _conv(512, 1024, 3)
    expected = convs + _conv(1024, 1024, 3) + _fc(1024 * 36, 3072) + _fc(3072, 4096) + _fc(4096, 1000)
    assert _params(_built("overfeat")[0]) == expected


def test_vgg16_matches_the_paper_and_torchvision() -> None:
    """Simonyan & Zisserman 2015, Table 2: 138 M parameters; torchvision's vgg16 has the same parameter count."""
    torchvision = pytest.importorskip("torchvision")
    params = _params(_built("vgg16")[0])
    assert round(params / 1e6) == 138
    with torch.device("meta"):  # shapes only: skip initialising 138 M weights
        reference = torchvision.models.vgg16(weights=None)
    assert params == _params(reference)
    ours = [tuple(p.shape) for p in _built("vgg16")[0].parameters()]
    assert ours == [tuple(p.shape) for p in reference.parameters()]


def test_nin_has_four_mlpconv_blocks_and_caffe_pooled_sizes() -> None:
    _, seen = _run("nin")
    assert [seen[k][2] for k in ("conv1", "pool1", "pool2", "pool3", "cccp8", "pool4")] == [54, 27, 13, 6, 6, 1]
    blocks = ((3, 96, 11, 96, 96), (96, 256, 5, 256, 256), (256, 384, 3, 384, 384), (384, 1024, 3, 1024, 1000))
    expected = sum(_conv(c_in, c, k) + _conv(c, a, 1) + _conv(a, b, 1) for c_in, c, k, a, b in blocks)
    assert _params(_built("nin")[0]) == expected


def test_chair_generator_streams() -> None:
    """Dosovitskiy et al. 2015: FC-1..FC-4 shared, then per stream FC-5 (8x8x256) and four uconv layers to 128."""
    _, seen = _run("chair")
    for stream, channels in (("rgb_stream", 3), ("mask_stream", 1)):
        sizes = [seen[f"{stream}.{layer}"] for layer in ("reshape", "uconv1", "uconv2", "uconv3", "uconv4")]
        assert sizes == [(1, 256, 8, 8), (1, 256, 16, 16), (1, 92, 32, 32), (1, 48, 64, 64), (1, channels, 128, 128)]
    shared = 3 * _fc(512, 512) + _fc(809, 512) + _fc(4, 512) + _fc(12, 512) + _fc(1536, 1024) + _fc(1024, 1024)
    upconv = _conv(256, 256, 5) + _conv(256, 92, 5) + _conv(92, 48, 5)
    streams = 2 * (_fc(1024, 16384) + upconv) + _conv(48, 3, 5) + _conv(48, 1, 5)
    assert _params(_built("chair")[0]) == shared + streams


def test_uconv_equals_unpooling_followed_by_a_5x5_convolution() -> None:
    """The chair generator's uconv: zero-insertion 2x2 unpooling (value top-left) then a 5x5 conv, padding 2."""
    torch.manual_seed(0)
    up = nn.ConvTranspose2d(4, 3, 5, stride=2, padding=2, output_padding=1)
    x = torch.randn(1, 4, 6, 6)
    unpooled = torch.zeros(1, 4, 12, 12)
    unpooled[:, :, ::2, ::2] = x
    weight = up.weight.flip(2, 3).transpose(0, 1)  # (out, in, 5, 5)
    with torch.no_grad():
        expected = nn.functional.conv2d(unpooled, weight, up.bias, padding=2)
        torch.testing.assert_close(up(x), expected)


def test_pix2pix_unet_matches_the_paper() -> None:
    """Isola et al. 2017: encoder C64-...-C512 (256 -> 1), decoder inputs 512-1024-1024-1024-1024-512-256-128."""
    module, _ = _built("pix2pix")
    encoders, decoders = module.get_submodule("encoders"), module.get_submodule("decoders")
    assert [e[0].out_channels for e in encoders] == [64, 128, 256, 512, 512, 512, 512, 512]
    assert [d[1].in_channels for d in decoders] == [512, 1024, 1024, 1024, 1024, 512, 256, 128]
    assert [any(isinstance(m, nn.BatchNorm2d) for m in e) for e in encoders] == [False] + [True] * 6 + [False]
    assert [any(isinstance(m, nn.Dropout) for m in d) for d in decoders] == [True] * 3 + [False] * 5
    _, seen = _run("pix2pix")
    assert [seen[f"encoders.{i}.0"][2] for i in range(8)] == [128, 64, 32, 16, 8, 4, 2, 1]
    enc = (3, 64, 128, 256, 512, 512, 512, 512, 512)
    dec_in, dec_out = (512, 1024, 1024, 1024, 1024, 512, 256, 128), (512, 512, 512, 512, 256, 128, 64, 3)
    batch_norms = 2 * (sum(enc[2:8]) + sum(dec_out[:7]))
    convs = sum(_conv(a, b, 4) for a, b in itertools.pairwise(enc))
    expected = convs + sum(_conv(a, b, 4) for a, b in zip(dec_in, dec_out, strict=True))
    assert _params(module) == expected + batch_norms
