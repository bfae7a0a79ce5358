"""parthasarathy2022 §IV-V reproduced: simulated edge clusters, Alg. 1 partitions, k-path placement and baselines.

What the paper reports (§V), and what :func:`format_report` sets beside it:

* Fig. 7: the k-path algorithm's bottleneck latency by number of nodes (5 to 50) and bandwidth classes (2 to 20)
  for each model and each node memory too small to hold the whole model; the lowest value at the most nodes and
  classes; every model fits one 512 MB node; InceptionResNetV2 cannot be cut for 5 nodes of 64 MB.
* Fig. 8: about 10x lower bottleneck than the random algorithm, on average over the models.
* Fig. 9: 35% lower bottleneck than the greedy joint-optimisation algorithm at 50 nodes.
* Fig. 10: over 1000 random clusters of 50 nodes with 64 MB each, the bottleneck is on average 1.092 times
  Theorem 1's bound, and within 9% of it for 75% of the models.

Our simulation: for every model, node memory and number of nodes, ``runs`` random clusters (cluster seed = run
index; :func:`edgeplan.planners.partition.simulate.random_cluster`). Alg. 1 cuts the model (least total transfer,
uncompressed); its stages are placed by the k-path algorithm for every number of classes, and exactly (the
optimum placement of Alg. 1's partitions, ``opt`` below). The joint greedy and random baselines and edgeplan's
own planner choose their partitions themselves, so their ratio to ``opt`` can fall below 1 (the own planner
includes Alg. 1's partitions among its candidates: it is at most ``opt`` whenever its search finishes).

Aggregates: a ratio is the mean over runs of the per-run ratio; figures over models, memories and classes weight
every (model, memory, nodes, classes) cell equally. A configuration whose Alg. 1 partitioning is one stage (the
model fits one node) has no transfers and is left out, as in the paper's Fig. 7.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from edgeplan.errors import EdgeplanError, InfeasibleError
from edgeplan.measure.progress import counting_bar
from edgeplan.planners.partition import (
    PlacementProblem,
    place_exact,
    place_greedy,
    shortest_partition_path,
    theorem1_bound,
)
from edgeplan.planners.partition.from_graph import partition_problem
from edgeplan.planners.partition.joint import joint_greedy, joint_random, plan_own
from edgeplan.planners.partition.kpath import place_kpath
from edgeplan.planners.partition.simulate import random_cluster

if TYPE_CHECKING:
    from edgeplan.ir.cut_points import CutPoints
    from edgeplan.planners.partition import PartitionPlan, PartitionProblem

__all__ = ["DEFAULT_MODELS", "PAPER", "TARGETS", "CellResult", "ClaimCheck", "Fig10Row", "KPathStats",
           "SimulationConfig", "SimulationResult", "Timings", "check_claims", "fig8_rows", "fig9_rows",
           "format_report", "main", "own_ratio", "run_simulation"]

#: The paper's model set, as far as our zoo has it (Keras names: ResNet50, InceptionV3, InceptionResNetV2, ...).
DEFAULT_MODELS = ("torchvision:resnet50", "torchvision:inception_v3", "timm:inception_resnet_v2",
                  "torchvision:mobilenet_v2", "torchvision:densenet121", "timm:xception41", "torchvision:vgg16",
                  "torchvision:efficientnet_b0")

#: The paper's published figures (parthasarathy2022 abstract, §V).
PAPER: dict[str, float] = {
    "random_over_kpath": 10.0,  # Fig. 8: "10x improvement over a random partitioning/placement algorithm"
    "below_greedy_at_50_nodes": 0.35,  # Fig. 9: "for 50 nodes, our algorithm outperforms ... by 35%"
    "fig10_ratio_theorem1": 1.092,  # Fig. 10: mean ratio to Theorem 1, 50 nodes, 64 MB, 1000 trials
    "fig10_share_within_9pct": 0.75,  # Fig. 10: "75% of these models are within 9% of the optimal solution"
}

#: edgeplan's own targets (not the paper's): own planner vs the optimum, solver and planner times.
TARGETS: dict[str, float] = {"own_ratio_opt": 1.02, "exact_median_s": 10.0, "own_time_s": 1.0}

OK, INFEASIBLE, SINGLE_DEVICE, UNAVAILABLE = "ok", "infeasible", "single_device", "unavailable"


@dataclass(frozen=True)
class SimulationConfig:
    """What to simulate; the defaults are the paper's grid (shrink any of them for a quick run).

    Attributes
    ----------
    models
        Zoo names (:func:`edgeplan.frontends.zoo.load_graph`).
    memories_mb, nodes, classes
        Node memories (MiB), cluster sizes and numbers of bandwidth classes of the grid.
    runs
        Random clusters per configuration (seeds ``0 .. runs - 1``).
    fig10_trials, fig10_nodes, fig10_memory_mb, fig10_classes
        Fig. 10: random clusters (seeds ``0 .. trials - 1``), cluster size, node memory, classes.
    link
        Link model of the clusters (:data:`edgeplan.planners.partition.simulate.LINK_MODELS`).
    kpath_trials
        Colourings per k-path query.
    own_time_limit_s
        Time budget of the own planner per plan.
    """

    models: tuple[str, ...] = DEFAULT_MODELS
    memories_mb: tuple[int, ...] = (64, 128, 256, 512)
    nodes: tuple[int, ...] = (5, 10, 15, 20, 50)
    classes: tuple[int, ...] = (2, 5, 8, 11, 14, 17, 20)
    runs: int = 50
    fig10_trials: int = 1000
    fig10_nodes: int = 50
    fig10_memory_mb: int = 64
    fig10_classes: int = 20
    link: str = "min"
    kpath_trials: int = 30
    own_time_limit_s: float = 0.8


@dataclass(frozen=True)
class KPathStats:
    """The k-path algorithm with one number of classes, over the runs of one configuration.

    Ratios are means of per-run ratios (``None``: no run to compare). ``below_greedy`` is ``1 - kpath/greedy``
    against the joint greedy (§IV(a): its own partitions), ``below_greedy_alg1`` against a greedy placement of
    Alg. 1's partitions (§V: "the same optimal partitioning logic"); ``ratio_opt_same_class`` is k-path matching
    each run to links of exactly its class (the other reading of Alg. 3);
    ``fallback_runs`` counts runs that needed fewer classes than asked; ``failed_runs`` runs without a placement.
    """

    classes: int
    mean_ms: float | None
    ratio_opt: float | None
    ratio_theorem1: float | None
    below_greedy: float | None
    random_over_kpath: float | None
    fallback_runs: int
    mean_classes_used: float | None
    failed_runs: int
    ratio_opt_same_class: float | None = None
    below_greedy_alg1: float | None = None


@dataclass(frozen=True)
class CellResult:
    """One (model, memory, nodes) configuration.

    Attributes
    ----------
    status
        ``"ok"``; ``"infeasible"`` (a segment fits no node, or more stages than nodes); ``"single_device"`` (the
        model fits one node: no transfer); ``"unavailable"`` (the model did not load).
    reason
        Why the status is not ``"ok"``.
    stages
        Stages of Alg. 1's partitioning (0 when there is none).
    mean_ms
        Mean bottleneck (ms) per method: ``opt``, ``greedy``, ``random``, ``own`` and the ``theorem1`` bound.
    ratio_opt
        Mean per-run ratio to ``opt`` of ``greedy``, ``random`` and ``own``.
    failures, failure_reasons
        Runs in which a method found no plan, and the first message.
    kpath
        One entry per number of classes.
    """

    model: str
    memory_mb: int
    nodes: int
    status: str
    reason: str = ""
    stages: int = 0
    runs: int = 0
    mean_ms: dict[str, float | None] = field(default_factory=dict)
    ratio_opt: dict[str, float | None] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    failure_reasons: dict[str, str] = field(default_factory=dict)
    kpath: tuple[KPathStats, ...] = ()


@dataclass(frozen=True)
class Fig10Row:
    """Fig. 10 for one model: k-path over Theorem 1's bound and over the true optimum (means over trials)."""

    model: str
    status: str
    reason: str = ""
    stages: int = 0
    trials: int = 0
    ratio_theorem1: float | None = None
    ratio_opt: float | None = None
    opt_over_theorem1: float | None = None
    share_at_opt: float | None = None
    fallback_trials: int = 0
    failed_trials: int = 0
    ratio_theorem1_same_class: float | None = None


@dataclass(frozen=True)
class Timings:
    """Solver times (s) per run at the largest cluster of the grid (``nodes``)."""

    nodes: int
    exact_count: int = 0
    exact_median_s: float | None = None
    exact_max_s: float | None = None
    exact_proven: int = 0
    own_count: int = 0
    own_median_s: float | None = None
    own_max_s: float | None = None
    own_proven: int = 0


@dataclass(frozen=True)
class SimulationResult:
    """Everything :func:`run_simulation` measured; :meth:`to_dict` gives plain JSON-able data."""

    config: SimulationConfig
    cells: tuple[CellResult, ...]
    fig10: tuple[Fig10Row, ...]
    timings: Timings
    elapsed_s: float
    paper: dict[str, float] = field(default_factory=lambda: dict(PAPER))

    def to_dict(self) -> dict[str, Any]:
        """The result as nested dicts and lists."""
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------------- running


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _ratio(num: float, den: float) -> float | None:
    """``num / den``; 1 when both are 0, ``None`` when only the denominator is."""
    if den > 0:
        return num / den
    return 1.0 if num <= 0 else None


def _ratios(nums: Sequence[float | None], dens: Sequence[float | None]) -> list[float]:
    out = []
    for a, b in zip(nums, dens, strict=True):
        r = None if a is None or b is None else _ratio(a, b)
        if r is not None:
            out.append(r)
    return out


def _present(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


@dataclass
class _Runs:
    """Per-run bottlenecks of one configuration (``None``: the method found no plan in that run)."""

    ms: dict[str, list[float | None]] = field(default_factory=dict)
    kpath_ms: dict[int, list[float | None]] = field(default_factory=dict)
    kpath_used: dict[int, list[int]] = field(default_factory=dict)
    kpath_same_ms: dict[int, list[float | None]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    def add(self, method: str, value: float | None) -> None:
        self.ms.setdefault(method, []).append(value)

    def attempt(self, method: str, solve: Callable[[], float]) -> None:
        try:
            self.add(method, solve())
        except InfeasibleError as e:
            self.add(method, None)
            self.reasons.setdefault(method, str(e))


@dataclass
class _TimingLog:
    exact_s: list[float] = field(default_factory=list)
    exact_proven: int = 0
    own_s: list[float] = field(default_factory=list)
    own_proven: int = 0


def _one_run(runs: _Runs, pp: PartitionProblem, plan: PartitionPlan, nodes: int, run: int,
             config: SimulationConfig, log: _TimingLog | None) -> None:
    bw = random_cluster(nodes, seed=run, link=config.link)
    problem = PlacementProblem(plan.transfers_bytes, bw)
    start = time.perf_counter()
    exact = place_exact(problem)
    if log is not None:
        log.exact_s.append(time.perf_counter() - start)
        log.exact_proven += exact.proven_optimal
    runs.add("opt", exact.bottleneck_ms)
    runs.add("theorem1", theorem1_bound(problem))
    for c in config.classes:
        try:
            kp = place_kpath(problem, classes=c, trials=config.kpath_trials, seed=run)
        except InfeasibleError as e:
            runs.kpath_ms.setdefault(c, []).append(None)
            runs.reasons.setdefault(f"kpath-{c}", str(e))
            continue
        runs.kpath_ms.setdefault(c, []).append(kp.bottleneck_ms)
        runs.kpath_used.setdefault(c, []).append(kp.classes_used)
        try:
            same = place_kpath(problem, classes=c, trials=config.kpath_trials, seed=run, same_class_only=True)
            runs.kpath_same_ms.setdefault(c, []).append(same.bottleneck_ms)
        except InfeasibleError:
            runs.kpath_same_ms.setdefault(c, []).append(None)
    runs.attempt("greedy-alg1", lambda: place_greedy(problem).bottleneck_ms)
    runs.attempt("greedy", lambda: joint_greedy(pp, bw).bottleneck_ms)
    runs.attempt("random", lambda: joint_random(pp, bw, seed=run).bottleneck_ms)
    start = time.perf_counter()
    try:
        own = plan_own(pp, bw, time_limit_s=config.own_time_limit_s)
    except InfeasibleError as e:
        runs.add("own", None)
        runs.reasons.setdefault("own", str(e))
        return
    runs.add("own", own.bottleneck_ms)
    if log is not None:
        log.own_s.append(time.perf_counter() - start)
        log.own_proven += own.proven_optimal


def _cell(model: str, memory_mb: int, nodes: int, pp: PartitionProblem, plan: PartitionPlan,
          config: SimulationConfig, log: _TimingLog | None, advance: Callable[[int], None]) -> CellResult:
    runs = _Runs()
    for run in range(config.runs):
        _one_run(runs, pp, plan, nodes, run, config, log)
        advance(1)
    opt = runs.ms["opt"]
    kpath = []
    for c in config.classes:
        ms, used = runs.kpath_ms.get(c, []), runs.kpath_used.get(c, [])
        kpath.append(KPathStats(
            classes=c, mean_ms=_mean(_present(ms)), ratio_opt=_mean(_ratios(ms, opt)),
            ratio_theorem1=_mean(_ratios(ms, runs.ms["theorem1"])),
            below_greedy=_mean([1.0 - r for r in _ratios(ms, runs.ms["greedy"])]),
            below_greedy_alg1=_mean([1.0 - r for r in _ratios(ms, runs.ms["greedy-alg1"])]),
            ratio_opt_same_class=_mean(_ratios(runs.kpath_same_ms.get(c, []), opt)),
            random_over_kpath=_mean(_ratios(runs.ms["random"], ms)),
            fallback_runs=sum(u < c for u in used), mean_classes_used=_mean([float(u) for u in used]),
            failed_runs=sum(v is None for v in ms)))
    failures = {m: sum(v is None for v in vs) for m, vs in runs.ms.items()}
    failures.update({f"kpath-{c}": s.failed_runs for c, s in zip(config.classes, kpath, strict=True)})
    return CellResult(
        model, memory_mb, nodes, OK, stages=len(plan.runs), runs=config.runs,
        mean_ms={m: _mean(_present(vs)) for m, vs in runs.ms.items()},
        ratio_opt={m: _mean(_ratios(runs.ms[m], opt)) for m in ("greedy", "greedy-alg1", "random", "own")},
        failures={m: k for m, k in failures.items() if k}, failure_reasons=dict(runs.reasons), kpath=tuple(kpath))


def _fig10_row(model: str, cuts: CutPoints | None, reason: str, config: SimulationConfig,
               advance: Callable[[int], None]) -> Fig10Row:
    if cuts is None:
        advance(config.fig10_trials)
        return Fig10Row(model, UNAVAILABLE, reason)
    pp = partition_problem(cuts, config.fig10_memory_mb * 2**20)
    try:
        plan = shortest_partition_path(pp)
        if len(plan.runs) > config.fig10_nodes:
            raise InfeasibleError(f"Alg. 1 cuts {len(plan.runs)} stages, more than the {config.fig10_nodes} nodes")
    except InfeasibleError as e:
        advance(config.fig10_trials)
        return Fig10Row(model, INFEASIBLE, str(e))
    if len(plan.runs) == 1:
        advance(config.fig10_trials)
        return Fig10Row(model, SINGLE_DEVICE, f"fits one {config.fig10_memory_mb} MB node", stages=1)
    to_bound: list[float] = []
    to_opt: list[float] = []
    opt_bound: list[float] = []
    same_bound: list[float] = []
    at_opt = fallback = failed = 0
    for trial in range(config.fig10_trials):
        problem = PlacementProblem(plan.transfers_bytes, random_cluster(config.fig10_nodes, seed=trial,
                                                                        link=config.link))
        advance(1)
        opt, bound = place_exact(problem).bottleneck_ms, theorem1_bound(problem)
        try:
            kp = place_kpath(problem, classes=config.fig10_classes, trials=config.kpath_trials, seed=trial)
        except InfeasibleError:
            failed += 1
            continue
        fallback += kp.classes_used < config.fig10_classes
        try:
            same = place_kpath(problem, classes=config.fig10_classes, trials=config.kpath_trials, seed=trial,
                               same_class_only=True).bottleneck_ms
            r_same = _ratio(same, bound)
            if r_same is not None:
                same_bound.append(r_same)
        except InfeasibleError:
            pass
        at_opt += kp.bottleneck_ms <= opt * (1 + 1e-9)
        for out, num, den in ((to_bound, kp.bottleneck_ms, bound), (to_opt, kp.bottleneck_ms, opt),
                              (opt_bound, opt, bound)):
            r = _ratio(num, den)
            if r is not None:
                out.append(r)
    done = config.fig10_trials - failed
    return Fig10Row(model, OK, stages=len(plan.runs), trials=config.fig10_trials, ratio_theorem1=_mean(to_bound),
                    ratio_opt=_mean(to_opt), opt_over_theorem1=_mean(opt_bound),
                    share_at_opt=at_opt / done if done else None, fallback_trials=fallback, failed_trials=failed,
                    ratio_theorem1_same_class=_mean(same_bound))


def _load(model: str) -> tuple[CutPoints | None, str]:
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.cut_points import cut_points

    try:
        return cut_points(load_graph(model)), ""
    except (EdgeplanError, ImportError) as e:
        return None, f"{type(e).__name__}: {e}"


def _model_cells(model: str, cuts: CutPoints | None, reason: str, config: SimulationConfig,
                 log: _TimingLog, advance: Callable[[int], None]) -> list[CellResult]:
    cells = []
    for mb in config.memories_mb:
        pp = None if cuts is None else partition_problem(cuts, mb * 2**20)
        plan, why = None, reason
        if pp is not None:
            try:
                plan = shortest_partition_path(pp)
            except InfeasibleError as e:
                why = str(e)
        for n in config.nodes:
            if pp is None or plan is None:
                cells.append(CellResult(model, mb, n, UNAVAILABLE if cuts is None else INFEASIBLE, why))
                advance(config.runs)
            elif len(plan.runs) == 1:
                cells.append(CellResult(model, mb, n, SINGLE_DEVICE, f"the model fits one {mb} MB node", stages=1))
                advance(config.runs)
            elif len(plan.runs) > n:
                cells.append(CellResult(model, mb, n, INFEASIBLE, f"Alg. 1 cuts {len(plan.runs)} stages, more than "
                                        f"the {n} nodes", stages=len(plan.runs)))
                advance(config.runs)
            else:
                timed = log if n == max(config.nodes) else None
                cells.append(_cell(model, mb, n, pp, plan, config, timed, advance))
    return cells


def run_simulation(config: SimulationConfig | None = None, progress: bool = False) -> SimulationResult:
    """Run the paper's §IV simulation (Figs. 7-10) on ``config`` and time the exact and own planners.

    Parameters
    ----------
    config
        The grid; default: the paper's (8 models, 4 memories, 5 cluster sizes, 7 class counts, 50 runs, 1000
        Fig. 10 trials), which takes minutes.
    progress
        Show a rich progress bar on stderr.

    Returns
    -------
    SimulationResult
        Per-configuration means and ratios, Fig. 10 rows and timings; models that fail to load are recorded as
        ``"unavailable"`` with the error.
    """
    config = config or SimulationConfig()
    clock = time.perf_counter()
    total = len(config.models) * (len(config.memories_mb) * len(config.nodes) * config.runs + config.fig10_trials)
    log = _TimingLog()
    cells: list[CellResult] = []
    fig10 = []
    with counting_bar(progress, "parthasarathy2022 (clusters)", total) as advance:
        for model in config.models:
            cuts, reason = _load(model)  # once per model
            cells += _model_cells(model, cuts, reason, config, log, advance)
            fig10.append(_fig10_row(model, cuts, reason, config, advance))
    ex, own = log.exact_s, log.own_s
    timings = Timings(max(config.nodes), len(ex), statistics.median(ex) if ex else None, max(ex, default=None),
                      log.exact_proven, len(own), statistics.median(own) if own else None, max(own, default=None),
                      log.own_proven)
    return SimulationResult(config, tuple(cells), tuple(fig10), timings, time.perf_counter() - clock)


# ---------------------------------------------------------------------------------------------------- aggregates


@dataclass(frozen=True)
class Fig8Row:
    """Fig. 8 for one model at ``nodes``: mean bottlenecks and the mean per-run ratio random / k-path."""

    model: str
    nodes: int
    random_ms: float | None
    kpath_ms: float | None
    random_over_kpath: float | None
    cells: int


@dataclass(frozen=True)
class Fig9Row:
    """Fig. 9 at one cluster size: mean ``1 - kpath/greedy`` over all models, and per model."""

    nodes: int
    below_greedy: float | None
    by_model: dict[str, float]
    below_greedy_alg1: float | None = None


@dataclass(frozen=True)
class ClaimCheck:
    """One of the paper's claims with our measurement; ``holds`` is ``None`` when nothing could be measured."""

    claim: str
    paper: str
    measured: str
    holds: bool | None

    def line(self) -> str:
        """``paper claim ...: measured ..., holds`` (or ``does not hold`` / ``not measured``)."""
        verdict = {True: "holds", False: "does not hold", None: "not measured"}[self.holds]
        return f"paper claim {self.claim} ({self.paper}): measured {self.measured}, {verdict}"


def _ok(result: SimulationResult, nodes: int | None = None) -> list[CellResult]:
    return [c for c in result.cells if c.status == OK and (nodes is None or c.nodes == nodes)]


def fig8_rows(result: SimulationResult, nodes: int | None = None) -> list[Fig8Row]:
    """Fig. 8: per model at ``nodes`` (default the largest), random vs k-path over all memories and classes."""
    nodes = nodes or max(result.config.nodes)
    rows = []
    for model in result.config.models:
        cells = [c for c in _ok(result, nodes) if c.model == model]
        stats = [s for c in cells for s in c.kpath]
        rows.append(Fig8Row(model, nodes, _mean(_present([c.mean_ms.get("random") for c in cells])),
                            _mean(_present([s.mean_ms for s in stats])),
                            _mean(_present([s.random_over_kpath for s in stats])), len(cells)))
    return rows


def fig9_rows(result: SimulationResult) -> list[Fig9Row]:
    """Fig. 9: by cluster size, the mean of ``1 - kpath/greedy`` over models, memories and classes."""
    rows = []
    for n in result.config.nodes:
        stats = [(c.model, s.below_greedy) for c in _ok(result, n) for s in c.kpath if s.below_greedy is not None]
        by_model = {m: statistics.fmean(v for mm, v in stats if mm == m) for m in dict.fromkeys(m for m, _ in stats)}
        alg1 = [s.below_greedy_alg1 for c in _ok(result, n) for s in c.kpath if s.below_greedy_alg1 is not None]
        rows.append(Fig9Row(n, _mean([v for _, v in stats]), by_model, _mean(alg1)))
    return rows


def own_ratio(result: SimulationResult) -> float | None:
    """The own planner's mean per-run ratio to the optimum, over every feasible configuration (runs weighted)."""
    pairs = [(c.ratio_opt["own"], c.runs) for c in _ok(result) if c.ratio_opt.get("own") is not None]
    weight = sum(w for _, w in pairs)
    return sum(r * w for r, w in pairs if r is not None) / weight if weight else None


def _fig7_best_corner(result: SimulationResult) -> tuple[int, int]:
    """(model, memory) panels whose lowest k-path bottleneck is at the most nodes and classes; and the panel count."""
    hits = panels = 0
    for model in result.config.models:
        for mb in result.config.memories_mb:
            cells = [c for c in _ok(result) if c.model == model and c.memory_mb == mb]
            values = [(c.nodes, s.classes, s.mean_ms) for c in cells for s in c.kpath if s.mean_ms is not None]
            if not values:
                continue
            panels += 1
            corner = [v for n, k, v in values if n == max(result.config.nodes) and k == max(result.config.classes)]
            hits += bool(corner) and corner[0] <= min(v for _, _, v in values) * (1 + 1e-9)
    return hits, panels


def check_claims(result: SimulationResult) -> list[ClaimCheck]:
    """The paper's claims, each with our measurement and whether it holds (at least as good as the paper says)."""
    cfg, out = result.config, []
    big = max(cfg.nodes)
    f8 = _present([r.random_over_kpath for r in fig8_rows(result)])
    m8 = _mean(f8)
    g8 = statistics.geometric_mean(f8) if f8 and min(f8) > 0 else None
    out.append(ClaimCheck(f"Fig. 8: k-path bottleneck vs random at {big} nodes", f"{PAPER['random_over_kpath']:g}x "
                          "lower", "n/a" if m8 is None or g8 is None else
                          f"{m8:.1f}x lower (mean over {len(f8)} models; geometric mean {g8:.1f}x, range "
                          f"{min(f8):.1f}x-{max(f8):.1f}x)", None if g8 is None else g8 >= PAPER["random_over_kpath"]))
    row9 = next((r for r in fig9_rows(result) if r.nodes == big), None)
    for label, value in (("the joint greedy, its own partitions (§IV(a))", None if row9 is None else row9.below_greedy),
                         ("a greedy placement of Alg. 1's partitions (§V)",
                          None if row9 is None else row9.below_greedy_alg1)):
        out.append(ClaimCheck(f"Fig. 9: k-path vs {label} at {big} nodes",
                              f"{PAPER['below_greedy_at_50_nodes']:.0%} below greedy at 50 nodes",
                              "n/a" if value is None else f"{value:.1%} below greedy",
                              None if value is None else value >= PAPER["below_greedy_at_50_nodes"]))
    rows = [r for r in result.fig10 if r.ratio_theorem1 is not None]
    m10 = _mean([r.ratio_theorem1 for r in rows if r.ratio_theorem1 is not None])
    o10 = _mean([r.ratio_opt for r in rows if r.ratio_opt is not None])
    where = f"{cfg.fig10_nodes} nodes, {cfg.fig10_memory_mb} MB, {cfg.fig10_trials} trials"
    out.append(ClaimCheck(f"Fig. 10: mean ratio to Theorem 1 ({where})", f"{PAPER['fig10_ratio_theorem1']}",
                          "n/a" if m10 is None else f"{m10:.3f} over {len(rows)} models (to the true optimum: "
                          f"{o10:.3f})", None if m10 is None else m10 <= PAPER["fig10_ratio_theorem1"]))
    s10 = _mean([r.ratio_theorem1_same_class for r in rows if r.ratio_theorem1_same_class is not None])
    out.append(ClaimCheck(f"Fig. 10, k-path matching links of exactly each run's class ({where})",
                          f"{PAPER['fig10_ratio_theorem1']}", "n/a" if s10 is None else f"{s10:.3f}",
                          None if s10 is None else s10 <= PAPER["fig10_ratio_theorem1"]))
    within = [r.ratio_theorem1 <= 1.09 for r in rows if r.ratio_theorem1 is not None]
    share = sum(within) / len(within) if within else None
    out.append(ClaimCheck("Fig. 10: models within 9% of Theorem 1", f"{PAPER['fig10_share_within_9pct']:.0%}",
                          "n/a" if share is None else f"{sum(within)} of {len(within)} ({share:.0%})",
                          None if share is None else share >= PAPER["fig10_share_within_9pct"]))
    hits, panels = _fig7_best_corner(result)
    out.append(ClaimCheck("Fig. 7: lowest bottleneck at the most nodes and classes", "every model and memory",
                          f"{hits} of {panels} model/memory panels", None if not panels else hits == panels))
    if 512 in cfg.memories_mb:
        at512 = {c.model: c.status for c in result.cells if c.memory_mb == 512 and c.status != UNAVAILABLE}
        misfit = sorted(m for m, s in at512.items() if s != SINGLE_DEVICE)
        out.append(ClaimCheck("Fig. 7: every model fits one 512 MB node", "all models",
                              f"{len(at512) - len(misfit)} of {len(at512)}" + (f" (not: {', '.join(misfit)})"
                                                                              if misfit else ""),
                              None if not at512 else not misfit))
    irv2 = [c for c in result.cells if "inception_resnet_v2" in c.model and c.memory_mb == 64 and c.nodes == 5]
    if irv2:
        out.append(ClaimCheck("Fig. 7: InceptionResNetV2 cannot be placed on 5 nodes of 64 MB", "infeasible",
                              f"{irv2[0].status} ({irv2[0].reason})" if irv2[0].reason else irv2[0].status,
                              irv2[0].status == INFEASIBLE))
    return out


# ---------------------------------------------------------------------------------------------------- report


def _f(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def _fig7_lines(result: SimulationResult) -> list[str]:
    cfg = result.config
    lines = ["Fig. 7: k-path bottleneck (ms, mean of runs) by nodes (rows) and classes (columns); opt = exact "
             "placement of Alg. 1's partitions"]
    head = " ".join(f"{k:>7}" for k in cfg.classes)
    for model in cfg.models:
        cells = [c for c in result.cells if c.model == model]
        if cells and all(c.status == UNAVAILABLE for c in cells):
            lines.append(f"{model}: unavailable ({cells[0].reason})")
            continue
        single = [mb for mb in cfg.memories_mb if any(c.memory_mb == mb and c.status == SINGLE_DEVICE for c in cells)]
        for mb in cfg.memories_mb:
            row = [c for c in cells if c.memory_mb == mb]
            if mb in single:
                continue
            ok = [c for c in row if c.status == OK]
            if not ok:
                lines.append(f"{model}, {mb} MB: infeasible: {row[0].reason if row else 'not run'}")
                continue
            lines.append(f"{model}, {mb} MB, {ok[0].stages} stages:")
            lines.append(f"  {'nodes':>5} | {head} | {'opt':>7} {'greedy':>7} {'random':>8} {'own':>7} fallback")
            for c in row:
                if c.status != OK:
                    lines.append(f"  {c.nodes:>5} | {c.reason}")
                    continue
                ks = " ".join(f"{_f(s.mean_ms):>7}" for s in c.kpath)
                fb = sum(s.fallback_runs for s in c.kpath)
                lines.append(f"  {c.nodes:>5} | {ks} | {_f(c.mean_ms['opt']):>7} {_f(c.mean_ms.get('greedy')):>7} "
                             f"{_f(c.mean_ms.get('random')):>8} {_f(c.mean_ms.get('own')):>7} "
                             f"{fb}/{c.runs * len(c.kpath)}" + (f"  (failures: {c.failures})" if c.failures else ""))
        if single:
            lines.append(f"{model}: fits one node at {', '.join(map(str, single))} MB (not shown, as in the paper)")
    return lines


def _ratio_lines(result: SimulationResult) -> list[str]:
    lines = ["Mean per-run ratios to the optimum over all feasible configurations (and classes for k-path):"]
    ok = _ok(result)
    for method in ("greedy", "greedy-alg1", "random", "own"):
        vals = _present([c.ratio_opt.get(method) for c in ok])
        lines.append(f"  {method + '/opt':<15} {_f(_mean(vals), '.3f')}  (min cell "
                     f"{_f(min(vals, default=None), '.3f')}, max cell {_f(max(vals, default=None), '.3f')})")
    for label, attr in (("kpath/opt", "ratio_opt"), ("kpath/theorem1", "ratio_theorem1")):
        vals = _present([getattr(s, attr) for c in ok for s in c.kpath])
        lines.append(f"  {label:<15} {_f(_mean(vals), '.3f')}  (max cell {_f(max(vals, default=None), '.3f')})")
    by_classes = {k: _present([s.ratio_opt for c in ok for s in c.kpath if s.classes == k])
                  for k in result.config.classes}
    lines.append("  kpath/opt by classes: " + ", ".join(f"{k}: {_f(_mean(v), '.3f')}" for k, v in by_classes.items()))
    same = {k: _present([s.ratio_opt_same_class for c in ok for s in c.kpath if s.classes == k])
            for k in result.config.classes}
    lines.append("  kpath/opt by classes, links of exactly each run's class: "
                 + ", ".join(f"{k}: {_f(_mean(v), '.3f')}" for k, v in same.items()))
    fb = sum(s.fallback_runs for c in ok for s in c.kpath)
    total = sum(c.runs for c in ok) * len(result.config.classes)
    lines.append(f"  k-path fell back to fewer classes in {fb} of {total} runs")
    return lines


def format_report(result: SimulationResult) -> str:
    """The Fig. 7-10 tables, the paper's claims checked, the own planner and the solver times, as text."""
    cfg, big = result.config, max(result.config.nodes)
    lines = [f"parthasarathy2022 §IV: {len(cfg.models)} models, memories {list(cfg.memories_mb)} MB, nodes "
             f"{list(cfg.nodes)}, classes {list(cfg.classes)}, {cfg.runs} runs, link model {cfg.link!r}; "
             f"{result.elapsed_s:.0f} s", ""]
    lines += _fig7_lines(result)
    lines += ["", f"Fig. 8: k-path vs random at {big} nodes (paper: {PAPER['random_over_kpath']:g}x lower on average)",
              f"  {'model':<28} {'random ms':>10} {'kpath ms':>9} {'random/kpath':>13} cells"]
    for r in fig8_rows(result):
        lines.append(f"  {r.model:<28} {_f(r.random_ms):>10} {_f(r.kpath_ms):>9} {_f(r.random_over_kpath, '.2f'):>12}x "
                     f"{r.cells}")
    lines += ["", f"Fig. 9: % below greedy (1 - kpath/greedy) by nodes (paper: "
                  f"{PAPER['below_greedy_at_50_nodes']:.0%} at 50 nodes); the joint greedy with its own partitions "
                  "(§IV(a)), per model, and [a greedy placement of Alg. 1's partitions (§V)]"]
    for r9 in fig9_rows(result):
        per = ", ".join(f"{m.split(':')[-1]} {v:+.0%}" for m, v in r9.by_model.items())
        alg1 = None if r9.below_greedy_alg1 is None else 100 * r9.below_greedy_alg1
        lines.append(f"  {r9.nodes:>3} nodes: {_f(None if r9.below_greedy is None else 100 * r9.below_greedy):>6}%  "
                     f"({per})  [{_f(alg1)}%]")
    lines += ["", f"Fig. 10: {cfg.fig10_nodes} nodes, {cfg.fig10_memory_mb} MB, {cfg.fig10_classes} classes, "
                  f"{cfg.fig10_trials} trials (paper: mean {PAPER['fig10_ratio_theorem1']} to Theorem 1)",
              f"  {'model':<28} {'stages':>6} {'kpath/Thm1':>10} {'kpath/opt':>9} {'opt/Thm1':>8} {'at opt':>7} "
              f"{'fallback':>8} {'same-class/Thm1':>15}"]
    for r10 in result.fig10:
        if r10.status != OK:
            lines.append(f"  {r10.model:<28} {r10.status}: {r10.reason}")
            continue
        at_opt = None if r10.share_at_opt is None else 100 * r10.share_at_opt
        lines.append(f"  {r10.model:<28} {r10.stages:>6} {_f(r10.ratio_theorem1, '.3f'):>10} "
                     f"{_f(r10.ratio_opt, '.3f'):>9} {_f(r10.opt_over_theorem1, '.3f'):>8} "
                     f"{_f(at_opt, '.0f'):>6}% {r10.fallback_trials:>8} {_f(r10.ratio_theorem1_same_class, '.3f'):>15}")
    lines += ["", *_ratio_lines(result), ""]
    own = own_ratio(result)
    lines.append(f"own planner: mean ratio to the optimum placement of Alg. 1's partitions {_f(own, '.4f')} (target "
                 f"<= {TARGETS['own_ratio_opt']}; Alg. 1's partitions are among its candidates, so it exceeds 1 only "
                 "when its time budget runs out; below 1 where it finds better partitions)")
    t = result.timings
    lines.append(f"exact solver at {t.nodes} nodes: median {_f(t.exact_median_s, '.3f')} s, max "
                 f"{_f(t.exact_max_s, '.3f')} s (target median <= {TARGETS['exact_median_s']:g} s), proven optimal "
                 f"{t.exact_proven}/{t.exact_count}")
    lines.append(f"own planner at {t.nodes} nodes: median {_f(t.own_median_s, '.3f')} s, max "
                 f"{_f(t.own_max_s, '.3f')} s (target <= {TARGETS['own_time_s']:g} s), proven "
                 f"{t.own_proven}/{t.own_count}")
    lines += ["", "Claims:"]
    lines += [c.line() for c in check_claims(result)]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- command line


def _ints(text: str, name: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of integers", param_hint=name) from None
    if not values or min(values) < 1:
        raise click.BadParameter(f"{text!r}: give one or more positive integers, e.g. 5,10,50", param_hint=name)
    return values


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--models", default=None, help="Comma-separated zoo names (default: the paper's 8 models).")
@click.option("--memories", default="64,128,256,512", show_default=True, help="Node memories (MB).")
@click.option("--nodes", default="5,10,15,20,50", show_default=True, help="Cluster sizes.")
@click.option("--classes", default="2,5,8,11,14,17,20", show_default=True, help="Numbers of bandwidth classes.")
@click.option("--runs", type=click.IntRange(min=1), default=50, show_default=True,
              help="Random clusters per configuration.")
@click.option("--fig10-trials", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Random clusters of Fig. 10 (the most nodes, the least memory, the most classes).")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False), default=None,
              help="Write Figs. 7-10 as PNG files into this folder (created, and checked, before simulating).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def cli(models: str | None, memories: str, nodes: str, classes: str, runs: int, fig10_trials: int,
        plots_dir: str | None, as_json: bool) -> None:
    """Edge-cluster pipelines (parthasarathy2022 Figs. 7-10): k-path vs exact, greedy, random and edgeplan's planner.

    The paper's grid takes minutes; shrink it with --models, --nodes, --runs and --fig10-trials.

    Example: python -m experiments.parthasarathy2022 --models torchvision:resnet50 --runs 10 --json
    """
    from edgeplan.errors import InvalidInputError
    from experiments._cli import emit

    names = tuple(m.strip() for m in models.split(",") if m.strip()) if models is not None else DEFAULT_MODELS
    if not names:
        raise click.BadParameter("give at least one model", param_hint="--models")
    sizes, mbs, ks = _ints(nodes, "--nodes"), _ints(memories, "--memories"), _ints(classes, "--classes")
    config = SimulationConfig(models=names, memories_mb=mbs, nodes=sizes, classes=ks, runs=runs,
                              fig10_trials=fig10_trials, fig10_nodes=max(sizes), fig10_memory_mb=min(mbs),
                              fig10_classes=max(ks))
    if plots_dir is not None:  # a folder that cannot be written is named now, not after the simulation
        from experiments.parthasarathy2022_plots import figure_folder

        figure_folder(plots_dir)
    result = run_simulation(config, progress=not as_json)
    written = []
    if plots_dir is not None:
        from experiments.parthasarathy2022_plots import plot_partition_figures

        written = plot_partition_figures(result, plots_dir)
    lines = [format_report(result)] + (["", "figures: " + ", ".join(str(p) for p in written)] if written else [])
    data = {"experiment": "parthasarathy2022", **result.to_dict(), "own_ratio": own_ratio(result),
            "claims": [dataclasses.asdict(c) for c in check_claims(result)]}
    emit(data, lines, as_json)
    failed = sorted({f"{c.model} ({c.reason})" for c in result.cells if c.status == UNAVAILABLE})
    if failed:
        raise InvalidInputError(f"{len(failed)} model(s) could not be loaded and are missing from the results: "
                                f"{'; '.join(failed)}; fix or drop them in --models")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors on one line and a non-zero exit code."""
    from experiments._cli import run_command

    return run_command(cli, "experiments.parthasarathy2022", argv)


if __name__ == "__main__":
    sys.exit(main())
