"""The convolution primitives (edgeplan.primitives): every variant against F.conv2d, rules, errors, registry.

Each primitive runs in float32 on seeded random layers (odd and tiny image sizes, c and k from 1 to 20, f in
1, 2, 3, 4, 5, 7, 11, strides 1, 2, 4, 'same', zero and explicit padding) and must stay within its declared
``rel_tolerance`` of the float64 reference in the measure of :func:`edgeplan.primitives.relative_error`; in float64
every primitive must be exact to 1e-12 (Winograd and FFT included), which tells an algorithmic bug from float32
rounding. A hypothesis property test draws further layers inside each primitive's rule.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplan.errors import InvalidInputError
from edgeplan.primitives import (
    FAMILIES,
    LAYOUTS,
    ConvSpec,
    Layout,
    Primitive,
    Rule,
    all_primitives,
    applicable,
    from_chw,
    get_primitive,
    primitive_names,
    reference_conv2d,
    relative_error,
    to_chw,
)
from edgeplan.primitives.winograd import winograd_matrices

PRIMS = all_primitives()
NAMES = [p.name for p in PRIMS]
ONEDNN = bool(torch.backends.mkldnn.is_available())
#: The primitives that can run here (the oneDNN ones need a PyTorch built with it).
AVAILABLE = [p for p in PRIMS if any(p.applies(ConvSpec(3, 5, 9, f)) for f in (3, 5, 1))]
#: Largest float64 error of any primitive: all algorithms are exact in exact arithmetic.
FLOAT64_TOLERANCE = 1e-12


def _probe(prim: Primitive, c: int = 3, k: int = 5, im: int = 9) -> ConvSpec:
    """A small layer ``prim`` applies to (f = 3, else 5, else 1); skips the test where there is none."""
    for f in (3, 5, 1):
        spec = ConvSpec(c, k, im, f)
        if prim.applies(spec):
            return spec
    pytest.skip(f"{prim.name} applies to no probe layer here (its rule: {prim.rule.text})")


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """Small tensors on a shared machine: one intra-op thread avoids oversubscription stalls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _layer_pool() -> tuple[ConvSpec, ...]:
    """Seeded random layers over the whole space, plus extra draws inside the narrow rules (f = 1 p = 0; s = 1)."""
    rng = random.Random(20240611)
    combos = [(f, s, pad) for f in (1, 2, 3, 4, 5, 7, 11) for s in (1, 2, 4) for pad in ("same", "zero", "more")]
    combos += [(f, 1, pad) for f in (3, 5) for pad in ("same", "zero", "more") for _ in range(4)]
    combos += [(1, s, "zero") for s in (1, 2, 3, 4) for _ in range(3)]
    combos += [(f, 1, "same") for f in (1, 2, 7, 11)]
    pool = []
    for f, s, pad_kind in combos:
        padding = {"same": None, "zero": 0, "more": rng.randint(1, f // 2 + 2)}[pad_kind]
        p = (f - 1) // 2 if padding is None else padding
        smallest = max(1, f - 2 * p)  # the padded input must hold the kernel
        im = rng.choice([smallest, *range(smallest, 16)])  # odd and even sizes, often the smallest
        pool.append(ConvSpec(c=rng.randint(1, 20), k=rng.randint(1, 20), im=im, f=f, s=s, padding=padding))
    # the corner cases: one channel, one kernel, one output pixel, a 1x1 image
    pool += [ConvSpec(1, 1, 1, 1), ConvSpec(1, 1, 1, 3), ConvSpec(1, 1, 1, 5), ConvSpec(2, 3, 3, 3, padding=0),
             ConvSpec(1, 1, 5, 5, padding=0), ConvSpec(20, 20, 3, 1, 2), ConvSpec(3, 2, 17, 3, 4)]
    return tuple(pool)


POOL = _layer_pool()


def _tensors(spec: ConvSpec, seed: int, dtype: torch.dtype = torch.float32,
             bias: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(spec.c, spec.im, spec.im, generator=g, dtype=dtype)
    w = torch.randn(spec.weight_shape, generator=g, dtype=dtype)
    b = torch.randn(spec.k, generator=g, dtype=dtype) if bias else None
    return x, w, b


def _run(prim: Primitive, spec: ConvSpec, x: torch.Tensor, w: torch.Tensor,
         b: torch.Tensor | None) -> torch.Tensor:
    """Execute ``prim`` on the chw input ``x``; check the output's form and return it in chw."""
    x_in = from_chw(x, prim.input_layout)
    before = x_in.clone()
    y = prim.execute(x_in, prim.prepare(w, b, spec=spec))
    assert torch.equal(x_in, before), f"{prim.name} modified its input on {spec.describe()}"
    assert tuple(y.shape) == spec.output_shape(prim.output_layout), (prim.name, spec.describe(), tuple(y.shape))
    assert y.is_contiguous() and y.dtype == x.dtype, (prim.name, spec.describe())
    return to_chw(y, prim.output_layout)


def _applicable_layers(prim: Primitive) -> list[tuple[int, ConvSpec]]:
    return [(i, spec) for i, spec in enumerate(POOL) if prim.applies(spec)]


# --- equivalence with F.conv2d ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_float32_matches_conv2d_within_declared_tolerance(name: str) -> None:
    prim = get_primitive(name)
    _probe(prim)
    layers = _applicable_layers(prim)
    assert len(layers) >= 15, f"the test pool has only {len(layers)} layers for {name}"
    worst, worst_layer = 0.0, ""
    for i, spec in layers:
        x, w, b = _tensors(spec, seed=i, bias=i % 3 != 0)
        err = relative_error(_run(prim, spec, x, w, b), x, w, b, spec)
        if err > worst:
            worst, worst_layer = err, spec.describe()
    assert worst <= prim.info.rel_tolerance, f"{name}: error {worst:.2e} on {worst_layer}"


@pytest.mark.skipif("not __import__('torch').cuda.is_available()")
@pytest.mark.parametrize("name", NAMES)
def test_float32_on_cuda_matches_conv2d(name: str) -> None:
    prim = get_primitive(name)
    if not prim.supports_device("cuda"):
        pytest.skip(f"{name} runs on the CPU only")
    layers = _applicable_layers(prim)[:12]
    worst, worst_layer = 0.0, ""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # cuDNN's TF32 is not float32 arithmetic
        for i, spec in layers:
            x, w, b = _tensors(spec, seed=i, bias=i % 2 == 0)
            x_in = from_chw(x, prim.input_layout).contiguous().cuda()
            y = prim.execute(x_in, prim.prepare(w.cuda(), None if b is None else b.cuda(), spec=spec))
            assert y.is_cuda and y.is_contiguous(), (name, spec.describe())
            err = relative_error(to_chw(y.cpu(), prim.output_layout), x, w, b, spec)
            if err > worst:
                worst, worst_layer = err, spec.describe()
    assert worst <= 4 * prim.info.rel_tolerance, f"{name} on CUDA: error {worst:.2e} on {worst_layer}"


def test_only_onednn_is_cpu_only() -> None:
    assert [p.name for p in PRIMS if not p.supports_device("cuda:0")] == ["torch-onednn-chw", "torch-onednn-hwc"]
    assert all(p.supports_device("cpu") and p.supports_device(torch.device("cpu")) for p in PRIMS)


@pytest.mark.parametrize("name", NAMES)
def test_float64_is_exact(name: str) -> None:
    prim = get_primitive(name)
    if not prim.supports_dtype(torch.float64):
        pytest.skip(f"{name} has no float64 path")
    _probe(prim)
    for i, spec in _applicable_layers(prim)[::3]:
        x, w, b = _tensors(spec, seed=1000 + i, dtype=torch.float64)
        err = relative_error(_run(prim, spec, x, w, b), x, w, b, spec)
        assert err <= FLOAT64_TOLERANCE, f"{name}: float64 error {err:.2e} on {spec.describe()}"


@st.composite
def _layer_for(draw: st.DrawFn, prim: Primitive) -> ConvSpec:
    rule = prim.rule
    f = draw(st.sampled_from(sorted(rule.kernel_sizes or (1, 2, 3, 4, 5, 6, 7, 9, 11))))
    s = draw(st.sampled_from(sorted(rule.strides or (1, 2, 3, 4))))
    padding = 0 if rule.zero_padding else draw(st.one_of(st.none(), st.integers(0, f)))
    p = (f - 1) // 2 if padding is None else padding
    im = draw(st.integers(max(1, f - 2 * p), 17))
    return ConvSpec(c=draw(st.integers(1, 20)), k=draw(st.integers(1, 20)), im=im, f=f, s=s, padding=padding)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_every_primitive_matches_conv2d(data: st.DataObject) -> None:
    prim = data.draw(st.sampled_from(AVAILABLE), label="primitive")
    spec = data.draw(_layer_for(prim), label="layer")
    assert prim.applies(spec)
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    x, w, b = _tensors(spec, seed, bias=data.draw(st.booleans(), label="bias"))
    err = relative_error(_run(prim, spec, x, w, b), x, w, b, spec)
    assert err <= prim.info.rel_tolerance, f"{prim.name}: error {err:.2e} on {spec.describe()}"


def test_execute_is_repeatable_and_leaves_the_prepared_state_alone() -> None:
    for prim in AVAILABLE:
        spec = _probe(prim, c=3, k=4, im=7)
        x, w, b = _tensors(spec, seed=7)
        prepared = prim.prepare(w, b, spec=spec)
        state = prepared.weight.clone()
        x_in = from_chw(x, prim.input_layout)
        first = prim.execute(x_in, prepared)
        second = prim.execute(x_in, prepared)
        assert torch.equal(first, second), prim.name
        assert torch.equal(prepared.weight, state), prim.name
        assert torch.allclose(to_chw(first, prim.output_layout),
                              reference_conv2d(x, w, b, spec).float(), rtol=1e-4, atol=1e-4), prim.name


def test_execute_records_no_graph_with_or_without_grad_mode() -> None:
    """A bare call (grad enabled, input requiring grad), one under no_grad and one under inference_mode compute the
    same output, and no call records a graph."""
    for prim in AVAILABLE:
        spec = _probe(prim, c=3, k=4, im=7)
        x, w, b = _tensors(spec, seed=3)
        prepared = prim.prepare(w.requires_grad_(), b, spec=spec)
        x_in = from_chw(x, prim.input_layout).requires_grad_()
        bare = prim.execute(x_in, prepared)
        with torch.no_grad():
            no_grad = prim.execute(x_in, prepared)
        with torch.inference_mode():
            quiet = prim.execute(x_in.detach(), prepared)
        assert not bare.requires_grad and not no_grad.requires_grad, prim.name
        assert torch.equal(bare, quiet) and torch.equal(bare, no_grad), prim.name


def test_direct_sum2d_blocks_over_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    from edgeplan.primitives import direct

    monkeypatch.setattr(direct, "MAC_BLOCK_ELEMENTS", 3 * 7 * 7 * 2)  # two kernels per block, the last one alone
    prim = get_primitive("direct-sum2d")
    spec = ConvSpec(c=3, k=5, im=7, f=3)
    x, w, b = _tensors(spec, seed=11)
    assert relative_error(_run(prim, spec, x, w, b), x, w, b, spec) <= prim.info.rel_tolerance


def test_declared_layouts_are_the_real_ones() -> None:
    # c, im and k all differ, so a tensor in a layout other than the declared one has another shape
    for prim in AVAILABLE:
        spec = _probe(prim)
        x, w, b = _tensors(spec, seed=3)
        prepared = prim.prepare(w, b, spec=spec)
        y = prim.execute(from_chw(x, prim.input_layout), prepared)
        ref = reference_conv2d(x, w, b, spec).float()
        assert y.shape == ref.permute(*["chw".index(a) for a in prim.output_layout.value]).shape, prim.name
        assert torch.allclose(to_chw(y, prim.output_layout), ref, rtol=1e-4, atol=1e-4), prim.name
        for other in LAYOUTS:
            if other is not prim.input_layout:
                with pytest.raises(InvalidInputError, match=f"{prim.name}: input"):
                    prim.execute(from_chw(x, other), prepared)


# --- applicability rules ----------------------------------------------------------------------------------------

_EXPECTED_RULES = {
    "direct-sum2d": lambda sp: True,
    "im2": lambda sp: True,
    "kn2": lambda sp: sp.s == 1,
    "wino3": lambda sp: sp.f == 3 and sp.s == 1,
    "wino5": lambda sp: sp.f == 5 and sp.s == 1,
    "conv-1x1": lambda sp: sp.f == 1 and sp.pad == 0,
    "mec": lambda sp: True,
    "fft": lambda sp: sp.s == 1,
    "runtime": lambda sp: True,
    "runtime-onednn": lambda sp: ONEDNN,
}


@pytest.mark.parametrize("name", NAMES)
def test_applies_follows_the_family_rule(name: str) -> None:
    prim = get_primitive(name)
    expected = _EXPECTED_RULES["runtime-onednn" if "onednn" in name else prim.family]
    for spec in POOL:
        assert prim.applies(spec) == expected(spec), f"{name} on {spec.describe()}"
        assert prim.applies(spec) == (prim.rule.violation(spec) is None)


def test_winograd_rules_are_exact() -> None:
    for prim in applicable(ConvSpec(8, 8, 8, 3), family="wino3"):
        assert not prim.applies(ConvSpec(8, 8, 8, 3, s=2))
        assert not prim.applies(ConvSpec(8, 8, 8, 5))
        assert prim.applies(ConvSpec(8, 8, 8, 3, padding=0))
    assert {p.name for p in applicable(ConvSpec(8, 8, 8, 5))} >= {
        "winograd-2x2-5x5", "winograd-3x3-5x5", "winograd-4x4-5x5", "winograd-2-5", "winograd-3-5", "winograd-3-5-col"}
    assert not applicable(ConvSpec(8, 8, 8, 7), family="wino5")
    assert not applicable(ConvSpec(8, 8, 8, 1, padding=1), family="conv-1x1")
    assert len(applicable(ConvSpec(8, 8, 8, 1, s=2), family="conv-1x1")) == 8


def test_fft_refuses_a_layer_whose_kernel_spectrum_is_too_large() -> None:
    fft = get_primitive("fft")
    huge = ConvSpec(c=1024, k=1024, im=1024, f=3)
    assert not fft.applies(huge)
    with pytest.raises(InvalidInputError, match="kernel spectrum"):
        fft.check(huge)


@pytest.mark.parametrize("name", [p.name for p in PRIMS if p.family in ("kn2", "wino3", "wino5", "conv-1x1", "fft")])
def test_check_and_prepare_refuse_an_inapplicable_layer(name: str) -> None:
    prim = get_primitive(name)
    refused = [spec for spec in POOL if not prim.applies(spec)][:5]
    assert refused
    for spec in refused:
        with pytest.raises(InvalidInputError, match=rf"{name} does not apply to layer.*{prim.rule.violation(spec)}"):
            prim.check(spec)
        _, w, b = _tensors(spec, seed=0)
        with pytest.raises(InvalidInputError, match=name):
            prim.prepare(w, b, spec=spec)


def test_rule_text_and_violation() -> None:
    rule = Rule(kernel_sizes=frozenset({3}), strides=frozenset({1, 2}), zero_padding=True)
    assert rule.text == "f = 3, s in {1, 2}, p = 0"
    assert rule.violation(ConvSpec(1, 1, 5, 5, padding=0)) == "f = 3"
    assert rule.violation(ConvSpec(1, 1, 5, 3, s=4, padding=0)) == "s in {1, 2}"
    assert rule.violation(ConvSpec(1, 1, 5, 3)) == "p = 0"
    assert rule.applies(ConvSpec(1, 1, 5, 3, s=2, padding=0))
    assert Rule().text == "any f, s"
    extra = Rule(extra=lambda sp: sp.c < 4, extra_text="c < 4")
    assert extra.violation(ConvSpec(8, 1, 5, 3)) == "c < 4" and extra.applies(ConvSpec(3, 1, 5, 3))
    with pytest.raises(InvalidInputError, match="extra_text"):
        Rule(extra=lambda sp: True)


# --- errors on misuse -------------------------------------------------------------------------------------------


def test_execute_refuses_the_prepared_state_of_another_primitive() -> None:
    spec = ConvSpec(4, 6, 9, 3)
    _, w, b = _tensors(spec, seed=1)
    a, other = get_primitive("im2col-copy-short-ab-ki"), get_primitive("direct-sum2d")
    assert a.input_layout == other.input_layout
    x = torch.randn(spec.input_shape(a.input_layout))
    with pytest.raises(InvalidInputError, match="prepared state of direct-sum2d"):
        a.execute(x, other.prepare(w, b, spec=spec))
    for prim in AVAILABLE:  # every primitive refuses a state it did not make, even one of the same shape
        donor = get_primitive("direct-sum2d" if prim.name != "direct-sum2d" else "direct-sum2d-gemm")
        spec1 = _probe(prim, c=4, k=6, im=9)
        _, w1, _ = _tensors(spec1, seed=2)
        with pytest.raises(InvalidInputError, match=f"{prim.name}: got the prepared state of {donor.name}"):
            prim.execute(torch.zeros(spec1.input_shape(prim.input_layout)), donor.prepare(w1, spec=spec1))


def test_execute_refuses_an_input_that_does_not_match_the_layer() -> None:
    prim = get_primitive("winograd-2x2-3x3")
    spec = ConvSpec(4, 6, 9, 3)
    _, w, _ = _tensors(spec, seed=1)
    prepared = prim.prepare(w, spec=spec)
    with pytest.raises(InvalidInputError, match=r"expected \(9, 9, 4\)"):
        prim.execute(torch.zeros(4, 9, 9), prepared)  # chw, not hwc
    with pytest.raises(InvalidInputError, match="float64"):
        prim.execute(torch.zeros(9, 9, 4, dtype=torch.float64), prepared)


def test_prepare_validates_weight_bias_and_dtype() -> None:
    prim = get_primitive("direct-sum2d")
    spec = ConvSpec(4, 6, 9, 3)
    with pytest.raises(InvalidInputError, match="weight shape"):
        prim.prepare(torch.zeros(6, 4, 5, 5), spec=spec)
    with pytest.raises(InvalidInputError, match="bias"):
        prim.prepare(torch.zeros(spec.weight_shape), torch.zeros(5), spec=spec)
    with pytest.raises(InvalidInputError, match="bias"):
        prim.prepare(torch.zeros(spec.weight_shape), torch.zeros(6, dtype=torch.float64), spec=spec)
    for dtype in (torch.int64, torch.float16):
        with pytest.raises(InvalidInputError, match="not supported"):
            prim.prepare(torch.zeros(spec.weight_shape, dtype=dtype), spec=spec)
    onednn = get_primitive("torch-onednn-chw")
    assert onednn.supports_dtype(torch.float32) and not onednn.supports_dtype(torch.float64)
    if onednn.applies(spec):
        with pytest.raises(InvalidInputError, match="torch.float32"):
            onednn.prepare(torch.zeros(spec.weight_shape, dtype=torch.float64), spec=spec)


def test_run_infers_the_layer_and_spec_for_refuses_bad_shapes() -> None:
    prim = get_primitive("mec-col")  # hcw input
    spec = ConvSpec(c=3, k=4, im=8, f=3, s=2, padding=2)
    x, w, b = _tensors(spec, seed=4)
    y = prim.run(from_chw(x, prim.input_layout), w, b, stride=2, padding=2)
    assert relative_error(to_chw(y, prim.output_layout), x, w, b, spec) <= prim.info.rel_tolerance
    assert prim.spec_for(from_chw(x, Layout.HCW), w, stride=2, padding=2) == spec
    with pytest.raises(InvalidInputError, match="3-D"):
        prim.spec_for(x[None], w)
    with pytest.raises(InvalidInputError, match="square"):
        prim.spec_for(torch.zeros(8, 3, 7), w)
    with pytest.raises(InvalidInputError, match="square"):
        prim.spec_for(from_chw(x, Layout.HCW), w[..., :2])


# --- registry ---------------------------------------------------------------------------------------------------


def test_registry_names_families_and_counts() -> None:
    assert len(set(NAMES)) == len(NAMES) == len(primitive_names())
    counts = Counter(p.family for p in PRIMS)
    assert set(counts) == set(FAMILIES)
    assert len(PRIMS) >= 30 and len(counts) >= 7
    assert counts == {"direct-sum2d": 3, "im2": 24, "kn2": 8, "wino3": 8, "wino5": 6, "conv-1x1": 8, "mec": 2,
                      "fft": 1, "runtime": 5}
    assert [FAMILIES.index(p.family) for p in PRIMS] == sorted(FAMILIES.index(p.family) for p in PRIMS)
    for prim in PRIMS:
        info = prim.info
        assert info.input_layout in LAYOUTS and info.output_layout in LAYOUTS
        assert info.summary and info.prepared
        assert 0 < info.rel_tolerance <= 1e-4
        assert prim.name in repr(prim)
    # the families of mulder2020 §3.1 with their distinctive variants
    for name in ("im2col-copy-self-ab-ki", "im2row-scan-ab-ik", "kn2row", "kn2col", "winograd-2x2-3x3",
                 "winograd-4x4-3x3", "winograd-2-3", "winograd-4-3", "winograd-2x2-5x5", "winograd-3x3-5x5",
                 "winograd-2-5", "winograd-3-5", "conv-1x1-gemm-ab-ki", "mec-col", "mec-row-partition", "fft"):
        assert name in NAMES


def test_get_primitive_suggests_close_names() -> None:
    assert get_primitive("kn2row").name == "kn2row"
    with pytest.raises(InvalidInputError, match="did you mean winograd-2x2-3x3"):
        get_primitive("winograd-2x2-3x4")
    with pytest.raises(InvalidInputError, match="edgeplan primitives list"):
        get_primitive("zzzz")
    with pytest.raises(InvalidInputError, match="unknown primitive family"):
        applicable(ConvSpec(1, 1, 3, 3), family="winograd")
    spec = ConvSpec(8, 8, 8, 3)
    assert applicable(spec) == tuple(p for p in PRIMS if p.applies(spec))
    assert all(p.family == "kn2" for p in applicable(spec, family="kn2"))


def test_importing_the_package_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import edgeplan.primitives as P\n"
        "spec = P.ConvSpec(3, 4, 5, 3)\n"
        "assert spec.out == 5 and P.Layout.parse('hwc') is P.Layout.HWC\n"
        "assert 'torch' not in sys.modules, 'torch imported by edgeplan.primitives'\n"
        "try:\n"
        "    P.no_such_name\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
        "assert 'torch' not in sys.modules\n"
        "assert P.get_primitive('fft').name == 'fft' and 'torch' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=Path(__file__).resolve().parents[1])


# --- layer configurations, the reference and the Winograd matrices -----------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True)
@given(f=st.integers(1, 7), s=st.integers(1, 4), padding=st.one_of(st.none(), st.integers(0, 4)),
       im=st.integers(1, 12))
def test_convspec_output_size_is_conv2d_s(f: int, s: int, padding: int | None, im: int) -> None:
    p = (f - 1) // 2 if padding is None else padding
    if im + 2 * p < f:
        with pytest.raises(InvalidInputError, match="larger than the padded"):
            ConvSpec(2, 3, im, f, s, padding)
        return
    spec = ConvSpec(2, 3, im, f, s, padding)
    y = torch.nn.functional.conv2d(torch.zeros(1, 2, im, im), torch.zeros(3, 2, f, f), stride=s, padding=p)
    assert tuple(y.shape[1:]) == spec.output_shape(Layout.CHW)
    if padding is None and f % 2 == 1:
        assert spec.out == -(-im // s)


def test_convspec_refuses_bad_values() -> None:
    for kwargs in ({"c": 0}, {"k": -1}, {"im": 2.0}, {"f": True}, {"s": 0}, {"padding": -1}, {"padding": True}):
        args = {"c": 2, "k": 2, "im": 5, "f": 3, **kwargs}
        with pytest.raises(InvalidInputError):
            ConvSpec(**args)  # type: ignore[arg-type]
    assert ConvSpec(64, 128, 56, 3).describe() == "c=64 k=128 im=56 f=3 s=1 p=same"
    assert ConvSpec(64, 128, 56, 3, padding=0).describe() == "c=64 k=128 im=56 f=3 s=1 p=0"
    assert ConvSpec(2, 3, 6, 4).out == 5  # 'same' padding of an even kernel loses a pixel


def test_relative_error_measure() -> None:
    spec = ConvSpec(3, 2, 5, 3)
    x, w, b = _tensors(spec, seed=5, dtype=torch.float64)
    ref = reference_conv2d(x, w, b, spec)
    assert relative_error(ref, x, w, b, spec) == 0.0
    assert relative_error(ref + 1e-3 * ref.abs().max(), x, w, b, spec) == pytest.approx(1e-3)
    assert relative_error(ref[:1], x, w, b, spec) == float("inf")
    nan = ref.clone()
    nan[0, 0, 0] = float("nan")
    assert relative_error(nan, x, w, b, spec) == float("inf")
    # one output that cancels to zero: the error is measured against the magnitude of its products
    one = ConvSpec(c=2, k=1, im=1, f=1)
    xo, wo = torch.tensor([[[1.0]], [[1.0]]]), torch.tensor([[[[1.0]], [[-1.0]]]])
    assert relative_error(torch.full((1, 1, 1), 1e-7), xo, wo, None, one) == pytest.approx(1e-7 / 2**0.5)
    with pytest.raises(InvalidInputError, match="chw input"):
        relative_error(ref, x[:2], w, b, spec)


@pytest.mark.parametrize(("m", "r"), [(2, 3), (3, 3), (4, 3), (2, 5), (3, 5), (4, 5), (6, 3)])
def test_winograd_matrices_compute_the_correlation(m: int, r: int) -> None:
    at, g, bt = winograd_matrices(m, r)
    a = m + r - 1
    assert at.shape == (m, a) and g.shape == (a, r) and bt.shape == (a, a)
    gen = torch.Generator().manual_seed(m * 10 + r)
    for _ in range(5):
        kernel, tile = torch.randn(r, generator=gen, dtype=torch.float64), torch.randn(a, generator=gen,
                                                                                        dtype=torch.float64)
        y = at @ ((g @ kernel) * (bt @ tile))
        expected = torch.stack([(kernel * tile[i:i + r]).sum() for i in range(m)])
        assert torch.allclose(y, expected, rtol=1e-12, atol=1e-12)
    # F(2, 3) at the points 0, 1, -1 and infinity, in closed form
    if (m, r) == (2, 3):
        assert torch.equal(g, torch.tensor([[1.0, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 1]], dtype=torch.float64))


def test_winograd_matrices_refuse_unsupported_tiles() -> None:
    with pytest.raises(InvalidInputError, match="not supported"):
        winograd_matrices(0, 3)
    with pytest.raises(InvalidInputError, match="not supported"):
        winograd_matrices(10, 5)
