"""LiteRT kernel deduction for transformer constructs, checked against litert-torch conversions: the reshapes around
fully connected layers, L2 normalization, and the shifted-window attention mask the converter keeps as operators."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from edgeplan.frontends.litert_export import export_tflite, generic_weights
from edgeplan.frontends.tflite_frontend import read_tflite
from edgeplan.frontends.torch_frontend import graph_from_torch
from edgeplan.ir.kernels import deduce_kernels
from edgeplan.ir.kernels.litert_folded import folded_chains
from edgeplan.ir.kernels.rules import load_rules
from edgeplan.measure.litert_delegate import check_litert


class Projected(nn.Module):
    """A linear layer between the reshapes ``around`` writes."""

    def __init__(self, around: Callable[[nn.Linear, torch.Tensor], torch.Tensor], out: int) -> None:
        super().__init__()
        self.fc, self.around = nn.Linear(96, out), around

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.around(self.fc, x)


WINDOWS = torch.randn(1, 8, 7, 8, 7, 96)
HEADS = torch.randn(64, 3, 49, 32)
MAP = torch.randn(1, 8, 8, 96)

CASES = {  # name: (the reshapes around the layer, its input, its output features, the file's operators)
    "a reshape after that splits the features: the layer runs on rows": (
        lambda fc, x: fc(x.permute(0, 1, 3, 2, 4, 5).reshape(64, 49, 96)).reshape(64, 49, 3, 3, 32), WINDOWS, 288,
        ["TRANSPOSE", "RESHAPE", "FULLY_CONNECTED", "RESHAPE"]),
    "a reshape after that keeps the features runs before the layer": (
        lambda fc, x: fc(x.transpose(1, 2).reshape(64, 49, 96)).reshape(1, 8, 8, 7, 7, 96), HEADS, 96,
        ["TRANSPOSE", "RESHAPE", "FULLY_CONNECTED"]),
    "a reshape to rows stays when nothing reshapes the result": (
        lambda fc, x: fc(x.permute(0, 2, 1, 3).reshape(64, 96)), MAP, 288,
        ["TRANSPOSE", "RESHAPE", "FULLY_CONNECTED"]),
    "reshapes that cancel leave the layer on its input": (
        lambda fc, x: fc(x.permute(0, 2, 1, 3).reshape(64, 96)).reshape(1, 8, 8, 288), MAP, 288,
        ["TRANSPOSE", "FULLY_CONNECTED"]),
    "a tanh after the layer stays an operator": (
        lambda fc, x: torch.tanh(fc(x.permute(0, 2, 1, 3).reshape(64, 96))), MAP, 288,
        ["TRANSPOSE", "RESHAPE", "FULLY_CONNECTED", "TANH"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_operators_around_a_fully_connected_layer_are_the_converters(case: str, tmp_path: Path) -> None:
    around, x, out, expected = CASES[case]
    module = Projected(around, out).eval()
    path = export_tflite(module, (x,), tmp_path / "fc.tflite")
    assert read_tflite(path).op_types() == expected
    assert check_litert(graph_from_torch(module, (x,)), path) == []


class Normalized(nn.Module):
    """Cosine attention's normalization (Swin V2), a clamp from below and one on both sides."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        return F.normalize(x * 2, dim=-1) + (x * 3).clamp_min(1e-3) + (x * 4).clamp(-0.5, 0.7)


def test_a_normalization_is_one_l2_normalization_on_the_default_kernels(tmp_path: Path) -> None:
    module, x = Normalized().eval(), torch.randn(4, 3, 64, 32)
    path = export_tflite(module, (x,), tmp_path / "normalized.tflite")
    graph = graph_from_torch(module, (x,))
    assert check_litert(graph, path) == []
    kinds = [k.kind for k in deduce_kernels(graph, "litert-xnnpack").kernels]
    assert "tflite.L2_NORMALIZATION" in kinds and kinds.count("xnnpack.MAXIMUM") == 2 and "xnnpack.MINIMUM" in kinds


class ShiftedWindows(nn.Module):
    """A patch embedding and four Swin blocks of one size (torchvision's), two of them shifted: each of those builds
    the same attention mask."""

    def __init__(self) -> None:
        super().__init__()
        from torchvision.models.swin_transformer import SwinTransformerBlock

        self.embed, self.norm = nn.Conv2d(3, 32, 4, 4), nn.LayerNorm(32)
        self.blocks = nn.Sequential(*(SwinTransformerBlock(32, 2, [7, 7], [3, 3] if k % 2 else [0, 0],
                                                           stochastic_depth_prob=0.0) for k in range(4)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.norm(self.embed(x).permute(0, 2, 3, 1)))


def test_a_shifted_window_mask_is_written_once_as_the_converter_keeps_it(tmp_path: Path) -> None:
    module, x = generic_weights(ShiftedWindows().eval()), torch.randn(1, 3, 224, 224)
    graph = graph_from_torch(module, (x,))
    assert len(graph.folded_at) == len(graph.folded_ops) and list(graph.folded_at) == sorted(graph.folded_at)
    chains = folded_chains(graph, load_rules("litert-xnnpack").data["folded_mask"])
    assert len(chains) == 2 and chains[0].key == chains[1].key  # two shifted blocks, one mask
    assert chains[0].shape == (1, 64, 1, 49, 49)
    path = export_tflite(module, (x,), tmp_path / "swin.tflite")
    assert check_litert(graph, path) == []
    kinds = [k.kind for k in deduce_kernels(graph, "litert-xnnpack").kernels]
    assert kinds.count("tflite.NOT_EQUAL") == 1 and "tflite.SELECT" in kinds  # on the default kernels


def test_a_graph_without_folded_positions_writes_no_mask() -> None:
    from dataclasses import replace

    graph = graph_from_torch(ShiftedWindows().eval(), (torch.randn(1, 3, 224, 224),))
    assert folded_chains(replace(graph, folded_at=()), load_rules("litert-xnnpack").data["folded_mask"]) == []


def test_a_normalization_over_another_axis_is_written_out(tmp_path: Path) -> None:
    import torch.nn.functional as F

    class Across(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.normalize(x * 2, dim=1) + 1

    module, x = Across().eval(), torch.randn(2, 16, 10)
    types = read_tflite(export_tflite(module, (x,), tmp_path / "across.tflite")).op_types()
    kinds = [k.kind for k in deduce_kernels(graph_from_torch(module, (x,)), "litert-xnnpack").kernels]
    assert "L2_NORMALIZATION" not in types and not any(k.endswith("L2_NORMALIZATION") for k in kinds)
    assert types.count("SQRT") == 1 and "xnnpack.SQRT" in kinds
