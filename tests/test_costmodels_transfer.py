"""Transfer of a performance model to another platform (mulder2020 §4.4): samples, factor, fine-tuning, scratch, CLI."""

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
from edgeplan.costmodels.transfer_learning import (
    ADAPTIVE_FIRST,
    CALIBRATION_FOLDS,
    CONTENDERS,
    CROSS_FIT_MIN_ROWS,
    STOP_FRACTION,
    bag_seed,
    calibrate_primitives,
    common_epoch,
    contender_cells,
    even_shares,
    factor_scales,
    hold_out,
    pooled_scales,
    stopping_plan,
    transfer_on,
)
from edgeplan.errors import InvalidInputError
from edgeplan.measure.sampling import design_rows

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


# -- samples ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fraction", [0.001, 0.01, 0.1, 0.5, 1.0])
def test_samples_come_only_from_the_training_part(source_data: PrimitiveDataset, fraction: float) -> None:
    split = split_indices(source_data.features, 3)
    sample = draw_samples(source_data, fraction, seed=7, split_seed=3)
    assert len(sample) == max(1, round(fraction * len(split.train)))
    assert set(sample.rows) <= set(split.train)
    assert not set(sample.fit_rows) & set(sample.stop_rows)
    n = len(sample)
    assert len(sample.stop_rows) == (max(1, round(STOP_FRACTION * n)) if n >= 2 else 0)


def test_samples_are_seeded_and_nested_across_fractions(source_data: PrimitiveDataset) -> None:
    a, b = draw_samples(source_data, 0.1, seed=1), draw_samples(source_data, 0.1, seed=1)
    assert np.array_equal(a.fit_rows, b.fit_rows) and np.array_equal(a.stop_rows, b.stop_rows)
    assert not np.array_equal(a.rows, draw_samples(source_data, 0.1, seed=2).rows)
    assert set(draw_samples(source_data, 0.05, seed=1).rows) <= set(a.rows)


def grid(sizes: int = 30) -> np.ndarray:
    """A mulder2021-like grid: ``sizes`` layer sizes, each under the same four filter shapes."""
    rng = np.random.default_rng(5)
    base = np.unique(np.column_stack([rng.choice([3, 16, 32, 64, 128, 256, 512], 3 * sizes),
                                      rng.choice([16, 32, 64, 128, 256], 3 * sizes),
                                      rng.choice([7, 14, 28, 56, 112, 224], 3 * sizes)]), axis=0)[:sizes]
    shapes = [(1, 1), (3, 1), (3, 2), (5, 1)]
    return np.array([[*b, f, st] for b in base for f, st in shapes], dtype=float)


def test_design_rows_spreads_over_sizes_and_balances_shapes() -> None:
    x = grid()
    candidates = np.arange(len(x))
    rows = design_rows(x, candidates, 10, seed=0)
    assert len(rows) == 10 and np.array_equal(rows, np.unique(rows)) and set(rows) <= set(candidates)
    assert len(np.unique(x[rows][:, :3], axis=0)) == 10  # ten different sizes
    counts = np.unique(x[rows][:, 3:], axis=0, return_counts=True)[1]
    assert len(counts) == 4 and counts.max() - counts.min() <= 1  # every shape, balanced
    assert np.array_equal(rows, design_rows(x, candidates, 10, seed=0))
    assert not np.array_equal(rows, design_rows(x, candidates, 10, seed=1))
    # the chosen sizes cover the range: the spread of log c is near the whole grid's
    assert np.log(x[rows, 0]).std() > 0.6 * np.log(x[:, 0]).std()


def test_design_rows_beyond_the_number_of_sizes() -> None:
    x = grid(10)  # 10 sizes x 4 shapes
    rows = design_rows(x, np.arange(len(x)), 25, seed=3)
    assert len(rows) == 25 == len(np.unique(rows))
    assert len(np.unique(x[rows][:, :3], axis=0)) == 10  # every size, then again with other shapes
    counts = np.unique(x[rows][:, 3:], axis=0, return_counts=True)[1]
    assert counts.max() - counts.min() <= 1
    assert len(design_rows(x, np.arange(len(x)), len(x), seed=0)) == len(x)


def test_design_rows_weighs_the_shapes_by_their_cells() -> None:
    x = grid()
    cells = np.where((x[:, 3] == 3) & (x[:, 4] == 1), 40.0, 10.0)  # (3, 1) gives four times the cells
    rows = design_rows(x, np.arange(len(x)), 14, seed=0, cells=cells)
    shapes = [tuple(r) for r in x[rows][:, 3:]]
    assert shapes.count((3.0, 1.0)) == 8 and all(shapes.count(s) == 2 for s in [(1.0, 1.0), (3.0, 2.0), (5.0, 1.0)])


def test_kmeans_samples_follow_the_targets_defined_cells(source_data: PrimitiveDataset) -> None:
    sample = draw_samples(source_data, 0.2, seed=0, design="kmeans")
    f, s = source_data.features[sample.rows][:, 3:].T
    wino = ((f == 3) & (s == 1)).mean()  # the third primitive applies there only: 3 cells against 2
    uniform = draw_samples(source_data, 0.2, seed=0).rows
    fu, su = source_data.features[uniform][:, 3:].T
    assert wino > ((fu == 3) & (su == 1)).mean()


@pytest.mark.parametrize("n", [0, 41])
def test_design_rows_refuses_impossible_counts(n: int) -> None:
    with pytest.raises(InvalidInputError, match="cannot choose"):
        design_rows(grid(10), np.arange(40), n, seed=0)


def test_kmeans_samples_come_from_the_training_part(source_data: PrimitiveDataset) -> None:
    split = split_indices(source_data.features, 0)
    sample = draw_samples(source_data, 0.1, seed=4, design="kmeans")
    assert len(sample) == round(0.1 * len(split.train)) and set(sample.rows) <= set(split.train)
    cells = (~np.isnan(source_data.primitive_ns)).sum(axis=1)
    assert np.array_equal(sample.rows, design_rows(source_data.features, split.train, len(sample), 4, cells=cells))
    with pytest.raises(InvalidInputError, match="unknown sample design"):
        draw_samples(source_data, 0.1, seed=4, design="latin")


def test_transfer_records_its_design(lin_source: PerformanceModel) -> None:
    target = shifted_target()
    model = transfer(lin_source, target, fraction=0.1, seed=0, method="factor", design="kmeans")
    assert model.info["transfer"]["design"] == "kmeans"
    assert transfer(lin_source, target, fraction=0.1, seed=0, method="factor").info["transfer"]["design"] == "uniform"


def test_cells_samples_draw_the_fraction_of_the_training_parts_timings(source_data: PrimitiveDataset) -> None:
    train = split_indices(source_data.features, 0).train
    defined = int((~np.isnan(source_data.primitive_ns[train])).sum())
    sample = draw_samples(source_data, 0.05, seed=2, design="cells")
    assert sample.cells is not None and sample.drawn_cells == len(sample.cells) == round(0.05 * defined)
    rows, cols = sample.cells.T
    assert set(rows) <= set(train) and not np.isnan(source_data.primitive_ns[rows, cols]).any()
    assert len({(r, c) for r, c in sample.cells}) == len(sample.cells)  # without replacement
    assert np.array_equal(sample.rows, np.unique(rows))  # the rows are those the timings fall in, and no other
    assert len(sample.rows) > round(0.05 * len(train))  # spread over far more layers than a row draw of as many
    # the transformations are those of the uniform row draw, and the draw is seeded
    assert np.array_equal(sample.transform_rows, draw_samples(source_data, 0.05, seed=2).rows)
    again = draw_samples(source_data, 0.05, seed=2, design="cells")
    assert again.cells is not None and np.array_equal(again.cells, sample.cells)
    seen = sample.primitive_times(source_data)
    assert int(np.isfinite(seen).sum()) == len(sample.cells)
    assert draw_samples(source_data, 0.05, seed=2).primitive_times(source_data) is source_data.primitive_ns


def test_even_shares_give_every_column_as_many_as_it_can_take() -> None:
    assert even_shares([10, 2, 10], 12, seed=0).tolist() == [5, 2, 5]  # the capped column's share goes to the others
    shares = even_shares([10, 10, 10], 5, seed=3)
    assert shares.sum() == 5 and set(shares.tolist()) == {1, 2}
    assert even_shares([1, 0, 2], 10, seed=0).tolist() == [1, 0, 2]  # no more than there is
    assert even_shares([4, 4], 0, seed=0).tolist() == [0, 0]


def test_cells_samples_give_every_primitive_as_many_timings(source_data: PrimitiveDataset) -> None:
    train = split_indices(source_data.features, 0).train
    per_column = (~np.isnan(source_data.primitive_ns[train])).sum(axis=0)
    balanced = draw_samples(source_data, 0.1, seed=0, design="cells")
    uniform = draw_samples(source_data, 0.1, seed=0, design="cells-uniform")
    assert balanced.cells is not None and uniform.cells is not None
    counts = np.bincount(balanced.cells[:, 1], minlength=3)
    assert counts.sum() == len(uniform.cells) == round(0.1 * per_column.sum())
    assert counts.max() - counts.min() <= 1  # the rare third primitive (f = 3, s = 1 only) as many as the others
    rare = np.bincount(uniform.cells[:, 1], minlength=3)[2]
    assert rare < counts[2]  # uniformly over the cells it gets its share of the cells, far fewer


def test_a_cells_transfer_learns_from_the_drawn_timings_only(lin_source: PerformanceModel) -> None:
    """Poison every undrawn cell of the drawn rows (and their transformations): the factor stays exact."""
    clean = shifted_target()
    x = clean.features
    scales = np.array([2.5, 0.5, 4.0])
    prims = lin_source.predict_primitives(x) * scales
    prims[np.isnan(clean.primitive_ns)] = np.nan
    trans = lin_source.predict_transforms(x[:, [0, 2]]) * 3.0
    sample = draw_samples(table(x, prims, trans), 0.3, seed=1, design="cells")
    assert sample.cells is not None and set(sample.cells[:, 1]) == {0, 1, 2}  # every primitive has drawn timings
    poisoned, poisoned_trans = prims * 1000.0, trans * 1000.0
    poisoned[sample.cells[:, 0], sample.cells[:, 1]] = prims[sample.cells[:, 0], sample.cells[:, 1]]
    poisoned_trans[sample.transform_rows] = trans[sample.transform_rows]
    model = transfer(lin_source, table(x, poisoned, poisoned_trans), fraction=0.3, seed=1, method="factor",
                     design="cells")
    assert model.info["transfer"]["primitive_scales"] == pytest.approx(dict(zip(NAMES, scales, strict=True)),
                                                                      rel=1e-9)
    assert list(model.info["transfer"]["transform_scales"].values()) == pytest.approx([3.0] * 9, rel=1e-9)
    info = model.info["transfer"]
    assert info["design"] == "cells" and info["drawn_cells"] == len(sample.cells)
    assert info["drawn_rows"] == len(sample.rows)
    assert transfer(lin_source, clean, fraction=0.3, seed=1, method="factor").info["transfer"]["drawn_cells"] is None


def test_contender_cells_time_the_predicted_fastest_primitives_of_layers(lin_source: PerformanceModel) -> None:
    target = shifted_target()
    train = split_indices(target.features, 0).train
    first = draw_samples(target, 0.05, seed=0, design="cells")
    assert first.cells is not None
    model = transfer_on(lin_source, target, first, seed=0, method="factor")
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
    first = draw_samples(target, 0.05, seed=1, design="cells")
    assert first.cells is not None
    model = transfer_on(lin_source, target, first, seed=1, method="factor")
    none_close = contender_cells(model, target, first, len(first.cells) + 50, seed=1, margin=0.0)
    assert none_close.cells is not None and np.array_equal(none_close.cells, first.cells)  # no exact ties here
    with pytest.raises(InvalidInputError, match="at least 2 contenders"):
        contender_cells(model, target, first, 10, seed=1, contenders=1)
    with pytest.raises(InvalidInputError, match="single timings"):
        contender_cells(model, target, draw_samples(target, 0.05, seed=1), 10, seed=1)


def test_a_cells_adaptive_transfer_draws_two_rounds_of_as_many_timings_as_cells(lin_source: PerformanceModel) -> None:
    x = layers(400)
    prims, trans = times(x, slow=3.0)
    prims[:, 0] = 1.05 * prims[:, 1]  # a close contender of the second primitive on every layer
    target = table(x, prims, trans)
    cells = draw_samples(target, 0.1, seed=2, design="cells")
    assert cells.cells is not None and CONTENDERS >= 2
    model = transfer(lin_source, target, fraction=0.1, seed=2, method="factor", design="cells-adaptive")
    info = model.info["transfer"]
    first = draw_samples(target, 0.1 * ADAPTIVE_FIRST, seed=2, design="cells")
    assert first.cells is not None and info["design"] == "cells-adaptive"
    assert info["adaptive_rounds"][0] == len(first.cells)
    assert sum(info["adaptive_rounds"]) == info["drawn_cells"] <= len(cells.cells)
    assert info["adaptive_rounds"][1] > 0 and sum(info["adaptive_rounds"]) == len(cells.cells)
    assert info["transform_scales"] == transfer(lin_source, target, fraction=0.1, seed=2, method="factor",
                                                design="cells").info["transfer"]["transform_scales"]  # same tensors
    assert transfer(lin_source, target, fraction=0.1, seed=2, method="factor",
                    design="cells").info["transfer"]["adaptive_rounds"] is None
    with pytest.raises(InvalidInputError, match="transfer"):
        draw_samples(target, 0.1, seed=2, design="cells-adaptive")


def test_contender_cells_keep_to_the_margin_and_the_model_s_columns(lin_source: PerformanceModel) -> None:
    x = layers(400)
    prims, trans = times(x, slow=3.0)
    prims[:, 0] = 1.3 * prims[:, 1]  # a contender of the second primitive within 50 %, not within 10 %
    extra = 0.5 * prims[:, [1]]  # the fastest on every layer, but a column the model does not predict
    target = table(x, np.hstack([prims, extra]), trans, names=(*NAMES, "extra"))
    first = draw_samples(target, 0.05, seed=4, design="cells")
    assert first.cells is not None
    model = transfer_on(lin_source, target, first, seed=4, method="factor")
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


def test_a_cells_adaptive_transfer_reports_both_rounds_time(lin_source: PerformanceModel,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools
    import types

    import edgeplan.costmodels.transfer_learning as tl

    clock = itertools.count()  # every reading of the clock one second later
    monkeypatch.setattr(tl, "time", types.SimpleNamespace(monotonic=lambda: float(next(clock))))
    model = transfer(lin_source, shifted_target(), fraction=0.1, seed=2, method="factor", design="cells-adaptive")
    assert model.info["fit_primitives_s"] == 1.0  # the last round alone
    assert model.info["transfer"]["seconds"] > 1.0  # the first round and the choice of the second counted too


def test_a_cells_sample_fine_tunes_and_trains_from_scratch(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    direct = evaluate_performance_model(transfer(nn2_source, target, fraction=0.1, seed=0, method="direct"),
                                        target).median_primitive_mdrae
    tuned = transfer(nn2_source, target, fraction=0.1, seed=0, method="finetune", design="cells")
    assert evaluate_performance_model(tuned, target).median_primitive_mdrae < 0.5 * direct
    scratch = transfer(nn2_source, target, fraction=0.3, seed=0, method="scratch", design="cells")
    sample = draw_samples(target, 0.3, 0, design="cells")
    # its standardization comes from the drawn timings of its training rows, not from their other cells
    expected = np.nanmean(np.log(sample.primitive_times(target)[sample.fit_rows]), axis=0)
    np.testing.assert_allclose(scratch.primitives.y_mean_, expected)


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
    model = transfer(lin_source, target, fraction=1.0, seed=0, method="factor")
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
    model = transfer(lin_source, target, fraction=0.1, seed=0, method="factor")
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

def shifted_target(base: PerformanceModel | None = None) -> PrimitiveDataset:
    """The source's layers on a platform 3x slower, more so on large inputs (not a pure per-primitive scale)."""
    x = layers(400)
    prims, trans = times(x, slow=3.0)
    prims = prims * (1.0 + x[:, [2]] / 56.0)
    return table(x, prims, trans)


def test_finetune_beats_direct_on_a_shifted_target(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    direct = transfer(nn2_source, target, fraction=0.3, seed=0, method="direct")
    tuned = transfer(nn2_source, target, fraction=0.3, seed=0, method="finetune")
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
    again = transfer(nn2_source, target, fraction=0.3, seed=0, method="direct")
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


def test_refit_trains_every_member_on_all_drawn_rows(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    refit = transfer(nn2_source, target, fraction=0.1, seed=1, method="finetune", refit=True)
    folds_only = transfer(nn2_source, target, fraction=0.1, seed=1, method="finetune")
    epochs = refit.info["transfer"]["refit_epochs"]
    assert isinstance(epochs, int) and 1 <= epochs <= min(refit.primitives.n_epochs_)
    assert folds_only.info["transfer"]["refit_epochs"] is None
    assert refit.info["transfer"]["cross_fit_folds"] == folds_only.info["transfer"]["cross_fit_folds"]
    x = target.features
    assert not np.allclose(refit.predict_primitives(x), folds_only.predict_primitives(x), equal_nan=True)
    assert evaluate_performance_model(refit, target).median_primitive_mdrae < 0.3
    again = transfer(nn2_source, target, fraction=0.1, seed=1, method="finetune", refit=True)
    np.testing.assert_array_equal(refit.predict_primitives(x), again.predict_primitives(x))
    shared = transfer(nn2_source, target, fraction=0.1, seed=1, method="finetune", cross_fit=False, refit=True)
    assert shared.info["transfer"]["refit_epochs"] is None  # nothing cross-fitted, nothing to refit


def test_a_bag_keeps_every_fine_tuning_as_one_ensemble(nn2_source: PerformanceModel, tmp_path: Path) -> None:
    target = shifted_target()
    single = transfer(nn2_source, target, fraction=0.1, seed=1, method="factor-finetune")
    bagged = transfer(nn2_source, target, fraction=0.1, seed=1, method="factor-finetune", bag=3)
    second = transfer_on(nn2_source, target, draw_samples(target, 0.1, 1, 0), seed=bag_seed(1, 1),
                         method="factor-finetune", settings=(0.1, 0))
    members = len(single.primitives.nets_)
    assert len(bagged.primitives.nets_) == 3 * members and bagged.primitives.n_members == 3 * members
    assert bagged.info["transfer"]["bag"] == 3 and single.info["transfer"]["bag"] == 1
    assert bagged.info["transfer"]["primitive_scales"] == single.info["transfer"]["primitive_scales"]
    x = target.features
    # the first fine-tuning of the bag is the unbagged transfer; the ensemble averages log predictions
    first = bagged.primitives.nets_[:members]
    for a, b in zip(first, single.primitives.nets_, strict=True):
        np.testing.assert_array_equal(a.to_arrays()["w0"], b.to_arrays()["w0"])
    assert not np.allclose(bagged.predict_primitives(x), single.predict_primitives(x), equal_nan=True)
    # the bag's second fine-tuning is a transfer of the same rows with the second bag seed
    for a, b in zip(bagged.primitives.nets_[members:2 * members], second.primitives.nets_, strict=True):
        np.testing.assert_allclose(a.to_arrays()["w0"], b.to_arrays()["w0"], rtol=1e-6)
    folder = save_performance_model(bagged, tmp_path / "bag")
    again = load_performance_model(folder)
    np.testing.assert_allclose(again.predict_primitives(x), bagged.predict_primitives(x), rtol=1e-6, equal_nan=True)
    assert evaluate_performance_model(bagged, target).median_primitive_mdrae < 0.3


@pytest.mark.parametrize(("method", "bag", "message"), [
    ("factor", 2, "method 'factor' has none"),
    ("direct", 3, "method 'direct' has none"),
    ("finetune", 0, "at least 1"),
])
def test_a_bag_needs_fine_tuning_and_at_least_one(nn2_source: PerformanceModel, method: str, bag: int,
                                                  message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        transfer(nn2_source, shifted_target(), fraction=0.1, seed=0, method=method, bag=bag)


def test_training_the_body_keeps_the_output_layer_and_moves_the_hidden_ones(nn2_source: PerformanceModel,
                                                                            tmp_path: Path) -> None:
    target = shifted_target()
    body = transfer(nn2_source, target, fraction=0.1, seed=1, method="factor-finetune", train="body")
    whole = transfer(nn2_source, target, fraction=0.1, seed=1, method="factor-finetune")
    assert body.info["transfer"]["train"] == "body" and whole.info["transfer"]["train"] == "all"
    assert body.info["transfer"]["primitive_scales"] == whole.info["transfer"]["primitive_scales"]
    for src, b, w in zip(nn2_source.primitives.nets_, body.primitives.nets_, whole.primitives.nets_, strict=True):
        s, a, c = src.to_arrays(), b.to_arrays(), w.to_arrays()
        last = len(src.weights) - 1
        # the output layer is the source's; the factor lives in the output standardization, not in these weights
        np.testing.assert_array_equal(a[f"w{last}"], s[f"w{last}"])
        np.testing.assert_array_equal(a[f"b{last}"], s[f"b{last}"])
        assert not np.array_equal(c[f"w{last}"], s[f"w{last}"])  # fine-tuning every layer moves it
        assert not np.array_equal(a["w0"], s["w0"])  # the hidden layers trained
        assert all(p.requires_grad for p in b.parameters())  # unfrozen after training
    x = target.features
    assert not np.allclose(body.predict_primitives(x), whole.predict_primitives(x), equal_nan=True)
    direct = evaluate_performance_model(transfer(nn2_source, target, fraction=0.1, seed=1, method="direct"), target)
    assert evaluate_performance_model(body, target).median_primitive_mdrae < direct.median_primitive_mdrae
    folder = save_performance_model(body, tmp_path / "body")
    again = load_performance_model(folder)
    assert again.info["transfer"]["train"] == "body"
    np.testing.assert_allclose(again.predict_primitives(x), body.predict_primitives(x), rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize(("method", "train", "message"), [
    ("finetune", "head", "train 'head': use one of all, body"),
    ("factor", "body", "method 'factor' has none"),
    ("scratch", "body", "method 'scratch' has none"),
])
def test_training_the_body_needs_fine_tuning(nn2_source: PerformanceModel, method: str, train: str,
                                            message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        transfer(nn2_source, shifted_target(), fraction=0.1, seed=0, method=method, train=train)


def test_bag_seeds() -> None:
    assert bag_seed(7, 0) == 7 and bag_seed(7, 1) == 7001 and bag_seed(0, 2) == 2


def test_finetune_is_cross_fitted_unless_asked_not_to(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    crossed = transfer(nn2_source, target, fraction=0.1, seed=1, method="finetune")
    shared = transfer(nn2_source, target, fraction=0.1, seed=1, method="finetune", cross_fit=False)
    n = crossed.info["transfer"]["drawn_rows"]
    assert n >= 2 * CROSS_FIT_MIN_ROWS  # two members
    folds = crossed.info["transfer"]["cross_fit_folds"]
    assert len(folds) == 2 and sum(folds) == n and crossed.info["transfer"]["stop_rows"] == 0
    assert crossed.info["train_rows"] == n
    assert shared.info["transfer"]["cross_fit_folds"] is None
    assert shared.info["transfer"]["stop_rows"] == max(1, round(STOP_FRACTION * n))
    x = target.features
    assert not np.allclose(crossed.predict_primitives(x), shared.predict_primitives(x), equal_nan=True)
    for model in (crossed, shared):  # both learn the shift
        assert evaluate_performance_model(model, target).median_primitive_mdrae < 0.3


def test_transfer_is_deterministic_per_seed(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    a = transfer(nn2_source, target, fraction=0.05, seed=4, method="finetune")
    b = transfer(nn2_source, target, fraction=0.05, seed=4, method="finetune")
    c = transfer(nn2_source, target, fraction=0.05, seed=5, method="finetune")
    x = target.features
    np.testing.assert_array_equal(a.predict_primitives(x), b.predict_primitives(x))
    assert not np.allclose(a.predict_primitives(x), c.predict_primitives(x), equal_nan=True)


@pytest.mark.parametrize("method", ["finetune", "scratch", "factor"])
def test_a_single_sample_is_enough(nn2_source: PerformanceModel, method: str) -> None:
    target = shifted_target()
    sample = draw_samples(target, 1e-6, seed=0)
    assert len(sample.fit_rows) == 1 and len(sample.stop_rows) == 0
    model = transfer(nn2_source, target, fraction=1e-6, seed=0, method=method)
    assert model.info["transfer"]["drawn_rows"] == 1 and model.info["transfer"]["stop_rows"] == 0
    row = target.features[sample.fit_rows]
    assert np.isfinite(model.predict_primitives(row)[~np.isnan(target.primitive_ns[sample.fit_rows])]).all()


def test_scratch_learns_only_from_the_samples(nn2_source: PerformanceModel) -> None:
    target = shifted_target()
    model = transfer(nn2_source, target, fraction=0.3, seed=0, method="scratch")
    sample = draw_samples(target, 0.3, 0)
    fit = target.primitive_ns[sample.fit_rows]
    # its own standardization, from the training samples
    expected = np.nanmean(np.log(fit), axis=0)
    np.testing.assert_allclose(model.primitives.y_mean_, expected)
    assert model.primitive_names == target.primitives and model.transform_kind == "krr"
    assert model.transforms_paper is None
    assert evaluate_performance_model(model, target).median_primitive_mdrae < 1.0


# -- columns, saving, errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["finetune", "factor"])
def test_a_target_with_a_subset_of_the_columns_works(nn2_source: PerformanceModel, method: str) -> None:
    full = shifted_target()
    # the target lacks p1 and has a primitive the source never saw
    extra = full.primitive_ns[:, [0]] * 0.7
    target = PrimitiveDataset(full.features, ("wino", "p0", "new"),
                              np.column_stack([full.primitive_ns[:, [2, 0]], extra]), full.transforms,
                              full.transform_ns, "subset.csv")
    model = transfer(nn2_source, target, fraction=0.2, seed=0, method=method)
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


@pytest.mark.parametrize("method", ["finetune", "factor", "scratch", "direct"])
def test_a_transferred_model_saves_and_loads(tmp_path: Path, nn2_source: PerformanceModel, method: str) -> None:
    target = shifted_target()
    model = transfer(nn2_source, target, fraction=0.1, seed=1, method=method)
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
    ({"method": "magic"}, "unknown transfer method"),
])
def test_bad_arguments_are_refused(lin_source: PerformanceModel, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"fraction": 0.1, "seed": 0, "method": "factor", **kwargs}
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace("]", r"\]")):
        transfer(lin_source, shifted_target(), **args)  # type: ignore[arg-type]


def test_no_shared_column_and_finetune_from_lin_are_refused(lin_source: PerformanceModel) -> None:
    target = shifted_target()
    other = PrimitiveDataset(target.features, ("q0", "q1", "q2"), target.primitive_ns, target.transforms,
                             target.transform_ns, "other.csv")
    with pytest.raises(InvalidInputError, match="no primitive column in common"):
        transfer(lin_source, other, fraction=0.1, seed=0, method="factor")
    with pytest.raises(InvalidInputError, match="use method factor or scratch"):
        transfer(lin_source, target, fraction=0.1, seed=0, method="finetune")


# -- CLI -------------------------------------------------------------------------------------------------------------

def write_table(path: Path, data: PrimitiveDataset) -> Path:
    header = ["c", "k", "im", "f", "s", *data.transforms, *data.primitives]
    lines = [",".join(header)]
    for x, t, p in zip(data.features, data.transform_ns, data.primitive_ns, strict=True):
        cells = [f"{int(v)}" for v in x] + ["" if np.isnan(v) else f"{v:.9g}" for v in (*t, *p)]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_transfer(tmp_path: Path, lin_source: PerformanceModel) -> None:
    src = save_performance_model(lin_source, tmp_path / "src")
    csv = write_table(tmp_path / "target.csv", shifted_target())
    out = tmp_path / "moved"
    runner = CliRunner()
    args = ["--model", str(src), "--data", str(csv), "--fraction", "0.05", "--seed", "2", "--method", "factor",
            "--out", str(out)]
    result = runner.invoke(transfer_cmd, [*args, "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    data = json.loads(result.output)
    assert data["drawn_rows"] == round(0.05 * data["target_train_rows"]) and data["method"] == "factor"
    assert data["test"]["median_primitive_mdrae"] is not None
    assert load_performance_model(out).info["transfer"]["seed"] == 2 and data["design"] == "uniform"
    result = runner.invoke(transfer_cmd, [*args, "--design", "kmeans", "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    assert json.loads(result.output)["design"] == "kmeans" == load_performance_model(out).info["transfer"]["design"]
    assert json.loads(result.output)["drawn_cells"] is None
    result = runner.invoke(transfer_cmd, [*args, "--design", "cells", "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    cells = json.loads(result.output)
    assert cells["design"] == "cells" and cells["drawn_cells"] > 0 and cells["drawn_rows"] > data["drawn_rows"]
    result = runner.invoke(transfer_cmd, [*args, "--design", "cells"], obj=Context())
    assert result.exit_code == 0 and f"({cells['drawn_cells']} single timings) (cells" in result.output
    assert cells["adaptive_rounds"] is None
    result = runner.invoke(transfer_cmd, [*args, "--design", "cells-adaptive", "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    adaptive = json.loads(result.output)
    first, second = adaptive["adaptive_rounds"]
    assert adaptive["design"] == "cells-adaptive" and first + second == adaptive["drawn_cells"] <= cells["drawn_cells"]
    result = runner.invoke(transfer_cmd, [*args, "--design", "cells-adaptive"], obj=Context())
    assert result.exit_code == 0 and f"{first} as cells, {second} on close contenders" in result.output
    result = runner.invoke(transfer_cmd, args, obj=Context())
    assert result.exit_code == 0 and "target test MdRAE (median over 3 primitives" in result.output
    assert "held out for early stopping" in result.output  # factor: no fine-tuning, nothing cross-fitted


def test_cli_transfer_reports_cross_fitting(tmp_path: Path, nn2_source: PerformanceModel) -> None:
    src = save_performance_model(nn2_source, tmp_path / "src")
    csv = write_table(tmp_path / "target.csv", shifted_target())
    args = ["--model", str(src), "--data", str(csv), "--fraction", "0.05", "--seed", "0", "--out",
            str(tmp_path / "moved")]
    result = CliRunner().invoke(transfer_cmd, args, obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    assert "cross-fitted: each of 2 ensemble members early-stops on its own fold" in result.output
    result = CliRunner().invoke(transfer_cmd, [*args, "--json"], obj=Context())
    data = json.loads(result.output)
    assert sum(data["cross_fit_folds"]) == data["drawn_rows"] and data["stop_rows"] == 0
    assert data["refit_epochs"] is None
    result = CliRunner().invoke(transfer_cmd, [*args, "--refit", "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    epochs = json.loads(result.output)["refit_epochs"]
    assert isinstance(epochs, int) and epochs >= 1
    result = CliRunner().invoke(transfer_cmd, [*args, "--refit"], obj=Context())
    assert "cross-fitted: 2 folds of" in result.output and "then every ensemble member trained on all" in result.output
    result = CliRunner().invoke(transfer_cmd, [*args, "--bag", "2", "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    assert json.loads(result.output)["bag"] == 2
    factor_args = [*args[:-1], str(tmp_path / "factor"), "--bag", "2", "--method", "factor"]
    result = CliRunner().invoke(transfer_cmd, factor_args, obj=Context())
    assert result.exit_code != 0 and isinstance(result.exception, InvalidInputError)
    assert "has none" in str(result.exception) and not (tmp_path / "factor").exists()
    result = CliRunner().invoke(transfer_cmd, [*args, "--train", "body", "--json"], obj=Context())
    assert result.exit_code == 0, (result.output, result.exception)
    assert json.loads(result.output)["train"] == "body"
    result = CliRunner().invoke(transfer_cmd, [*args, "--train", "body"], obj=Context())
    assert "the hidden layers only, the output layer frozen" in result.output
    body_args = [*args[:-1], str(tmp_path / "body-factor"), "--train", "body", "--method", "factor"]
    result = CliRunner().invoke(transfer_cmd, body_args, obj=Context())
    assert result.exit_code != 0 and isinstance(result.exception, InvalidInputError)
    assert "has none" in str(result.exception) and not (tmp_path / "body-factor").exists()


@pytest.mark.parametrize(("fraction", "names", "message"), [
    ("0", NAMES, "--fraction 0 is outside (0, 1]"),
    ("1.01", NAMES, "outside (0, 1]"),
    ("0.1", ("q0", "q1", "q2"), "no primitive column in common"),
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


# -- calibrate --primitives ------------------------------------------------------------------------------------------

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


def test_cli_calibrate_primitives_from_a_table(tmp_path: Path, lin_source: PerformanceModel) -> None:
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    csv = write_table(tmp_path / "mine.csv", shifted_target().subset(np.arange(25)))
    home = tmp_path / "home"
    base = ["--home", str(home), "calibrate", "--primitives", "--measurements", str(csv), "--from", str(src)]
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
    assert main(["--home", str(home), "calibrate", "--primitives", "--measurements", str(bad), "--from", str(src),
                 "--name", "box", "--replace"]) != 0
    assert (folder / "model.json").stat().st_mtime_ns == stamp
    assert main(["--home", str(home), "calibrate", "--primitives", "--measurements", str(csv), "--from",
                 str(tmp_path / "nowhere"), "--name", "other"]) != 0
    assert not (home / "devices" / "other").exists()
    # the calibrated device is a source for another calibration
    assert main([*base[:-1], "box", "--name", "box2"]) == 0
    assert load_performance_model(home / "devices" / "box2" / "primitives").info["calibration"]["source"] == str(folder)


def test_cli_calibrate_option_mixups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.cli.main import main

    home = ["--home", str(tmp_path / "home")]
    assert main([*home, "calibrate", "--name", "x", "--samples", "5"]) != 0
    assert "--samples is an option of --primitives" in capsys.readouterr().err
    assert main([*home, "calibrate", "--name", "x", "--design", "kmeans"]) != 0
    assert "--design is an option of --primitives" in capsys.readouterr().err
    assert main([*home, "calibrate", "--name", "x"]) != 0
    assert "--measurements FILE.csv is required" in capsys.readouterr().err
    assert main([*home, "calibrate", "--name", "x", "--torch-device", "cuda"]) != 0
    assert "--torch-device is an option of --primitives" in capsys.readouterr().err
    assert main([*home, "calibrate", "--primitives", "--name", "x", "--measurements", "a.csv", "--network",
                 "torchvision:resnet18"]) != 0
    assert "use one" in capsys.readouterr().err
    assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "nobody"]) != 0
    assert "has no primitive performance model" in capsys.readouterr().err
    assert main([*home, "select", "torchvision:resnet18", "--device", "nobody"]) != 0
    assert "with --costs predicted" in capsys.readouterr().err


def test_cli_calibrate_primitives_refuses_the_latency_method(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    from edgeplan.cli.main import main

    assert main(["--home", str(tmp_path), "calibrate", "--primitives", "--name", "x", "--method", "gbdt"]) != 0
    assert "with --primitives use --transfer" in capsys.readouterr().err


def test_factor_then_finetune_starts_from_the_scaled_source(nn2_source: PerformanceModel) -> None:
    """factor-finetune records its pooled factor's scales and, like fine-tuning, beats the source as is."""
    target = shifted_target()
    both = transfer(nn2_source, target, fraction=0.3, seed=0, method="factor-finetune")
    factor = transfer(nn2_source, target, fraction=0.3, seed=0, method="factor")
    rows = draw_samples(target, 0.3, 0).rows
    pooled, _ = pooled_scales(nn2_source.primitives, target.features[rows], target.primitive_ns[rows])
    plain, _ = factor_scales(nn2_source.primitives, target.features[rows], target.primitive_ns[rows])
    np.testing.assert_allclose(list(both.info["transfer"]["primitive_scales"].values()), pooled)
    np.testing.assert_allclose(list(factor.info["transfer"]["primitive_scales"].values()), plain)
    assert both.info["transfer"]["lr_factor"] == 0.1 and factor.info["transfer"]["lr_factor"] is None
    assert both.info["transfer"]["transform_scales"] == factor.info["transfer"]["transform_scales"]
    direct = transfer(nn2_source, target, fraction=0.3, seed=0, method="direct")
    err = {m: evaluate_performance_model(m_, target).median_primitive_mdrae
           for m, m_ in (("both", both), ("direct", direct))}
    assert err["both"] < err["direct"]
    assert not np.allclose(both.predict_primitives(target.features[:5]), factor.predict_primitives(
        target.features[:5]), equal_nan=True)


def test_calibration_needs_two_folds(lin_source: PerformanceModel) -> None:
    target = shifted_target().subset(np.arange(10))
    for folds in (1, 0, -1):
        with pytest.raises(InvalidInputError, match="at least 2 folds"):
            calibrate_primitives(lin_source, target, folds=folds)


def test_cli_calibrate_primitives_json_is_strict_without_transformations(tmp_path: Path, lin_source: PerformanceModel,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A table without transformation columns: the scores it cannot give are null, never NaN."""
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    t = shifted_target().subset(np.arange(20))
    bare = PrimitiveDataset(t.features, t.primitives, t.primitive_ns, (), np.zeros((len(t), 0)), "bare.csv")
    csv = write_table(tmp_path / "bare.csv", bare)
    home = ["--home", str(tmp_path / "home")]
    assert main([*home, "calibrate", "--primitives", "--measurements", str(csv), "--from", str(src), "--name", "b",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c}"))
    assert out["cv_transform_mdrae"] == {"direct": None, "factor": None} and out["threads"] is None
    saved = (tmp_path / "home" / "devices" / "b" / "primitives" / "model.json").read_text()
    json.loads(saved, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c} in model.json"))


def test_cli_calibrate_primitives_refuses_conflicting_options(tmp_path: Path, lin_source: PerformanceModel,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    csv = write_table(tmp_path / "t.csv", shifted_target().subset(np.arange(12)))
    home = ["--home", str(tmp_path / "home")]
    base = [*home, "calibrate", "--primitives", "--name", "x"]
    assert main([*base, "--measurements", str(csv), "--samples", "10"]) != 0
    assert "drop them with --measurements" in capsys.readouterr().err
    assert main([*base, "--measurements", str(csv), "--torch-device", "tpu"]) != 0
    assert "use cpu, cuda or cuda:N" in capsys.readouterr().err
    assert main([*base, "--network", "torchvision:resnet18", "--samples", "10"]) != 0
    assert "drop --samples" in capsys.readouterr().err
    assert main([*base, "--measurements", str(csv), "--design", "kmeans"]) != 0
    assert "--design and --budget-s are about measuring here" in capsys.readouterr().err
    assert main([*base, "--network", "torchvision:resnet18", "--design", "kmeans"]) != 0
    assert "drop --samples and --design" in capsys.readouterr().err
    assert main([*base, "--measurements", str(csv), "--from", str(src)]) == 0
    capsys.readouterr()
    assert main([*base, "--measurements", str(csv), "--from", "x", "--replace"]) != 0
    assert "is the device being replaced" in capsys.readouterr().err


def test_cli_calibrate_the_shipped_model_then_select_and_evaluate(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped NN2 calibrated from a table of our own primitives; select and evaluate use the device."""
    from edgeplan.cli.main import main
    from edgeplan.costmodels import load_primitive_csv
    table = load_primitive_csv(data_file("primitives", "networks_cpu_2t.csv"))
    first = write_table(tmp_path / "first.csv", table.subset(np.arange(0, 12)))
    second = write_table(tmp_path / "second.csv", table.subset(np.arange(12, 30)))
    home = ["--home", str(tmp_path / "home")]
    calib = [*home, "calibrate", "--primitives", "--name", "box", "--transfer", "factor"]
    assert main([*calib, "--measurements", str(first)]) == 0
    folder = tmp_path / "home" / "devices" / "box" / "primitives"
    assert load_performance_model(folder).info["calibration"]["data"] == str(first)
    capsys.readouterr()
    # --replace puts a new model in place, whole, and leaves no staging folder behind
    assert main([*calib, "--measurements", str(second), "--replace", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"] == 18
    assert load_performance_model(folder).info["calibration"]["data"] == str(second)
    assert sorted(p.name for p in folder.parent.iterdir()) == ["primitives"]
    assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "box",
                 "--no-flow-costs", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["predicted_ms"] > 0 and all(layer["primitive"] for layer in plan["layers"] if layer["kind"] == "conv")
    assert main(["primitives", "evaluate", "--model", str(folder), "--data", str(first), "--split", "all",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 12
    # a device calibrated at another thread count than the selection's says so
    meta = json.loads((folder / "model.json").read_text())
    meta["info"]["calibration"]["threads"] = 2
    (folder / "model.json").write_text(json.dumps(meta))
    assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "box",
                 "--no-flow-costs", "--json"]) == 0
    assert "was calibrated at 2 thread(s)" in capsys.readouterr().err
    # one calibrated on a GPU selects for a GPU (planned from here without measuring), and not for the CPU
    meta["info"]["calibration"].update(threads=1, torch_device="cuda")
    (folder / "model.json").write_text(json.dumps(meta))
    for extra in ([], ["--torch-device", "cuda:0"]):
        assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "box",
                     "--no-flow-costs", "--json", *extra]) == 0
        captured = capsys.readouterr()
        plan = json.loads(captured.out)
        assert not any(layer["primitive"].startswith("torch-onednn") for layer in plan["layers"]
                       if layer["primitive"]), extra
        assert "warning" not in captured.err
    assert main([*home, "select", "torchvision:resnet18", "--costs", "predicted", "--device", "box",
                 "--no-flow-costs", "--torch-device", "cpu"]) != 0
    assert "was calibrated on cuda, and --torch-device cpu is another kind" in capsys.readouterr().err


def test_cli_calibrate_primitives_records_where_a_given_table_was_measured(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """--torch-device with --measurements labels the table; without it the processor is unknown."""
    from edgeplan.cli.main import main
    from edgeplan.costmodels import load_primitive_csv
    gpu_table = load_primitive_csv(data_file("primitives", "networks_cuda.csv"))
    table = write_table(tmp_path / "t.csv", gpu_table.subset(np.arange(12)))
    home = ["--home", str(tmp_path / "home")]
    calib = [*home, "calibrate", "--primitives", "--transfer", "factor", "--measurements", str(table), "--json"]
    assert main([*calib, "--name", "gpu", "--torch-device", "cuda"]) == 0
    assert json.loads(capsys.readouterr().out)["torch_device"] == "cuda"
    assert main([*calib, "--name", "somewhere"]) == 0
    assert json.loads(capsys.readouterr().out)["torch_device"] is None
    for name in ("gpu", "somewhere"):
        meta = json.loads((tmp_path / "home" / "devices" / name / "primitives" / "model.json").read_text())
        assert meta["info"]["calibration"]["torch_device"] == ("cuda" if name == "gpu" else None)


@pytest.mark.skipif("__import__('torch').cuda.is_available()")
def test_cli_calibrate_primitives_on_cuda_without_it_stores_nothing(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.cli.main import main

    home = tmp_path / "home"
    assert main(["--home", str(home), "calibrate", "--primitives", "--name", "gpu", "--torch-device", "cuda",
                 "--samples", "2"]) != 0
    assert "CUDA is not available here" in capsys.readouterr().err
    assert not (home / "devices" / "gpu").exists()


@pytest.mark.skipif("not __import__('torch').cuda.is_available()")
def test_cli_calibrate_primitives_on_cuda_then_select_and_run_there(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """On a GPU: a few layers measured there, the shipped model moved to them, a network selected and run there."""
    from edgeplan.cli.main import main

    home = ["--home", str(tmp_path / "home")]
    assert main([*home, "calibrate", "--primitives", "--name", "gpu", "--torch-device", "cuda", "--samples", "6",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["complete"] and out["torch_device"] == "cuda" and out["layers"] == 6
    assert main([*home, "select", "torchvision:squeezenet1_0", "--costs", "predicted", "--device", "gpu",
                 "--torch-device", "cuda", "--run", "--rounds", "3", "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    plan = json.loads(captured.out)
    assert not any(layer["primitive"].startswith("torch-onednn") for layer in plan["layers"] if layer["primitive"])
    assert plan["run"]["device"] == "cuda" and plan["run"]["outputs_match"]


def test_cli_calibrate_primitives_stopped_by_its_budget_fits_nothing(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Measuring here goes through the Store; a budget that stops it leaves no device and says how to resume."""
    from edgeplan.cli.main import main

    home = tmp_path / "home"
    args = ["--home", str(home), "calibrate", "--primitives", "--name", "t", "--network",
            "nb201:|skip_connect~0|+|none~0|none~1|+|none~0|none~1|none~2|", "--budget-s", "0.001"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["complete"] is False and out["measured"]["stopped_by_budget"] is True
    assert out["measured"]["configs_total"] > 0 and out["measured"]["campaign"].startswith("primitives|custom-")
    assert (home / "store.sqlite").is_file() and not (home / "devices").exists()
    assert main(args) == 0
    assert "run the same command again to resume (nothing fitted yet)" in capsys.readouterr().out
    # a designed sample of the configuration space is its own campaign
    sampled = ["--home", str(home), "calibrate", "--primitives", "--name", "t", "--samples", "6", "--design",
               "kmeans", "--budget-s", "0.001", "--json"]
    assert main(sampled) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measured"]["campaign"].startswith("primitives|zoo-cap3e+08-n6-kmeans-seed0|")
    assert out["measured"]["configs_total"] == 6 and not (home / "devices").exists()


def test_cli_calibrate_primitives_from_one_layer(tmp_path: Path, lin_source: PerformanceModel,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.cli.main import main

    src = save_performance_model(lin_source, tmp_path / "src")
    csv = write_table(tmp_path / "one.csv", shifted_target().subset(np.arange(1)))
    assert main(["--home", str(tmp_path / "home"), "calibrate", "--primitives", "--measurements", str(csv), "--from",
                 str(src), "--name", "one"]) == 0
    out = capsys.readouterr().out
    assert "1 layers" in out and "moved by factor" in out
    assert "one layer: nothing to cross-validate, so auto keeps the factor correction" in out


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
    direct = evaluate_performance_model(transfer(source, target, fraction=0.01, seed=0, method="direct"), target,
                                        "test", 0)
    factor = evaluate_performance_model(transfer(source, target, fraction=0.01, seed=0, method="factor"), target,
                                        "test", 0)
    assert set(factor.primitive_mdrae) == set(target.primitives)
    # the GPU runs these primitives 2-100x faster than the CPU: as is, the CPU model is off by several times
    assert direct.median_primitive_mdrae > 3 * factor.median_primitive_mdrae


def test_the_gpu_tables_hold_the_first_configurations_of_the_campaign_order() -> None:
    """The GPU's tables: the first configurations of the seeded plan, their re-measurement and the six networks'
    layers, with provenance."""
    from edgeplan.costmodels import load_primitive_csv
    from edgeplan.measure.primitive_campaign import noise_floor, primitive_campaign

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
