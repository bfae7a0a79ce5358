"""Transfer of a performance model to another platform (mulder2020 §4.4): samples, factor, fine-tuning, refit,
blend, the calibration of a machine, and the CLI (``primitives transfer``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from repo_data import data_file

from edgeplan.cli.common import Context
from edgeplan.cli.costmodel_cmd import transfer as transfer_cmd
from edgeplan.costmodels import (
    TRANSFORM_COLUMNS,
    NN2Model,
    PerformanceModel,
    PrimitiveDataset,
    draw_samples,
    evaluate_performance_model,
    fit_performance_model,
    load_performance_model,
    save_performance_model,
    split_indices,
    transfer,
)
from edgeplan.costmodels.primitive_calibration import CALIBRATION_FOLDS, calibrate_primitives
from edgeplan.costmodels.transfer_learning import (
    ADAPTIVE_FIRST,
    CONTENDERS,
    STOP_FRACTION,
    FitOptions,
    TransferSample,
    contender_cells,
    even_shares,
    hold_out,
    transfer_on,
)
from edgeplan.costmodels.transfer_steps import (
    CROSS_FIT_MIN_ROWS,
    common_epoch,
    factor_scales,
    pooled_scales,
    stopping_plan,
)
from edgeplan.errors import InvalidInputError

NAMES = ("p0", "p1", "wino")
TINY_NN = {"hidden": (32, 32), "max_epochs": 600, "patience": 40, "threads": 1, "n_members": 2}


def layers(n: int, seed: int = 0) -> np.ndarray:
    """Distinct conv layer shapes ``(c, k, im, f, s)``."""
    rng = np.random.default_rng(seed)
    c = rng.choice([3, 16, 32, 64, 128, 256], n)
    k = rng.choice([16, 32, 64, 128], n)
    im = rng.choice([7, 14, 28, 56, 112], n)
    f = rng.choice([1, 3, 5], n)
    s = np.where(f == 1, 1, rng.choice([1, 2], n))
    x = np.unique(np.column_stack([c, k, im, f, s]).astype(float), axis=0)
    return x


def times(x: np.ndarray, slow: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Three primitives (the third only for f = 3, s = 1) and the nine transformations, in closed form."""
    c, k, im, f, s = x.T
    macs = c * k * (im / s) ** 2 * f * f
    prims = np.column_stack([10 * macs + 1e4, 3 * macs ** 0.9 + 5e3,
                             np.where((f == 3) & (s == 1), 2 * macs, np.nan)]) * slow
    trans = np.column_stack([(1.0 + j % 3) * c * im * im + 50 for j in range(9)]) * slow
    return prims, trans


def table(x: np.ndarray, prims: np.ndarray, trans: np.ndarray, names: tuple[str, ...] = NAMES,
          source: str = "target.csv") -> PrimitiveDataset:
    return PrimitiveDataset(x, names, prims, TRANSFORM_COLUMNS, trans, source)


@pytest.fixture(scope="module")
def source_data() -> PrimitiveDataset:
    x = layers(400)
    return table(x, *times(x), source="source.csv")


@pytest.fixture(scope="module")
def lin_source(source_data: PrimitiveDataset) -> PerformanceModel:
    return fit_performance_model(source_data, "lin")


@pytest.fixture(scope="module")
def nn2_source(source_data: PrimitiveDataset) -> PerformanceModel:
    return fit_performance_model(source_data, "nn2", params=TINY_NN)


def shifted_target(base: PerformanceModel | None = None) -> PrimitiveDataset:
    """The source's layers on a platform 3x slower, more so on large inputs (not a pure per-primitive scale)."""
    x = layers(400)
    prims, trans = times(x, slow=3.0)
    prims = prims * (1.0 + x[:, [2]] / 56.0)
    return table(x, prims, trans)


def on(source: PerformanceModel, target: PrimitiveDataset, fraction: float, seed: int, method: str,
       sample: TransferSample | None = None, refit: bool = False, blend: bool = False) -> PerformanceModel:
    """:func:`transfer_on` with one method on the cells :func:`draw_samples` draws (no refit, no blend)."""
    drawn = draw_samples(target, fraction, seed) if sample is None else sample
    return transfer_on(source, target, drawn, FitOptions(seed, method, refit=refit, blend=blend), (fraction, 0))


# -- samples ---------------------------------------------------------------------------------------------------------

def test_samples_draw_the_fraction_of_the_training_parts_timings(source_data: PrimitiveDataset) -> None:
    train = split_indices(source_data.features, 0).train
    defined = int((~np.isnan(source_data.primitive_ns[train])).sum())
    sample = draw_samples(source_data, 0.05, seed=2)
    assert sample.cells is not None and sample.drawn_cells == len(sample.cells) == round(0.05 * defined)
    rows, cols = sample.cells.T
    assert set(rows) <= set(train) and not np.isnan(source_data.primitive_ns[rows, cols]).any()
    assert len({(r, c) for r, c in sample.cells}) == len(sample.cells)  # without replacement
    assert np.array_equal(sample.rows, np.unique(rows))  # the rows are those the timings fall in, and no other
    assert len(sample.rows) > round(0.05 * len(train))  # spread over far more layers than a row draw of as many
    assert not set(sample.fit_rows) & set(sample.stop_rows)
    n = len(sample)
    assert len(sample.stop_rows) == (max(1, round(STOP_FRACTION * n)) if n >= 2 else 0)
    # the transformations are those of a uniform row draw of the fraction, and the draw is seeded
    assert len(sample.transform_rows) == round(0.05 * len(train)) and set(sample.transform_rows) <= set(train)
    again = draw_samples(source_data, 0.05, seed=2)
    assert again.cells is not None and np.array_equal(again.cells, sample.cells)
    other = draw_samples(source_data, 0.05, seed=3)
    assert other.cells is not None and not np.array_equal(other.cells, sample.cells)
    seen = sample.primitive_times(source_data)
    assert int(np.isfinite(seen).sum()) == len(sample.cells)
    assert hold_out(sample.rows, 2).primitive_times(source_data) is source_data.primitive_ns


@pytest.mark.parametrize("split_seed", [0, 3])
def test_samples_come_only_from_the_training_part(source_data: PrimitiveDataset, split_seed: int) -> None:
    train = split_indices(source_data.features, split_seed).train
    for fraction in (0.001, 0.1, 1.0):
        sample = draw_samples(source_data, fraction, seed=7, split_seed=split_seed)
        assert set(sample.rows) <= set(train) and set(sample.transform_rows) <= set(train)


def test_even_shares_give_every_column_as_many_as_it_can_take() -> None:
    assert even_shares([10, 2, 10], 12, seed=0).tolist() == [5, 2, 5]  # the capped column's share goes to the others
    shares = even_shares([10, 10, 10], 5, seed=3)
    assert shares.sum() == 5 and set(shares.tolist()) == {1, 2}
    assert even_shares([1, 0, 2], 10, seed=0).tolist() == [1, 0, 2]  # no more than there is
    assert even_shares([4, 4], 0, seed=0).tolist() == [0, 0]


def test_samples_give_every_primitive_as_many_timings(source_data: PrimitiveDataset) -> None:
    train = split_indices(source_data.features, 0).train
    per_column = (~np.isnan(source_data.primitive_ns[train])).sum(axis=0)
    sample = draw_samples(source_data, 0.1, seed=0)
    assert sample.cells is not None
    counts = np.bincount(sample.cells[:, 1], minlength=3)
    assert counts.sum() == round(0.1 * per_column.sum())
    assert counts.max() - counts.min() <= 1  # the rare third primitive (f = 3, s = 1 only) as many as the others


def test_a_transfer_learns_from_the_drawn_timings_only(lin_source: PerformanceModel) -> None:
    """Poison every undrawn cell of the drawn rows (and their transformations): the factor stays exact."""
    clean = shifted_target()
    x = clean.features
    scales = np.array([2.5, 0.5, 4.0])
    prims = lin_source.predict_primitives(x) * scales
    prims[np.isnan(clean.primitive_ns)] = np.nan
    trans = lin_source.predict_transforms(x[:, [0, 2]]) * 3.0
    sample = draw_samples(table(x, prims, trans), 0.3, seed=1)
    assert sample.cells is not None and set(sample.cells[:, 1]) == {0, 1, 2}  # every primitive has drawn timings
    poisoned, poisoned_trans = prims * 1000.0, trans * 1000.0
    poisoned[sample.cells[:, 0], sample.cells[:, 1]] = prims[sample.cells[:, 0], sample.cells[:, 1]]
    poisoned_trans[sample.transform_rows] = trans[sample.transform_rows]
    model = on(lin_source, table(x, poisoned, poisoned_trans), 0.3, 1, "factor")
    assert model.info["transfer"]["primitive_scales"] == pytest.approx(dict(zip(NAMES, scales, strict=True)),
                                                                      rel=1e-9)
    assert list(model.info["transfer"]["transform_scales"].values()) == pytest.approx([3.0] * 9, rel=1e-9)
    info = model.info["transfer"]
    assert info["drawn_cells"] == len(sample.cells) and info["drawn_rows"] == len(sample.rows)
    given = transfer_on(lin_source, clean, hold_out(sample.rows, 1), FitOptions(1, "factor", refit=False,
                                                                               blend=False))
    assert given.info["transfer"]["drawn_cells"] is None and given.info["transfer"]["fraction"] is None


def test_contender_cells_time_the_predicted_fastest_primitives_of_layers(lin_source: PerformanceModel) -> None:
    target = shifted_target()
    train = split_indices(target.features, 0).train
    first = draw_samples(target, 0.05, seed=0)
    assert first.cells is not None
    model = on(lin_source, target, 0.05, 0, "factor", sample=first)
    total = len(first.cells) + 41
    sample = contender_cells(model, target, first, total, seed=0, contenders=2, margin=100.0)
    assert sample.cells is not None and len(sample.cells) == total
    assert len({(r, c) for r, c in sample.cells}) == total  # no timing drawn twice
    assert {(r, c) for r, c in first.cells} <= {(r, c) for r, c in sample.cells}
    assert np.array_equal(sample.rows, np.unique(sample.cells[:, 0]))
    assert sample.transform_rows is first.transform_rows
    new = sorted({(int(r), int(c)) for r, c in sample.cells} - {(int(r), int(c)) for r, c in first.cells})
    new_rows = sorted({r for r, _ in new})
    assert set(new_rows) <= set(train)
    predicted = model.predict_primitives(target.features[new_rows])
    predicted[np.isnan(target.primitive_ns[new_rows])] = np.inf  # where the target defines no time
    partial = 0
    for i, row in enumerate(new_rows):  # the pair the model predicts fastest there (the last layer may get one)
        drawn = {c for r, c in new if r == row}
        fastest = set(np.argsort(predicted[i])[:2].tolist())
        assert drawn <= fastest
        partial += drawn != fastest
    assert partial <= 1 and len(new_rows) >= 20
    again = contender_cells(model, target, first, total, seed=0, contenders=2, margin=100.0)
    assert again.cells is not None and np.array_equal(again.cells, sample.cells)


def test_contender_cells_time_no_layer_without_close_contenders(lin_source: PerformanceModel) -> None:
    target = shifted_target()
    first = draw_samples(target, 0.05, seed=1)
    assert first.cells is not None
    model = on(lin_source, target, 0.05, 1, "factor", sample=first)
    none_close = contender_cells(model, target, first, len(first.cells) + 50, seed=1, margin=0.0)
    assert none_close.cells is not None and np.array_equal(none_close.cells, first.cells)  # no exact ties here
    with pytest.raises(InvalidInputError, match="at least 2 contenders"):
        contender_cells(model, target, first, 10, seed=1, contenders=1)
    with pytest.raises(InvalidInputError, match="single timings"):
        contender_cells(model, target, hold_out(first.rows, 1), 10, seed=1)


def test_contender_cells_keep_to_the_margin_and_the_model_s_columns(lin_source: PerformanceModel) -> None:
    x = layers(400)
    prims, trans = times(x, slow=3.0)
    prims[:, 0] = 1.3 * prims[:, 1]  # a contender of the second primitive within 50 %, not within 10 %
    extra = 0.5 * prims[:, [1]]  # the fastest on every layer, but a column the model does not predict
    target = table(x, np.hstack([prims, extra]), trans, names=(*NAMES, "extra"))
    first = draw_samples(target, 0.05, seed=4)
    assert first.cells is not None
    model = on(lin_source, target, 0.05, 4, "factor", sample=first)
    sample = contender_cells(model, target, first, len(first.cells) + 60, seed=4, contenders=3, margin=0.5)
    assert sample.cells is not None
    new = {(int(r), int(c)) for r, c in sample.cells} - {(int(r), int(c)) for r, c in first.cells}
    assert new and all(c != 3 for _, c in new)  # never the column without a prediction
    rows = sorted({r for r, _ in new})
    predicted = model.predict_primitives(target.features[rows])
    predicted[np.isnan(target.primitive_ns[rows, :3])] = np.inf
    best = predicted.min(axis=1)
    for i, row in enumerate(rows):  # every new timing within 50 % of its layer's predicted best
        assert all(predicted[i, c] <= 1.5 * best[i] for r, c in new if r == row)
    assert any(predicted[i, c] > 1.1 * best[i] for i, row in enumerate(rows) for r, c in new if r == row)


# -- the transfer ----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_transfer_draws_two_rounds_and_fine_tunes_refitted_and_blended(nn2_source: PerformanceModel,
                                                                         tmp_path: Path) -> None:
    x = layers(400)
    prims, trans = times(x, slow=3.0)
    prims = prims * (1.0 + x[:, [2]] / 56.0)
    prims[:, 0] = 1.05 * prims[:, 1]  # a close contender of the second primitive on every layer
    target = table(x, prims, trans)
    cells = draw_samples(target, 0.1, seed=2)
    assert cells.cells is not None and CONTENDERS >= 2
    model = transfer(nn2_source, target, fraction=0.1, seed=2)
    info = model.info["transfer"]
    first = draw_samples(target, 0.1 * ADAPTIVE_FIRST, seed=2)
    assert first.cells is not None and info["method"] == "factor-finetune"
    assert info["adaptive_rounds"][0] == len(first.cells) and info["adaptive_rounds"][1] > 0
    assert sum(info["adaptive_rounds"]) == info["drawn_cells"] == len(cells.cells)
    # the transformations of the full fraction's row draw, factor-corrected
    plain = on(nn2_source, target, 0.1, 2, "factor", sample=cells)
    assert info["transform_scales"] == plain.info["transfer"]["transform_scales"]
    assert isinstance(info["refit_epochs"], int) and info["blend"]["weight"] > 0
    assert len(info["cross_fit_folds"]) == 2 and info["stop_rows"] == 0
    direct = evaluate_performance_model(on(nn2_source, target, 0.1, 2, "direct"), target).median_primitive_mdrae
    assert evaluate_performance_model(model, target).median_primitive_mdrae < 0.5 * direct
    loaded = load_performance_model(save_performance_model(model, tmp_path / "moved"))
    np.testing.assert_allclose(loaded.predict_primitives(x), model.predict_primitives(x), rtol=1e-6,
                               equal_nan=True)
    again = transfer(nn2_source, target, fraction=0.1, seed=2)
    np.testing.assert_array_equal(again.predict_primitives(x), model.predict_primitives(x))


def test_a_transfer_reports_both_rounds_time(nn2_source: PerformanceModel, monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools
    import types

    import edgeplan.costmodels.transfer_learning as tl

    clock = itertools.count()  # every reading of the clock one second later
    monkeypatch.setattr(tl, "time", types.SimpleNamespace(monotonic=lambda: float(next(clock))))
    model = transfer(nn2_source, shifted_target(), fraction=0.05, seed=2)
    assert model.info["fit_primitives_s"] == 1.0  # the last round alone
    assert model.info["transfer"]["seconds"] > 1.0  # the first round and the choice of the second counted too


def test_validation_and_test_rows_never_reach_the_transfer(source_data: PrimitiveDataset,
                                                            lin_source: PerformanceModel) -> None:
    """Poison the target's validation and test rows: a factor from the whole training part stays exact."""
    x = source_data.features
    prims = lin_source.predict_primitives(x) * 2.0
    trans = lin_source.predict_transforms(x[:, [0, 2]]) * 3.0
    split = split_indices(x, 0)
    held = np.concatenate([split.val, split.test])
    prims[held] *= 1000.0
    trans[held] *= 1000.0
    target = table(x, prims, trans)
    model = on(lin_source, target, 1.0, 0, "factor")
    assert model.info["transfer"]["primitive_scales"] == pytest.approx({n: 2.0 for n in NAMES}, rel=1e-9)
    assert list(model.info["transfer"]["transform_scales"].values()) == pytest.approx([3.0] * 9, rel=1e-9)

# -- factor ----------------------------------------------------------------------------------------------------------

def test_factor_recovers_a_pure_per_primitive_scale_exactly(source_data: PrimitiveDataset,
                                                             lin_source: PerformanceModel) -> None:
    x = source_data.features
    scales = np.array([2.5, 0.5, 4.0])
    t_scales = np.linspace(1.5, 3.0, 9)
    target = table(x, lin_source.predict_primitives(x) * scales,
                   lin_source.predict_transforms(x[:, [0, 2]]) * t_scales)
    model = on(lin_source, target, 0.1, 0, "factor")
    np.testing.assert_allclose(model.predict_primitives(x), lin_source.predict_primitives(x) * scales, rtol=1e-9)
    np.testing.assert_allclose(model.predict_transforms(x[:, [0, 2]]),
                               lin_source.predict_transforms(x[:, [0, 2]]) * t_scales, rtol=1e-9)
    assert evaluate_performance_model(model, target).median_primitive_mdrae == pytest.approx(0.0, abs=1e-9)
    # the source is untouched
    assert not np.allclose(lin_source.predict_primitives(x[:5])[:, 0], model.predict_primitives(x[:5])[:, 0])


def test_factor_gives_a_primitive_without_samples_the_median_scale(lin_source: PerformanceModel) -> None:
    x = np.array([[16, 32, 28, 1, 1], [32, 32, 14, 3, 2], [64, 16, 56, 5, 1]], dtype=float)
    y = lin_source.predict_primitives(x) * np.array([2.0, 4.0, 1.0])  # wino: NaN on these layers (f, s)
    scales, counts = factor_scales(lin_source.primitives, x, y)
    assert counts.tolist() == [3, 3, 0]
    np.testing.assert_allclose(scales, [2.0, 4.0, 3.0])


class _Ones:
    """An estimator predicting 1 ns for every cell (the ratios are then the target times themselves)."""

    def __init__(self, outputs: int) -> None:
        self.outputs = outputs

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.ones((len(x), self.outputs))


def test_pooled_scales_pull_a_one_cell_primitive_to_the_common_scale() -> None:
    rng = np.random.default_rng(0)
    n, true = 40, np.log(3.0) + np.array([0.2, -0.2, 0.1, -0.1, 0.0, 0.15, -0.15, 0.0, 0.0])
    y = np.exp(true + rng.normal(0.0, 0.25, (n, len(true))))
    y[1:, 7] = np.nan  # one cell, far off its primitive's true scale
    y[0, 7] = 3.0 * np.exp(1.0)
    y[:, 8] = np.nan  # no cell at all
    est, x = _Ones(len(true)), np.zeros((n, 5))
    plain, counts = factor_scales(est, x, y)
    pooled, pooled_counts = pooled_scales(est, x, y)
    np.testing.assert_array_equal(counts, pooled_counts)
    assert counts[7] == 1 and counts[8] == 0
    common = float(np.exp(np.median(np.log(plain[:8]))))
    # the one-cell primitive moves most of the way back to the common scale ...
    assert common < pooled[7] < plain[7]
    assert abs(np.log(pooled[7] / common)) < 0.5 * abs(np.log(plain[7] / common))
    # ... while 40 cells keep most of their own scale, and the cell-less output gets the common scale
    assert np.all(np.abs(np.log(pooled[:7] / plain[:7])) < 0.5 * np.abs(np.log(plain[:7] / common)) + 1e-3)
    assert pooled[8] == pytest.approx(common)


def test_pooled_scales_keep_the_plain_ones_when_nothing_can_be_pooled() -> None:
    est, x = _Ones(2), np.zeros((2, 5))
    for y in (np.array([[2.0, np.nan], [2.2, np.nan]]),  # one primitive with cells
              np.array([[2.0, 5.0], [2.0, 5.0]])):  # no spread within the primitives (exact scales)
        pooled = pooled_scales(est, x, y)[0]
        assert np.all(np.isfinite(pooled))
        np.testing.assert_allclose(pooled, factor_scales(est, x, y)[0])


# -- fine-tuning -----------------------------------------------------------------------------------------------------

def test_finetune_beats_direct_on_a_shifted_target(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    direct = on(nn2_source, target, 0.3, 0, "direct")
    tuned = on(nn2_source, target, 0.3, 0, "finetune")
    direct_err = evaluate_performance_model(direct, target).median_primitive_mdrae
    tuned_err = evaluate_performance_model(tuned, target).median_primitive_mdrae
    assert direct_err > 0.6 and tuned_err < 0.25 * direct_err
    # the source's standardization is kept; the weights moved; the source did not
    src, new = nn2_source.primitives, tuned.primitives
    np.testing.assert_array_equal(src.x_mean_, new.x_mean_)
    np.testing.assert_array_equal(src.y_std_, new.y_std_)
    assert isinstance(src, NN2Model) and isinstance(new, NN2Model) and len(new.nets_) == 2
    for before, after in zip(src.nets_, new.nets_, strict=True):  # every ensemble member was fine-tuned
        assert not np.allclose(before.to_arrays()["w0"], after.to_arrays()["w0"])
    assert tuned.info["transfer"]["lr_factor"] == 0.1
    again = on(nn2_source, target, 0.3, 0, "direct")
    np.testing.assert_array_equal(direct.predict_primitives(target.features), again.predict_primitives(target.features))


def test_stopping_plan_cross_fits_an_ensemble_from_enough_rows() -> None:
    sample = hold_out(np.arange(100, 137), seed=3)  # 37 rows, as 1 % of the mulder2021 training part
    plan = stopping_plan(sample, members=4, seed=3)
    assert len(plan) == 4
    folds = [stop for _, stop in plan]
    assert sorted(np.concatenate(folds).tolist()) == list(range(100, 137))  # the folds partition the drawn rows
    assert [len(f) for f in folds] == [10, 9, 9, 9]
    for fit, stop in plan:  # each member trains on every row it does not stop on
        assert not set(fit) & set(stop) and set(fit) | set(stop) == set(sample.rows)
    again = stopping_plan(sample, members=4, seed=3)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(plan, again, strict=True))
    assert not np.array_equal(stopping_plan(sample, members=4, seed=4)[0][1], plan[0][1])
    # One member, or too few rows per member: every member trains on the fit rows and stops on the hold-out.
    for members, rows in ((1, 37), (4, 4 * CROSS_FIT_MIN_ROWS - 1)):
        small = hold_out(np.arange(rows), seed=0)
        shared = stopping_plan(small, members=members, seed=0)
        assert len(shared) == members
        assert all(np.array_equal(f, small.fit_rows) and np.array_equal(st, small.stop_rows) for f, st in shared)
    single = hold_out([7], seed=0)  # nothing to hold out: it stops on its training loss
    assert [(f.tolist(), st.tolist()) for f, st in stopping_plan(single, members=2, seed=0)] == [([7], [7])] * 2


def test_common_epoch_sums_the_folds_over_the_epochs_they_share() -> None:
    assert common_epoch([[3.0, 2.0, 1.0, 2.0], [3.0, 1.0, 2.0, 2.0, 0.0]]) == 2  # sums 6, 3, 3, 4: the first lowest
    assert common_epoch([[5.0, 4.0, 3.0]]) == 3
    assert common_epoch([[1.0, 0.5], [1.0, 0.9, 0.1, 0.1]]) == 2  # the fourth epoch is beyond the shorter curve
    for bad in ([], [[1.0], []]):
        with pytest.raises(ValueError, match="at least one"):
            common_epoch(bad)


@pytest.mark.slow
def test_refit_trains_every_member_on_all_drawn_rows(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    refit = on(nn2_source, target, 0.1, 1, "finetune", refit=True)
    folds_only = on(nn2_source, target, 0.1, 1, "finetune")
    epochs = refit.info["transfer"]["refit_epochs"]
    assert isinstance(epochs, int) and 1 <= epochs <= min(refit.primitives.n_epochs_)
    assert folds_only.info["transfer"]["refit_epochs"] is None
    assert refit.info["transfer"]["cross_fit_folds"] == folds_only.info["transfer"]["cross_fit_folds"]
    x = target.features
    assert not np.allclose(refit.predict_primitives(x), folds_only.predict_primitives(x), equal_nan=True)
    assert evaluate_performance_model(refit, target).median_primitive_mdrae < 0.3
    again = on(nn2_source, target, 0.1, 1, "finetune", refit=True)
    np.testing.assert_array_equal(refit.predict_primitives(x), again.predict_primitives(x))


def test_finetune_is_cross_fitted(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    crossed = on(nn2_source, target, 0.1, 1, "finetune")
    n = crossed.info["transfer"]["drawn_rows"]
    assert n >= 2 * CROSS_FIT_MIN_ROWS  # two members
    folds = crossed.info["transfer"]["cross_fit_folds"]
    assert len(folds) == 2 and sum(folds) == n and crossed.info["transfer"]["stop_rows"] == 0
    assert crossed.info["train_rows"] == n
    assert evaluate_performance_model(crossed, target).median_primitive_mdrae < 0.3


def test_transfer_is_deterministic_per_seed(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    a = on(nn2_source, target, 0.05, 4, "finetune")
    b = on(nn2_source, target, 0.05, 4, "finetune")
    c = on(nn2_source, target, 0.05, 5, "finetune")
    x = target.features
    np.testing.assert_array_equal(a.predict_primitives(x), b.predict_primitives(x))
    assert not np.allclose(a.predict_primitives(x), c.predict_primitives(x), equal_nan=True)


@pytest.mark.parametrize("method", ["finetune", "factor"])
def test_a_single_sample_is_enough(nn2_source: PerformanceModel, method: str) -> None:
    target = shifted_target()
    sample = draw_samples(target, 1e-6, seed=0)
    assert len(sample.fit_rows) == 1 and len(sample.stop_rows) == 0
    model = on(nn2_source, target, 1e-6, 0, method)
    assert model.info["transfer"]["drawn_rows"] == 1 and model.info["transfer"]["stop_rows"] == 0
    row = target.features[sample.fit_rows]
    assert np.isfinite(model.predict_primitives(row)[~np.isnan(target.primitive_ns[sample.fit_rows])]).all()


def test_factor_then_finetune_starts_from_the_scaled_source(nn2_source: PerformanceModel) -> None:
    """factor-finetune records its pooled factor's scales and, like fine-tuning, beats the source as is."""
    target = shifted_target()
    both = on(nn2_source, target, 0.3, 0, "factor-finetune")
    factor = on(nn2_source, target, 0.3, 0, "factor")
    sample = draw_samples(target, 0.3, 0)
    seen = sample.primitive_times(target)[sample.rows]
    pooled, _ = pooled_scales(nn2_source.primitives, target.features[sample.rows], seen)
    plain, _ = factor_scales(nn2_source.primitives, target.features[sample.rows], seen)
    np.testing.assert_allclose(list(both.info["transfer"]["primitive_scales"].values()), pooled)
    np.testing.assert_allclose(list(factor.info["transfer"]["primitive_scales"].values()), plain)
    assert both.info["transfer"]["lr_factor"] == 0.1 and factor.info["transfer"]["lr_factor"] is None
    assert both.info["transfer"]["transform_scales"] == factor.info["transfer"]["transform_scales"]
    direct = on(nn2_source, target, 0.3, 0, "direct")
    err = {m: evaluate_performance_model(m_, target).median_primitive_mdrae
           for m, m_ in (("both", both), ("direct", direct))}
    assert err["both"] < err["direct"]
    assert not np.allclose(both.predict_primitives(target.features[:5]), factor.predict_primitives(
        target.features[:5]), equal_nan=True)


# -- columns, saving, errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["finetune", "factor"])
def test_a_target_with_a_subset_of_the_columns_works(nn2_source: PerformanceModel, method: str) -> None:
    full = shifted_target()
    # the target lacks p1 and has a primitive the source never saw
    extra = full.primitive_ns[:, [0]] * 0.7
    target = PrimitiveDataset(full.features, ("wino", "p0", "new"),
                              np.column_stack([full.primitive_ns[:, [2, 0]], extra]), full.transforms,
                              full.transform_ns, "subset.csv")
    model = on(nn2_source, target, 0.2, 0, method)
    assert model.primitive_names == nn2_source.primitive_names
    assert model.info["transfer"]["ignored_columns"] == ["new"]
    pred = model.predict_primitives(target.features)
    assert np.isfinite(pred[:, 1]).all()  # p1 is still predicted, from the source
    result = evaluate_performance_model(model, target)
    assert set(result.primitive_mdrae) == {"p0", "wino"} and result.only_in_data == ("new",)
    if method == "finetune":  # p1 moves with the shared layers only: weight decay does not pull its outputs to 0
        src, tuned = nn2_source.primitives, model.primitives
        assert isinstance(src, NN2Model) and isinstance(tuned, NN2Model) and src.weight_decay > 0
        for cols, before, after in zip(src.groups_, src.nets_, tuned.nets_, strict=True):
            p1, p0 = cols.index(1), cols.index(0)
            w0, w1 = before.weights[-1].detach().numpy(), after.weights[-1].detach().numpy()
            np.testing.assert_array_equal(w1[..., p1], w0[..., p1])
            assert not np.array_equal(w1[..., p0], w0[..., p0])


@pytest.mark.parametrize("method", ["finetune", "factor", "direct"])
def test_a_transferred_model_saves_and_loads(tmp_path: Path, nn2_source: PerformanceModel, method: str) -> None:
    target = shifted_target()
    model = on(nn2_source, target, 0.1, 1, method)
    loaded = load_performance_model(save_performance_model(model, tmp_path / method))
    x = target.features
    np.testing.assert_allclose(loaded.predict_primitives(x), model.predict_primitives(x), rtol=1e-6)
    np.testing.assert_allclose(loaded.predict_transforms(x[:, [0, 2]]), model.predict_transforms(x[:, [0, 2]]),
                               rtol=1e-6)
    assert loaded.info["transfer"]["method"] == method and loaded.info["split_seed"] == 0
    assert not list(tmp_path.rglob("*.pkl"))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"fraction": 0.0}, "outside (0, 1]"),
    ({"fraction": 1.5}, "outside (0, 1]"),
    ({"seed": -1}, "non-negative integer"),
])
def test_bad_arguments_are_refused(nn2_source: PerformanceModel, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"fraction": 0.1, "seed": 0, **kwargs}
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace("]", r"\]")):
        transfer(nn2_source, shifted_target(), **args)  # type: ignore[arg-type]


def test_refusals_of_the_source_the_method_and_the_options(lin_source: PerformanceModel) -> None:
    target = shifted_target()
    other = PrimitiveDataset(target.features, ("q0", "q1", "q2"), target.primitive_ns, target.transforms,
                             target.transform_ns, "other.csv")
    with pytest.raises(InvalidInputError, match="no primitive column in common"):
        on(lin_source, other, 0.1, 0, "factor")
    with pytest.raises(InvalidInputError, match="transfer an nn2 or nn1 model"):
        transfer(lin_source, target, fraction=0.1, seed=0)
    with pytest.raises(InvalidInputError, match="use method factor"):
        on(lin_source, target, 0.1, 0, "finetune")
    with pytest.raises(InvalidInputError, match="unknown transfer method 'scratch'"):
        on(lin_source, target, 0.1, 0, "scratch")
    with pytest.raises(InvalidInputError, match="has none"):
        on(lin_source, target, 0.1, 0, "factor", blend=True)


# -- CLI -------------------------------------------------------------------------------------------------------------

def write_table(path: Path, data: PrimitiveDataset) -> Path:
    header = ["c", "k", "im", "f", "s", *data.transforms, *data.primitives]
    lines = [",".join(header)]
    for x, t, p in zip(data.features, data.transform_ns, data.primitive_ns, strict=True):
        cells = [f"{int(v)}" for v in x] + ["" if np.isnan(v) else f"{v:.9g}" for v in (*t, *p)]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_cli_transfer(tmp_path: Path, nn2_source: PerformanceModel) -> None:
    src = save_performance_model(nn2_source, tmp_path / "src")
    csv = write_table(tmp_path / "target.csv", shifted_target())
    out = tmp_path / "moved"
    args = ["--model", str(src), "--data", str(csv), "--fraction", "0.2", "--seed", "2", "--out", str(out)]
    result = CliRunner().invoke(transfer_cmd, [*args, "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    data = json.loads(result.output)
    first, second = data["adaptive_rounds"]
    assert data["method"] == "factor-finetune" and first + second == data["drawn_cells"] > 0
    assert data["test"]["median_primitive_mdrae"] is not None and data["blend"] is not None
    assert isinstance(data["refit_epochs"], int) and sum(data["cross_fit_folds"]) == data["drawn_rows"]
    assert load_performance_model(out).info["transfer"]["seed"] == 2
    result = CliRunner().invoke(transfer_cmd, args, obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    assert f"({first} spread over the primitives, {second} on close contenders)" in result.output
    assert "cross-fitted: 2 folds of" in result.output and "then every ensemble member trained on all" in result.output
    assert "blended with a shared correction" in result.output
    assert "target test MdRAE (median over 3 primitives" in result.output


def test_transfer_with_a_fraction_saves_a_device(tmp_path: Path, nn2_source: PerformanceModel) -> None:
    """The library call behind ``primitives transfer --fraction F --name NAME``: scored, saved as a device with its
    calibration recorded, its ``to_dict`` what ``--json`` prints."""
    from edgeplan.costmodels.primitive_devices import device_calibration, primitive_model_folder
    from edgeplan.decisions.transfer import ScoredTransfer, TransferOptions, TransferTarget, transfer_primitives

    src = save_performance_model(nn2_source, tmp_path / "src")
    csv = write_table(tmp_path / "target.csv", shifted_target())
    home = tmp_path / "home"
    moved = transfer_primitives(csv, TransferTarget(name="far"), TransferOptions(fraction=0.1, seed=1), source=src,
                                home=home)
    assert isinstance(moved, ScoredTransfer) and moved.path == primitive_model_folder(home, "far")
    data = moved.to_dict()
    assert set(data) == {"model", "source", "data", "method", "fraction", "seed", "split_seed", "drawn_rows",
                         "drawn_cells", "adaptive_rounds", "stop_rows", "cross_fit_folds", "refit_epochs", "blend",
                         "target_train_rows", "ignored_columns", "seconds", "test"}
    assert data["fraction"] == 0.1 and data["seed"] == 1 and data["test"]["median_primitive_mdrae"] is not None
    calibration = device_calibration(moved.path)
    assert calibration is not None and calibration.device == "far" and calibration.data == str(csv)


@pytest.mark.parametrize(("fraction", "names", "message"), [
    ("0", NAMES, "--fraction 0 is outside (0, 1]"),
    ("1.01", NAMES, "outside (0, 1]"),
    ("0.1", ("q0", "q1", "q2"), "no primitive column in common"),
    ("0.1", NAMES, "transfer an nn2 or nn1 model"),
])
def test_cli_transfer_bad_input(tmp_path: Path, lin_source: PerformanceModel, fraction: str,
                                names: tuple[str, ...], message: str) -> None:
    src = save_performance_model(lin_source, tmp_path / "src")
    t = shifted_target()
    csv = write_table(tmp_path / "target.csv", PrimitiveDataset(t.features, names, t.primitive_ns, t.transforms,
                                                                t.transform_ns))
    result = CliRunner().invoke(transfer_cmd, ["--model", str(src), "--data", str(csv), "--fraction", fraction,
                                               "--seed", "0", "--out", str(tmp_path / "o")], obj=Context())
    assert result.exit_code != 0 and isinstance(result.exception, InvalidInputError)
    assert message in str(result.exception) and not (tmp_path / "o").exists()


# -- calibration: primitives transfer without --fraction ----------------------------------------------------------

def test_hold_out_is_seeded_and_disjoint() -> None:
    a, b = hold_out(np.arange(10, 30), 4), hold_out(np.arange(10, 30), 4)
    assert np.array_equal(a.fit_rows, b.fit_rows) and np.array_equal(a.stop_rows, b.stop_rows)
    assert len(a.stop_rows) == round(STOP_FRACTION * 20) and set(a.rows) == set(range(10, 30))
    assert len(hold_out([5], 0).stop_rows) == 0
    with pytest.raises(InvalidInputError, match="no target rows"):
        hold_out([], 0)


def test_calibration_chooses_the_factor_for_a_pure_scale(source_data: PrimitiveDataset,
                                                         lin_source: PerformanceModel) -> None:
    """A machine exactly 2x slower on every primitive: the factor is exact, the source as is 50 % off."""
    x = source_data.features[:40]
    target = table(x, lin_source.predict_primitives(x) * 2.0, lin_source.predict_transforms(x[:, [0, 2]]) * 2.0)
    calls: list[tuple[int, int]] = []
    result = calibrate_primitives(lin_source, target, progress=lambda d, t: calls.append((d, t)))
    assert result.folds == CALIBRATION_FOLDS and result.rows == 40
    assert set(result.scores) == {"direct", "factor"} and result.method == "factor"
    assert result.scores["direct"] == pytest.approx(0.5, rel=1e-6)
    assert result.scores["factor"] == pytest.approx(0.0, abs=1e-9)
    assert result.transform_scores["factor"] == pytest.approx(0.0, abs=1e-9)
    assert calls[-1] == (2 * CALIBRATION_FOLDS + 1, 2 * CALIBRATION_FOLDS + 1)
    info = result.model.info["transfer"]
    assert info["calibration"]["chosen"] == "factor" and info["fraction"] is None
    assert info["primitive_scales"] == pytest.approx({n: 2.0 for n in NAMES})
    assert result.model.predict_primitives(x) == pytest.approx(target.primitive_ns, rel=1e-9, nan_ok=True)


@pytest.mark.slow
def test_calibration_of_a_neural_source_tries_finetuning(nn2_source: PerformanceModel) -> None:
    target = shifted_target().subset(np.arange(30))
    result = calibrate_primitives(nn2_source, target, seed=1, folds=3)
    assert set(result.scores) == {"direct", "factor", "finetune", "factor-finetune"} and result.folds == 3
    assert result.method == min(result.scores, key=result.scores.__getitem__)
    assert result.scores["finetune"] < result.scores["direct"]
    only = calibrate_primitives(nn2_source, target, method="finetune", folds=3)
    assert set(only.scores) == {"finetune"} and only.method == "finetune"


def test_calibration_from_a_single_layer(lin_source: PerformanceModel) -> None:
    target = shifted_target().subset(np.arange(1))
    result = calibrate_primitives(lin_source, target)
    assert result.folds == 0 and result.scores == {} and result.method == "factor"


def test_calibration_refusals(lin_source: PerformanceModel) -> None:
    target = shifted_target().subset(np.arange(10))
    with pytest.raises(InvalidInputError, match="unknown calibration method 'scratch'"):
        calibrate_primitives(lin_source, target, method="scratch")
    with pytest.raises(InvalidInputError, match="use factor or auto"):
        calibrate_primitives(lin_source, target, method="finetune")
    other = PrimitiveDataset(target.features, ("q0", "q1", "q2"), target.primitive_ns, target.transforms,
                             target.transform_ns, "other.csv")
    with pytest.raises(InvalidInputError, match="no primitive column in common"):
        calibrate_primitives(lin_source, other)


def test_calibration_needs_two_folds(lin_source: PerformanceModel) -> None:
    target = shifted_target().subset(np.arange(10))
    for folds in (1, 0, -1):
        with pytest.raises(InvalidInputError, match="at least 2 folds"):
            calibrate_primitives(lin_source, target, folds=folds)


def test_cli_calibrate_from_a_table(tmp_path: Path, lin_source: PerformanceModel) -> None:
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    csv = write_table(tmp_path / "mine.csv", shifted_target().subset(np.arange(25)))
    home = tmp_path / "home"
    base = ["--home", str(home), "primitives", "transfer", "--data", str(csv), "--model", str(src)]
    assert main([*base, "--name", "box", "--json"]) == 0
    folder = home / "devices" / "box" / "primitives"
    model = load_performance_model(folder)
    calib = model.info["transfer"]["calibration"]
    assert calib["chosen"] in ("direct", "factor") and calib["folds"] == CALIBRATION_FOLDS
    assert model.info["calibration"]["device"] == "box" and model.info["calibration"]["data"] == str(csv)
    stamp = (folder / "model.json").stat().st_mtime_ns
    # an existing device is not replaced without --replace; a bad table stores nothing
    assert main([*base, "--name", "box"]) != 0
    bad = tmp_path / "bad.csv"
    bad.write_text("c,k,im,f,s,p0\n64,64,56,3,1,-5\n")
    assert main(["--home", str(home), "primitives", "transfer", "--data", str(bad), "--model", str(src),
                 "--name", "box", "--replace"]) != 0
    assert (folder / "model.json").stat().st_mtime_ns == stamp
    assert main(["--home", str(home), "primitives", "transfer", "--data", str(csv), "--model",
                 str(tmp_path / "nowhere"), "--name", "other"]) != 0
    assert not (home / "devices" / "other").exists()
    # the calibrated device is a source for another calibration; --out writes a model folder instead
    assert main([*base[:-1], "box", "--name", "box2"]) == 0
    assert load_performance_model(home / "devices" / "box2" / "primitives").info["calibration"]["source"] == str(folder)
    assert main([*base, "--out", str(tmp_path / "folder")]) == 0
    assert load_performance_model(tmp_path / "folder").info["transfer"]["calibration"]["folds"] == CALIBRATION_FOLDS


def test_cli_transfer_option_mixups(tmp_path: Path, lin_source: PerformanceModel,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    csv = write_table(tmp_path / "t.csv", shifted_target().subset(np.arange(12)))
    home = ["--home", str(tmp_path / "home")]
    base = [*home, "primitives", "transfer", "--data", str(csv), "--model", str(src)]
    assert main(base) != 0
    assert "give one of --out DIR" in capsys.readouterr().err
    assert main([*base, "--name", "x", "--out", str(tmp_path / "o")]) != 0
    assert "give one of --out DIR" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "o"), "--replace"]) != 0
    assert "it goes with --name" in capsys.readouterr().err
    assert main([*base, "--name", "a/b"]) != 0
    assert "use a short plain name" in capsys.readouterr().err
    assert main([*base, "--name", "x"]) == 0
    capsys.readouterr()
    assert main([*home, "primitives", "transfer", "--data", str(csv), "--model", "x", "--name", "x",
                 "--replace"]) != 0
    assert "is the device being replaced" in capsys.readouterr().err
    assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "nobody"]) != 0
    assert "has no primitive performance model" in capsys.readouterr().err
    assert main([*home, "select", "torchvision:resnet18", "--device", "nobody"]) != 0
    assert "with --costs predicted" in capsys.readouterr().err
    assert main([*home, "calibrate", "--name", "x"]) != 0
    assert "primitives transfer --name" in capsys.readouterr().err


def test_cli_calibrate_json_is_strict_without_transformations(tmp_path: Path, lin_source: PerformanceModel,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A table without transformation columns: the scores it cannot give are null, never NaN."""
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    t = shifted_target().subset(np.arange(20))
    bare = PrimitiveDataset(t.features, t.primitives, t.primitive_ns, (), np.zeros((len(t), 0)), "bare.csv")
    csv = write_table(tmp_path / "bare.csv", bare)
    home = ["--home", str(tmp_path / "home")]
    assert main([*home, "primitives", "transfer", "--data", str(csv), "--model", str(src), "--name", "b",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c}"))
    assert out["cv_transform_mdrae"] == {"direct": None, "factor": None} and out["threads"] is None
    saved = (tmp_path / "home" / "devices" / "b" / "primitives" / "model.json").read_text()
    json.loads(saved, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c} in model.json"))


def test_cli_calibrate_a_machine_then_select_and_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model of our own primitives calibrated from a table; select and evaluate use the device."""
    from edgeplan.cli.main import main
    from edgeplan.costmodels import load_primitive_csv
    table = load_primitive_csv(data_file("primitives", "networks_cpu_2t.csv"))
    src = save_performance_model(fit_performance_model(table, "lin"), tmp_path / "lin")
    first = write_table(tmp_path / "first.csv", table.subset(np.arange(0, 12)))
    second = write_table(tmp_path / "second.csv", table.subset(np.arange(12, 30)))
    home = ["--home", str(tmp_path / "home")]
    calib = [*home, "primitives", "transfer", "--model", str(src), "--name", "box"]
    assert main([*calib, "--data", str(first)]) == 0
    folder = tmp_path / "home" / "devices" / "box" / "primitives"
    assert load_performance_model(folder).info["calibration"]["data"] == str(first)
    capsys.readouterr()
    # --replace puts a new model in place, whole, and leaves no staging folder behind
    assert main([*calib, "--data", str(second), "--replace", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"] == 18
    assert load_performance_model(folder).info["calibration"]["data"] == str(second)
    assert sorted(p.name for p in folder.parent.iterdir()) == ["primitives"]
    assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "box", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["predicted_ms"] > 0 and all(layer["primitive"] for layer in plan["layers"] if layer["kind"] == "conv")
    assert main(["primitives", "evaluate", "--model", str(folder), "--data", str(first), "--split", "all",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 12
    # a device calibrated at another thread count than the selection's says so
    meta = json.loads((folder / "model.json").read_text())
    meta["info"]["calibration"]["threads"] = 2
    (folder / "model.json").write_text(json.dumps(meta))
    assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "box", "--json"]) == 0
    assert "was calibrated at 2 thread(s)" in capsys.readouterr().err
    # one calibrated on a GPU selects for a GPU, and not for the CPU
    meta["info"]["calibration"].update(threads=1, torch_device="cuda")
    (folder / "model.json").write_text(json.dumps(meta))
    assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "box",
                 "--torch-device", "cpu"]) != 0
    assert "was calibrated on cuda, and --torch-device cpu is another kind" in capsys.readouterr().err


def test_cli_calibrate_records_where_a_table_was_measured(tmp_path: Path, lin_source: PerformanceModel,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The provenance file `profile primitives --export` writes beside a table says where it was measured."""
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    home = ["--home", str(tmp_path / "home")]
    for name, params in (("gpu", {"device": "cuda", "threads": 1}), ("somewhere", None)):
        csv = write_table(tmp_path / f"{name}.csv", shifted_target().subset(np.arange(12)))
        if params is not None:
            (tmp_path / f"{name}.provenance.json").write_text(json.dumps({"campaign": {"params": params}}))
        assert main([*home, "primitives", "transfer", "--data", str(csv), "--model", str(src), "--name", name,
                     "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["torch_device"] == (params or {}).get("device") and out["threads"] == (params or {}).get("threads")
        meta = json.loads((tmp_path / "home" / "devices" / name / "primitives" / "model.json").read_text())
        assert meta["info"]["calibration"]["torch_device"] == (params or {}).get("device")


@pytest.mark.skipif("not __import__('torch').cuda.is_available()")
def test_cli_calibrate_on_cuda_then_select_and_run_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a GPU: a few layers measured there, the shipped model moved to them, a network selected and run there."""
    from edgeplan.cli.main import main

    home = ["--home", str(tmp_path / "home")]
    table = tmp_path / "gpu.csv"
    assert main([*home, "profile", "primitives", "--torch-device", "cuda", "--max-configs", "6", "--export",
                 str(table), "--json"]) == 0
    capsys.readouterr()
    assert main([*home, "primitives", "transfer", "--data", str(table), "--name", "gpu", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["complete"] and out["torch_device"] == "cuda" and out["layers"] == 6
    assert main([*home, "select", "torchvision:squeezenet1_0", "--costs", "predicted", "--device", "gpu",
                 "--torch-device", "cuda", "--run", "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    plan = json.loads(captured.out)
    assert not any(layer["primitive"].startswith("torch-onednn") for layer in plan["layers"] if layer["primitive"])
    assert plan["run"]["device"] == "cuda" and plan["run"]["outputs_match"]


def test_cli_calibrate_from_one_layer(tmp_path: Path, lin_source: PerformanceModel,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    csv = write_table(tmp_path / "one.csv", shifted_target().subset(np.arange(1)))
    assert main(["--home", str(tmp_path / "home"), "primitives", "transfer", "--data", str(csv), "--model",
                 str(src), "--name", "one"]) == 0
    out = capsys.readouterr().out
    assert "1 layers" in out and "moved by factor" in out
    assert "one layer: nothing to cross-validate, so the factor correction is kept" in out


def test_the_shipped_cpu_model_transfers_to_the_gpu_table() -> None:
    """The GPU table (an H200's, measured with --device cuda) lacks oneDNN's CPU-only columns; the CPU NN2 moves
    to it."""
    from edgeplan.costmodels import load_primitive_csv
    from edgeplan.decisions.select import SHIPPED, SHIPPED_MODEL

    target = load_primitive_csv(data_file("primitives", "reference_cuda.csv"))
    provenance = json.loads(data_file("primitives", "reference_cuda.provenance.json").read_text())
    assert len(target) == provenance["rows"] and provenance["device"] == "cuda"
    assert "NVIDIA H200" in provenance["machine"]
    assert "torch-native-chw" in target.primitives and not any("onednn" in p for p in target.primitives)
    source = load_performance_model(SHIPPED / SHIPPED_MODEL)
    direct = evaluate_performance_model(on(source, target, 0.01, 0, "direct"), target, "test", 0)
    factor = evaluate_performance_model(on(source, target, 0.01, 0, "factor"), target, "test", 0)
    assert set(factor.primitive_mdrae) == set(target.primitives)
    # the GPU runs these primitives 2-100x faster than the CPU: as is, the CPU model is off by several times
    assert direct.median_primitive_mdrae > 3 * factor.median_primitive_mdrae


def test_the_gpu_tables_hold_the_first_configurations_of_the_campaign_order() -> None:
    """The GPU's tables: the first configurations of the seeded plan, their re-measurement and the six networks'
    layers, with provenance."""
    from edgeplan.costmodels import load_primitive_csv
    from edgeplan.measure.primitive_campaign import primitive_campaign
    from edgeplan.measure.primitive_export import noise_floor

    table = load_primitive_csv(data_file("primitives", "reference_cuda.csv"))
    provenance = json.loads(data_file("primitives", "reference_cuda.provenance.json").read_text())
    assert provenance["csv"] == "reference_cuda.csv" and provenance["rows"] == len(table)

    def keys(data: PrimitiveDataset) -> set[tuple[int, ...]]:
        return {tuple(int(v) for v in row[:5]) for row in data.features}

    plan = primitive_campaign("order", device="cuda")
    assert keys(table) == {(s.c, s.k, s.im, s.f, s.s) for s in plan.configs[:len(table)]}
    floor = noise_floor(table, load_primitive_csv(data_file("primitives", "reference_cuda_remeasure100.csv")))
    assert floor.shared_configs == 100 and floor.median_primitive_mdrae > 0
    nets = load_primitive_csv(data_file("primitives", "networks_cuda.csv"))
    assert len(nets) == 73 and nets.primitives == table.primitives
    measured = np.isfinite(nets.primitive_ns)
    assert measured.any(axis=1).all() and (nets.primitive_ns[measured] > 0).all()
