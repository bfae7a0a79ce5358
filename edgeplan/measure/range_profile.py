"""Measure the latency of every contiguous layer range ``i..j`` of a model: n(n+1)/2 values.

eshratifar2018 §2-3 profiles every range because consecutive layers are not additive (a range runs faster or
slower than the sum of its layers). Measuring each range separately costs ~n^2/6 runs of the whole model per
repeat; we measure them in *sweeps* instead: one run per start layer ``i`` that reads the clock after every
layer, so that the mark after layer ``j`` is one sample of the range ``i..j`` executed in one go, exactly as a
plan would execute it (the tensors live at boundary ``i`` are prepared beforehand, untimed). Per repeat this
costs ~n/2 model runs. Sweeps are made for a batch of start layers at a time (:data:`BATCH_STARTS`),
interleaved round-robin inside the batch, so that a burst of load on the machine spreads over several start
layers, and the rows of each batch are committed before the next batch starts (the time budget and an
interruption lose at most one batch).

Each range becomes one row of the Store (kind ``layer_range``, subject ``layers i..j``) with the median and
spread of its samples; campaigns are resumable like any other.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgeplan.errors import InvalidInputError
from edgeplan.ir.layer_chain import LayerChain, layer_chain
from edgeplan.measure.campaign import CampaignReport, MeasurementResult, Task, run_campaign
from edgeplan.measure.device import DeviceDescriptor, describe_device
from edgeplan.measure.graph_exec import GraphExecutor
from edgeplan.measure.harness import Timing, use_threads
from edgeplan.measure.progress import counting_bar
from edgeplan.measure.store import MeasurementRecord, Store

__all__ = ["BATCH_STARTS", "RANGE_KIND", "RangeTable", "SweepConfig", "profile_ranges", "range_campaign",
           "range_table_from_records", "sweep_all_ranges"]

#: ``measurements.kind`` of a layer-range latency.
RANGE_KIND = "layer_range"

#: Start layers swept together (interleaved) before their rows are committed.
BATCH_STARTS = 6


@dataclass(frozen=True)
class SweepConfig:
    """How many sweeps to run per start layer.

    Attributes
    ----------
    repeats
        Timed sweeps per start layer; each range gets this many samples and stores their median.
    warmup
        Untimed sweeps per start layer before the timed ones.
    """

    repeats: int = 9
    warmup: int = 1

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.warmup < 0:
            raise InvalidInputError(f"sweep config needs repeats >= 1 and warmup >= 0, got {self}")


@dataclass(frozen=True)
class RangeTable:
    """Measured latencies of the layer ranges of one model on one device.

    Attributes
    ----------
    model
        The model spec.
    layers
        Layer names (head node of each layer), in order.
    median_ms
        ``(n, n)`` array; ``[i, j]`` is the median latency of layers ``i..j``; NaN below the diagonal and where
        nothing was measured.
    iqr_ms
        Interquartile ranges of the same samples.
    device
        What the ranges ran on.
    source
        Where the numbers came from (a Store path and campaign, or a shipped file).
    """

    model: str
    layers: tuple[str, ...]
    median_ms: np.ndarray
    iqr_ms: np.ndarray
    device: DeviceDescriptor
    source: str

    @property
    def complete(self) -> bool:
        """Whether every range ``i <= j`` has a value."""
        upper = np.triu(np.ones_like(self.median_ms, dtype=bool))
        return bool(np.isfinite(self.median_ms[upper]).all())

    def missing(self) -> list[tuple[int, int]]:
        """Ranges without a value."""
        n = len(self.layers)
        return [(i, j) for i in range(n) for j in range(i, n) if not np.isfinite(self.median_ms[i, j])]


def sweep_all_ranges(executor: GraphExecutor, chain: LayerChain, starts: Sequence[int],
                     config: SweepConfig) -> dict[tuple[int, int], list[float]]:
    """Samples of every range starting at one of ``starts``, from interleaved sweeps.

    Parameters
    ----------
    executor
        Runs the graph.
    chain
        The graph's layer chain.
    starts
        Start layers to sweep.
    config
        Repeats and warm-up.

    Returns
    -------
    dict
        ``(i, j) -> [sample_ms, ...]`` for every ``i`` in ``starts`` and ``j >= i``.
    """
    inputs = executor.example_inputs()
    envs = {i: executor.live_at(chain, i, inputs) for i in starts}
    samples: dict[tuple[int, int], list[float]] = {(i, j): [] for i in starts for j in range(i, len(chain))}
    for round_ in range(config.warmup + config.repeats):
        for i in starts:
            marks = executor.sweep_ms(chain, i, envs[i])
            if round_ >= config.warmup:
                for k, mark in enumerate(marks):
                    samples[(i, i + k)].append(mark)
    return samples


def profile_ranges(store: Store, model: str, *, threads: int, input_shape: tuple[int, ...] | None = None,
                   config: SweepConfig | None = None, budget_s: float | None = None, progress: bool = False,
                   command: str = "") -> CampaignReport:
    """Measure every layer range of ``model`` with torch at ``threads`` threads into ``store`` (resumable).

    Parameters
    ----------
    store
        Where the rows go; the campaign is :func:`range_campaign` (model, input shape, threads and device).
    model
        Zoo spec.
    threads
        Intra-op threads.
    input_shape
        Input shape override.
    config
        Sweep repeats and warm-up; None: those of the campaign already in ``store`` (a campaign begun with other
        settings is finished with them), else :class:`SweepConfig`'s.
    budget_s
        Time budget of this call.
    progress
        Show a progress bar.
    command
        Command line stored with the rows.

    Returns
    -------
    CampaignReport
    """
    from edgeplan.frontends.zoo import load_graph

    graph = load_graph(model, input_shape)
    chain = layer_chain(graph)
    executor = GraphExecutor(graph)
    n = len(chain)
    device = describe_device("torch", threads)
    tasks = [Task(f"{model}|{i}..{j}", model, RANGE_KIND, f"layers {i}..{j}",
                  {"first": i, "last": j, "first_layer": chain.layers[i].name, "last_layer": chain.layers[j].name,
                   "n_layers": n})
             for i in range(n) for j in range(i, n)]
    name = range_campaign(model, threads, input_shape, device.key)
    found = store.find_campaign(name)
    earlier = found.params if found is not None else None
    if config is None:
        config = SweepConfig(**{k: int(v) for k, v in (earlier or {}).items() if k in ("repeats", "warmup")})
    params = _params(model, threads, n, config, input_shape)
    if earlier is not None and (earlier.get("repeats"), earlier.get("warmup")) != (config.repeats, config.warmup):
        finish = (f"run with --repeats {earlier.get('repeats')}" if earlier.get("warmup") == config.warmup else
                  f"finish them through the Python API with SweepConfig(repeats={earlier.get('repeats')}, "
                  f"warmup={earlier.get('warmup')}) (the CLI sweeps with {SweepConfig().warmup} warm-up)")
        raise InvalidInputError(
            f"the Store at {store.path} already holds layer ranges of {model} at {threads} thread(s) swept with "
            f"{earlier.get('repeats')} repeat(s) and {earlier.get('warmup')} warm-up(s), not {config.repeats} and "
            f"{config.warmup}: {finish} to finish or reuse them, or give another --store to measure them anew")
    done = store.completed_task_keys(store.campaign(name, command, params))
    starts = sorted({int(t.params["first"]) for t in tasks if t.key not in done})
    cache: dict[tuple[int, int], list[float]] = {}

    def measure(task: Task) -> MeasurementResult:
        key = (int(task.params["first"]), int(task.params["last"]))
        timing = Timing.from_samples(cache[key], "max_repeats")
        return MeasurementResult(timing, device, {"method": "sweep", "warmup": config.warmup})

    # One run_campaign call per batch of start layers: each batch is swept, then committed, and the time budget
    # is checked between batches, so a budget or an interruption loses at most one batch.
    clock = time.monotonic()
    reports: list[CampaignReport] = []
    stopped = False
    with counting_bar(progress, f"ranges of {model}, {threads} thread(s), start layers", len(starts)) as advance:
        for k in range(0, len(starts), BATCH_STARTS):
            if budget_s is not None and time.monotonic() - clock >= budget_s:
                stopped = True
                break
            batch = starts[k : k + BATCH_STARTS]
            with use_threads(threads):
                cache.update(sweep_all_ranges(executor, chain, batch, config))
            todo = [t for t in tasks if int(t.params["first"]) in batch and t.key not in done]
            reports.append(run_campaign(store, name, todo, measure, command=command, params=params))
            advance(len(batch))
    done_now = sum(r.done_now for r in reports)
    failed = tuple(f for r in reports for f in r.failed)
    remaining = len(tasks) - len(done) - done_now
    store.set_campaign_status(store.campaign(name, command, params), "complete" if remaining == 0 else "partial")
    return CampaignReport(name, len(tasks), len(done), done_now, remaining, failed, stopped, time.monotonic() - clock)


def range_campaign(model: str, threads: int, input_shape: tuple[int, ...] | None, device_key: str) -> str:
    """Name of the campaign holding the layer ranges of one model, input shape and device."""
    shape = "x".join(map(str, input_shape)) if input_shape else "default"
    return f"ranges|{model}|{shape}|torch|{threads}t|{device_key}"


def _params(model: str, threads: int, n: int, config: SweepConfig,
            input_shape: tuple[int, ...] | None) -> dict[str, object]:
    return {"model": model, "threads": threads, "n_layers": n, "repeats": config.repeats, "warmup": config.warmup,
            "input_shape": list(input_shape) if input_shape else None}


def range_table_from_records(model: str, layers: Sequence[str], records: Sequence[MeasurementRecord],
                             device: DeviceDescriptor, source: str) -> RangeTable:
    """Assemble a :class:`RangeTable` from Store rows of kind ``layer_range`` (the latest row of each range wins).

    Raises
    ------
    InvalidInputError
        When a row's range is outside the model's layers or its layer names disagree with ``layers`` (the
        model's graph changed since it was measured).
    """
    n = len(layers)
    median = np.full((n, n), np.nan)
    iqr = np.full((n, n), np.nan)
    for rec in records:
        params = rec.extra.get("task_params", {})
        i, j = int(params.get("first", -1)), int(params.get("last", -1))
        if not 0 <= i <= j < n or params.get("n_layers") != n:
            raise InvalidInputError(f"{source}: row {rec.task_key!r} does not fit the {n} layers of {model}; "
                                    "the model changed since it was measured: measure it again")
        if params.get("first_layer") != layers[i] or params.get("last_layer") != layers[j]:
            raise InvalidInputError(f"{source}: row {rec.task_key!r} names layers {params.get('first_layer')}.."
                                    f"{params.get('last_layer')}, the graph has {layers[i]}..{layers[j]}; "
                                    "measure the model again")
        median[i, j] = rec.latency_ms
        iqr[i, j] = rec.p75_ms - rec.p25_ms
    return RangeTable(model, tuple(layers), median, iqr, device, source)
