"""The costs of a primitive selection (mulder2020 Fig. 2): every conv layer's primitives and every tensor's layout
transformations, from a profiled table or a performance model, for the PBQP planner.

* :func:`table_costs`: measured costs from a table in the mulder2021 CSV format (theirs, or ours exported by
  ``edgeplan profile primitives --export``): the row of every conv layer and the transformation times of every tensor.
* :func:`model_costs`: predicted costs from a :class:`~edgeplan.costmodels.PerformanceModel`: one batched forward
  pass for all conv layers and one for all tensors.
* :func:`select_network`: both steps and the solve, timed as mulder2020 Table 4 times them (cost estimation plus
  PBQP).

A primitive's layouts come from a formats mapping (``name -> (input layout, output layout)``): mulder2021's
``formats.csv`` for their primitives (:func:`load_formats`), the registry for ours (:func:`own_formats`).
"""
from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.planners.pbqp.costgraph import (
    LAYOUTS,
    PrimitiveOption,
    SelectionCosts,
    SelectionPlan,
    select_primitives,
)
from edgeplan.planners.pbqp.network import SelectionStructure

if TYPE_CHECKING:
    from edgeplan.costmodels import PerformanceModel
    from edgeplan.measure.primitive_data import PrimitiveDataset

__all__ = ["Formats", "TimedSelection", "load_formats", "merged_tables", "model_costs", "own_formats",
           "select_network", "single_primitive_choice", "table_costs", "with_flow_costs"]

Formats = Mapping[str, tuple[str, str]]
"""``primitive name -> (input layout, output layout)``."""


def load_formats(path: str | Path) -> dict[str, tuple[str, str]]:
    """Read a formats file (no header; rows ``primitive,input layout,output layout``, as mulder2021's)."""
    formats: dict[str, tuple[str, str]] = {}
    with Path(path).open(newline="") as f:
        for line, row in enumerate(csv.reader(f), start=1):
            if not row:
                continue
            if len(row) != 3 or row[1] not in LAYOUTS or row[2] not in LAYOUTS:
                raise InvalidInputError(f"{path}:{line}: expected 'primitive,layout,layout' with layouts among "
                                        f"{', '.join(LAYOUTS)}, got {row}")
            formats[row[0]] = (row[1], row[2])
    return formats


def own_formats(torch_device: str = "cpu") -> dict[str, tuple[str, str]]:
    """The layouts of edgeplan's own primitives that run on ``torch_device`` (imports torch)."""
    from edgeplan.primitives import all_primitives

    return {p.name: (p.input_layout.value, p.output_layout.value) for p in all_primitives()
            if p.supports_device(torch_device)}


def _transform_matrix(names: tuple[str, ...], times_ns: np.ndarray) -> np.ndarray:
    """``(n, 3, 3)`` ms from ``X-to-Y`` columns; identity 0; a missing column is inf (never chosen)."""
    out = np.full((times_ns.shape[0], 3, 3), np.inf)
    for i in range(3):
        out[:, i, i] = 0.0
    for j, name in enumerate(names):
        src, _, dst = name.partition("-to-")
        if src != dst:
            out[:, LAYOUTS.index(src), LAYOUTS.index(dst)] = times_ns[:, j] / 1e6
    return out


def _options(structure: SelectionStructure, names: tuple[str, ...], values_ns: np.ndarray, formats: Formats,
             allowed: SelectionCosts | None) -> tuple[tuple[tuple[PrimitiveOption, ...], ...], tuple[np.ndarray, ...]]:
    known = np.array([name in formats for name in names], dtype=bool)
    column = {name: j for j, name in enumerate(names)}
    every = [PrimitiveOption(name, *formats[name]) if known[j] else None for j, name in enumerate(names)]
    usable = known[None, :] & np.isfinite(values_ns)
    options: list[tuple[PrimitiveOption, ...]] = []
    costs: list[np.ndarray] = []
    row = 0
    for i, node in enumerate(structure.nodes):
        if node.kind != "conv":
            options.append(())
            costs.append(np.zeros(0))
            continue
        mask = usable[row]
        if allowed is not None:
            keep = np.zeros(len(names), dtype=bool)
            keep[[column[o.name] for o in allowed.options[i] if o.name in column]] = True
            mask = mask & keep
        chosen = np.flatnonzero(mask)
        if chosen.size == 0:
            raise InvalidInputError(f"conv layer {node.name!r} ({_describe(node.conv)}): no primitive with a cost "
                                    "and a known layout applies")
        options.append(tuple(every[j] for j in chosen))  # type: ignore[misc]
        costs.append(values_ns[row, chosen] / 1e6)
        row += 1
    return tuple(options), tuple(costs)


def _describe(conv: tuple[int, ...] | None) -> str:
    return "" if conv is None else "c={} k={} im={} f={} s={}".format(*conv[:5])


def _interpolated(volume: np.ndarray, times_ns: np.ndarray, tensor: tuple[int, int]) -> float:
    """A transformation time for ``tensor`` interpolated log-log in the element count from the measured ones
    (clamped to the nearest measured tensor outside their range); ``inf`` (never chosen) when none is measured."""
    ok = np.isfinite(times_ns)
    if not ok.any():
        return math.inf
    order = np.argsort(volume[ok])
    c, im = tensor
    return math.exp(float(np.interp(math.log(c * im * im), volume[ok][order], np.log(times_ns[ok][order]))))


def table_costs(structure: SelectionStructure, data: PrimitiveDataset, formats: Formats) -> SelectionCosts:
    """Measured costs of a network's selection from a profiled table.

    Parameters
    ----------
    structure
        The network's selection nodes and layout edges.
    data
        The table (mulder2021 format).
    formats
        The primitives' layouts; columns without one are left out.

    Returns
    -------
    SelectionCosts
        A tensor the table has no time for gets it interpolated (log-log in the element count ``c im^2``,
        clamped outside the measured range; ``inf`` for a transformation measured on no tensor); ``source`` and
        ``interpolated`` say for how many edges.

    Raises
    ------
    InvalidInputError
        A conv layer of the structure has no row in the table (make it layout-fixed with ``selectable``).
    """
    index = {tuple(int(v) for v in row): r for r, row in enumerate(data.features)}
    rows, missing = [], []
    for node in structure.nodes:
        if node.kind == "conv" and node.conv is not None:
            r = index.get(node.conv[:5])
            (missing.append(f"{node.name} ({_describe(node.conv)})") if r is None else rows.append(r))
    if missing:
        raise InvalidInputError(f"{len(missing)} conv layers have no row in {data.source or 'the table'}: "
                                f"{', '.join(missing[:5])}; leave them out of the selection (selectable=...)")
    options, costs = _options(structure, data.primitives, data.primitive_ns[rows], formats, None)
    table = data.transform_table()
    lookup = {(int(c), int(im)): r for r, (c, im) in enumerate(table.features)}
    volume = np.log(table.features[:, 0] * table.features[:, 1] ** 2)
    times = np.empty((len(structure.edges), len(table.names)))
    estimated = 0
    for e, edge in enumerate(structure.edges):
        r = lookup.get(edge.tensor)
        times[e] = table.times_ns[r] if r is not None else np.nan
        missing = ~np.isfinite(times[e])
        if missing.any():
            estimated += 1
            times[e, missing] = [_interpolated(volume, table.times_ns[:, j], edge.tensor)
                                 for j in np.flatnonzero(missing)]
    source = f"measured: {data.source or 'table'}"
    if estimated:
        source += f" ({estimated} of {len(structure.edges)} tensors interpolated)"
    return SelectionCosts(options, costs, _transform_matrix(table.names, times), source, estimated)


def model_costs(structure: SelectionStructure, model: PerformanceModel, formats: Formats, *,
                restrict_to: SelectionCosts | None = None) -> SelectionCosts:
    """Predicted costs of a network's selection: one batched pass for the conv layers, one for the tensors.

    Parameters
    ----------
    structure
        The network's selection nodes and layout edges.
    model
        A fitted performance model.
    formats
        The primitives' layouts; outputs without one are left out.
    restrict_to
        Keep only the options these costs have (e.g. the primitives a measured table defines), node by node.

    Returns
    -------
    SelectionCosts
    """
    layers = np.array([n.conv[:5] for n in structure.nodes if n.kind == "conv" and n.conv is not None], dtype=float)
    predicted = model.predict_primitives(layers)
    options, costs = _options(structure, model.primitive_names, predicted, formats, restrict_to)
    tensors = np.array([e.tensor for e in structure.edges], dtype=float).reshape(-1, 2)
    transforms = model.predict_transforms(tensors) if len(tensors) else np.zeros((0, len(model.transform_names)))
    return SelectionCosts(options, costs, _transform_matrix(model.transform_names, transforms),
                          f"predicted: {model.kind} model")


@dataclass(frozen=True)
class TimedSelection:
    """A selection plan and how long its two stages took (mulder2020 Table 4)."""

    plan: SelectionPlan
    costs: SelectionCosts
    estimate_s: float
    solve_s: float

    @property
    def total_s(self) -> float:
        """Cost estimation plus PBQP."""
        return self.estimate_s + self.solve_s


def select_network(structure: SelectionStructure, model: PerformanceModel, formats: Formats, *,
                   solver: str = "exact", restrict_to: SelectionCosts | None = None) -> TimedSelection:
    """Predict every cost with ``model`` and solve the PBQP, timing both stages.

    Parameters
    ----------
    structure
        The network's selection nodes and layout edges.
    model
        A fitted performance model.
    formats
        The primitives' layouts.
    solver
        The PBQP solver.
    restrict_to
        As for :func:`model_costs`.

    Returns
    -------
    TimedSelection
    """
    start = time.perf_counter()
    costs = model_costs(structure, model, formats, restrict_to=restrict_to)
    estimated = time.perf_counter()
    plan = select_primitives(structure, costs, solver=solver)
    return TimedSelection(plan, costs, estimated - start, time.perf_counter() - estimated)


def single_primitive_choice(structure: SelectionStructure, costs: SelectionCosts) -> tuple[str, list[int]] | None:
    """The best single primitive used for every selected conv layer (joins in its output layout), by ``costs``.

    Returns
    -------
    tuple or None
        ``(primitive, choice)`` for :func:`~edgeplan.planners.pbqp.costgraph.plan_cost`, or ``None`` when no
        primitive applies to every layer.
    """
    from edgeplan.planners.pbqp.costgraph import plan_cost

    convs = [i for i, n in enumerate(structure.nodes) if n.kind == "conv"]
    common = set.intersection(*({o.name for o in costs.options[i]} for i in convs))
    best: tuple[float, str, list[int]] | None = None
    for name in sorted(common):
        layout = next(o.output_layout for o in costs.options[convs[0]] if o.name == name)
        choice = [next(j for j, o in enumerate(costs.options[i]) if o.name == name) if n.kind == "conv"
                  else LAYOUTS.index(layout) for i, n in enumerate(structure.nodes)]
        prims, trans, _ = plan_cost(structure, costs, choice)
        if best is None or prims + trans < best[0]:
            best = (prims + trans, name, choice)
    return None if best is None else (best[1], best[2])


def merged_tables(paths: Sequence[str | Path]) -> PrimitiveDataset:
    """Several tables of one platform as one: rows appended, columns the union (empty where a table lacks one)."""
    if isinstance(paths, str | os.PathLike):  # one table: not a sequence of one-character names
        paths = [paths]
    from edgeplan.measure.primitive_data import PrimitiveDataset, load_primitive_csv

    tables = [load_primitive_csv(p) for p in paths]
    primitives = tuple(dict.fromkeys(c for t in tables for c in t.primitives))
    transforms = tuple(dict.fromkeys(c for t in tables for c in t.transforms))

    def widen(values: np.ndarray, have: tuple[str, ...], want: tuple[str, ...]) -> np.ndarray:
        out = np.full((values.shape[0], len(want)), np.nan)
        for j, name in enumerate(have):
            out[:, want.index(name)] = values[:, j]
        return out

    return PrimitiveDataset(np.vstack([t.features for t in tables]), primitives,
                            np.vstack([widen(t.primitive_ns, t.primitives, primitives) for t in tables]), transforms,
                            np.vstack([widen(t.transform_ns, t.transforms, transforms) for t in tables]),
                            " + ".join(t.source for t in tables))


def with_flow_costs(structure: SelectionStructure, costs: SelectionCosts, flow_ms: np.ndarray) -> SelectionCosts:
    """Add the per-layout times of the layout-transparent layers to the options of the decision they follow.

    Parameters
    ----------
    structure
        The network's structure; ``structure.flow`` lists the layers.
    costs
        The costs to extend (conv primitives; joins may have none).
    flow_ms
        ``(len(structure.flow), 3)``: each layer's time in each layout (:data:`LAYOUTS` order). A layer that
        follows the network input or a layout-fixed node runs in ``chw`` whatever is chosen: a constant, left out.

    Returns
    -------
    SelectionCosts
        A conv option's time then includes the layers it feeds in its output layout; a join gets a time per layout.
    """
    if flow_ms.shape != (len(structure.flow), 3):
        raise InvalidInputError(f"flow costs of shape {flow_ms.shape}, expected {(len(structure.flow), 3)}")
    extra = np.zeros((len(structure.nodes), 3))
    for op, ms in zip(structure.flow, flow_ms, strict=True):
        if op.source is not None:
            extra[op.source] += ms
    primitive_ms = []
    for i, node in enumerate(structure.nodes):
        if node.kind == "conv":
            out = [LAYOUTS.index(o.output_layout) for o in costs.options[i]]
            primitive_ms.append(np.asarray(costs.primitive_ms[i]) + extra[i, out])
        else:
            base = np.asarray(costs.primitive_ms[i])
            primitive_ms.append((base if base.size == 3 else np.zeros(3)) + extra[i])
    return SelectionCosts(costs.options, tuple(primitive_ms), costs.transform_ms,
                          costs.source + " + measured layout-transparent layers", costs.interpolated)
