"""The primitive profiling campaign of mulder2020 §3.2.1: configuration space, measurement and CSV export.

Configuration space
-------------------
1. **Triplets.** ``(c, k, im)`` as they occur in the architectures of mulder2020 Table 7 (:data:`ARCHITECTURES`,
   the 25 of them our zoo has), extracted from their IR graphs by :func:`extract_triplets`: for every ``conv2d``
   node, ``c`` = input channels, ``k`` = output channels, ``im`` = side of its (square) input at the model's default
   input size. Groups are ignored, as in the mulder2021 dataset (its rows hold MobileNet's depthwise ``(32, 32,
   112)`` and ResNeXt's grouped ``(128, 128, 56)`` as dense layers). The 385 distinct triplets ship in
   ``edgeplan/data/primitives/zoo_triplets.json`` (382 of them are also in the 419 triplets of mulder2021).
2. **Crossing.** Each triplet is combined with every ``f`` in :data:`KERNEL_SIZES` and ``s`` in :data:`STRIDES`
   ('same' padding ``(f - 1) // 2``), and the impossible ones, ``f > im``, are dropped (:func:`config_space`).
3. **Sampling** (:func:`select_configs`). A configuration is kept when its work
   ``max(c k f^2 out^2, 6 k c P (P // 2 + 1))`` (dense multiply-accumulates; the second term, the FFT primitive's
   complex products on the padded side ``P = im + 2p``, only where that primitive applies) is at most
   ``work_cap`` (default :data:`DEFAULT_WORK_CAP`), so that every applicable primitive of every kept configuration
   is affordable on one thread; the kept ones are shuffled by a seeded RNG (the measurement order, so that drift
   of the machine does not correlate with the configuration) and optionally truncated to ``max_configs`` (a
   uniform random sample). A campaign stopped by its time budget has likewise measured a uniform random sample.

Measurement (:class:`TimingPlan`)
---------------------------------
Per configuration, inputs (one per layout) and weights are allocated once from a seeded generator; the
applicable primitives and the configuration's missing layout transformations are measured in a seeded random
order, each committed to the Store as soon as it is measured (resumable: a rerun measures only what is missing).
Per (configuration, primitive): ``prepare`` untimed, then one untimed run whose duration ``t1`` is the estimate;
if ``t1 > call_cap_ms`` the primitive is recorded as **over cap** (one run, ``stopped_by = time_cap``,
``extra.status = over_cap``) and not repeated. Otherwise one more untimed run when ``t1 < target_ms``, then
``n = clamp(ceil(target_ms / t1), min_repeats, max_repeats)`` timed runs, and the median is stored with its
spread. *Deviation from the paper* (which takes the median of a fixed number of runs of its harness): the
adaptive ``n`` (at least 3) bounds the timed work per call near ``target_ms`` so that ~50 primitives x 3000+
configurations fit in a few hours on one core; the noise this leaves is measured by a re-measured subset
(:func:`remeasure_campaign`). Times include the Python-level argument checks of :meth:`Primitive.execute`
(about a microsecond). Everything runs with one intra-op thread.

Export (:func:`export_dataset`): the mulder2021 CSV format (``c,k,im,f,s``, the nine ``X-to-Y`` columns, one
column per primitive; nanoseconds; empty = not applicable) plus a provenance JSON beside it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError, MeasurementError, StoreError
from edgeplan.measure.campaign import FailedTask
from edgeplan.measure.device import DeviceDescriptor, collect_versions
from edgeplan.measure.harness import Timing, TimingConfig, time_callable, use_threads
from edgeplan.measure.store import Campaign, MeasurementRecord, Store
from edgeplan.primitives.spec import LAYOUTS, ConvSpec

if TYPE_CHECKING:
    from edgeplan.primitives.base import Primitive

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_WORK_CAP",
    "KERNEL_SIZES",
    "PRIMITIVE_KIND",
    "STRIDES",
    "TRANSFORM_COLUMNS",
    "TRANSFORM_KIND",
    "CampaignPlan",
    "DatasetTable",
    "ExportSummary",
    "ProfileReport",
    "TimingPlan",
    "config_space",
    "dataset_table",
    "export_dataset",
    "extract_triplets",
    "find_campaign",
    "load_triplets",
    "primitive_campaign",
    "profile_primitives",
    "remeasure_campaign",
    "select_configs",
    "work_units",
    "write_triplets",
]

#: The architectures of mulder2020 Table 7 that the zoo has (MobileNet v1 comes from timm).
ARCHITECTURES: tuple[str, ...] = (
    *(f"torchvision:{name}" for name in (
        "alexnet", "vgg11", "vgg13", "vgg16", "vgg19", "googlenet", "inception_v3",
        "densenet121", "densenet161", "densenet169", "densenet201",
        "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
        "squeezenet1_0", "squeezenet1_1",
        "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0")),
    "timm:mobilenetv1_100",
)
#: Kernel sizes crossed with every triplet (mulder2020 Table 1).
KERNEL_SIZES: tuple[int, ...] = (1, 3, 5, 7, 11)
#: Strides crossed with every triplet (mulder2020 Table 1).
STRIDES: tuple[int, ...] = (1, 2, 4)
#: Default largest work (multiply-accumulates, see the module docstring) of a kept configuration.
DEFAULT_WORK_CAP = 3e8
#: ``measurements.kind`` of a primitive's time and of a layout transformation's time.
PRIMITIVE_KIND = "conv_primitive"
TRANSFORM_KIND = "layout_transform"
#: The nine transformation columns, in mulder2021 order.
TRANSFORM_COLUMNS: tuple[str, ...] = tuple(f"{a.value}-to-{b.value}" for a in LAYOUTS for b in LAYOUTS)
SHAPE_COLUMNS: tuple[str, ...] = ("c", "k", "im", "f", "s")

_TRIPLETS_FORMAT = "edgeplan-conv-triplets/1"
_DATASET_FORMAT = "edgeplan-primitive-dataset/1"
_SHIPPED_TRIPLETS = "primitives/zoo_triplets.json"
_NAME_PREFIX = "primitives|"

Triplet = tuple[int, int, int]


# ---------------------------------------------------------------------------------------------- configuration space


def extract_triplets(models: Sequence[str] = ARCHITECTURES) -> dict[Triplet, tuple[str, ...]]:
    """The distinct ``(c, k, im)`` of the conv layers of ``models``, each with the models it occurs in.

    Parameters
    ----------
    models
        Zoo specs, loaded with :func:`edgeplan.frontends.zoo.load_graph` at their default input size.

    Returns
    -------
    dict
        ``(c, k, im) -> models``, sorted by triplet; groups ignored (see the module docstring).

    Raises
    ------
    InvalidInputError
        If a model is unknown or a conv layer has a non-square input.
    """
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.ops import ConvAttrs, OpKind

    found: dict[Triplet, list[str]] = {}
    for model in dict.fromkeys(models):
        for node in load_graph(model).nodes:
            if node.kind is not OpKind.CONV2D or not isinstance(node.attrs, ConvAttrs):
                continue
            *_, h, w = node.input_shapes[0]
            if h != w:
                raise InvalidInputError(f"{model}: conv node {node.name!r} has a non-square {h}x{w} input; the "
                                        "(c, k, im) space needs square inputs")
            users = found.setdefault((node.attrs.in_channels, node.attrs.out_channels, int(h)), [])
            if model not in users:
                users.append(model)
    return {t: tuple(found[t]) for t in sorted(found)}


def write_triplets(path: str | os.PathLike[str], triplets: Mapping[Triplet, Sequence[str]], command: str) -> None:
    """Write triplets (from :func:`extract_triplets`) with their provenance to a JSON file."""
    models = sorted({m for users in triplets.values() for m in users})
    data = {"format": _TRIPLETS_FORMAT, "extracted_at": _now(), "command": command,
            "versions": collect_versions(), "models": models,
            "rule": "every conv2d node of each model's IR at its default input size: c = in_channels, "
                    "k = out_channels (groups ignored), im = input side",
            "triplets": [{"c": c, "k": k, "im": im, "models": list(triplets[(c, k, im)])}
                         for c, k, im in sorted(triplets)]}
    Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def load_triplets(path: str | os.PathLike[str] | None = None) -> tuple[Triplet, ...]:
    """The triplets of a file written by :func:`write_triplets` (default: the shipped zoo triplets).

    Raises
    ------
    InvalidInputError
        If the file is missing, not JSON or not a triplets file.
    """
    where = str(path) if path is not None else f"edgeplan/data/{_SHIPPED_TRIPLETS}"
    try:
        text = (Path(path).read_text(encoding="utf-8") if path is not None
                else resources.files("edgeplan.data").joinpath(_SHIPPED_TRIPLETS).read_text(encoding="utf-8"))
        data = json.loads(text)
    except OSError as e:
        raise InvalidInputError(f"cannot read the triplets file {where}: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{where} is not JSON ({e}); regenerate it with `edgeplan primitives triplets`") from e
    if not isinstance(data, dict) or data.get("format") != _TRIPLETS_FORMAT:
        raise InvalidInputError(f"{where} is not a {_TRIPLETS_FORMAT} file")
    return tuple(sorted((int(t["c"]), int(t["k"]), int(t["im"])) for t in data["triplets"]))


def config_space(triplets: Iterable[Triplet], kernel_sizes: Sequence[int] = KERNEL_SIZES,
                 strides: Sequence[int] = STRIDES) -> tuple[ConvSpec, ...]:
    """Every triplet crossed with every ``(f, s)``, 'same' padding, without the impossible ``f > im``.

    Returns
    -------
    tuple of ConvSpec
        Distinct configurations sorted by ``(c, k, im, f, s)``.
    """
    found = {(c, k, im, f, s) for c, k, im in triplets for f in kernel_sizes for s in strides if f <= im}
    return tuple(ConvSpec(*shape) for shape in sorted(found))


def work_units(spec: ConvSpec, with_fft: bool = True) -> float:
    """The work proxy of the sampling rule: dense MACs, or 6x the FFT primitive's complex MACs when larger."""
    macs = spec.c * spec.k * spec.f * spec.f * spec.out * spec.out
    if not with_fft:
        return float(macs)
    from edgeplan.primitives.registry import get_primitive

    if not get_primitive("fft").applies(spec):
        return float(macs)
    side = spec.padded
    return float(max(macs, 6 * spec.k * spec.c * side * (side // 2 + 1)))


def select_configs(space: Sequence[ConvSpec], *, work_cap: float, seed: int, max_configs: int | None = None,
                   with_fft: bool = True) -> tuple[ConvSpec, ...]:
    """The configurations to measure, in measurement order (the sampling rule of the module docstring)."""
    if not work_cap > 0:
        raise InvalidInputError(f"the work cap must be positive, got {work_cap}")
    if max_configs is not None and max_configs < 1:
        raise InvalidInputError(f"max_configs must be a positive integer, got {max_configs}")
    kept = [spec for spec in space if work_units(spec, with_fft) <= work_cap]
    order = random.Random(seed).sample(kept, len(kept))
    return tuple(order if max_configs is None else order[:max_configs])


# ---------------------------------------------------------------------------------------------- campaign plans


@dataclass(frozen=True)
class TimingPlan:
    """How each (configuration, primitive) is timed; see the module docstring.

    Parameters
    ----------
    target_ms
        Aimed-at total of the timed runs of one call.
    min_repeats, max_repeats
        Bounds of the number of timed runs.
    call_cap_ms
        A first run longer than this marks the primitive as over cap (not repeated).
    """

    target_ms: float = 20.0
    min_repeats: int = 3
    max_repeats: int = 50
    call_cap_ms: float = 2000.0

    def __post_init__(self) -> None:
        if not (self.target_ms > 0 and self.call_cap_ms > 0 and 1 <= self.min_repeats <= self.max_repeats):
            raise InvalidInputError(f"timing plan needs positive times and 1 <= min_repeats <= max_repeats, "
                                    f"got {self}")

    def repeats_for(self, estimate_ms: float) -> int:
        """Timed runs for a call whose first run took ``estimate_ms``."""
        wanted = math.ceil(self.target_ms / max(estimate_ms, 1e-6))
        return min(self.max_repeats, max(self.min_repeats, wanted))


@dataclass(frozen=True)
class CampaignPlan:
    """What a primitive campaign measures: its Store name, configurations in order, primitives and parameters."""

    name: str
    configs: tuple[ConvSpec, ...]
    primitives: tuple[str, ...]
    timing: TimingPlan
    params: Mapping[str, Any]
    space_size: int


def primitive_campaign(device_key: str, *, configs: Sequence[ConvSpec] | None = None,
                       triplets: Sequence[Triplet] | None = None, work_cap: float = DEFAULT_WORK_CAP,
                       seed: int = 0, max_configs: int | None = None, primitives: Sequence[str] | None = None,
                       timing: TimingPlan | None = None, threads: int = 1) -> CampaignPlan:
    """The main campaign: the zoo space (or explicit ``configs``), sampled, on one device.

    Parameters
    ----------
    device_key
        Key of the device (part of the campaign name).
    configs
        Explicit configurations, measured in the seeded order instead of the zoo space.
    triplets
        The triplets; default the shipped zoo triplets.
    work_cap, seed, max_configs
        The sampling rule (:func:`select_configs`); the cap does not apply to explicit configurations.
    primitives
        Names of the primitives to measure; default all.
    timing
        The timing plan; default :class:`TimingPlan`.
    threads
        Intra-op threads (the campaign is meant for 1).

    Returns
    -------
    CampaignPlan

    Raises
    ------
    InvalidInputError
        On an unknown primitive name, an explicit padding or an empty selection.
    """
    from edgeplan.primitives.registry import get_primitive, primitive_names

    timing = timing or TimingPlan()
    wanted = None if primitives is None else {get_primitive(p).name for p in primitives}
    names = tuple(n for n in primitive_names() if wanted is None or n in wanted)  # registry order
    if not names:
        raise InvalidInputError("no primitive to measure; name at least one (edgeplan primitives list)")
    params: dict[str, Any] = {"threads": threads, "seed": seed, "timing": asdict(timing), "primitives": list(names)}
    if configs is not None:
        padded = [s.describe() for s in configs if s.padding is not None]
        if padded:
            raise InvalidInputError(f"layers {', '.join(padded)} set a padding; the campaign (and the mulder2021 "
                                    "format) uses 'same' padding: leave padding=None")
        space = tuple(dict.fromkeys(configs))
        chosen = tuple(random.Random(seed).sample(space, len(space)))
        params["configs"] = [_shape(s) for s in space]
        tag = f"custom-{_digest(params['configs'])}"
    else:
        triplets = tuple(triplets) if triplets is not None else load_triplets()
        space = config_space(triplets)
        chosen = select_configs(space, work_cap=work_cap, seed=seed, max_configs=max_configs,
                                with_fft="fft" in names)
        params["space"] = {"triplets": len(triplets), "triplets_sha256": _digest(sorted(triplets)),
                           "kernel_sizes": list(KERNEL_SIZES), "strides": list(STRIDES), "work_cap": work_cap,
                           "max_configs": max_configs, "space_size": len(space), "selected": len(chosen)}
        tag = f"zoo-cap{work_cap:g}" + (f"-n{max_configs}" if max_configs else "")
    if not chosen:
        raise InvalidInputError("the configuration selection is empty; raise --work-cap or give configurations")
    if primitives is not None:
        tag += f"-p{_digest(list(names))}"
    name = f"{_NAME_PREFIX}{tag}-seed{seed}|torch|{threads}t|{device_key}"
    return CampaignPlan(name, chosen, names, timing, params, len(space))


def remeasure_campaign(store: Store, main: CampaignPlan, n: int, seed: int) -> CampaignPlan:
    """An independent re-measurement of ``n`` configurations complete in ``main`` (for the noise floor).

    The configurations are a seeded sample of those complete in ``main`` when the subset campaign is first
    created; resuming it reuses the stored list.

    Raises
    ------
    InvalidInputError
        If ``main`` is not in the Store or has fewer than ``n`` complete configurations.
    """
    if n < 1:
        raise InvalidInputError(f"the re-measured subset needs at least 1 configuration, got {n}")
    name = main.name.replace(_NAME_PREFIX, f"{_NAME_PREFIX}remeasure-n{n}-seed{seed}-of-", 1)
    existing = {c.name: c for c in store.campaigns()}
    if name in existing:
        params = dict(existing[name].params)
        chosen = tuple(ConvSpec(*shape) for shape in params["configs"])
    else:
        if main.name not in existing:
            raise InvalidInputError(f"campaign {main.name!r} is not in the Store at {store.path}; measure it "
                                    "before re-measuring a subset of it")
        table = dataset_table(store.measurements(campaign=main.name), main.primitives)
        complete = sorted(table.complete_configs)
        if len(complete) < n:
            raise InvalidInputError(f"campaign {main.name!r} has {len(complete)} complete configurations, fewer "
                                    f"than the {n} asked for; measure more or ask for fewer")
        chosen = tuple(ConvSpec(*shape) for shape in random.Random(seed).sample(complete, n))
        params = {**main.params, "remeasure_of": main.name, "subset_seed": seed,
                  "configs": [_shape(s) for s in chosen]}
    return CampaignPlan(name, chosen, main.primitives, main.timing, params, len(main.configs))


# ---------------------------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class ProfileReport:
    """What one call of :func:`profile_primitives` did; counts are configurations unless named ``rows``."""

    campaign: str
    configs_total: int
    configs_done_before: int
    configs_done_now: int
    rows_now: int
    over_cap: tuple[str, ...]
    failed: tuple[FailedTask, ...]
    stopped_by_budget: bool
    elapsed_s: float

    @property
    def remaining(self) -> int:
        """Configurations with at least one task still to measure."""
        return self.configs_total - self.configs_done_before - self.configs_done_now

    @property
    def configs_per_hour(self) -> float | None:
        """Measurement rate of this call, or ``None`` when it measured nothing."""
        if self.configs_done_now == 0 or self.elapsed_s <= 0:
            return None
        return self.configs_done_now / self.elapsed_s * 3600.0

    @property
    def estimated_remaining_s(self) -> float | None:
        """Time the remaining configurations take at this call's rate (the order is random, so it is unbiased)."""
        rate = self.configs_per_hour
        return None if rate is None else self.remaining / rate * 3600.0

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-serialisable dict."""
        return {"campaign": self.campaign, "configs_total": self.configs_total,
                "configs_done_before": self.configs_done_before, "configs_done_now": self.configs_done_now,
                "remaining": self.remaining, "rows_now": self.rows_now, "over_cap": list(self.over_cap),
                "failed": [{"key": f.key, "reason": f.reason} for f in self.failed],
                "stopped_by_budget": self.stopped_by_budget, "elapsed_s": self.elapsed_s,
                "configs_per_hour": self.configs_per_hour, "estimated_remaining_s": self.estimated_remaining_s}


@dataclass
class _Run:
    """Mutable state of one :func:`profile_primitives` call."""

    store: Store
    campaign: Campaign
    plan: CampaignPlan
    device: DeviceDescriptor
    command: str
    versions: dict[str, str]
    done: set[str]
    rows: int = 0
    over_cap: list[str] = field(default_factory=list)
    failed: list[FailedTask] = field(default_factory=list)


def profile_primitives(store: Store, plan: CampaignPlan, device: DeviceDescriptor, *, budget_s: float | None = None,
                       progress: bool = False, command: str = "") -> ProfileReport:
    """Measure every missing (configuration, primitive) and layout transformation of ``plan`` into ``store``.

    The time budget is checked before each configuration (a call may exceed it by one configuration). A failing
    primitive (a torch ``RuntimeError`` or ``MemoryError``) is reported and retried on the next run.

    Parameters
    ----------
    store
        Where the rows go.
    plan
        The campaign (:func:`primitive_campaign` or :func:`remeasure_campaign`).
    device
        The device description stored with every row; its thread count is used.
    budget_s
        Time budget of this call, or ``None``.
    progress
        Show a progress bar on stderr.
    command
        Command line stored with the campaign and each row.

    Returns
    -------
    ProfileReport
    """
    if budget_s is not None and not budget_s > 0:
        raise InvalidInputError(f"the time budget must be positive, got {budget_s}")
    started = time.monotonic()
    campaign = store.campaign(plan.name, command=command, params=plan.params)
    run = _Run(store, campaign, plan, device, command, collect_versions(), set(store.completed_task_keys(campaign)))
    pending = [spec for spec in plan.configs if _todo(run, spec)]
    done_before = len(plan.configs) - len(pending)
    done_now, stopped = 0, False
    store.set_campaign_status(campaign, "running")
    try:
        with use_threads(device.threads), _bar(progress, plan.name, len(plan.configs), done_before) as advance:
            for spec in pending:
                if budget_s is not None and time.monotonic() - started >= budget_s:
                    stopped = True
                    break
                _measure_config(run, spec)
                done_now += not _todo(run, spec)
                advance(_config_key(spec))
    finally:
        complete = done_before + done_now == len(plan.configs)
        store.set_campaign_status(campaign, "complete" if complete else "partial")
    return ProfileReport(plan.name, len(plan.configs), done_before, done_now, run.rows, tuple(run.over_cap),
                         tuple(run.failed), stopped, time.monotonic() - started)


@functools.cache
def _resolve(names: tuple[str, ...]) -> tuple[Primitive, ...]:
    from edgeplan.primitives.registry import get_primitive

    return tuple(get_primitive(name) for name in names)


def _jobs(plan: CampaignPlan, spec: ConvSpec) -> list[tuple[str, str, str]]:
    """``(task_key, kind, subject)`` of every task of one configuration."""
    key = _config_key(spec)
    jobs = [(f"{key}|{p.name}", PRIMITIVE_KIND, p.name) for p in _resolve(plan.primitives) if p.applies(spec)]
    act = f"c{spec.c}-im{spec.im}"
    return jobs + [(f"{act}|{name}", TRANSFORM_KIND, name) for name in TRANSFORM_COLUMNS]


def _todo(run: _Run, spec: ConvSpec) -> bool:
    return any(key not in run.done for key, _, _ in _jobs(run.plan, spec))


def _measure_config(run: _Run, spec: ConvSpec) -> None:
    import torch

    from edgeplan.primitives.layouts import from_chw, transform
    from edgeplan.primitives.registry import get_primitive

    jobs = [job for job in _jobs(run.plan, spec) if job[0] not in run.done]
    random.Random(f"{run.plan.params.get('seed')}|{_config_key(spec)}").shuffle(jobs)
    generator = torch.Generator().manual_seed(int(_digest(_shape(spec)), 16))
    x = torch.randn(spec.c, spec.im, spec.im, generator=generator)
    inputs = {layout.value: from_chw(x, layout).contiguous() for layout in LAYOUTS}
    weight = torch.randn(spec.weight_shape, generator=generator) / math.sqrt(spec.c * spec.f * spec.f)
    for key, kind, name in jobs:
        fn: Callable[[], object]
        try:
            if kind == PRIMITIVE_KIND:
                prim = get_primitive(name)
                prepared = prim.prepare(weight, None, spec=spec)
                xin = inputs[prim.input_layout.value]
                fn = functools.partial(prim.execute, xin, prepared)
                subject_shape: dict[str, int] = dict(zip(SHAPE_COLUMNS, _shape(spec), strict=True))
            else:
                src, _, dst = name.partition("-to-")
                fn = functools.partial(transform, inputs[src], src, dst)
                subject_shape = {"c": spec.c, "im": spec.im}
            timing, over, warmup_runs = _time(fn, run.plan.timing)
        except (RuntimeError, MemoryError, MeasurementError) as e:
            run.failed.append(FailedTask(key, f"{type(e).__name__}: {e}"))
            continue
        model = ("conv2d:" if kind == PRIMITIVE_KIND else "activation:") + ",".join(
            f"{k}={v}" for k, v in subject_shape.items())
        extra = {"config": subject_shape, "status": "over_cap" if over else "measured", "warmup_runs": warmup_runs}
        run.store.add_measurement(timing, run.device, model=model, task_key=key, kind=kind, subject=name,
                                  campaign=run.campaign, command=run.command, versions=run.versions, extra=extra)
        run.done.add(key)
        run.rows += 1
        if over:
            run.over_cap.append(key)


def _time(fn: Callable[[], object], plan: TimingPlan) -> tuple[Timing, bool, int]:
    """Time ``fn`` by :class:`TimingPlan`; ``(timing, over_cap, untimed runs)``."""
    start = time.perf_counter_ns()
    fn()
    first_ms = (time.perf_counter_ns() - start) / 1e6
    if first_ms > plan.call_cap_ms:
        return Timing.from_samples([first_ms], "time_cap"), True, 0
    n = plan.repeats_for(first_ms)
    warmup = 1 if first_ms < plan.target_ms else 0
    config = TimingConfig(warmup=warmup, min_repeats=n, max_repeats=n,
                          max_time_s=max(60.0, 10 * n * plan.call_cap_ms / 1e3))
    return time_callable(fn, config), False, 1 + warmup


@contextmanager
def _bar(enabled: bool, description: str, total: int, completed: int) -> Iterator[Callable[[str], None]]:
    """Advance once per configuration: a rich bar on a terminal, else a plain line on stderr every minute."""
    if not enabled:
        yield lambda _: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield _log_lines(total, completed)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("configs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=console, speed_estimate_period=900) as bar:
        task_id = bar.add_task(description[:40], total=total, completed=completed)
        yield lambda last: bar.update(task_id, advance=1, description=last)


def _log_lines(total: int, completed: int, every_s: float = 60.0) -> Callable[[str], None]:
    import sys

    started = last = time.monotonic()
    done = 0

    def advance(key: str) -> None:
        nonlocal last, done
        done += 1
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            left_h = (total - completed - done) * (now - started) / done / 3600.0
            print(f"configs {completed + done}/{total}, {now - started:.0f} s, about {left_h:.1f} h left ({key})",
                  file=sys.stderr, flush=True)

    return advance


# ---------------------------------------------------------------------------------------------- export


@dataclass(frozen=True)
class DatasetTable:
    """A campaign's measurements as mulder2021 rows (times in ns; ``None`` = not applicable or not measured).

    Attributes
    ----------
    columns
        ``c, k, im, f, s``, the nine transformations, then the primitives.
    rows
        One tuple per configuration, sorted by shape.
    complete_configs
        Shapes whose every applicable primitive and every transformation is measured (not over cap).
    incomplete
        Configurations with something missing or over cap (left out of ``rows`` unless asked for).
    over_cap_cells
        Primitive cells over the per-call cap in the rows written.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[int | None, ...], ...]
    complete_configs: frozenset[tuple[int, ...]]
    incomplete: int
    over_cap_cells: int


def dataset_table(records: Sequence[MeasurementRecord], primitives: Sequence[str],
                  include_incomplete: bool = False) -> DatasetTable:
    """Assemble a campaign's rows into a :class:`DatasetTable`.

    Parameters
    ----------
    records
        The campaign's Store rows.
    primitives
        The campaign's primitives (the primitive columns, in order).
    include_incomplete
        Also write configurations with missing or over-cap cells (those cells empty).
    """
    from edgeplan.primitives.registry import primitive_names

    known = set(primitive_names())
    prim: dict[tuple[int, ...], dict[str, int | None]] = {}
    trans: dict[tuple[int, ...], dict[str, int]] = {}
    for rec in records:
        config = rec.extra["config"]
        names = SHAPE_COLUMNS if rec.kind == PRIMITIVE_KIND else ("c", "im")
        shape = tuple(int(config[n]) for n in names)
        value = None if rec.extra.get("status") == "over_cap" else max(1, round(rec.latency_ms * 1e6))
        if rec.kind == PRIMITIVE_KIND:
            prim.setdefault(shape, {})[rec.subject] = value
        elif rec.kind == TRANSFORM_KIND and value is not None:
            trans.setdefault(shape, {})[rec.subject] = value
    rows, complete, incomplete, over = [], set(), 0, 0
    for shape in sorted(prim):
        spec = ConvSpec(*shape)
        cells = prim[shape]
        needed = [p for p in primitives if (_applies(p, spec) if p in known else p in cells)]
        moves = trans.get((spec.c, spec.im), {})
        ok = all(cells.get(p) is not None for p in needed) and all(t in moves for t in TRANSFORM_COLUMNS)
        if ok:
            complete.add(shape)
        else:
            incomplete += 1
            if not include_incomplete:
                continue
        over += sum(1 for p in needed if p in cells and cells[p] is None)
        rows.append((*shape, *(moves.get(t) for t in TRANSFORM_COLUMNS), *(cells.get(p) for p in primitives)))
    return DatasetTable((*SHAPE_COLUMNS, *TRANSFORM_COLUMNS, *primitives), tuple(rows), frozenset(complete),
                        incomplete, over)


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_dataset` wrote."""

    csv_path: Path
    provenance_path: Path | None
    rows: int
    incomplete: int
    over_cap_cells: int

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-serialisable dict."""
        return {"csv": str(self.csv_path), "provenance": str(self.provenance_path) if self.provenance_path else None,
                "rows": self.rows, "incomplete": self.incomplete, "over_cap_cells": self.over_cap_cells}


def find_campaign(store: Store, name: str | None = None) -> Campaign:
    """The primitive campaign called ``name``, or the only main one in ``store``.

    Raises
    ------
    InvalidInputError
        If it is missing, or ``name`` is ``None`` and the Store holds no or several main campaigns.
    """
    ours = [c for c in store.campaigns() if c.name.startswith(_NAME_PREFIX)]
    if name is not None:
        for campaign in ours:
            if campaign.name == name:
                return campaign
    else:
        main = [c for c in ours if not c.name.startswith(f"{_NAME_PREFIX}remeasure-")]
        if len(main) == 1:
            return main[0]
    listed = "; ".join(c.name for c in ours) or "none"
    what = f"no primitive campaign {name!r}" if name is not None else f"{len(ours)} primitive campaigns, not one"
    raise InvalidInputError(f"the Store at {store.path} has {what} (it has: {listed}); run `edgeplan primitives "
                            "profile` first or pass --campaign NAME")


def export_dataset(store: Store, campaign: Campaign, out: str | os.PathLike[str], *, command: str = "",
                   include_incomplete: bool = False, provenance: bool = True) -> ExportSummary:
    """Write ``campaign``'s measurements as a mulder2021 CSV, and its provenance as ``OUT.provenance.json``.

    Raises
    ------
    StoreError
        If the files cannot be written.
    """
    records = store.measurements(campaign=campaign)
    primitives = tuple(campaign.params.get("primitives", ()))
    table = dataset_table(records, primitives, include_incomplete)
    target = Path(out).expanduser()
    lines = [",".join(table.columns)]
    lines += [",".join("" if v is None else str(v) for v in row) for row in table.rows]
    _write_atomic(target, "\n".join(lines) + "\n")
    prov_path = None
    if provenance:
        prov_path = target.with_name(target.stem + ".provenance.json")
        data = _provenance(store, campaign, records, table, target, command, include_incomplete)
        _write_atomic(prov_path, json.dumps(data, indent=1, default=str) + "\n")
    return ExportSummary(target, prov_path, len(table.rows), table.incomplete, table.over_cap_cells)


def _provenance(store: Store, campaign: Campaign, records: Sequence[MeasurementRecord], table: DatasetTable,
                target: Path, command: str, include_incomplete: bool) -> dict[str, Any]:
    devices = sorted({r.device_key for r in records})
    versions = sorted({json.dumps(dict(r.versions), sort_keys=True) for r in records})
    times = sorted(r.created_at for r in records)
    return {
        "format": _DATASET_FORMAT, "csv": target.name, "rows": len(table.rows), "columns": list(table.columns),
        "units": "ns", "cell": "median of the timed runs after warm-up (see timing); empty = the primitive does not "
                               "apply to the layer" + ("" if not table.incomplete else
                                                       " or was not measured (incomplete rows included)"),
        "incomplete_configs": table.incomplete, "incomplete_included": include_incomplete,
        "over_cap_cells": table.over_cap_cells,
        "timing": "per (config, primitive): prepare untimed; one untimed run t1 (over call_cap_ms: recorded over "
                  "cap, not repeated); one more untimed run if t1 < target_ms; then clamp(ceil(target_ms / t1), "
                  "min_repeats, max_repeats) timed runs; median. One intra-op thread; random seeded inputs.",
        "config_space": "edgeplan.primitives.campaign module docstring (triplets of mulder2020 Table 7 crossed "
                        "with f and s, f > im dropped, work cap, seeded order)",
        "campaign": {"name": campaign.name, "params": dict(campaign.params), "command": campaign.command,
                     "created_at": campaign.created_at, "status": campaign.status},
        "devices": [{"key": k, "descriptor": d.to_dict() if (d := store.device(k)) else None} for k in devices],
        "versions": [json.loads(v) for v in versions],
        "measured_from": times[0] if times else None, "measured_to": times[-1] if times else None,
        "exported_at": _now(), "export_command": command, "store": str(store.path),
    }


# ---------------------------------------------------------------------------------------------- helpers


def _applies(name: str, spec: ConvSpec) -> bool:
    from edgeplan.primitives.registry import get_primitive

    return get_primitive(name).applies(spec)


def _config_key(spec: ConvSpec) -> str:
    return f"c{spec.c}-k{spec.k}-im{spec.im}-f{spec.f}-s{spec.s}"


def _shape(spec: ConvSpec) -> list[int]:
    return [spec.c, spec.k, spec.im, spec.f, spec.s]


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _write_atomic(target: Path, text: str) -> None:
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)
    except OSError as e:
        temporary.unlink(missing_ok=True)
        raise StoreError(f"cannot write {target}: {e.strerror or e}; choose a writable path") from e
