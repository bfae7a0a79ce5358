"""Cost graph of a network and primitive selection: layout flow, PBQP encoding vs an independent recount, costs
from a table and from a model, and the mulder2021 tables when ../shared/data is present."""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from repo_data import data_file

from edgeplan.costmodels import fit_performance_model
from edgeplan.decisions.selection_costs import load_formats, model_costs, select_network, table_costs
from edgeplan.errors import InvalidInputError
from edgeplan.frontends.zoo import load_graph
from edgeplan.ir import Graph
from edgeplan.measure.primitive_data import load_primitive_csv
from edgeplan.planners.pbqp import solve
from edgeplan.planners.pbqp.costgraph import (
    LAYOUTS,
    PrimitiveOption,
    SelectionCosts,
    plan_cost,
    select_primitives,
    selection_problem,
)
from edgeplan.planners.pbqp.network import LayoutEdge, SelectionStructure, SelectNode, selection_structure

MULDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "mulder2021"


@functools.cache
def graph_of(model: str) -> Graph:
    """Each zoo network is imported once for the whole module (imports take seconds)."""
    return load_graph(model)

A = PrimitiveOption("a", "chw", "chw")
B = PrimitiveOption("b", "hwc", "hwc")
C = PrimitiveOption("c", "chw", "hwc")


def _toy() -> tuple[SelectionStructure, SelectionCosts]:
    """input -> conv0 -> conv1 -> output; conv0 and conv1 each offer a (chw) or b (hwc), conv1 also c."""
    structure = SelectionStructure("toy", (SelectNode("conv0", "conv", (3, 8, 8, 3, 1, 1)),
                                           SelectNode("conv1", "conv", (8, 8, 8, 3, 1, 1))),
                                   (LayoutEdge(None, 0, (3, 8), "conv0"), LayoutEdge(0, 1, (8, 8), "conv1"),
                                    LayoutEdge(1, None, (8, 8), "output")), ())
    t = np.full((3, 3, 3), 1.0)  # every transformation costs 1 ms
    costs = SelectionCosts(((A, B), (A, B, C)), (np.array([5.0, 3.5]), np.array([5.0, 3.0, 4.5])), t, "toy")
    return structure, costs


def test_toy_selection_trades_primitive_time_against_transformations() -> None:
    structure, costs = _toy()
    plan = select_primitives(structure, costs)
    # enumerate by hand: options x options with transforms at input, middle and output
    best = min(sum(plan_cost(structure, costs, (i, j))[:2]) for i in range(2) for j in range(3))
    assert plan.total_ms == pytest.approx(best)
    # b then b: 3.5 + 3.0 + 1 (input chw->hwc) + 1 (output hwc->chw) = 8.5 beats a then a (10)
    assert plan.choices() == {"conv0": "b", "conv1": "b"} and plan.total_ms == pytest.approx(8.5)
    assert [(t.src, t.dst) for t in plan.transforms] == [("chw", "hwc"), ("hwc", "chw")]


def test_pbqp_cost_equals_the_independent_recount_on_real_networks() -> None:
    rng = np.random.default_rng(0)
    for model in ("torchvision:googlenet", "torchvision:resnet18"):  # inception joins, residual joins
        structure = selection_structure(graph_of(model))
        options = []
        for node in structure.nodes:
            if node.kind == "conv":
                options.append(tuple(PrimitiveOption(f"p{i}", LAYOUTS[i % 3], LAYOUTS[(i // 3) % 3])
                                     for i in range(int(rng.integers(1, 12)))))
            else:
                options.append(())
        costs = SelectionCosts(tuple(options), tuple(rng.lognormal(size=len(o)) for o in options),
                               rng.lognormal(size=(len(structure.edges), 3, 3)) * 0.3)
        plan = select_primitives(structure, costs)
        assert plan.solution.optimal
        assert plan.total_ms == pytest.approx(plan.solution.cost, rel=1e-9)
        prims, trans, _ = plan_cost(structure, costs, plan.choice)
        assert prims + trans == pytest.approx(plan.total_ms)
        problem, _ = selection_problem(structure, costs)
        assert solve(problem, "heuristic").cost == pytest.approx(plan.total_ms, rel=1e-9)


def test_layout_class_dominance_matches_brute_force_over_primitives() -> None:
    structure, costs = _toy()
    b2, b3 = PrimitiveOption("b2", "hwc", "hwc"), PrimitiveOption("b3", "hwc", "hwc")  # same layouts as b
    costs = SelectionCosts(((A, B, b2), (A, b3, B, C)), (np.array([5.0, 3.5, 2.5]), np.array([5.0, 3.3, 3.0, 4.5])),
                           costs.transform_ms)
    problem, represents = selection_problem(structure, costs)
    assert problem.n_options == (2, 3) and represents[0] == [0, 2]  # b2 stands for the hwc pair, b is dominated
    brute = min(sum(plan_cost(structure, costs, choice)[:2]) for choice in itertools.product(range(3), range(4)))
    plan = select_primitives(structure, costs)
    assert plan.total_ms == pytest.approx(brute) and plan.choices() == {"conv0": "b2", "conv1": "b"}


@pytest.mark.parametrize(("model", "convs", "joins"), [
    ("torchvision:vgg11", 8, 0), ("torchvision:resnet18", 20, 8), ("torchvision:googlenet", 57, 9),
])
def test_structure_of_zoo_networks(model: str, convs: int, joins: int) -> None:
    s = selection_structure(graph_of(model))
    assert len(s.convs) == convs and sum(n.kind == "join" for n in s.nodes) == joins
    assert s.edges[0].producer is None and s.edges[0].tensor == (3, 224)  # the input arrives in chw
    for e in s.edges:  # every edge joins decisions that exist
        assert e.producer is None or 0 <= e.producer < len(s.nodes)
        assert e.consumer is None or 0 <= e.consumer < len(s.nodes)
    # every join has at least two incoming edges; every conv exactly one
    incoming = [sum(e.consumer == i for e in s.edges) for i in range(len(s.nodes))]
    assert all(incoming[i] >= 2 if n.kind == "join" else incoming[i] == 1 for i, n in enumerate(s.nodes))


def test_resnet_downsample_layers_can_be_left_out() -> None:
    s = selection_structure(graph_of("torchvision:resnet18"), selectable=lambda shape: shape[3] != 1)
    assert len(s.convs) == 17 and len(s.fixed) == 3
    assert s.fixed_reasons == ("not selectable",) * 3
    why = selection_structure(graph_of("torchvision:resnet18"),
                              why_not=lambda shape: "a 1x1 layer" if shape[3] == 1 else None)
    assert why.fixed == s.fixed and why.fixed_reasons == ("a 1x1 layer",) * 3
    # a fixed layer reads chw: the flow into it is priced as a sink, and it feeds its join from chw
    assert sum(e.consumer is None for e in s.edges) == 3
    assert sum(e.producer is None for e in s.edges) == 4


def test_depthwise_layers_are_fixed() -> None:
    s = selection_structure(graph_of("torchvision:mobilenet_v2"))
    assert len(s.fixed) == 17 and len(s.convs) == 52 - 17  # the depthwise convs are fixed, the rest selected
    assert s.fixed_reasons == ("depthwise",) * 17  # each named with why no primitive runs it


@pytest.mark.parametrize(("layer", "reason"), [
    (dict(groups=4), "grouped (4 groups)"), (dict(dilation=2), "dilated"),
    (dict(kernel_size=(3, 1), padding=(1, 0)), "non-square kernel 3x1, unequal padding"),
    (dict(stride=(2, 1)), "unequal strides"), (dict(padding=(1, 2)), "unequal padding")])
def test_a_conv_no_primitive_runs_is_left_to_pytorch_with_its_reason(layer: dict[str, object], reason: str) -> None:
    import torch

    from edgeplan.frontends.torch_frontend import graph_from_torch

    settings: dict[str, object] = {"kernel_size": 3, "padding": 1, **layer}
    net = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Conv2d(8, 8, **settings))
    s = selection_structure(graph_from_torch(net, torch.randn(1, 8, 16, 16), name="odd"))
    assert len(s.convs) == 1 and s.fixed_reasons == (reason,)


def _write_table(path: Path, rows: list[tuple[int, int, int, int, int]], names: list[str]) -> Path:
    rng = np.random.default_rng(1)
    transforms = [f"{a}-to-{b}" for a in LAYOUTS for b in LAYOUTS]
    lines = [",".join(["c", "k", "im", "f", "s", *transforms, *names])]
    for row in rows:
        cells = [str(v) for v in row] + [f"{v:.1f}" for v in rng.uniform(1e3, 1e5, len(transforms))]
        cells += [f"{v:.1f}" for v in rng.uniform(1e5, 1e7, len(names))]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_table_costs_lookup_interpolation_and_missing_layers(tmp_path: Path) -> None:
    structure = selection_structure(graph_of("torchvision:vgg11"))
    rows = [n.conv[:5] for n in structure.nodes if n.conv is not None]
    formats = {"pa": ("chw", "chw"), "pb": ("hwc", "hwc"), "pc": ("chw", "hwc")}
    data = load_primitive_csv(_write_table(tmp_path / "t.csv", rows, ["pa", "pb", "pc", "unknown"]))
    costs = table_costs(structure, data, formats)
    assert all(len(o) == 3 for o in costs.options)  # the column without a layout is left out
    assert "1 of 9 tensors interpolated" in costs.source  # the (512, 7) tensor into the classifier
    assert np.isfinite(costs.transform_ms).all()
    plan = select_primitives(structure, costs)
    assert math.isfinite(plan.total_ms)
    short = load_primitive_csv(_write_table(tmp_path / "s.csv", rows[1:], ["pa", "pb"]))  # no first layer
    with pytest.raises(InvalidInputError, match="no row"):
        table_costs(structure, short, formats)


def test_model_costs_are_batched_and_restricted(tmp_path: Path) -> None:
    structure = selection_structure(graph_of("torchvision:vgg11"))
    rows = [n.conv[:5] for n in structure.nodes if n.conv is not None]
    formats = {"pa": ("chw", "chw"), "pb": ("hwc", "hwc"), "pc": ("chw", "hwc")}
    data = load_primitive_csv(_write_table(tmp_path / "t.csv", rows * 12, ["pa", "pb", "pc"]))
    model = fit_performance_model(data, "lin")
    measured = table_costs(structure, data, {"pa": formats["pa"], "pb": formats["pb"]})
    timed = select_network(structure, model, formats, restrict_to=measured)
    kept = [{o.name for o in opts} for n, opts in zip(structure.nodes, timed.costs.options, strict=True)
            if n.kind == "conv"]
    assert kept and all(names == {"pa", "pb"} for names in kept)
    assert timed.costs.source == "predicted: lin model" and timed.estimate_s > 0 and timed.solve_s > 0
    assert np.isfinite(model_costs(structure, model, formats).transform_ms).all()


@pytest.mark.skipif(not MULDER.exists(), reason="../shared/data/mulder2021 is absent")
def test_mulder_tables_select_every_network_with_measured_costs() -> None:
    formats = load_formats(MULDER / "formats.csv")
    assert len(formats) == 79
    data = load_primitive_csv(MULDER / "intel.csv")
    keys = {tuple(int(v) for v in row) for row in data.features}
    structure = selection_structure(graph_of("torchvision:resnet18"), selectable=lambda s: s[:5] in keys)
    plan = select_primitives(structure, table_costs(structure, data, formats))
    assert plan.solution.optimal and len(plan.choices()) == 17
    # the optimum is no slower than the best single primitive for every layer in its own layout
    singles = []
    costs = table_costs(structure, data, formats)
    for name in {o.name for o in costs.options[0]}:
        if all(name in {o.name for o in opts} for opts, n in zip(costs.options, structure.nodes, strict=True)
               if n.kind == "conv"):
            choice = [next(j for j, o in enumerate(opts) if o.name == name) if n.kind == "conv" else
                      LAYOUTS.index(formats[name][0]) for opts, n in zip(costs.options, structure.nodes, strict=True)]
            singles.append(sum(plan_cost(structure, costs, choice)[:2]))
    assert singles and plan.total_ms <= min(singles) + 1e-9


def test_bad_formats_file(tmp_path: Path) -> None:
    bad = tmp_path / "f.csv"
    bad.write_text("direct,chw,nhwc\n")
    with pytest.raises(InvalidInputError, match="layouts"):
        load_formats(bad)


@pytest.mark.slow
@pytest.mark.skipif(not MULDER.exists(), reason="../shared/data/mulder2021 is absent")
def test_mulder2020_experiment_prices_the_predicted_selection_with_measured_costs() -> None:
    from experiments.mulder2020 import format_report, run

    data = load_primitive_csv(MULDER / "intel.csv")
    model = fit_performance_model(data, "lin")  # fast; the command uses NN2
    (result,) = run({"intel": (data, model)}, MULDER / "formats.csv", networks=("alexnet",), repeats=2)
    assert result.selected_layers == 5 and result.fixed_layers == 0 and result.interpolated_tensors == 1
    assert result.predicted_selection_ms >= result.optimum_ms - 1e-9  # the measured optimum cannot be beaten
    assert result.increase_pct == pytest.approx(100 * (result.predicted_selection_ms / result.optimum_ms - 1))
    assert result.profiling_s > 0 and result.model_ms_median > 0
    report = "\n".join(format_report([result]))
    assert "Fig. 7" in report and "Table 4" in report and "alexnet" in report


def test_flow_costs_are_added_by_output_layout() -> None:
    from edgeplan.decisions.selection_costs import with_flow_costs

    structure = selection_structure(graph_of("torchvision:resnet18"))
    assert {op.node.kind.value for op in structure.flow} >= {"batch_norm", "activation", "pool2d"}
    maxpool = next(i for i, op in enumerate(structure.flow) if op.name == "maxpool")
    source = structure.flow[maxpool].source
    assert source is not None and structure.nodes[source].name == "conv1"
    options = [(PrimitiveOption("pa", "chw", "chw"), PrimitiveOption("pb", "chw", "hwc")) if n.kind == "conv" else ()
               for n in structure.nodes]
    costs = SelectionCosts(tuple(options), tuple(np.ones(len(o)) for o in options),
                           np.zeros((len(structure.edges), 3, 3)))
    flow = np.zeros((len(structure.flow), 3))
    flow[maxpool] = [3.0, 3.0, 0.2]  # max pooling is much faster on channels-last memory
    extended = with_flow_costs(structure, costs, flow)
    np.testing.assert_allclose(extended.primitive_ms[source], [4.0, 1.2])
    join = next(i for i, n in enumerate(structure.nodes) if n.kind == "join")
    assert extended.primitive_ms[join].shape == (3,)
    plan = select_primitives(structure, extended)
    assert plan.nodes[source].primitive == "pb"  # the plan moves to hwc to pool there
    with pytest.raises(InvalidInputError, match="flow costs"):
        with_flow_costs(structure, costs, np.zeros((1, 3)))


def test_the_two_thread_table_prices_every_conv_layer_of_the_six_networks() -> None:
    """``data/primitives/networks_cpu_2t.csv`` (what ``make bench-selection`` measures on each machine): every conv
    layer of the six mulder2020 networks has a row, measured at 2 threads, and the selection is optimal and finite
    without fixed layers."""
    import json

    from edgeplan.decisions.select import select

    table = data_file("primitives", "networks_cpu_2t.csv")
    provenance = json.loads(table.with_suffix(".provenance.json").read_text())
    assert provenance["threads"] == 2 and provenance["rows"] == 73
    for name in ("alexnet", "vgg11", "vgg19", "googlenet", "resnet18", "resnet34"):
        sel = select(f"torchvision:{name}", costs="measured", tables=[table])
        assert not sel.structure.fixed and sel.plan.solution.optimal and math.isfinite(sel.plan.total_ms)
