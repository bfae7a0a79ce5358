"""The primitive profiling campaign of mulder2020 §3.2.1: plans and measurement, into the Store (resumable).

The configurations come from :mod:`edgeplan.measure.primitive_space`; the measurements are exported as a dataset by
:mod:`edgeplan.measure.primitive_export`; :func:`edgeplan.measure.profile_jobs.profile_primitive_campaign` plans,
measures and exports in one call.

Measurement (:class:`~edgeplan.measure.primitive_space.TimingPlan`): per configuration, inputs (one per layout) and
weights are allocated once from a seeded generator; the applicable primitives and the configuration's missing layout
transformations are measured in a seeded random order, each committed to the Store as soon as it is measured (a
rerun measures only what is missing). Per (configuration, primitive): ``prepare`` untimed, then one untimed run whose
duration ``t1`` is the estimate; if ``t1 > call_cap_ms`` the primitive is recorded as **over cap** (one run,
``stopped_by = time_cap``, ``extra.status = over_cap``) and not repeated. Otherwise one more untimed run when
``t1 < target_ms``, then ``n = clamp(ceil(target_ms / t1), min_repeats, max_repeats)`` timed runs, and the median is
stored with its spread. *Deviation from the paper* (which takes the median of a fixed number of runs): the adaptive
``n`` (at least 3) bounds the timed work per call near ``target_ms``, so that some 50 primitives on 3000 and more
configurations fit in a few hours on one core; the noise this leaves is measured by a re-measured subset
(:func:`remeasure_campaign`). Times include the Python-level argument checks of :meth:`Primitive.execute`.
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.measure.campaign import FailedTask
from edgeplan.measure.device import DeviceDescriptor, collect_versions
from edgeplan.measure.harness import Timing, TimingConfig, time_callable, use_threads
from edgeplan.measure.primitive_export import (
    OVER_CAP,
    dataset_table,
)
from edgeplan.measure.primitive_space import (
    CAMPAIGN_PREFIX,
    DEFAULT_WORK_CAP,
    KERNEL_SIZES,
    PRIMITIVE_KIND,
    SHAPE_COLUMNS,
    STRIDES,
    TRANSFORM_COLUMNS,
    TRANSFORM_KIND,
    AboveCapOptions,
    Shape,
    TimingPlan,
    Triplet,
    config_key,
    config_space,
    digest,
    load_triplets,
    sample_above_cap,
    select_configs,
    shape_list,
    work_units,
)
from edgeplan.measure.progress import PlainLines
from edgeplan.measure.runners import torch_device
from edgeplan.measure.store import Campaign, Provenance, Store
from edgeplan.primitives.spec import LAYOUTS, ConvSpec

if TYPE_CHECKING:
    from edgeplan.primitives.base import Primitive

__all__ = [
    "CampaignPlan",
    "ConfigSelection",
    "ProfileReport",
    "above_cap_campaign",
    "primitive_campaign",
    "profile_primitives",
    "resolve_primitives",
    "remeasure_campaign",
]


# ---------------------------------------------------------------------------------------------- configuration space


# ---------------------------------------------------------------------------------------------- campaign plans


@dataclass(frozen=True)
class CampaignPlan:
    """What a primitive campaign measures: its Store name, configurations in order, primitives and parameters."""

    name: str
    configs: tuple[ConvSpec, ...]
    primitives: tuple[str, ...]
    timing: TimingPlan
    params: Mapping[str, Any]
    space_size: int


@dataclass(frozen=True)
class ConfigSelection:
    """Which configurations a :func:`primitive_campaign` measures, and in which order.

    Attributes
    ----------
    configs
        Explicit configurations, measured in the seeded order instead of the zoo space.
    triplets
        The triplets of the zoo space; default the shipped zoo triplets.
    work_cap, seed, max_configs
        The sampling rule (:func:`select_configs`); the cap does not apply to explicit configurations. The seed
        also orders explicit configurations.
    design
        How ``max_configs`` configurations are chosen from the zoo space: ``uniform`` (default) or ``kmeans``
        (:func:`select_configs`; part of the campaign's name and parameters).
    """

    configs: Sequence[ConvSpec] | None = None
    triplets: Sequence[Triplet] | None = None
    work_cap: float = DEFAULT_WORK_CAP
    seed: int = 0
    max_configs: int | None = None
    design: str = "uniform"


def primitive_campaign(device_key: str, *, selection: ConfigSelection | None = None,
                       primitives: Sequence[str] | None = None, timing: TimingPlan | None = None, threads: int = 1,
                       device: str = "cpu") -> CampaignPlan:
    """The main campaign: the zoo space (or explicit configurations), sampled, on one device.

    Parameters
    ----------
    device_key
        Key of the device (part of the campaign name).
    selection
        The configurations: explicit ones or the sampling rule of the zoo space; default :class:`ConfigSelection`.
    primitives
        Names of the primitives to measure; default all.
    timing
        The timing plan; default :class:`TimingPlan`.
    threads
        Intra-op threads (the campaign is meant for 1).
    device
        Torch device the primitives run on: ``"cpu"``, or ``"cuda"`` / ``"cuda:N"`` (then the primitives that run
        on the CPU only, oneDNN's, are left out, and every timed run ends with a device synchronisation).

    Returns
    -------
    CampaignPlan

    Raises
    ------
    InvalidInputError
        On an unknown primitive name, one named that does not run on ``device``, an explicit padding or an empty
        selection.
    """
    selection = selection or ConfigSelection()
    configs, work_cap, seed = selection.configs, selection.work_cap, selection.seed
    max_configs, design = selection.max_configs, selection.design
    timing = timing or TimingPlan()
    names = _primitive_names(primitives, device)
    params: dict[str, Any] = {"threads": threads, "seed": seed, "timing": asdict(timing), "primitives": list(names)}
    if device != "cpu":  # CPU campaigns keep the parameters (and so the Store identity) they always had
        import torch

        params["device"] = device
        params["tf32"] = {"cudnn": bool(torch.backends.cudnn.allow_tf32),  # PyTorch's defaults: True, False
                          "matmul": bool(torch.backends.cuda.matmul.allow_tf32)}
    if configs is not None:
        padded = [s.describe() for s in configs if s.padding is not None]
        if padded:
            raise InvalidInputError(f"layers {', '.join(padded)} set a padding; the campaign (and the mulder2021 "
                                    "format) uses 'same' padding: leave padding=None")
        space = tuple(dict.fromkeys(configs))
        chosen = tuple(random.Random(seed).sample(space, len(space)))
        params["configs"] = [shape_list(s) for s in space]
        tag = f"custom-{digest(params['configs'])}"
    else:
        triplets = tuple(selection.triplets) if selection.triplets is not None else load_triplets()
        space = config_space(triplets)
        chosen = select_configs(space, work_cap=work_cap, seed=seed, max_configs=max_configs,
                                with_fft="fft" in names, design=design, primitives=names)
        params["space"] = {"triplets": len(triplets), "triplets_sha256": digest(sorted(triplets)),
                           "kernel_sizes": list(KERNEL_SIZES), "strides": list(STRIDES), "work_cap": work_cap,
                           "max_configs": max_configs, "space_size": len(space), "selected": len(chosen)}
        tag = f"zoo-cap{work_cap:g}" + (f"-n{max_configs}" if max_configs else "")
        if design != "uniform" and max_configs:  # uniform campaigns keep the names and parameters they always had
            params["space"]["design"] = design
            tag += f"-{design}"
    if not chosen:
        raise InvalidInputError("the configuration selection is empty; raise --work-cap or give configurations")
    if primitives is not None:
        tag += f"-p{digest(list(names))}"
    name = f"{CAMPAIGN_PREFIX}{tag}-seed{seed}|torch|{threads}t|{device_key}"
    return CampaignPlan(name, chosen, names, timing, params, len(space))


def _primitive_names(primitives: Sequence[str] | None, device: str = "cpu") -> tuple[str, ...]:
    """The primitives to measure on ``device``, in registry order (all that run there when ``None``)."""
    from edgeplan.primitives.registry import get_primitive, primitive_names

    torch_device(device, available=False)
    wanted = None if primitives is None else {get_primitive(p).name for p in primitives}
    if wanted is not None:
        refused = sorted(n for n in wanted if not get_primitive(n).supports_device(device))
        if refused:
            raise InvalidInputError(f"primitives {', '.join(refused)} do not run on device {device!r}; drop them "
                                    "(edgeplan primitives list)")
    names = tuple(n for n in primitive_names()
                  if (wanted is None or n in wanted) and get_primitive(n).supports_device(device))  # registry order
    if not names:
        raise InvalidInputError("no primitive to measure; name at least one (edgeplan primitives list)")
    return names


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
    name = main.name.replace(CAMPAIGN_PREFIX, f"{CAMPAIGN_PREFIX}remeasure-n{n}-seed{seed}-of-", 1)
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
                  "configs": [shape_list(s) for s in chosen]}
    return CampaignPlan(name, chosen, main.primitives, main.timing, params, len(main.configs))


# ---------------------------------------------------------------------------------------------- above the cap


def above_cap_campaign(device_key: str, options: AboveCapOptions, *,
                       real_layers: Callable[[], Iterable[Shape]] | None = None, store: Store | None = None,
                       primitives: Sequence[str] | None = None, threads: int = 1) -> CampaignPlan:
    """The optional above-cap campaign: a stratified sample above the work cap plus the real layers above it.

    A campaign of its own (name ``primitives|abovecap-...``), never the main one: the main campaign, its
    selection and its export do not change. Its configurations are stored with it; resuming one already in
    ``store`` reuses them (``real_layers`` is not called).

    Parameters
    ----------
    device_key
        Key of the device (part of the name).
    options
        The sample and the timing.
    real_layers
        Gives the real ``(c, k, im, f, s)`` layers (e.g. from :func:`extract_layers`); those above the cap are
        added whatever their work (those below are in the main campaign). ``None``: none.
    store
        Where a started campaign of the same name is looked up.
    primitives, threads
        As in :func:`primitive_campaign`.

    Raises
    ------
    InvalidInputError
        On an unknown primitive or an empty selection.
    """
    names = _primitive_names(primitives)
    with_fft = "fft" in names
    triplets = load_triplets()
    space = config_space(triplets)
    tag = (f"abovecap-n{options.n}-b{options.bins}-cap{options.work_cap:g}-max{options.max_work:g}-"
           f"seed{options.seed}" + (f"-p{digest(list(names))}" if primitives is not None else ""))
    name = f"{CAMPAIGN_PREFIX}{tag}|torch|{threads}t|{device_key}"
    started = {c.name: c for c in store.campaigns()}.get(name) if store is not None else None
    if started is not None:  # its sample and layers as stored; the Store checks the rest of the parameters
        configs = tuple(ConvSpec(*shape) for shape in started.params["configs"])
        above = dict(started.params["above_cap"])
    else:
        sampled = sample_above_cap(space, options, with_fft=with_fft)
        real = sorted({tuple(s) for s in (real_layers() if real_layers is not None else ())
                       if work_units(ConvSpec(*s), with_fft) > options.work_cap})
        configs = tuple(dict.fromkeys((*sampled, *(ConvSpec(*s) for s in real))))
        above = {"n": options.n, "bins": options.bins, "work_cap": options.work_cap, "max_work": options.max_work,
                 "triplets_sha256": digest(sorted(triplets)), "sampled": len(sampled),
                 "real_layers": [list(s) for s in real]}
    if not configs:
        raise InvalidInputError(f"no configuration has work in ({options.work_cap:g}, {options.max_work:g}]; "
                                "raise the largest work")
    params = {"threads": threads, "seed": options.seed, "timing": asdict(options.timing), "primitives": list(names),
              "configs": [shape_list(s) for s in configs], "above_cap": above}
    order = tuple(random.Random(options.seed).sample(configs, len(configs)))
    return CampaignPlan(name, order, names, options.timing, params, len(space))


# ---------------------------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class ProfileReport:
    """What one call of :func:`profile_primitives` did; counts are configurations unless named ``rows``.

    ``configs_not_exportable`` counts the configurations done (before or now) with a cell over the per-call cap:
    the campaign does not measure them again, and the export leaves them out (see the module docstring).
    """

    campaign: str
    configs_total: int
    configs_done_before: int
    configs_done_now: int
    rows_now: int
    over_cap: tuple[str, ...]
    failed: tuple[FailedTask, ...]
    stopped_by_budget: bool
    elapsed_s: float
    configs_not_exportable: int = 0

    @property
    def configs_exportable(self) -> int:
        """Configurations done with every cell measured below the per-call cap."""
        return self.configs_done_before + self.configs_done_now - self.configs_not_exportable

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
                "remaining": self.remaining, "configs_exportable": self.configs_exportable,
                "configs_not_exportable": self.configs_not_exportable,
                "rows_now": self.rows_now, "over_cap": list(self.over_cap),
                "failed": [{"key": f.key, "reason": f.reason} for f in self.failed],
                "stopped_by_budget": self.stopped_by_budget, "elapsed_s": self.elapsed_s,
                "configs_per_hour": self.configs_per_hour, "estimated_remaining_s": self.estimated_remaining_s}


@dataclass
class _Run:
    """Mutable state of one :func:`profile_primitives` call."""

    store: Store
    plan: CampaignPlan
    device: DeviceDescriptor
    provenance: Provenance
    done: set[str]
    over_keys: set[str] = field(default_factory=set)
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
    run = _Run(store, plan, device, Provenance(campaign, command, collect_versions()),
               set(store.completed_task_keys(campaign)), _over_cap_keys(store, campaign))
    pending = [spec for spec in plan.configs if _todo(run, spec)]
    done_before = len(plan.configs) - len(pending)
    waiting = set(pending)
    not_exportable = sum(_over_cap(run, spec) for spec in plan.configs if spec not in waiting)
    done_now, stopped = 0, False
    store.set_campaign_status(campaign, "running")
    try:
        with use_threads(device.threads), _bar(progress, plan.name, len(plan.configs), done_before) as advance:
            for spec in pending:
                if budget_s is not None and time.monotonic() - started >= budget_s:
                    stopped = True
                    break
                _measure_config(run, spec)
                run.over_keys.update(run.over_cap)
                if not _todo(run, spec):
                    done_now += 1
                    not_exportable += _over_cap(run, spec)
                advance(config_key(spec) + (f", {not_exportable} not exportable" if not_exportable else ""))
    finally:
        complete = done_before + done_now == len(plan.configs)
        store.set_campaign_status(campaign, "complete" if complete else "partial")
    return ProfileReport(plan.name, len(plan.configs), done_before, done_now, run.rows, tuple(run.over_cap),
                         tuple(run.failed), stopped, time.monotonic() - started, not_exportable)


# ---------------------------------------------------------------------------------------------- the whole command


def _over_cap_keys(store: Store, campaign: Campaign) -> set[str]:
    """Task keys of ``campaign`` recorded over the per-call cap."""
    return {r.task_key for r in store.measurements(campaign=campaign) if r.extra.get("status") == OVER_CAP}


def _over_cap(run: _Run, spec: ConvSpec) -> bool:
    """Whether a task of ``spec`` (a primitive or one of its transformations) is recorded over cap."""
    return any(key in run.over_keys for key, _, _ in _jobs(run.plan, spec))


@functools.cache
def resolve_primitives(names: tuple[str, ...]) -> tuple[Primitive, ...]:
    """The registered primitives of these names, in order."""
    from edgeplan.primitives.registry import get_primitive

    return tuple(get_primitive(name) for name in names)


def _jobs(plan: CampaignPlan, spec: ConvSpec) -> list[tuple[str, str, str]]:
    """``(task_key, kind, subject)`` of every task of one configuration."""
    key = config_key(spec)
    jobs = [(f"{key}|{p.name}", PRIMITIVE_KIND, p.name) for p in resolve_primitives(plan.primitives) if p.applies(spec)]
    act = f"c{spec.c}-im{spec.im}"
    return jobs + [(f"{act}|{name}", TRANSFORM_KIND, name) for name in TRANSFORM_COLUMNS]


def _todo(run: _Run, spec: ConvSpec) -> bool:
    return any(key not in run.done for key, _, _ in _jobs(run.plan, spec))


def _measure_config(run: _Run, spec: ConvSpec) -> None:
    import torch

    from edgeplan.primitives.layouts import from_chw, transform
    from edgeplan.primitives.registry import get_primitive

    jobs = [job for job in _jobs(run.plan, spec) if job[0] not in run.done]
    random.Random(f"{run.plan.params.get('seed')}|{config_key(spec)}").shuffle(jobs)
    generator = torch.Generator().manual_seed(int(digest(shape_list(spec)), 16))
    device = torch_device(run.plan.params.get("device", "cpu"), available=False)
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    x = torch.randn(spec.c, spec.im, spec.im, generator=generator).to(device)  # the same values on every device
    inputs = {layout.value: from_chw(x, layout).contiguous() for layout in LAYOUTS}
    weight = (torch.randn(spec.weight_shape, generator=generator) / math.sqrt(spec.c * spec.f * spec.f)).to(device)
    for key, kind, name in jobs:
        fn: Callable[[], object]
        try:
            if kind == PRIMITIVE_KIND:
                prim = get_primitive(name)
                prepared = prim.prepare(weight, None, spec=spec)
                xin = inputs[prim.input_layout.value]
                fn = functools.partial(prim.execute, xin, prepared)
                subject_shape: dict[str, int] = dict(zip(SHAPE_COLUMNS, shape_list(spec), strict=True))
            else:
                src, _, dst = name.partition("-to-")
                fn = functools.partial(transform, inputs[src], src, dst)
                subject_shape = {"c": spec.c, "im": spec.im}
            if sync is not None:  # CUDA runs asynchronously: a timed run ends when the device is done
                fn = functools.partial(_then_sync, fn, sync)
            timing, over, warmup_runs = _time(fn, run.plan.timing)
        except (RuntimeError, MemoryError, MeasurementError) as e:
            run.failed.append(FailedTask(key, f"{type(e).__name__}: {e}"))
            continue
        model = ("conv2d:" if kind == PRIMITIVE_KIND else "activation:") + ",".join(
            f"{k}={v}" for k, v in subject_shape.items())
        extra = {"config": subject_shape, "status": "over_cap" if over else "measured", "warmup_runs": warmup_runs}
        run.store.add_measurement(timing, run.device, model=model, task_key=key, kind=kind, subject=name, extra=extra,
                                  provenance=run.provenance)
        run.done.add(key)
        run.rows += 1
        if over:
            run.over_cap.append(key)


def _then_sync(fn: Callable[[], object], sync: Callable[[], None]) -> None:
    fn()
    sync()


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
        lines = PlainLines("configs", total, completed, every_s=60.0)
        yield lambda last: lines.advance(1, last)
        lines.line()
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


# ---------------------------------------------------------------------------------------------- export


# ---------------------------------------------------------------------------------------------- noise floor


# ---------------------------------------------------------------------------------------------- helpers


