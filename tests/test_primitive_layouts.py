"""The nine data-layout transformations between chw, hcw and hwc (edgeplan.primitives.layouts)."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplan.errors import InvalidInputError
from edgeplan.primitives import LAYOUTS, TRANSFORMS, ConvSpec, Layout, from_chw, to_chw, transform, transform_name
from edgeplan.primitives import layouts as layouts_module

PAIRS = list(itertools.product(LAYOUTS, LAYOUTS))


def _stored(x_chw: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The activation ``x_chw`` stored in ``layout``, built independently of the module: axes in name order."""
    return x_chw.permute(*["chw".index(axis) for axis in layout.value]).contiguous()


def _activation(c: int, h: int, w: int) -> torch.Tensor:
    """Distinct values, so that any misplaced element shows."""
    return torch.arange(c * h * w, dtype=torch.float32).view(c, h, w)


def test_there_are_nine_transformations_with_distinct_names() -> None:
    assert set(TRANSFORMS) == set(PAIRS) and len(TRANSFORMS) == 9
    names = {transform_name(src, dst) for src, dst in PAIRS}
    assert len(names) == 9
    assert transform_name("chw", Layout.HWC) == "chw-to-hwc"
    for src, dst in PAIRS:  # each is exported under its own name
        assert getattr(layouts_module, transform_name(src, dst).replace("-", "_")) is TRANSFORMS[(src, dst)]


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=[transform_name(s, d) for s, d in PAIRS])
def test_each_transformation_moves_every_element(src: Layout, dst: Layout) -> None:
    x = _activation(3, 5, 7)
    y = TRANSFORMS[(src, dst)](_stored(x, src))
    assert tuple(y.shape) == dst.shape(3, 5, 7)
    assert y.is_contiguous()
    assert torch.equal(y, _stored(x, dst))
    assert torch.equal(transform(_stored(x, src), src.value, dst.value), y)


def test_identities_return_their_argument_and_the_others_copy() -> None:
    x = _activation(2, 3, 4)
    for src, dst in PAIRS:
        stored = _stored(x, src)
        y = transform(stored, src, dst)
        if src is dst:
            assert y is stored
        else:
            assert y.data_ptr() != stored.data_ptr()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_from_chw_and_to_chw_round_trip(layout: Layout) -> None:
    x = torch.randn(4, 6, 5)
    there = from_chw(x, layout)
    assert torch.equal(there, _stored(x, layout))
    assert torch.equal(to_chw(there, layout), x)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(c=st.integers(1, 6), h=st.integers(1, 6), w=st.integers(1, 6), path=st.lists(st.sampled_from(LAYOUTS),
                                                                                      min_size=1, max_size=5))
def test_any_chain_of_transformations_equals_the_direct_one(c: int, h: int, w: int, path: list[Layout]) -> None:
    x = _activation(c, h, w)
    current, layout = x, Layout.CHW
    for nxt in path:
        current, layout = transform(current, layout, nxt), nxt
        assert torch.equal(current, _stored(x, layout))
    assert torch.equal(transform(current, layout, Layout.CHW), x)  # back to chw: the identity


def test_compositions_are_consistent() -> None:
    x = _activation(3, 4, 5)
    for a, b, c in itertools.product(LAYOUTS, repeat=3):
        via_b = transform(transform(_stored(x, a), a, b), b, c)
        assert torch.equal(via_b, transform(_stored(x, a), a, c)), (a, b, c)
        assert torch.equal(transform(transform(_stored(x, a), a, b), b, a), _stored(x, a)), (a, b)


def test_transformations_refuse_bad_input() -> None:
    for fn in TRANSFORMS.values():
        with pytest.raises(InvalidInputError, match="3-D"):
            fn(torch.zeros(1, 2, 3, 4))
    with pytest.raises(InvalidInputError, match="unknown data layout 'nchw'"):
        transform(torch.zeros(2, 3, 4), "nchw", "chw")
    with pytest.raises(InvalidInputError, match="unknown data layout"):
        transform_name("chw", "whc")


def test_layout_shapes_match_convspec() -> None:
    assert Layout.CHW.shape(1, 2, 3) == (1, 2, 3)
    assert Layout.HCW.shape(1, 2, 3) == (2, 1, 3)
    assert Layout.HWC.shape(1, 2, 3) == (2, 3, 1)
    assert [layout.value for layout in LAYOUTS] == ["chw", "hcw", "hwc"]
    assert Layout.parse(Layout.HWC) is Layout.HWC
    spec = ConvSpec(c=3, k=8, im=10, f=3, s=2)
    for layout in LAYOUTS:
        assert spec.input_shape(layout) == layout.shape(3, 10, 10)
        assert spec.output_shape(layout) == layout.shape(8, 5, 5)
