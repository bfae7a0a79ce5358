"""Partitioning a zoo model into a pipeline over an edge cluster, end to end (parthasarathy2022 and beyond).

Assembles the planner's inputs for a model: the candidate points (:mod:`edgeplan.ir.cut_points`), the bytes
crossing each point (optionally divided by the ZFP x LZ4 ratio measured on the model's own activations), each
partition's memory (conservative, as the paper), each segment's compute time measured on this machine, and the
cluster (a bandwidth file, or a simulated cluster as in the paper's §IV). Then one of the solvers:

* ``own`` (default): :func:`~edgeplan.planners.partition.joint.plan_own`, compute time and unequal nodes counted;
* ``exact``: Alg. 1's partitions, placed with the certified optimum;
* ``kpath``: the paper: Alg. 1's partitions, placed by bandwidth classes and colour-coding k-paths;
* ``greedy`` and ``random``: the paper's joint baselines.

Only ``own`` optimises compute; for every solver the result reports each stage's compute time and the
bottleneck with and without it.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError

if TYPE_CHECKING:
    from edgeplan.planners.partition.joint import JointPlan
    from edgeplan.runtimes.pipeline import PipelineResult

__all__ = ["OPTIMAL_OVER", "SOLVERS", "Cluster", "PartitionOptions", "PartitionResult", "PartitionRun",
           "load_cluster", "own_search_note", "plan_partition", "run_partition", "simulated_cluster"]

SOLVERS = ("own", "exact", "kpath", "greedy", "random")

#: What each solver's ``proven_optimal`` is optimal over (the others prove nothing).
OPTIMAL_OVER = {"own": "candidate partitionings", "exact": "placements of these partitions"}


@dataclass(frozen=True)
class Cluster:
    """Bandwidths between nodes (Mbit/s), each node's memory (bytes) and relative speed, and where they came from."""

    bandwidth_mbps: tuple[tuple[float, ...], ...]
    memory_bytes: tuple[float, ...]
    speed: tuple[float, ...]
    source: str
    positions_m: tuple[tuple[float, float], ...] | None = None

    @property
    def nodes(self) -> int:
        """Number of nodes."""
        return len(self.bandwidth_mbps)

    @classmethod
    def simulated(cls, nodes: int, seed: int, memory_mb: float, link: str = "min") -> Cluster:
        """The paper's simulated cluster (:func:`simulated_cluster`)."""
        return simulated_cluster(nodes, seed, memory_mb, link)

    @classmethod
    def from_file(cls, path: str | Path, nodes: int | None = None, memory_mb: float | None = None) -> Cluster:
        """A cluster file: a CSV bandwidth matrix or a JSON object (:func:`load_cluster`)."""
        return load_cluster(path, nodes, memory_mb)


def simulated_cluster(nodes: int, seed: int, memory_mb: float, link: str = "min") -> Cluster:
    """The paper's §IV cluster: ``nodes`` identical devices within 150 m of a router, Shannon-capacity links."""
    from edgeplan.planners.partition.simulate import cluster_positions, random_cluster

    bw = random_cluster(nodes, seed, link=link)
    xy = cluster_positions(nodes, seed)
    return Cluster(bw, (memory_mb * 2**20,) * nodes, (1.0,) * nodes,
                   f"simulated (seed {seed}, {nodes} nodes within 150 m of a router, Shannon capacity 5.5 Mbit/s "
                   f"at 80 m, link model {link!r})", xy)


_JSON_KEYS = ("bandwidth_mbps", "memory_mb", "speed")
_FORMAT_HINT = ('give a CSV of Mbit/s, one row per node, or JSON {"bandwidth_mbps": [[...], ...], "memory_mb": '
                '[...] or one number, "speed": [...] or one number}')


def _number(value: Any, what: str) -> float:
    """``value`` as a finite float; JSON numbers only (not strings, booleans or null)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{what} must be a finite number, got {json.dumps(value)}")
    return float(value)


def _per_node(value: Any, name: str, n: int) -> tuple[float, ...]:
    """A JSON ``memory_mb`` or ``speed``: one positive number per node, or one number for every node."""
    if not isinstance(value, list):
        x = _number(value, name)
        if not x > 0:
            raise InvalidInputError(f"{name} must be positive, got {x:g}")
        return (x,) * n
    if len(value) != n:
        raise InvalidInputError(f"{name} has {len(value)} entries for {n} nodes; give one per node or one number "
                                "for all")
    out = tuple(_number(x, f"{name}[{k}]") for k, x in enumerate(value))
    bad = next((k for k, x in enumerate(out) if not x > 0), None)
    if bad is not None:
        raise InvalidInputError(f"{name}[{bad}] must be positive, got {out[bad]:g}")
    return out


def _parse_json(text: str) -> tuple[tuple[tuple[float, ...], ...], Any, Any]:
    """Bandwidth matrix and the raw ``memory_mb`` and ``speed`` (``None`` when absent) of a JSON cluster."""
    data = json.loads(text)
    memory = speed = None
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(_JSON_KEYS))
        if unknown:
            raise InvalidInputError(f"unknown key(s) {', '.join(map(repr, unknown))}; the keys are "
                                    f"{', '.join(_JSON_KEYS)}")
        if "bandwidth_mbps" not in data:
            raise InvalidInputError("no 'bandwidth_mbps' key")
        matrix, memory, speed = data["bandwidth_mbps"], data.get("memory_mb"), data.get("speed")
    else:
        matrix = data
    if not isinstance(matrix, list) or not all(isinstance(row, list) for row in matrix):
        raise InvalidInputError("bandwidth_mbps must be a list of rows, each a list of Mbit/s")
    bw = tuple(tuple(_number(x, f"bandwidth_mbps[{u}][{v}]") for v, x in enumerate(row))
               for u, row in enumerate(matrix))
    return bw, memory, speed


def _parse_csv(text: str) -> tuple[tuple[float, ...], ...]:
    rows = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    out = []
    for u, line in enumerate(rows):
        row = []
        for v, cell in enumerate(line.split(",")):
            try:
                x = float(cell)
            except ValueError:
                raise InvalidInputError(f"row {u}, column {v}: {cell.strip()!r} is not a number") from None
            if not math.isfinite(x):
                raise InvalidInputError(f"row {u}, column {v}: {cell.strip()!r} is not a finite number")
            row.append(x)
        out.append(tuple(row))
    return tuple(out)


def _check_matrix(bw: tuple[tuple[float, ...], ...], p: Path, nodes: int | None) -> None:
    n = len(bw)
    if n < 1 or any(len(row) != n for row in bw):
        raise InvalidInputError(f"{p}: the bandwidth matrix must be square, got {n} rows of lengths "
                                f"{sorted({len(r) for r in bw})}")
    if nodes is not None and nodes != n:
        raise InvalidInputError(f"{p} describes {n} nodes but --nodes is {nodes}; make them agree")
    for u in range(n):
        for v in range(u + 1, n):
            if not (bw[u][v] > 0 and bw[v][u] > 0):
                raise InvalidInputError(f"{p}: bandwidth between nodes {u} and {v} must be positive")
            if abs(bw[u][v] - bw[v][u]) > 1e-9 * max(bw[u][v], bw[v][u]):
                raise InvalidInputError(f"{p}: the matrix is not symmetric at ({u}, {v}): {bw[u][v]} vs {bw[v][u]}")


def load_cluster(path: str | Path, nodes: int | None, memory_mb: float | None = None) -> Cluster:
    """Read a cluster from a file: a JSON object or a CSV bandwidth matrix.

    JSON (by the ``.json`` suffix): ``{"bandwidth_mbps": [[...], ...], "memory_mb": [...], "speed": [...]}``;
    ``memory_mb`` and ``speed`` are optional, each a list with one positive number per node or one number for
    every node; a bare list of lists is a bandwidth matrix. Any other file is CSV: one row per node,
    comma-separated Mbit/s (the diagonal is ignored; ``#`` starts a comment line). Speed defaults to 1.

    Parameters
    ----------
    path
        The file (UTF-8 text).
    nodes
        Expected number of nodes (CLI ``--nodes``), or ``None``.
    memory_mb
        Memory of every node in MiB (CLI ``--memory-mb``): needed when the file gives none; when both give it
        they must agree (there is no silent precedence).

    Raises
    ------
    InvalidInputError
        When the file cannot be read or parsed, a value is not a number, the matrix is not square or not
        symmetric, a bandwidth, memory or speed is not positive, the node count differs from ``nodes``, the memory
        is given nowhere, or the file's memory disagrees with ``memory_mb``.
    """
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as e:
        raise InvalidInputError(f"cannot read the bandwidth file {p}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"{p} is not UTF-8 text (byte {e.start}); give a CSV or JSON text file") from e
    memory: Any = None
    speed: Any = None
    try:
        if p.suffix.lower() == ".json":
            bw, memory, speed = _parse_json(text)
        else:
            bw = _parse_csv(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{p}: not valid JSON ({e}); {_FORMAT_HINT}") from e
    except InvalidInputError as e:
        raise InvalidInputError(f"{p}: {e}; {_FORMAT_HINT}") from e
    _check_matrix(bw, p, nodes)
    n = len(bw)
    try:
        mem_mb = None if memory is None else _per_node(memory, "memory_mb", n)
        spd = (1.0,) * n if speed is None else _per_node(speed, "speed", n)
    except InvalidInputError as e:
        raise InvalidInputError(f"{p}: {e}") from e
    if memory_mb is not None and not (math.isfinite(memory_mb) and memory_mb > 0):
        raise InvalidInputError(f"--memory-mb must be a positive number, got {memory_mb}")
    if mem_mb is None:
        if memory_mb is None:
            raise InvalidInputError(f"{p} gives no memory_mb: add --memory-mb, or memory_mb to the JSON file")
        mem_mb = (memory_mb,) * n
    elif memory_mb is not None and any(abs(m - memory_mb) > 1e-9 * memory_mb for m in mem_mb):
        shown = ", ".join(f"{m:g}" for m in mem_mb)
        raise InvalidInputError(f"{p} gives memory_mb [{shown}] but --memory-mb is {memory_mb:g}; leave out "
                                "--memory-mb or make it agree with the file")
    return Cluster(bw, tuple(m * 2**20 for m in mem_mb), spd, f"file {p}")


@dataclass(frozen=True)
class PartitionResult:
    """A plan and every input it was computed from.

    ``proven_optimal`` is scoped by :attr:`optimal_over`: for ``own`` it means optimal over the planner's candidate
    partitionings (not over every partitioning), for ``exact`` the optimal placement of Alg. 1's partitions; the
    heuristics never claim it. ``search_complete`` is false when the time budget stopped the search of ``own``
    (some candidates neither placed nor pruned) or of ``exact`` (a step left undecided); the heuristics always
    finish. ``candidates_tried`` and ``candidates_total`` (``own`` only) count the candidate partitionings placed
    exactly and those there were.
    """

    model: str
    solver: str
    points: tuple[str, ...]
    runs: tuple[tuple[int, int], ...]
    nodes: tuple[int, ...]
    transfers_raw_bytes: tuple[float, ...]
    transfers_bytes: tuple[float, ...]
    compression: tuple[float, ...] | None
    stage_memory_bytes: tuple[float, ...]
    stage_compute_ms: tuple[float, ...] | None
    link_mbps: tuple[float, ...]
    link_ms: tuple[float, ...]
    bottleneck_ms: float
    bottleneck_with_compute_ms: float | None
    theorem1_bound_ms: float
    matching_bound_ms: float
    proven_optimal: bool
    planning_ms: float
    cluster: Cluster
    notes: tuple[str, ...]
    threads: int
    search_complete: bool = True
    candidates_tried: int | None = None
    candidates_total: int | None = None

    @property
    def optimal_over(self) -> str | None:
        """What ``proven_optimal`` is optimal over, for this solver (``None``: the solver proves nothing)."""
        return OPTIMAL_OVER.get(self.solver)

    @property
    def period_ms(self) -> float:
        """The pipeline's period: the slowest link or stage, compute counted whenever it was measured."""
        return self.bottleneck_ms if self.bottleneck_with_compute_ms is None else self.bottleneck_with_compute_ms

    def bottleneck_parts(self) -> tuple[tuple[str, int], ...]:
        """The links (``("link", i)``: stage ``i`` to ``i + 1``) and stages (``("stage", i)``, its compute) that
        take :attr:`period_ms`, ties included."""
        worst = self.period_ms
        parts = [("link", i) for i, ms in enumerate(self.link_ms) if ms >= worst * (1 - 1e-12)]
        if self.stage_compute_ms is not None:
            parts += [("stage", i) for i, ms in enumerate(self.stage_compute_ms) if ms >= worst * (1 - 1e-12)]
        return tuple(parts)

    def stage_nodes(self, graph_nodes: Any) -> list[list[str]]:
        """Names of the graph nodes of each stage (from ``graph.nodes``)."""
        position = {n.name: k for k, n in enumerate(graph_nodes)}
        out, start = [], 0
        for _, b in self.runs:
            end = position[self.points[b]]
            out.append([n.name for n in graph_nodes[start : end + 1]])
            start = end + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: cut points, partitions, transfers, placement, bandwidths, bottleneck and bounds."""
        stages = []
        for i, (a, b) in enumerate(self.runs):
            stages.append({
                "stage": i, "node": self.nodes[i], "first_point": self.points[a], "last_point": self.points[b],
                "point_range": [a, b], "memory_bytes": self.stage_memory_bytes[i],
                "node_memory_bytes": self.cluster.memory_bytes[self.nodes[i]],
                "node_speed": self.cluster.speed[self.nodes[i]],
                "compute_ms": None if self.stage_compute_ms is None else self.stage_compute_ms[i],
                "sends_bytes": self.transfers_bytes[i] if i < len(self.transfers_bytes) else 0.0,
                "sends_raw_bytes": self.transfers_raw_bytes[i] if i < len(self.transfers_raw_bytes) else 0.0,
                "link_mbps": self.link_mbps[i] if i < len(self.link_mbps) else None,
                "link_ms": self.link_ms[i] if i < len(self.link_ms) else None,
            })
        return {
            "model": self.model, "solver": self.solver,
            "cut_points": list(self.points),
            "compression_ratios": None if self.compression is None else list(self.compression),
            "stages": stages,
            "bottleneck_ms": self.bottleneck_ms,
            "bottleneck_with_compute_ms": self.bottleneck_with_compute_ms,
            "throughput_per_s": 1000.0 / self.bottleneck_ms if self.bottleneck_ms > 0 else None,
            "lower_bound_ms": {"theorem1": self.theorem1_bound_ms, "matching": self.matching_bound_ms,
                               "of": "placing these partitions' transfers (compute left out)"},
            "bottleneck_at": [{"kind": kind, "index": i} for kind, i in self.bottleneck_parts()],
            "proven_optimal": self.proven_optimal, "optimal_over": self.optimal_over,
            "search_complete": self.search_complete,
            "candidates": None if self.candidates_total is None else {"placed": self.candidates_tried,
                                                                       "total": self.candidates_total},
            "planning_ms": self.planning_ms,
            "cluster": {"source": self.cluster.source, "bandwidth_mbps": [list(r) for r in self.cluster.bandwidth_mbps],
                        "memory_bytes": list(self.cluster.memory_bytes), "speed": list(self.cluster.speed)},
            "compute_threads": self.threads, "notes": list(self.notes),
        }


def own_search_note(plan: JointPlan, time_limit_s: float) -> str:
    """How the own planner's search over its candidate partitionings ended, in one sentence."""
    tried, total = plan.candidates_tried, plan.candidates_total
    origin = plan.notes[0] if plan.notes else plan.method
    head = f"partitioning: {origin} (of {total} candidates, {tried} placed exactly"
    if not plan.search_complete:
        return (f"{head}; the time budget ({time_limit_s:g} s) stopped the search there and the rest were not tried: "
                "the best plan found, not proven optimal; raise the time limit to finish the search)")
    if not plan.proven_optimal:
        return (f"{head}; every candidate was placed or pruned, but the time budget ({time_limit_s:g} s) left a "
                "placement unproven: raise the time limit for a proof)")
    if tried == total:
        return f"{head}: every candidate placed and the best kept, optimal over these candidates)"
    return (f"{head}; the others were pruned (their lower bounds could not beat it) or could not be placed: "
            "optimal over these candidates)")


@dataclass(frozen=True)
class PartitionOptions:
    """How :func:`plan_partition` plans.

    Attributes
    ----------
    solver
        One of :data:`SOLVERS`.
    compress
        Divide each transfer by the ZFP x LZ4 ratio measured on the model's activations (eq. 4).
    compute
        Measure each segment's compute time on this machine (at ``threads``); ``own`` optimises it, the other
        solvers report it. The times are always measured here, never read from another device's file.
    threads
        Torch threads for the compute measurement.
    device
        When set, each segment's compute time is predicted on this device profile (every node a device of that
        kind: ``litert-fp32-1t`` for boards running LiteRT, or a calibrated device) instead of measured here: a
        stage costs its nodes' sum plus one invocation's overhead (:mod:`edgeplan.decisions.predicted_costs`).
    classes
        Bandwidth classes of ``kpath``.
    seed
        Seed of ``kpath``'s colourings and of ``random``.
    time_limit_s
        Search budget of ``own`` and ``exact``.
    """

    solver: str = "own"
    compress: bool = False
    compute: bool = True
    threads: int = 1
    device: str | None = None
    classes: int = 5
    seed: int = 0
    time_limit_s: float = 0.8

    def __post_init__(self) -> None:
        if self.solver not in SOLVERS:
            raise InvalidInputError(f"solver {self.solver!r} is not one of {', '.join(SOLVERS)}")
        if self.device is not None and not self.compute:
            raise InvalidInputError("a device profile prices the stages' compute; it goes with compute=True")


def plan_partition(model: str, cluster: Cluster | str | Path, options: PartitionOptions | None = None, *,
                   home: str | Path | None = None) -> PartitionResult:
    """Partition ``model`` and place it on ``cluster``.

    Parameters
    ----------
    model
        Zoo spec (``torchvision:resnet50``, a file, ...).
    cluster
        Bandwidths, memories and speeds of the nodes (:meth:`Cluster.simulated`, :meth:`Cluster.from_file`), or
        the path of a cluster file that gives every node's memory.
    options
        Solver, compression and compute measurement (default: :class:`PartitionOptions`).
    home
        The edgeplan home (a calibrated ``options.device``).

    Raises
    ------
    InvalidInputError
        For an unknown solver or a model that cannot be cut (several outputs).
    InfeasibleError
        When the model does not fit the nodes (named with the memory it needs).
    """
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.cut_points import cut_points
    from edgeplan.planners.partition import (
        PartitionProblem,
        PlacementProblem,
        joint_greedy,
        joint_random,
        matching_bound,
        place_exact,
        place_kpath,
        plan_own,
        shortest_partition_path,
        theorem1_bound,
    )
    from edgeplan.planners.partition.from_graph import partition_problem

    if isinstance(cluster, str | Path):
        cluster = load_cluster(cluster, None)
    options = options or PartitionOptions()
    if not isinstance(options, PartitionOptions):
        raise InvalidInputError(f"options must be a PartitionOptions, got {type(options).__name__}")
    solver, compress, compute, threads = options.solver, options.compress, options.compute, options.threads
    classes, seed, time_limit_s = options.classes, options.seed, options.time_limit_s
    graph = load_graph(model)
    cuts = cut_points(graph)
    raw = partition_problem(cuts, max(cluster.memory_bytes))
    ratios: tuple[float, ...] | None = None
    problem = raw
    if compress:
        from edgeplan.runtimes.compression import measure_compression

        measured = measure_compression(graph, list(raw.points[:-1]))
        ratios = tuple(measured[p].ratio if p in measured else 1.0 for p in raw.points)
        problem = partition_problem(cuts, max(cluster.memory_bytes), {p: r for p, r in zip(raw.points, ratios,
                                                                                           strict=True)})
    notes: list[str] = []
    run_ms = None
    if compute and options.device is not None:
        from edgeplan.decisions.predicted_costs import predicted_costs
        from edgeplan.measure.segment_profile import segments

        predicted = predicted_costs(graph, options.device, home=home)
        notes.append(f"compute {predicted.label}: each stage a model of its nodes' kernels, overhead included; not "
                     "measured here")
        parts = segments(graph, problem.points)
        run_ms = tuple(tuple(predicted.range_ms([n for part in parts[a:b + 1] for n in part]) if a <= b else 0.0
                             for b in range(len(parts))) for a in range(len(parts)))
    elif compute:
        from edgeplan.measure.segment_profile import run_ms_matrix, segment_ms

        run_ms = run_ms_matrix(segment_ms(graph, problem.points, threads=threads))
    identical = len(set(cluster.memory_bytes)) == 1 and len(set(cluster.speed)) == 1
    complete: bool = True
    candidates: tuple[int | None, int | None] = (None, None)  # the heuristics always finish; only own has candidates
    start = time.perf_counter()
    if solver == "own":
        plan = plan_own(problem, cluster.bandwidth_mbps, run_ms=run_ms, node_speed=cluster.speed,
                        node_memory_bytes=cluster.memory_bytes, time_limit_s=time_limit_s)
        runs, nodes, proven = plan.runs, plan.placement.nodes, plan.proven_optimal
        complete, candidates = plan.search_complete, (plan.candidates_tried, plan.candidates_total)
        notes.append(own_search_note(plan, time_limit_s))
    else:
        paper_memory = min(cluster.memory_bytes)
        if not identical:
            notes.append(f"the paper's solvers assume identical nodes: every node taken as the smallest "
                         f"({paper_memory / 2**20:.0f} MiB), speeds ignored")
        paper_problem = PartitionProblem(problem.points, problem.transfer_bytes, problem.memory_bytes, paper_memory)
        if solver in ("greedy", "random"):
            joint = (joint_greedy(paper_problem, cluster.bandwidth_mbps) if solver == "greedy"
                     else joint_random(paper_problem, cluster.bandwidth_mbps, seed))
            runs, nodes, proven = joint.runs, joint.placement.nodes, False
        else:
            alg1 = shortest_partition_path(paper_problem)
            placement_problem = PlacementProblem(alg1.transfers_bytes, cluster.bandwidth_mbps)
            if solver == "exact":
                placement = place_exact(placement_problem, time_limit_s=time_limit_s)
                proven = complete = placement.proven_optimal
                if not complete:
                    notes.append(f"the time budget ({time_limit_s:g} s) stopped the exact search: the placement is "
                                 "the best found, not proven optimal; raise the time limit for a proof")
            else:
                placement = place_kpath(placement_problem, classes=classes, seed=seed)
                notes.append(f"bandwidth classes: {classes} asked, {placement.classes_used} used")
                proven = False
            runs, nodes = alg1.runs, placement.nodes
        if compute:
            notes.append("compute time is reported, not optimised (the paper leaves it out)")
    planning_ms = (time.perf_counter() - start) * 1e3
    transfers = tuple(problem.transfer_bytes[b] for _, b in runs[:-1])
    raw_transfers = tuple(raw.transfer_bytes[b] for _, b in runs[:-1])
    bw = cluster.bandwidth_mbps
    link_mbps = tuple(bw[nodes[i]][nodes[i + 1]] for i in range(len(transfers)))
    link_ms = tuple(t * 8.0 / (m * 1e3) for t, m in zip(transfers, link_mbps, strict=True))
    compute_ms = None if run_ms is None else tuple(run_ms[a][b] / cluster.speed[v] for (a, b), v in
                                                   zip(runs, nodes, strict=True))
    bottleneck = max(link_ms, default=0.0)
    if solver == "own" and compute_ms is not None:
        bottleneck = max(bottleneck, *compute_ms)
    bound_problem = PlacementProblem(transfers, bw)
    return PartitionResult(
        model=model, solver=solver, points=problem.points,
        runs=tuple(runs), nodes=tuple(nodes), transfers_raw_bytes=raw_transfers, transfers_bytes=transfers,
        compression=ratios, stage_memory_bytes=tuple(problem.memory_bytes[a][b] for a, b in runs),
        stage_compute_ms=compute_ms, link_mbps=link_mbps, link_ms=link_ms, bottleneck_ms=bottleneck,
        bottleneck_with_compute_ms=None if compute_ms is None else max(bottleneck, *compute_ms),
        theorem1_bound_ms=theorem1_bound(bound_problem), matching_bound_ms=matching_bound(bound_problem),
        proven_optimal=proven, planning_ms=planning_ms, cluster=cluster, notes=tuple(notes), threads=threads,
        search_complete=complete, candidates_tried=candidates[0], candidates_total=candidates[1])


@dataclass(frozen=True)
class PartitionRun:
    """A partition plan deployed for real (:func:`run_partition`), or why it was not.

    Attributes
    ----------
    pipeline
        What the Ray pipeline measured beside the prediction; None when the run was skipped.
    skipped
        Why the plan was not run (``""`` when it was).
    """

    pipeline: PipelineResult | None
    skipped: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``edgeplan partition --run --json`` prints it under ``run`` (the pipeline's measurement);
        ``{"skipped": why}`` when it was not run."""
        return {"skipped": self.skipped} if self.pipeline is None else self.pipeline.to_dict()


def run_partition(result: PartitionResult, *, address: str | None = None, inputs: int = 10) -> PartitionRun:
    """Deploy ``result``'s plan as a pipeline of Ray actors, with every link emulated at its bandwidth and
    compression, and measure its throughput against the prediction.

    A plan of one stage has nothing to pipeline: the run is skipped, and :attr:`PartitionRun.skipped` says so.

    Parameters
    ----------
    result
        A plan of :func:`plan_partition`; each stage runs at its ``threads``, each link at its bandwidth and, when
        the plan was compressed, at the ratio measured at its cut point.
    address
        The Ray cluster (None: a local Ray).
    inputs
        Timed inputs streamed through the pipeline (weights and inputs seeded with 0).

    Raises
    ------
    MeasurementError
        When Ray cannot start, an actor fails or hangs, or the outputs differ from a local run of the model.
    """
    if len(result.runs) < 2:
        return PartitionRun(None, "the plan has one stage: nothing to pipeline")
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.runtimes.pipeline import PipelineOptions, run_pipeline

    ratios = None if result.compression is None else [result.compression[b] for _, b in result.runs[:-1]]
    pipeline = run_pipeline(load_graph(result.model), result.points, result.runs, result.link_mbps,
                            compression=ratios, nodes=result.nodes,
                            options=PipelineOptions(inputs=inputs, threads=result.threads, address=address, seed=0))
    return PartitionRun(pipeline)
