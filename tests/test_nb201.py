"""Tests of the NAS-Bench-201 frontend: strict parsing, building, and the parameter counts the benchmark publishes."""

from __future__ import annotations

import csv
import itertools
import random
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.nb201 import NB201_OPS, Nb201Cell, build_nb201, parse_cell

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
LATENCY_CSV = DATA / "help-nasbench201" / "latency_ms.csv"

ALL_3X3 = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"
ALL_SKIP = "|skip_connect~0|+|skip_connect~0|skip_connect~1|+|skip_connect~0|skip_connect~1|skip_connect~2|"
ISSUE_36 = "|skip_connect~0|+|none~0|nor_conv_3x3~1|+|avg_pool_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"
ALL_NONE = "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"

# Parameters of one edge op summed over the 15 cells (5 per stage at 16, 32, 64 channels): conv weight + BN affine.
_EDGE_PARAMS = {
    "nor_conv_3x3": sum(5 * (9 * c * c + 2 * c) for c in (16, 32, 64)),
    "nor_conv_1x1": sum(5 * (c * c + 2 * c) for c in (16, 32, 64)),
}
# Everything outside the cells for 10 classes: stem, two reduction blocks, last BN, classifier.
_SKELETON_PARAMS_CIFAR10 = (
    (3 * 16 * 9 + 2 * 16)
    + (16 * 32 * 9 + 2 * 32 + 32 * 32 * 9 + 2 * 32 + 16 * 32)
    + (32 * 64 * 9 + 2 * 64 + 64 * 64 * 9 + 2 * 64 + 32 * 64)
    + 2 * 64
    + (64 * 10 + 10)
)


@cache
def _published_cells() -> tuple[str, ...]:
    """The ``arch`` column of the HELP latency file (all 15,625 NAS-Bench-201 cells)."""
    if not LATENCY_CSV.exists():
        pytest.skip(f"NAS-Bench-201 data not found at {LATENCY_CSV} (../shared/data beside the repository)")
    with LATENCY_CSV.open(newline="") as handle:
        return tuple(row["arch"] for row in csv.DictReader(handle))


def _params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _cell_string(ops: tuple[str, ...]) -> str:
    """The cell string of six edge ops in string order (0->1, 0->2, 1->2, 0->3, 1->3, 2->3)."""
    return "|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*ops)


six_ops = st.tuples(*[st.sampled_from(NB201_OPS)] * 6)


def test_every_published_cell_parses_and_round_trips() -> None:
    cells = _published_cells()
    assert len(cells) == 15_625
    parsed = [parse_cell(cell) for cell in cells]
    assert [p.to_str() for p in parsed] == list(cells)
    assert len(set(parsed)) == 15_625 == len(NB201_OPS) ** 6


@pytest.mark.slow
def test_a_seeded_sample_of_published_cells_builds_and_runs() -> None:
    sample = random.Random(201).sample(_published_cells(), 12)
    for cell in sample:
        module, shapes = build_nb201(cell)
        assert shapes == ((1, 3, 32, 32),)
        assert not module.training
        with torch.no_grad():
            logits = module(torch.randn(*shapes[0]))
        assert logits.shape == (1, 10)
        assert torch.isfinite(logits).all()


@pytest.mark.parametrize(
    ("cell", "num_classes", "params_mb"),
    [
        (ALL_3X3, 10, 1.531546),
        (ALL_3X3, 100, 1.537396),
        (ALL_3X3, 120, 1.538696),
        (ALL_SKIP, 10, 0.073306),
        (ALL_SKIP, 100, 0.079156),
        (ALL_SKIP, 120, 0.080456),
        (ISSUE_36, 10, 0.802426),
    ],
)
def test_parameter_counts_match_the_published_ones(cell: str, num_classes: int, params_mb: float) -> None:
    """Parameter counts equal the ``params`` (MB = 1e6 parameters) of the official benchmark files.

    Sources: the all-``nor_conv_3x3`` cell is the largest network (index 1462; NATS-Bench repository,
    ``notebooks/find-largest.ipynb``) and parameter-free cells the smallest; the minimum and maximum of ``params``
    over the official NAS-Bench-201-v1_1-096897 file are 0.073306 / 1.531546 (CIFAR-10), 0.079156 / 1.537396
    (CIFAR-100) and 0.080456 / 1.538696 (ImageNet16-120), as printed by scripts that read the official file
    (HPOBench's NAS-Bench-201 JSON export) and used by EvoXBench (EMI-Group/evoxbench, NB201 ``min_max_values``).
    The third cell's 0.802426 is the official API's ``get_cost_info(..., 'cifar10', hp='12')`` output quoted in
    https://github.com/D-X-Y/NATS-Bench/issues/36 (the ``hp='200'`` value in that issue was a bug, since fixed).
    """
    module, _ = build_nb201(cell, num_classes=num_classes)
    assert round(_params(module) / 1e6, 6) == params_mb


@settings(max_examples=15, deadline=None)
@given(six_ops)
def test_parameter_count_has_the_closed_form(ops: tuple[str, ...]) -> None:
    """Random cells, counted two ways: the built module, and skeleton + a fixed cost per conv edge."""
    module, _ = build_nb201(_cell_string(ops))
    expected = _SKELETON_PARAMS_CIFAR10 + sum(_EDGE_PARAMS.get(op, 0) for op in ops)
    assert _params(module) == expected


def test_all_none_cell_makes_the_output_independent_of_the_input() -> None:
    """With every edge ``none`` each cell outputs zeros, so the logits are the same for any input."""
    module, shapes = build_nb201(ALL_NONE)
    with torch.no_grad():
        first = module(torch.randn(*shapes[0]))
        second = module(torch.randn(*shapes[0]))
    torch.testing.assert_close(first, second)


def test_a_node_with_only_none_inputs_is_zero_and_still_feeds_later_edges() -> None:
    """Node 1 is all-``none`` here; the 1->3 conv edge still exists (as in the official code) and reads zeros."""
    cell = "|none~0|+|skip_connect~0|none~1|+|none~0|nor_conv_3x3~1|skip_connect~2|"
    module, _ = build_nb201(cell)
    assert _params(module) == _SKELETON_PARAMS_CIFAR10 + _EDGE_PARAMS["nor_conv_3x3"]
    cell_module = module.get_submodule("stage1_cell0")
    conv_edge = cell_module.edges[1]  # live edges: skip 0->2, conv 1->3, skip 2->3
    with torch.no_grad():
        conv_edge[2].bias.fill_(0.5)  # ReLU-Conv-BN of zeros is then 0.5, not 0
        x = torch.randn(1, 16, 32, 32)
        out = cell_module(x)
    torch.testing.assert_close(out, x + 0.5)


def test_stage_layout_follows_the_official_skeleton() -> None:
    module, _ = build_nb201(ALL_3X3)
    names = [name for name, _ in module.named_children()]
    cells = [f"stage{s}_cell{i}" for s in (1, 2, 3) for i in range(5)]
    expected = ["stem_conv", "stem_bn", *cells[:5], "reduction2", *cells[5:10], "reduction3", *cells[10:]]
    assert names == [*expected, "last_bn", "last_relu", "global_pool", "flatten", "classifier"]
    pools = [m for m in module.modules() if isinstance(m, torch.nn.AvgPool2d)]
    assert all(p.kernel_size == 2 for p in pools)  # only the reduction shortcuts pool here
    bns = [m for m in module.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert all(bn.affine and bn.track_running_stats for bn in bns)


def test_avg_pool_edges_exclude_padding() -> None:
    module, _ = build_nb201("|avg_pool_3x3~0|+|none~0|none~1|+|none~0|none~1|avg_pool_3x3~2|")
    pools = [m for m in module.modules() if isinstance(m, torch.nn.AvgPool2d) and m.kernel_size == 3]
    assert len(pools) == 2 * 15  # two pool edges in each of the 15 cells
    assert all(p.stride == 1 and p.padding == 1 and not p.count_include_pad for p in pools)


@pytest.mark.parametrize(
    ("cell", "needle"),
    [
        ("", "1 '+'-separated"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|", "2 '+'-separated"),
        (ALL_3X3 + "+|none~0|", "4 '+'-separated"),
        (ALL_3X3.replace("nor_conv_3x3~1|+", "nor_conv_5x5~1|+"), "'nor_conv_5x5'"),
        (ALL_3X3.replace("|nor_conv_3x3~2|", "|nor_conv_3x3~1|"), "source '1', expected 2"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|", "group 2"),
        ("nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|", "group 1"),
        ("|none0|+|none~0|none~1|+|none~0|none~1|none~2|", "'none0'"),
        (" " + ALL_NONE, "group 1"),
        (ALL_NONE + "\n", "group 3"),
        ("|none~0|+|none~0|none~ 1|+|none~0|none~1|none~2|", "source ' 1'"),
        ("|none~0|+||+|none~0|none~1|none~2|", "group 2"),
    ],
)
def test_malformed_cells_are_rejected_with_the_position_and_the_expected_form(cell: str, needle: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_cell(cell)
    message = str(info.value)
    assert needle in message
    assert "expected" in message or "use one of" in message


def test_a_non_string_cell_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="must be a string"):
        parse_cell(12)  # type: ignore[arg-type]


@pytest.mark.parametrize("num_classes", [0, -3, 2.5, True])
def test_a_bad_class_count_is_rejected(num_classes: object) -> None:
    with pytest.raises(InvalidInputError, match="num_classes"):
        build_nb201(ALL_NONE, num_classes=num_classes)  # type: ignore[arg-type]


@given(six_ops)
def test_parse_and_to_str_are_inverse(ops: tuple[str, ...]) -> None:
    cell = _cell_string(ops)
    parsed = parse_cell(cell)
    assert parsed.to_str() == cell == str(parsed)
    assert parsed == Nb201Cell(edges=tuple(zip(ops, (0, 0, 1, 0, 1, 2), (1, 2, 2, 3, 3, 3), strict=True)))


@given(st.text(alphabet="|+~0123 _abnoecrkv3x1pilnsu", max_size=80))
def test_parsing_arbitrary_text_raises_only_invalid_input(text: str) -> None:
    try:
        parse_cell(text)
    except InvalidInputError:
        pass


def test_the_cell_space_has_15625_cells() -> None:
    cells = {parse_cell(_cell_string(ops)) for ops in itertools.product(NB201_OPS, repeat=6)}
    assert len(cells) == 15_625


def test_parsing_does_not_import_torch() -> None:
    code = (
        "import sys; from edgeplan.frontends.nb201 import parse_cell; "
        f"parse_cell({ALL_3X3!r}); assert 'torch' not in sys.modules, 'torch was imported'"
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
