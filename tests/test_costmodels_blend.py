"""The fine-tuned model blended with the source's shared boosted correction (edgeplan.costmodels.blend)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from edgeplan.costmodels import (
    TRANSFORM_COLUMNS,
    PerformanceModel,
    PrimitiveDataset,
    evaluate_performance_model,
    fit_performance_model,
    load_performance_model,
    save_performance_model,
)
from edgeplan.costmodels.blend import (
    BLEND_WEIGHT,
    CORRECTION_PARAMS,
    BlendedModel,
    _Trees,
    correction_inputs,
    family,
    fit_blend,
    primitive_descriptors,
)
from edgeplan.costmodels.transfer_learning import FitOptions, draw_samples, transfer_on
from edgeplan.costmodels.transfer_steps import scaled as _scaled
from edgeplan.errors import InvalidInputError
from tests.test_costmodels_transfer import layers

NAMES = ("im2col-scan-ab-ki", "winograd-2x2-3x3", "winograd-4x4-3x3-vec-8")
TINY_NN = {"hidden": (32, 32), "max_epochs": 400, "patience": 40, "threads": 1, "n_members": 2}


def table(x: np.ndarray, slow: np.ndarray | float = 1.0) -> PrimitiveDataset:
    """A general primitive and two Winograd ones (3x3 stride 1 only); ``slow`` multiplies every time."""
    c, k, im, f, s = x.T
    macs = c * k * (im / s) ** 2 * f * f
    wino = (f == 3) & (s == 1)
    prims = np.column_stack([4 * macs + 1e4, np.where(wino, 2 * macs + 2e4, np.nan),
                             np.where(wino, 1.5 * macs + 4e4, np.nan)]) * np.reshape(slow, (-1, 1))
    trans = np.column_stack([(1.0 + j % 3) * c * im * im + 50 for j in range(9)])
    return PrimitiveDataset(x, NAMES, prims, TRANSFORM_COLUMNS, trans, "blend.csv")


@pytest.fixture(scope="module")
def source() -> PerformanceModel:
    return fit_performance_model(table(layers(400)), "nn2", params=TINY_NN)


def target() -> PrimitiveDataset:
    """The same layers 2x slower, the vectorized Winograd 1.5x more so on large images (a per-primitive interaction
    that a shared correction can learn from the tokens ``vec`` and ``8``)."""
    x = layers(400)
    slow = 2.0 * np.ones((len(x), 3))
    slow[:, 2] *= np.where(x[:, 2] >= 56, 1.5, 1.0)
    base = table(x)
    return PrimitiveDataset(x, NAMES, base.primitive_ns * slow, TRANSFORM_COLUMNS, base.transform_ns, "target.csv")


def test_families_and_descriptors() -> None:
    assert [family(n) for n in NAMES] == ["im2", "wino3", "wino3"]
    assert family("winograd-2-5-vec-4") == "wino5" and family("conv-1x1-gemm-ab-ik") == "c1x1"
    assert family("something-else") == "other"
    names, d = primitive_descriptors(NAMES)
    assert d.shape == (3, len(names))
    row = dict(zip(names, d[2], strict=True))
    assert row["family=wino3"] == 1 and row["token=vec"] == 1 and row["token=8"] == 1 and row["token=4x4"] == 1
    assert row["tile"] == 4 and row["vector_width"] == 8 and row[f"column={NAMES[2]}"] == 1
    assert row["token=im2col"] == 0 and row["family=im2"] == 0
    first = dict(zip(names, d[0], strict=True))
    assert first["tile"] == 0 and first["vector_width"] == 0 and first["token=im2col"] == 1


def test_correction_inputs_one_row_per_finite_cell() -> None:
    x = np.array([[16, 32, 28, 3, 1], [64, 64, 14, 1, 1]], dtype=float)
    log_source = np.array([[1.0, np.nan, 2.0], [3.0, np.nan, np.nan]])
    _, d = primitive_descriptors(NAMES)
    inputs, rows, cols = correction_inputs(x, log_source, d)
    assert rows.tolist() == [0, 0, 1] and cols.tolist() == [0, 2, 0]
    assert inputs.shape == (3, 9 + 1 + d.shape[1])
    np.testing.assert_array_equal(inputs[:, 9], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(inputs[1, 10:], d[2])
    assert inputs[0, 0] == 4 and inputs[0, 5] == np.log2(16 * 32 * 9 * 28 * 28)  # log2 c, log2 multiply-adds
    bare, _, _ = correction_inputs(x, log_source, None)
    assert bare.shape == (3, 10)


@pytest.mark.slow
def test_exported_trees_reproduce_the_booster() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 6))
    y = np.sin(x[:, 0]) + x[:, 1] * (x[:, 2] > 0) + 0.1 * rng.normal(size=600)
    est = HistGradientBoostingRegressor(random_state=0, **CORRECTION_PARAMS).fit(x, y)
    trees = _Trees.from_sklearn(est)
    probe = rng.normal(size=(300, 6)) * 1.5
    np.testing.assert_allclose(trees.predict(probe), est.predict(probe), rtol=1e-12, atol=1e-12)
    again = _Trees.from_arrays(trees.arrays())
    np.testing.assert_array_equal(again.predict(probe), trees.predict(probe))


def transfer(source: PerformanceModel, target: PrimitiveDataset, fraction: float, seed: int, method: str,
             blend: bool = False) -> PerformanceModel:
    """One method's transfer on drawn cells, with or without the blend (no refit)."""
    options = FitOptions(seed, method, refit=False, blend=blend)
    return transfer_on(source, target, draw_samples(target, fraction, seed), options, (fraction, 0))


def test_blend_is_the_geometric_mean_of_its_parts(source: PerformanceModel) -> None:
    tgt = target()
    tuned = transfer(source, tgt, 0.3, 0, "factor-finetune")
    blended = transfer(source, tgt, 0.3, 0, "factor-finetune", blend=True)
    est = blended.primitives
    assert isinstance(est, BlendedModel) and blended.kind == "blend" and est.weight == BLEND_WEIGHT
    x = tgt.features
    # the blend's fine-tuned part is the plain transfer's model (same seed, same samples)
    np.testing.assert_allclose(est.tuned_.predict(x), tuned.predict_primitives(x), rtol=1e-6, equal_nan=True)
    with np.errstate(invalid="ignore"):
        log_source = np.log(source.predict_primitives(x))
    inputs, rows, cols = correction_inputs(x, log_source, est.descriptors_)
    corrected = np.full_like(log_source, np.nan)
    corrected[rows, cols] = log_source[rows, cols] + est.trees_.predict(inputs)
    expected = np.exp(BLEND_WEIGHT * corrected + (1 - BLEND_WEIGHT) * np.log(tuned.predict_primitives(x)))
    np.testing.assert_allclose(blended.predict_primitives(x), expected, rtol=1e-6, equal_nan=True)
    # where a primitive does not apply, neither does the blend
    assert np.array_equal(np.isnan(blended.predict_primitives(x)), np.isnan(tgt.primitive_ns))
    assert blended.info["transfer"]["blend"]["weight"] == BLEND_WEIGHT


def test_the_shared_correction_learns_what_the_samples_show(source: PerformanceModel) -> None:
    tgt = target()
    x, y = tgt.features, tgt.primitive_ns
    est = fit_blend(source.primitives, source.primitives, x[::4], y[::4], weight=1.0)  # the corrected source alone
    err_direct = evaluate_performance_model(source, tgt).median_primitive_mdrae
    corrected = PerformanceModel("blend", est, source.transforms, dict(source.info), source.transforms_paper)
    err_corrected = evaluate_performance_model(corrected, tgt).median_primitive_mdrae
    assert err_direct > 0.4 and err_corrected < 0.25 * err_direct


@pytest.mark.slow
def test_a_blend_saves_loads_and_scales(tmp_path: Path, source: PerformanceModel) -> None:
    tgt = target()
    model = transfer(source, tgt, 0.3, 1, "finetune", blend=True)
    folder = save_performance_model(model, tmp_path / "blend")
    loaded = load_performance_model(folder)
    x = tgt.features
    np.testing.assert_allclose(loaded.predict_primitives(x), model.predict_primitives(x), rtol=1e-6, equal_nan=True)
    assert isinstance(loaded.primitives, BlendedModel) and loaded.kind == "blend"
    assert json.loads((folder / "primitives.json").read_text())["kind"] == "blend"
    assert not list(tmp_path.rglob("*.pkl"))
    scaled = _scaled(loaded.primitives, np.array([2.0, 1.0, 0.5]))  # a factor correction of the blend
    np.testing.assert_allclose(scaled.predict(x), loaded.predict_primitives(x) * [2.0, 1.0, 0.5], rtol=1e-9)


@pytest.mark.parametrize("method", ["factor", "direct"])
def test_blend_needs_fine_tuning(source: PerformanceModel, method: str) -> None:
    with pytest.raises(InvalidInputError, match="blend and refit shape a fine-tuning"):
        transfer(source, target(), 0.1, 0, method, blend=True)


def test_a_blend_is_not_fitted_or_fine_tuned_again(source: PerformanceModel) -> None:
    tgt = target()
    model = transfer(source, tgt, 0.3, 0, "finetune", blend=True)
    with pytest.raises(InvalidInputError, match="made by a transfer"):
        model.primitives.fit(tgt.features, tgt.primitive_ns)
    with pytest.raises(InvalidInputError, match="continues training a neural model"):
        transfer(model, tgt, 0.1, 0, "finetune")


def test_too_few_timings_and_bad_weights_are_refused(source: PerformanceModel) -> None:
    tgt = target()
    x, y = tgt.features[:5], tgt.primitive_ns[:5]
    with pytest.raises(InvalidInputError, match="needs at least 40 timings"):
        fit_blend(source.primitives, source.primitives, x, y)
    with pytest.raises(InvalidInputError, match="blend weight"):
        fit_blend(source.primitives, source.primitives, tgt.features, tgt.primitive_ns, weight=1.5)


@pytest.mark.slow
def test_cli_transfer_blend(tmp_path: Path, source: PerformanceModel) -> None:
    from click.testing import CliRunner

    from edgeplan.cli.common import Context
    from edgeplan.cli.costmodel_cmd import transfer as transfer_cmd
    from tests.test_costmodels_transfer import write_table

    src = save_performance_model(source, tmp_path / "src")
    csv = write_table(tmp_path / "target.csv", target())
    args = ["--model", str(src), "--data", str(csv), "--fraction", "0.3", "--seed", "0", "--out",
            str(tmp_path / "moved")]
    result = CliRunner().invoke(transfer_cmd, [*args, "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    data = json.loads(result.output)
    assert data["blend"]["weight"] == BLEND_WEIGHT and data["test"]["median_primitive_mdrae"] is not None
    assert load_performance_model(tmp_path / "moved").kind == "blend"
