"""Running a partition plan as a pipeline of Ray actors: profiling each stage, streaming inputs, measuring the
period and checking the outputs against a local run.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import statistics
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir import Graph
from edgeplan.runtimes.pipeline.actors import Link, Stage
from edgeplan.runtimes.pipeline.stages import Message, PipelineStage, message_bytes, pipeline_stages, transfer_ms

if TYPE_CHECKING:
    from edgeplan.measure.graph_exec import GraphExecutor


__all__ = ["PipelineOptions", "PipelineResult", "run_pipeline"]

_PROFILE_REPEATS = 5
_POOL = 4  # distinct inputs cycled through the pipeline (each output is checked against its own reference)


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


@dataclass(frozen=True)
class PipelineOptions:
    """How :func:`run_pipeline` streams, where it runs and with which weights.

    Attributes
    ----------
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
    seed
        Weight and input seed.
    """

    inputs: int = 20
    warmup: int = 3
    threads: int = 1
    address: str | None = None
    seed: int = 0


def run_pipeline(graph: Graph, points: Sequence[str], runs: Sequence[tuple[int, int]],
                 bandwidth_mbps: Sequence[float], *, compression: float | Sequence[float] | None = None,
                 nodes: Sequence[int] | None = None, options: PipelineOptions | None = None) -> PipelineResult:
    """Run a partition plan as a pipeline of Ray actors and measure its throughput against the prediction.

    Parameters
    ----------
    graph, points, runs
        The model and its plan (see :func:`pipeline_stages`).
    bandwidth_mbps
        Bandwidth of each link in order (link ``i`` joins stage ``i`` to stage ``i + 1``), in Mbit/s.
    compression
        Compression ratio of every link, or one per link (``None``: 1).
    nodes
        Cluster node of each stage from a placement; recorded in the result only.
    options
        Inputs, warm-up, threads, Ray address and seed; default :class:`PipelineOptions`.

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

    options = options or PipelineOptions()
    inputs, warmup, threads, seed = options.inputs, options.warmup, options.threads, options.seed
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
    with _ray_session(options.address) as ray:
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
