"""Run a partitioned model for real as a pipeline of Ray actors and measure its throughput (parthasarathy2022).

A partition plan cuts a model at candidate points into stages ``0..k-1``; stage ``i`` sends the output of its
last point to stage ``i + 1`` over a link. In a pipeline every stage and every link works on a different input
at the same time, so the throughput is ``1 / bottleneck``, the bottleneck being the slowest part: the largest of
the stages' compute times and the links' transfer times.

Here each stage is a :class:`Stage` actor holding the whole graph with the same seeded weights (so a split run
computes what a local run computes) and running its own nodes; each link is a :class:`Link` actor that forwards
a message after ``size_bytes * 8 / bandwidth`` seconds, ``size_bytes`` being the real bytes of the tensors it
carries (divided by a compression ratio when one is given). Links are actors of their own, so transfers overlap
compute as on a real network. Every actor runs its calls one at a time, in order.

:func:`run_pipeline` first times each stage on its own (nothing else running), predicts the bottleneck, then
streams inputs through the chain ``stage 0 -> link 0 -> stage 1 -> ...`` by chaining object references, with a
bounded number of inputs in flight, and measures the period between completions at the last stage. It checks
that every output equals a local run of the whole graph.

:func:`pipeline_stages` turns a plan into stages and checks from the graph's structure that only the cut point's
output crosses each cut. It and the actor classes import neither torch nor Ray at module level.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import statistics
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir import Graph, OpKind, Ref

if TYPE_CHECKING:
    from edgeplan.measure.graph_exec import GraphExecutor

__all__ = ["Link", "Message", "PipelineResult", "PipelineStage", "Stage", "message_bytes", "pipeline_stages",
           "run_pipeline", "transfer_ms"]

Message = tuple[np.ndarray, ...]
"""What crosses a cut: the tensors of :attr:`PipelineStage.sends`, in that order, as C-contiguous arrays."""

_PROFILE_REPEATS = 5
_POOL = 4  # distinct inputs cycled through the pipeline (each output is checked against its own reference)


@dataclass(frozen=True)
class PipelineStage:
    """One stage of a pipeline: the nodes it runs and the tensors it receives and sends.

    Attributes
    ----------
    index
        Position in the pipeline.
    nodes
        Names of the graph nodes it runs, in execution order (graph inputs excluded).
    receives
        Tensors it gets from the previous stage (the graph inputs for the first stage).
    sends
        Tensors it passes on: the outputs of its last point that later nodes read (the graph outputs for the last
        stage).
    """

    index: int
    nodes: tuple[str, ...]
    receives: tuple[Ref, ...]
    sends: tuple[Ref, ...]


def _check_runs(points: Sequence[str], runs: Sequence[tuple[int, int]]) -> None:
    m = len(points)
    if not runs:
        raise InvalidInputError("runs is empty: a pipeline needs at least one stage")
    expected = 0
    for a, b in runs:
        if a != expected or b < a or b >= m:
            raise InvalidInputError(f"runs {list(runs)} do not cover the points 0..{m - 1} in order without gaps "
                                    f"(run ({a}, {b}) should start at {expected} and end at or before {m - 1})")
        expected = b + 1
    if expected != m:
        raise InvalidInputError(f"runs {list(runs)} end at point {expected - 1}, not at the last point {m - 1} "
                                f"({points[-1]!r})")


def _positions(graph: Graph, points: Sequence[str]) -> list[int]:
    position = {node.name: k for k, node in enumerate(graph.nodes)}
    unknown = [p for p in points if p not in position]
    if unknown:
        raise InvalidInputError(f"points {unknown} are not nodes of {graph.name!r}")
    pos = [position[p] for p in points]
    if any(b <= a for a, b in itertools.pairwise(pos)):
        raise InvalidInputError(f"points of {graph.name!r} must be distinct and in execution order, got {list(points)}")
    if pos[-1] != len(graph.nodes) - 1:
        raise InvalidInputError(f"node {graph.nodes[pos[-1] + 1].name!r} of {graph.name!r} comes after the last point "
                                f"{points[-1]!r} and would belong to no stage; the last point must be the last node")
    return pos


def _lifetimes(graph: Graph) -> dict[Ref, tuple[int, float]]:
    """For every tensor: the position of its producer (-1 for graph inputs) and of its last reader (inf: output)."""
    life: dict[Ref, tuple[int, float]] = {}
    for k, node in enumerate(graph.nodes):
        born = -1 if node.kind is OpKind.INPUT else k
        for i in range(len(node.output_shapes)):
            life[Ref(node.name, i)] = (born, -math.inf)
        for ref in node.inputs:
            life[ref] = (life[ref][0], max(life[ref][1], k))
    for ref in graph.outputs:
        life[ref] = (life[ref][0], math.inf)
    return life


def pipeline_stages(graph: Graph, points: Sequence[str], runs: Sequence[tuple[int, int]]) -> tuple[PipelineStage, ...]:
    """The stages of a partition plan: nodes per stage and the tensors that cross each cut.

    Parameters
    ----------
    graph
        The graph.
    points
        Candidate points in execution order (e.g. :attr:`PartitionProblem.points
        <edgeplan.planners.partition.PartitionProblem.points>`); the last must be the graph's last node.
    runs
        ``(first point, last point)`` per stage (:attr:`PartitionPlan.runs
        <edgeplan.planners.partition.PartitionPlan.runs>`): stage ``a..b`` runs every node after point ``a - 1``
        up to point ``b``, in ``graph.nodes`` order.

    Returns
    -------
    tuple of PipelineStage

    Raises
    ------
    InvalidInputError
        When the runs do not cover the points in order, a point is not a node, a stage would run no node, or a
        tensor other than the cut point's outputs crosses a cut (naming it: the point is not a valid cut).
    """
    _check_runs(points, runs)
    pos = _positions(graph, points)
    life = _lifetimes(graph)
    receives = tuple(Ref(n.name, i) for n in graph.inputs for i in range(len(n.output_shapes)))
    stages: list[PipelineStage] = []
    for index, (a, b) in enumerate(runs):
        start, end = (pos[a - 1] + 1 if a > 0 else 0), pos[b]
        nodes = tuple(n.name for n in graph.nodes[start : end + 1] if n.kind is not OpKind.INPUT)
        if not nodes:
            raise InvalidInputError(f"stage {index} (points {a}..{b}) of {graph.name!r} runs no node; drop the "
                                    "graph inputs from the points")
        if index == len(runs) - 1:
            sends = tuple(graph.outputs)
        else:
            crossing = sorted((r for r, (born, last) in life.items() if born <= end < last), key=str)
            stray = [str(r) for r in crossing if r.node != points[b]]
            if stray:
                raise InvalidInputError(f"cutting {graph.name!r} after {points[b]!r} would also send {stray}; "
                                        "cut only at candidate points (edgeplan.ir.cut_points)")
            sends = tuple(crossing)
        stages.append(PipelineStage(index, nodes, receives, sends))
        receives = sends
    return tuple(stages)


def transfer_ms(size_bytes: float, bandwidth_mbps: float, compression: float = 1.0) -> float:
    """Time to send ``size_bytes`` (compressed by ``compression``) over a ``bandwidth_mbps`` link, in ms."""
    return size_bytes / compression * 8.0 / (bandwidth_mbps * 1e6) * 1e3


def message_bytes(message: Message) -> int:
    """Bytes of the tensors of a message."""
    return sum(int(a.nbytes) for a in message)


class Stage:
    """A pipeline stage: runs its nodes on the tensors it receives (a Ray actor in :func:`run_pipeline`).

    Parameters
    ----------
    graph
        The whole graph (every stage builds the same seeded weights).
    stage
        What this stage runs.
    seed
        Weight seed, the same on every stage.
    threads
        Torch intra-op threads of this process.
    """

    def __init__(self, graph: Graph, stage: PipelineStage, seed: int = 0, threads: int = 1) -> None:
        import torch

        from edgeplan.measure.graph_exec import GraphExecutor

        torch.set_num_threads(threads)
        self._executor: GraphExecutor = GraphExecutor(graph, seed=seed)
        self._stage = stage
        self._spans: list[tuple[float, float]] = []

    def _compute(self, message: Message) -> Message:
        import torch

        env = {r: torch.from_numpy(a if a.flags.writeable else a.copy())
               for r, a in zip(self._stage.receives, message, strict=True)}
        with torch.inference_mode():
            self._executor.run_nodes(self._stage.nodes, env)
        return tuple(np.ascontiguousarray(env[r].numpy()) for r in self._stage.sends)

    def run(self, message: Message) -> tuple[Message, float]:
        """Run the stage's nodes on ``message``; return what it sends and when it was ready (``time.time()``).

        Records the busy span. In the pipeline the two values are two Ray objects: the next link gets both.
        """
        t0 = time.perf_counter()
        out = self._compute(message)
        self._spans.append((t0, time.perf_counter()))
        return out, time.time()

    def profile(self, message: Message, repeats: int) -> tuple[Message, list[float]]:
        """Run once untimed, then ``repeats`` timed runs; return the output and the times (ms)."""
        out = self._compute(message)
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = self._compute(message)
            samples.append((time.perf_counter() - t0) * 1e3)
        return out, samples

    def spans(self) -> list[tuple[float, float]]:
        """``(start, end)`` of every :meth:`run` so far, on this process's ``time.perf_counter`` clock."""
        return list(self._spans)

    def host(self) -> str:
        """The host name of the machine the stage runs on."""
        import socket

        return socket.gethostname()


class Link:
    """An emulated network link: holds each message for its transfer time, then forwards it.

    Parameters
    ----------
    bandwidth_mbps
        Link speed in Mbit/s.
    compression
        The message's bytes are divided by this ratio (1: uncompressed).
    """

    def __init__(self, bandwidth_mbps: float, compression: float = 1.0) -> None:
        self._mbps = bandwidth_mbps
        self._ratio = compression
        self._free_at = 0.0  # time.time() at which the last transfer ends
        self._spans: list[tuple[float, float]] = []

    def send(self, message: Message, ready_at: float | None = None) -> Message:
        """Return ``message`` when its transfer is over; records the busy span.

        The transfer starts when the message was ready (``ready_at``, a ``time.time()`` stamp from the sender;
        ``None``: now) or when the previous transfer ended, whichever is later, as on a real link where a queued
        message goes out right after the one before it. The time this actor spends between calls (Ray returning
        the last message and delivering this one) thus overlaps the transfer instead of adding to it.
        """
        t0 = time.perf_counter()
        now = time.time()
        ready = now if ready_at is None else min(ready_at, now)  # never in the future (clock skew across hosts)
        start = max(ready, self._free_at)
        self._free_at = start + transfer_ms(message_bytes(message), self._mbps, self._ratio) / 1e3
        remaining = self._free_at - time.time()
        if remaining > 0:
            time.sleep(remaining)
        self._spans.append((t0, time.perf_counter()))
        return message

    def spans(self) -> list[tuple[float, float]]:
        """``(start, end)`` of every :meth:`send` so far."""
        return list(self._spans)


@dataclass(frozen=True)
class PipelineResult:
    """What a real pipeline run measured, next to what its parts predict.

    Attributes
    ----------
    graph
        Name of the graph.
    cuts
        The points after which the model is cut (one per link).
    stage_nodes
        Number of graph nodes of each stage.
    stage_ms
        Median compute time of each stage, timed on its own (nothing else running).
    link_bytes
        Bytes of the tensors each link carries per input (before compression).
    link_mbps, compression
        Bandwidth and compression ratio of each link.
    link_ms
        Emulated transfer time of each link.
    predicted_ms
        Predicted bottleneck: the largest of ``stage_ms`` and ``link_ms``.
    bottleneck
        Which part it is, e.g. ``"stage 2"`` or ``"link 0"``.
    period_median_ms, period_mean_ms
        Median and mean time between consecutive completions at the last stage after the warm-up.
    throughput_per_s
        ``1000 / period_mean_ms``.
    period_ratio
        ``period_mean_ms / predicted_ms`` (1: the pipeline runs at the predicted throughput).
    loaded_stage_ms, loaded_link_ms
        Median busy time per input of each stage and link while streaming (compute contention and per-message
        overhead show up here).
    outputs_match
        Whether every output equals a local run of the whole graph (always true: a mismatch raises).
    max_abs_error
        Largest difference from the local run.
    inputs, warmup
        Timed inputs, and untimed ones streamed before them.
    threads
        Torch threads per stage.
    machine
        The driver's machine.
    stage_hosts
        Host name of each stage's process.
    ray_version
        Ray's version.
    nodes
        Cluster node of each stage, as given by a placement (recorded only).
    """

    graph: str
    cuts: tuple[str, ...]
    stage_nodes: tuple[int, ...]
    stage_ms: tuple[float, ...]
    link_bytes: tuple[int, ...]
    link_mbps: tuple[float, ...]
    compression: tuple[float, ...]
    link_ms: tuple[float, ...]
    predicted_ms: float
    bottleneck: str
    period_median_ms: float
    period_mean_ms: float
    throughput_per_s: float
    period_ratio: float
    loaded_stage_ms: tuple[float, ...]
    loaded_link_ms: tuple[float, ...]
    outputs_match: bool
    max_abs_error: float
    inputs: int
    warmup: int
    threads: int
    machine: str
    stage_hosts: tuple[str, ...]
    ray_version: str
    nodes: tuple[int, ...] | None = None

    @property
    def stages(self) -> int:
        """Number of stages."""
        return len(self.stage_ms)

    def to_dict(self) -> dict[str, Any]:
        """The result as plain JSON-ready values (tuples become lists)."""
        fields = dataclasses.asdict(self)
        return {"stages": self.stages, **{k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}}


@contextmanager
def _ray_session(address: str | None) -> Iterator[Any]:
    """Ray, initialised for the block: connects to ``address`` or starts a local instance; shuts down only what
    it started (an already initialised Ray is used as it is)."""
    import ray

    started = False
    if not ray.is_initialized():
        try:
            if address is not None:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"connect to the Ray cluster at {address!r}" if address else "start a local Ray instance"
            raise MeasurementError(f"could not {where}: {e}; check the address (and RAY_AUTH_MODE / the auth "
                                   "token if the cluster uses token authentication)") from e
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def _per_link(values: float | Sequence[float] | None, links: int, name: str, default: float) -> tuple[float, ...]:
    if values is None:
        out = (default,) * links
    elif isinstance(values, int | float):
        out = (float(values),) * links
    else:
        out = tuple(float(v) for v in values)
    if len(out) != links:
        raise InvalidInputError(f"{name} needs one value per link ({links}), got {len(out)}")
    if any(not v > 0 for v in out):
        raise InvalidInputError(f"{name} must be positive, got {list(out)}")
    return out


def _get(ray: Any, ref: Any, timeout_s: float, what: str) -> Any:
    try:
        return ray.get(ref, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError as e:
        raise MeasurementError(f"{what} took more than {timeout_s:.0f} s; is the Ray cluster busy?") from e
    except ray.exceptions.RayError as e:
        raise MeasurementError(f"{what} failed in a Ray actor: {e}") from e


def _steady_periods(ends: Sequence[float], warmup: int) -> list[float]:
    """Times (ms) between consecutive completions, from the last warm-up completion on."""
    ref = max(warmup - 1, 0)
    return [(b - a) * 1e3 for a, b in itertools.pairwise(ends[ref:])]


def _loaded_ms(spans: Sequence[tuple[float, float]], warmup: int) -> float:
    return statistics.median((end - start) * 1e3 for start, end in spans[warmup:])


def _machine(threads: int) -> str:
    from edgeplan.measure.device import describe_device

    d = describe_device("torch", threads)
    return f"{d.cpu_model}; {d.logical_cores} logical / {d.physical_cores} physical cores; torch {d.runtime_version}"


def _chain(stages: Sequence[Any], links: Sequence[Any], ref: Any) -> Any:
    """Submit one input through ``stage 0 -> link 0 -> stage 1 -> ...``; returns the last stage's output ref."""
    for k, stage in enumerate(stages):
        ref, ready = stage.run.options(num_returns=2).remote(ref)
        if k < len(links):
            ref = links[k].send.remote(ref, ready)
    return ref


def run_pipeline(graph: Graph, points: Sequence[str], runs: Sequence[tuple[int, int]],
                 bandwidth_mbps: Sequence[float], *, inputs: int = 20, warmup: int = 3, threads: int = 1,
                 address: str | None = None, compression: float | Sequence[float] | None = None,
                 nodes: Sequence[int] | None = None, seed: int = 0) -> PipelineResult:
    """Run a partition plan as a pipeline of Ray actors and measure its throughput against the prediction.

    Parameters
    ----------
    graph, points, runs
        The model and its plan (see :func:`pipeline_stages`).
    bandwidth_mbps
        Bandwidth of each link in order (link ``i`` joins stage ``i`` to stage ``i + 1``), in Mbit/s.
    inputs
        Timed inputs (at least 2).
    warmup
        Untimed inputs streamed before them.
    threads
        Torch threads per stage.
    address
        Ray cluster to connect to (e.g. ``"ray://host:10001"`` or ``"auto"``); ``None`` starts a local Ray with
        one CPU per core. A Ray already initialised in this process is used as it is (and ``address`` ignored);
        only a Ray started here is shut down. Actors reserve no CPU, so any number of stages fit; token
        authentication follows Ray's own settings (``RAY_AUTH_MODE``).
    compression
        Compression ratio of every link, or one per link (``None``: 1).
    nodes
        Cluster node of each stage from a placement; recorded in the result only.
    seed
        Weight and input seed.

    Returns
    -------
    PipelineResult

    Raises
    ------
    InvalidInputError
        On a bad plan (see :func:`pipeline_stages`) or bad options.
    MeasurementError
        When Ray cannot start, an actor fails or hangs, or the outputs differ from a local run of the graph.

    Notes
    -----
    The prediction gives every stage a machine of its own, as the paper does. On one machine the stages share its
    cores: when their compute times add up to more than the cores can do in one bottleneck period, the measured
    period is longer than predicted (``loaded_stage_ms`` then exceeds ``stage_ms``). Link-bound pipelines, where
    the links are slower than any stage, are not affected: a link waits without using a core.
    """
    from edgeplan.measure.harness import check_thread_count

    check_thread_count(threads)
    if inputs < 2 or warmup < 0:
        raise InvalidInputError(f"a pipeline run needs inputs >= 2 and warmup >= 0, got {inputs} and {warmup}")
    stages = pipeline_stages(graph, points, runs)
    mbps = _per_link(tuple(bandwidth_mbps), len(stages) - 1, "bandwidth_mbps", 1.0)
    ratios = _per_link(compression, len(stages) - 1, "compression", 1.0)
    if nodes is not None and len(nodes) != len(stages):
        raise InvalidInputError(f"nodes needs one node per stage ({len(stages)}), got {len(nodes)}")
    from edgeplan.measure.graph_exec import GraphExecutor

    local = GraphExecutor(graph, seed=seed)  # raises UnsupportedOperatorError here, not in an actor
    envs = [local.example_inputs(seed=seed + i) for i in range(min(_POOL, warmup + inputs))]
    messages = [tuple(np.ascontiguousarray(env[r].numpy()) for r in stages[0].receives) for env in envs]
    with _ray_session(address) as ray:
        actors, links = _start_actors(ray, graph, stages, mbps, ratios, threads, seed)
        try:
            timeout_s = 120.0
            # wait for every actor to be up, so that no start-up (importing torch) runs during the timings
            hosts = tuple(_get(ray, [a.host.remote() for a in actors], 600.0, "starting the stage actors"))
            _get(ray, [k.spans.remote() for k in links], 600.0, "starting the link actors")
            stage_ms, sent = _profile(ray, actors, messages[0], timeout_s)
            link_ms = tuple(transfer_ms(b, m, c) for b, m, c in zip(sent, mbps, ratios, strict=True))
            parts = {**{f"stage {i}": ms for i, ms in enumerate(stage_ms)},
                     **{f"link {i}": ms for i, ms in enumerate(link_ms)}}
            bottleneck = max(parts, key=parts.__getitem__)
            timeout_s += 10 * sum(parts.values()) / 1e3 * len(actors)
            outputs = _stream(ray, actors, links, messages, warmup + inputs, timeout_s)
            stage_spans = [_get(ray, a.spans.remote(), timeout_s, "reading a stage's timings") for a in actors]
            link_spans = [_get(ray, k.spans.remote(), timeout_s, "reading a link's timings") for k in links]
        finally:
            for actor in (*actors, *links):
                ray.kill(actor)
        version = ray.__version__
    error = _check_outputs(local, envs, outputs, threads)
    periods = _steady_periods([end for _, end in stage_spans[-1]], warmup)
    mean_ms = statistics.fmean(periods)
    return PipelineResult(
        graph=graph.name, cuts=tuple(points[b] for _, b in runs[:-1]), stage_nodes=tuple(len(s.nodes) for s in stages),
        stage_ms=stage_ms, link_bytes=sent, link_mbps=mbps, compression=ratios, link_ms=link_ms,
        predicted_ms=parts[bottleneck], bottleneck=bottleneck, period_median_ms=statistics.median(periods),
        period_mean_ms=mean_ms, throughput_per_s=1e3 / mean_ms, period_ratio=mean_ms / parts[bottleneck],
        loaded_stage_ms=tuple(_loaded_ms(s, warmup) for s in stage_spans),
        loaded_link_ms=tuple(_loaded_ms(s, warmup) for s in link_spans),
        outputs_match=True, max_abs_error=error, inputs=inputs, warmup=warmup, threads=threads,
        machine=_machine(threads), stage_hosts=hosts, ray_version=version,
        nodes=None if nodes is None else tuple(nodes))


def _start_actors(ray: Any, graph: Graph, stages: Sequence[PipelineStage], mbps: Sequence[float],
                  ratios: Sequence[float], threads: int, seed: int) -> tuple[list[Any], list[Any]]:
    """One :class:`Stage` actor per stage and one :class:`Link` actor per link, reserving no CPU."""
    graph_ref = ray.put(graph)
    stage_cls = ray.remote(Stage).options(num_cpus=0, max_concurrency=1)
    link_cls = ray.remote(Link).options(num_cpus=0, max_concurrency=1)
    actors = [stage_cls.remote(graph_ref, s, seed, threads) for s in stages]
    links = [link_cls.remote(m, c) for m, c in zip(mbps, ratios, strict=True)]
    return actors, links


def _profile(ray: Any, actors: Sequence[Any], message: Message,
             timeout_s: float) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Median compute time of each stage, timed one stage at a time, and the bytes each stage but the last sends."""
    medians, sent = [], []
    for i, actor in enumerate(actors):
        message, samples = _get(ray, actor.profile.remote(message, _PROFILE_REPEATS), timeout_s, f"timing stage {i}")
        medians.append(statistics.median(samples))
        sent.append(message_bytes(message))
    return tuple(medians), tuple(sent[:-1])


def _stream(ray: Any, actors: Sequence[Any], links: Sequence[Any], messages: Sequence[Message], total: int,
            timeout_s: float) -> list[Message]:
    """Stream ``total`` inputs (cycling through ``messages``) with at most two per stage in flight."""
    window = 2 * len(actors)
    pool = [ray.put(m) for m in messages]
    pending: deque[Any] = deque()
    outputs: list[Message] = []
    for i in range(total):
        if len(pending) >= window:
            outputs.append(_get(ray, pending.popleft(), timeout_s, "streaming an input"))
        pending.append(_chain(actors, links, pool[i % len(pool)]))
    while pending:
        outputs.append(_get(ray, pending.popleft(), timeout_s, "streaming an input"))
    return outputs


def _check_outputs(local: GraphExecutor, envs: Sequence[Any], outputs: Sequence[Message], threads: int) -> float:
    """Largest difference between the pipeline's outputs and local runs; raises when they differ."""
    import torch

    from edgeplan.measure.harness import use_threads

    with use_threads(threads):
        references = [local.run(env) for env in envs]
    error = 0.0
    for i, out in enumerate(outputs):
        for got, want in zip(out, references[i % len(references)], strict=True):
            got_t = torch.from_numpy(np.array(got))
            error = max(error, float((got_t - want).abs().max()))
            if not torch.allclose(got_t, want, rtol=1e-4, atol=1e-5):
                raise MeasurementError(f"output of input {i} differs from a local run of {local.graph.name!r} (max "
                                       f"abs error {float((got_t - want).abs().max()):.3g}); the stages do not "
                                       "compute the model")
    return error
