"""The cost graph of a network (mulder2020 Fig. 2 step iii) and the selection plan: which primitive runs each
conv layer, in which layouts, and which layout transformations are inserted.

Given a :class:`~edgeplan.planners.pbqp.network.SelectionStructure` and :class:`SelectionCosts` (per conv layer
the applicable primitives with their times; per layout edge the 3 x 3 transformation times), :func:`select_primitives`
builds the PBQP instance, solves it and returns a :class:`SelectionPlan`; :func:`plan_cost` recomputes any
choice's total from the costs alone, independently of the PBQP encoding.

PBQP encoding: a conv node's options are its distinct (input, output) layout pairs, each standing for the
cheapest primitive with those layouts (the others are dominated: edges depend on layouts only); a join's options
are the three layouts. An edge between
two nodes costs ``T[out(a), in(b)]`` (``T`` the edge tensor's transformation times, identity on the diagonal =
0); an edge from a ``chw`` source adds ``T[chw, in(b)]`` to the consumer's vector, an edge into a ``chw`` sink adds
``T[out(a), chw]`` to the producer's vector.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.planners.pbqp.network import SelectionStructure
from edgeplan.planners.pbqp.problem import FloatArray, PBQPProblem
from edgeplan.planners.pbqp.solve import PBQPSolution, solve

__all__ = ["LAYOUTS", "ChosenNode", "InsertedTransform", "PrimitiveOption", "SelectionCosts", "SelectionPlan",
           "plan_cost", "select_primitives", "selection_problem"]

LAYOUTS = ("chw", "hcw", "hwc")
"""The three data layouts, in the order of the rows and columns of every transformation matrix."""

_CODE = {(a, b): 3 * i + j for i, a in enumerate(LAYOUTS) for j, b in enumerate(LAYOUTS)}


@dataclass(frozen=True)
class PrimitiveOption:
    """A primitive a conv node may use, with its input and output layout."""

    name: str
    input_layout: str
    output_layout: str


@dataclass(frozen=True, eq=False)
class SelectionCosts:
    """The costs of one network's selection, in milliseconds.

    Parameters
    ----------
    options
        Per selection node (in the structure's order): the applicable primitives of a conv node; empty for a join.
    primitive_ms
        Per selection node: the primitives' times, aligned with ``options``; for a join, empty (cost 0) or a time
        per layout (in :data:`LAYOUTS` order), e.g. of the layout-transparent layers it feeds.
    transform_ms
        Per layout edge (in the structure's order): a ``(3, 3)`` matrix, ``[src, dst]`` in :data:`LAYOUTS` order.
        The diagonal is ignored (no transformation is inserted between equal layouts).
    source
        Where the costs come from (e.g. ``"nn2 model"``, ``"measured: intel.csv"``).
    interpolated
        How many edges' transformation times were not measured but interpolated (see
        :func:`edgeplan.decisions.select.table_costs`).
    """

    options: tuple[tuple[PrimitiveOption, ...], ...]
    primitive_ms: tuple[FloatArray, ...]
    transform_ms: FloatArray
    source: str = ""
    interpolated: int = 0


@dataclass(frozen=True)
class ChosenNode:
    """The choice for one selection node.

    Parameters
    ----------
    name
        IR node name.
    kind
        ``"conv"`` or ``"join"``.
    primitive
        The selected primitive (``""`` for a join).
    input_layout, output_layout
        Layouts of the tensors the node reads and writes.
    latency_ms
        The primitive's cost (0 for a join).
    """

    name: str
    kind: str
    primitive: str
    input_layout: str
    output_layout: str
    latency_ms: float


@dataclass(frozen=True)
class InsertedTransform:
    """A layout transformation the plan inserts on an edge (only where the layouts differ)."""

    at: str
    tensor: tuple[int, int]
    src: str
    dst: str
    latency_ms: float


@dataclass(frozen=True)
class SelectionPlan:
    """A primitive selection for one network.

    Parameters
    ----------
    model
        Model name.
    nodes
        The choice of every selection node.
    choice
        Per selection node, the index of the chosen option (a primitive of the costs' options, or a join's
        layout), as :func:`plan_cost` takes it.
    transforms
        The transformations inserted.
    total_ms, primitives_ms, transforms_ms
        Predicted (or measured) total and its two parts, under the costs it was solved with.
    solution
        The PBQP solver's answer (solver, optimality, reductions, time).
    optimisation_s
        Time to build the instance and solve it.
    source
        Where the costs came from.
    """

    model: str
    nodes: tuple[ChosenNode, ...]
    choice: tuple[int, ...]
    transforms: tuple[InsertedTransform, ...]
    total_ms: float
    primitives_ms: float
    transforms_ms: float
    solution: PBQPSolution
    optimisation_s: float
    source: str

    def choices(self) -> dict[str, str]:
        """``conv node name -> primitive``."""
        return {n.name: n.primitive for n in self.nodes if n.kind == "conv"}


def _check(structure: SelectionStructure, costs: SelectionCosts) -> None:
    if len(costs.options) != len(structure.nodes) or len(costs.primitive_ms) != len(structure.nodes):
        raise InvalidInputError(f"costs for {len(costs.options)} nodes, the structure has {len(structure.nodes)}")
    if costs.transform_ms.shape != (len(structure.edges), 3, 3):
        raise InvalidInputError(f"transform costs of shape {costs.transform_ms.shape}, expected "
                                f"{(len(structure.edges), 3, 3)}")
    for node, opts, ms in zip(structure.nodes, costs.options, costs.primitive_ms, strict=True):
        if node.kind == "conv" and (not opts or len(opts) != len(ms)):
            raise InvalidInputError(f"conv layer {node.name!r}: {len(opts)} primitives with {len(ms)} costs; "
                                    "every conv layer needs at least one applicable primitive with a cost")
        if node.kind == "join" and len(ms) not in (0, 3):
            raise InvalidInputError(f"join {node.name!r}: {len(ms)} costs; give none or one per layout (3)")


def _classes(structure: SelectionStructure, costs: SelectionCosts, node: int) -> tuple[list[int], list[int], list[int]]:
    """A node's PBQP options: input layout, output layout and representative option index of each.

    A join has the three layouts. A conv node has one PBQP option per distinct (input, output) layout pair among
    its primitives, represented by the cheapest primitive of that pair: an edge's cost depends only on layouts,
    so any other primitive of the pair is dominated (exact, and it shrinks ~70 primitives to at most 9 options).
    """
    if structure.nodes[node].kind == "join":
        return [0, 1, 2], [0, 1, 2], [0, 1, 2]
    codes = np.array([_CODE[o.input_layout, o.output_layout] for o in costs.options[node]])
    ms = np.asarray(costs.primitive_ms[node], dtype=np.float64)
    keys = np.unique(codes)
    reps = [int(np.flatnonzero(codes == k)[np.argmin(ms[codes == k])]) for k in keys]
    return [int(k) // 3 for k in keys], [int(k) % 3 for k in keys], reps


def _join(costs: SelectionCosts, node: int) -> FloatArray:
    """A join's cost per layout (0 unless the costs give one)."""
    ms = np.asarray(costs.primitive_ms[node], dtype=np.float64)
    return ms if ms.size == 3 else np.zeros(3)


def _transforms(costs: SelectionCosts) -> FloatArray:
    t = np.array(costs.transform_ms, dtype=np.float64)
    t[:, [0, 1, 2], [0, 1, 2]] = 0.0
    return t


def selection_problem(structure: SelectionStructure, costs: SelectionCosts) -> tuple[PBQPProblem, list[list[int]]]:
    """The PBQP instance of a network's selection (see the module docstring for the encoding).

    Parameters
    ----------
    structure
        The network's selection nodes and layout edges.
    costs
        Their costs.

    Returns
    -------
    tuple
        The instance (one node per selection node, in the same order; a conv node's options are its distinct
        layout pairs, see :func:`_classes`) and, per node, the option index that each PBQP option stands for.
    """
    _check(structure, costs)
    t = _transforms(costs)
    classes = [_classes(structure, costs, i) for i in range(len(structure.nodes))]
    vectors = [np.asarray(costs.primitive_ms[i], dtype=np.float64)[rep] if node.kind == "conv" else _join(costs, i)
               for i, (node, (_, _, rep)) in enumerate(zip(structure.nodes, classes, strict=True))]
    edges: dict[tuple[int, int], FloatArray] = {}
    for e, edge in enumerate(structure.edges):
        if edge.producer is None and edge.consumer is not None:
            vectors[edge.consumer] = vectors[edge.consumer] + t[e, 0, classes[edge.consumer][0]]
        elif edge.consumer is None and edge.producer is not None:
            vectors[edge.producer] = vectors[edge.producer] + t[e, classes[edge.producer][1], 0]
        elif edge.producer is not None and edge.consumer is not None:
            key = (edge.producer, edge.consumer)
            matrix = t[e][np.ix_(classes[edge.producer][1], classes[edge.consumer][0])]
            edges[key] = edges[key] + matrix if key in edges else matrix
    problem = PBQPProblem.build(vectors, edges, names=[n.name for n in structure.nodes])
    return problem, [rep for _, _, rep in classes]


def plan_cost(structure: SelectionStructure, costs: SelectionCosts,
              choice: Sequence[int]) -> tuple[float, float, list[InsertedTransform]]:
    """Recompute a choice's cost from the costs, walking the edges (independent of the PBQP encoding).

    Parameters
    ----------
    structure
        The network's selection nodes and layout edges.
    costs
        The costs to price it with (they need not be those it was selected with).
    choice
        Per selection node, the option index (a primitive of a conv node, a layout index of a join).

    Returns
    -------
    tuple
        ``(primitives_ms, transforms_ms, inserted transformations)``.
    """
    _check(structure, costs)
    if len(choice) != len(structure.nodes):
        raise InvalidInputError(f"choice has {len(choice)} entries for {len(structure.nodes)} selection nodes")
    in_layout, out_layout = [], []
    primitives = 0.0
    for i, node in enumerate(structure.nodes):
        if node.kind == "conv":
            option = costs.options[i][choice[i]]
            in_layout.append(option.input_layout)
            out_layout.append(option.output_layout)
            primitives += float(costs.primitive_ms[i][choice[i]])
        else:
            in_layout.append(LAYOUTS[choice[i]])
            out_layout.append(LAYOUTS[choice[i]])
            primitives += float(_join(costs, i)[choice[i]])
    inserted = []
    for e, edge in enumerate(structure.edges):
        src = "chw" if edge.producer is None else out_layout[edge.producer]
        dst = "chw" if edge.consumer is None else in_layout[edge.consumer]
        if src != dst:
            ms = float(costs.transform_ms[e, LAYOUTS.index(src), LAYOUTS.index(dst)])
            inserted.append(InsertedTransform(edge.at, edge.tensor, src, dst, ms))
    return primitives, math.fsum(t.latency_ms for t in inserted), inserted


def select_primitives(structure: SelectionStructure, costs: SelectionCosts, *, solver: str = "exact",
                      time_limit_s: float = 60.0) -> SelectionPlan:
    """Choose every conv layer's primitive (and every join's layout) to minimise the network's total time.

    Parameters
    ----------
    structure
        The network's selection nodes and layout edges.
    costs
        Their costs.
    solver
        A PBQP solver (:data:`~edgeplan.planners.pbqp.solve.SOLVERS`).
    time_limit_s
        The solver's time limit.

    Returns
    -------
    SelectionPlan
    """
    start = time.perf_counter()
    problem, represents = selection_problem(structure, costs)
    solution = solve(problem, solver, time_limit_s=time_limit_s)
    elapsed = time.perf_counter() - start
    choice = [represents[i][a] for i, a in enumerate(solution.assignment)]
    primitives, transforms, inserted = plan_cost(structure, costs, choice)
    chosen = []
    for i, node in enumerate(structure.nodes):
        a = choice[i]
        if node.kind == "conv":
            o = costs.options[i][a]
            chosen.append(ChosenNode(node.name, "conv", o.name, o.input_layout, o.output_layout,
                                     float(costs.primitive_ms[i][a])))
        else:
            chosen.append(ChosenNode(node.name, "join", "", LAYOUTS[a], LAYOUTS[a], float(_join(costs, i)[a])))
    return SelectionPlan(structure.model, tuple(chosen), tuple(choice), tuple(inserted), primitives + transforms,
                         primitives, transforms, solution, elapsed, costs.source)
