"""benchmarks/diag_transfer_choices.py: the selection increase split into its primitive and transformation parts,
the wrong choices per layer and the winner's curse ratios, on a network small enough to enumerate by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchmark_loader import load_benchmark

from edgeplan.planners.pbqp.costgraph import PrimitiveOption, SelectionCosts
from edgeplan.planners.pbqp.network import LayoutEdge, SelectionStructure, SelectNode

A = PrimitiveOption("a", "chw", "chw")
B = PrimitiveOption("b", "hwc", "hwc")
C = PrimitiveOption("c", "chw", "hwc")


def _diag() -> Any:
    return load_benchmark("diag_transfer_choices")


def _toy(conv0: list[float], conv1: list[float], transform_ms: float = 1.0) -> tuple[SelectionStructure,
                                                                                      SelectionCosts]:
    """input -> conv0 (a | b) -> conv1 (a | b | c) -> output, every layout change ``transform_ms``."""
    structure = SelectionStructure("toy", (SelectNode("conv0", "conv", (3, 8, 8, 3, 1, 1)),
                                           SelectNode("conv1", "conv", (8, 8, 8, 3, 1, 1))),
                                   (LayoutEdge(None, 0, (3, 8), "conv0"), LayoutEdge(0, 1, (8, 8), "conv1"),
                                    LayoutEdge(1, None, (8, 8), "output")), ())
    costs = SelectionCosts(((A, B), (A, B, C)), (np.array(conv0), np.array(conv1)),
                           np.full((3, 3, 3), transform_ms), "toy")
    return structure, costs


def test_exact_costs_lose_nothing() -> None:
    structure, measured = _toy([5.0, 3.5], [5.0, 3.0, 4.5])
    assert _diag().split_increase(structure, measured, measured) == {"all": 0.0, "primitives": 0.0,
                                                                      "transforms": 0.0}
    wrong, ratios = _diag().wrong_choices(structure, measured, measured)
    assert wrong == [] and set(ratios["all"]) == {1.0} and len(ratios["all"]) == 5


def test_mispredicted_primitives_are_the_whole_increase_and_each_wrong_layer_is_listed() -> None:
    # measured optimum: b, b = 3.5 + 3 + 1 (input to hwc) + 1 (output to chw) = 8.5 ms
    structure, measured = _toy([5.0, 3.5], [5.0, 3.0, 4.5])
    _, predicted = _toy([2.0, 3.5], [5.0, 3.5, 4.5])  # a, a predicted at 7 ms beats a, b (7.5) and b, b (9)
    split = _diag().split_increase(structure, measured, predicted)
    assert split["all"] == pytest.approx(100 * (10.0 / 8.5 - 1))  # a, a costs 5 + 5 measured
    assert split["primitives"] == pytest.approx(split["all"]) and split["transforms"] == 0.0
    wrong, ratios = _diag().wrong_choices(structure, measured, predicted)
    assert [(w["layer"], w["chosen"], w["optimal"]) for w in wrong] == [("conv0", "a", "b"), ("conv1", "a", "b")]
    assert [w["lost_ms"] for w in wrong] == pytest.approx([1.5, 2.0])
    assert [w["chosen_ratio"] for w in wrong] == pytest.approx([0.4, 1.0])
    assert [w["optimal_ratio"] for w in wrong] == pytest.approx([1.0, 3.5 / 3.0])
    assert ratios["chosen"] == pytest.approx([0.4, 1.0]) and ratios["optimal"] == pytest.approx([1.0, 3.5 / 3.0])


def test_mispredicted_transformations_are_their_own_part() -> None:
    structure, measured = _toy([5.0, 3.5], [5.0, 3.0, 4.5])
    predicted = dataclasses.replace(measured, transform_ms=np.full((3, 3, 3), 10.0))  # a, a avoids every change
    split = _diag().split_increase(structure, measured, predicted)
    assert split["transforms"] == pytest.approx(100 * (10.0 / 8.5 - 1)) == pytest.approx(split["all"])
    assert split["primitives"] == 0.0
    wrong, _ = _diag().wrong_choices(structure, measured, predicted)
    assert all(w["chosen_ratio"] == 1.0 == w["optimal_ratio"] for w in wrong) and len(wrong) == 2


def test_options_are_matched_by_name_not_position() -> None:
    structure, measured = _toy([5.0, 3.5], [5.0, 3.0, 4.5])
    # the same predictions as the measured costs, listed in another order
    predicted = SelectionCosts(((B, A), (C, B, A)), (np.array([3.5, 5.0]), np.array([4.5, 3.0, 5.0])),
                               measured.transform_ms, "toy")
    assert _diag().priced_increase(structure, measured, predicted) == 0.0
    assert _diag().wrong_choices(structure, measured, predicted)[0] == []


def test_an_optimal_primitive_the_model_does_not_price_has_no_ratio() -> None:
    structure, measured = _toy([5.0, 3.5], [5.0, 3.0, 4.5])
    # the model prices neither b: the selection can only take a, a (10 ms against the optimum's 8.5)
    predicted = SelectionCosts(((A,), (A, C)), (np.array([5.0]), np.array([5.0, 4.5])), measured.transform_ms, "toy")
    wrong, ratios = _diag().wrong_choices(structure, measured, predicted)
    assert [(w["chosen"], w["optimal"], w["optimal_ratio"]) for w in wrong] == [("a", "b", None), ("a", "b", None)]
    assert ratios["optimal"] == [] and ratios["chosen"] == [1.0, 1.0] and len(ratios["all"]) == 3


def test_pairs_sum_the_lost_time_over_runs() -> None:
    runs = [{"wrong": [{"chosen": "a", "optimal": "b", "lost_ms": 1.5},
                       {"chosen": "c", "optimal": "b", "lost_ms": 4.0}]},
            {"wrong": [{"chosen": "a", "optimal": "b", "lost_ms": 3.0}]}]
    assert _diag().by_pair(runs) == [("a", "b", 4.5, 2), ("c", "b", 4.0, 1)]


def test_within_family_share_of_the_lost_time() -> None:
    runs = [{"wrong": [{"chosen": "winograd-4x4-3x3-vec-8", "optimal": "winograd-3x3-3x3-vec-4", "lost_ms": 3.0},
                       {"chosen": "kn2row-as", "optimal": "im2row-scan-abt-ik", "lost_ms": 1.0}]}]
    assert _diag().within_family_share(runs) == pytest.approx(0.75)
    assert np.isnan(_diag().within_family_share([{"wrong": []}]))


def test_costliest_layers_in_points_of_the_mean_increase() -> None:
    nets = {"n1": {"optimum_ms": 10.0}, "n2": {"optimum_ms": 100.0}}
    conv0 = {"network": "n1", "layer": "conv0", "conv": [3, 8, 8, 3, 1], "part": "test"}
    runs = [{"networks": nets, "wrong": [{**conv0, "lost_ms": 1.0},
                                         {"network": "n2", "layer": "conv5", "conv": None, "lost_ms": 4.0}]},
            {"networks": nets, "wrong": [{**conv0, "lost_ms": 3.0}]}]
    # n1 conv0: (10 % + 30 %) / 2 networks / 2 runs = 10 points; n2 conv5: 4 % / 2 / 2 = 1 point
    assert _diag().costliest_layers(runs) == [("n1", "conv0 (3, 8, 8, 3, 1) test", pytest.approx(10.0), 2),
                                              ("n2", "conv5", pytest.approx(1.0), 1)]


def test_analyse_on_the_mulder_tables_with_the_table_itself_as_the_model() -> None:
    from edgeplan.costmodels import fit_performance_model
    from edgeplan.decisions.select import load_formats, table_costs
    from edgeplan.measure.primitive_data import load_primitive_csv
    from experiments.mulder2020 import structures

    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "mulder2021"
    if not (data / "amd.csv").is_file():
        pytest.skip("../shared/data/mulder2021 is absent")
    amd = load_primitive_csv(data / "amd.csv")
    model = fit_performance_model(amd, "lin")  # fast; the script transfers an NN2
    nets = structures(amd, ("alexnet",))
    result = _diag().analyse(model, amd, nets, load_formats(data / "formats.csv"))
    inc = result["increase_pct"]
    assert set(inc) == {"all", "primitives", "transforms"} and min(inc.values()) >= 0
    assert result["networks"]["alexnet"]["optimum_ms"] > 0
    assert result["wrong"], "a linear model should miss some of AlexNet's optimal primitives"
    measured = table_costs(nets["alexnet"], amd, load_formats(data / "formats.csv"))
    for w in result["wrong"]:  # the lost time is the table's difference between the two primitives on that layer
        i = [n.name for n in nets["alexnet"].nodes].index(w["layer"])
        names = [o.name for o in measured.options[i]]
        truth = measured.primitive_ms[i]
        assert w["network"] == "alexnet" and w["chosen"] != w["optimal"]
        assert w["lost_ms"] == pytest.approx(truth[names.index(w["chosen"])] - truth[names.index(w["optimal"])])
        assert w["chosen_ratio"] > 0 and w["optimal_ratio"] > 0 and w["part"] in ("train", "val", "test")
