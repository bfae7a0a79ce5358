"""The jobs of ``edgeplan profile ops|ranges|primitives``: each runs (or resumes) its campaigns in the edgeplan
home's Store within one time budget for the whole command, and exports what they measured.

* :func:`profile_ops`: per-op campaigns of models in measurement scenarios (:mod:`edgeplan.measure.op_campaign`),
  exported as a dataset that ``edgeplan ops fit`` reads.
* :func:`profile_range_tables`: layer-range sweeps of models at thread counts (:mod:`edgeplan.measure.range_profile`),
  exported as the range tables of ``edgeplan offload`` and ``partition``.
* :func:`profile_primitive_campaign`: a convolution-primitive campaign (:mod:`edgeplan.measure.primitive_campaign`),
  exported as a table in the mulder2021 format.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.measure.campaign import CampaignReport
from edgeplan.measure.device import describe_device
from edgeplan.measure.op_campaign import OpCampaignOptions, OpExportOptions, export_dataset, run_op_campaign
from edgeplan.measure.primitive_campaign import (
    CampaignPlan,
    ConfigSelection,
    ProfileReport,
    primitive_campaign,
    profile_primitives,
    resolve_primitives,
)
from edgeplan.measure.primitive_export import (
    OVER_CAP,
    ExportSummary,
)
from edgeplan.measure.primitive_space import PRIMITIVE_KIND, SHAPE_COLUMNS, TRANSFORM_COLUMNS, work_units
from edgeplan.measure.range_files import export_range_tables
from edgeplan.measure.range_profile import SweepConfig
from edgeplan.measure.scenarios import Scenario
from edgeplan.measure.store import MeasurementRecord, Store
from edgeplan.primitives.spec import ConvSpec

__all__ = ["OpExportSummary", "OpsExport", "OpsProfileResult", "PrimitiveJob", "PrimitiveProfileResult",
           "RangeProfileResult", "RangeSweep", "estimate_duration_s", "export_campaign", "profile_ops",
           "profile_primitive_campaign", "profile_range_tables"]


@dataclass(frozen=True)
class OpsExport:
    """Where :func:`profile_ops` writes the models it was given, once measured, and at which scale.

    Attributes
    ----------
    path
        The dataset file (:func:`export_dataset`: xz for a ``.xz`` name, gzip otherwise).
    scale_from
        A dataset file of the scenario measured beside the same reference model: the times are written at its
        reference latency (:attr:`OpExportOptions.scale_from`).
    """

    path: Path
    scale_from: Path | None = None


@dataclass(frozen=True)
class OpExportSummary:
    """What :func:`export_campaign` wrote.

    Attributes
    ----------
    scenario
        The scenario's name.
    path
        The dataset file.
    models
        Models written.
    warnings
        The export's warnings (a repeat written at its own reference latency, models not measured), in order.
    """

    scenario: str
    path: str
    models: int
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The scenario, the file and the models written, as a JSON-serialisable dict (the warnings left out)."""
        return {"scenario": self.scenario, "path": self.path, "models": self.models}


@dataclass(frozen=True)
class OpsProfileResult:
    """What :func:`profile_ops` did.

    Attributes
    ----------
    campaigns
        One report per scenario measured, in the order given.
    not_started
        The scenarios the time budget left no time for (run again to measure them).
    export
        What the export wrote, or ``None`` without one.
    """

    campaigns: tuple[CampaignReport, ...]
    not_started: tuple[str, ...] = ()
    export: OpExportSummary | None = None

    @property
    def failed(self) -> int:
        """Models that could not be measured, over every campaign."""
        return sum(len(r.failed) for r in self.campaigns)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-serialisable dict."""
        return {"campaigns": [r.to_dict() for r in self.campaigns], "not_started": list(self.not_started),
                "export": self.export.to_dict() if self.export is not None else None}


def export_campaign(store: Store, scenario: Scenario, out: str | Path, *, command: str = "", repeat: str = "",
                    options: OpExportOptions | None = None) -> OpExportSummary:
    """Write a campaign's models with :func:`export_dataset`, its warnings kept in the summary instead of issued.

    Parameters
    ----------
    store, scenario, out, command, repeat, options
        As for :func:`export_dataset`.

    Returns
    -------
    OpExportSummary
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        n = export_dataset(store, scenario, out, command=command, repeat=repeat, options=options)
    return OpExportSummary(scenario.name, str(out), n, tuple(str(w.message) for w in caught))


def profile_ops(
    scenarios: Sequence[str],
    models: Sequence[str],
    *,
    options: OpCampaignOptions | None = None,
    budget_s: float | None = None,
    export: OpsExport | None = None,
    progress: bool = False,
    command: str = "",
    home: str | Path | None = None,
) -> OpsProfileResult:
    """Measure ``models`` in each scenario into the edgeplan home's Store, then export them (``profile ops``).

    One :func:`run_op_campaign` per scenario, in the order given, all within one time budget: a scenario the
    budget leaves no time for is not started, and running the same call again resumes where this one stopped.
    The export writes ``models`` as measured in the one scenario (in ``options.repeat``'s re-measurement).

    Parameters
    ----------
    scenarios
        Names of the scenarios (:data:`~edgeplan.measure.scenarios.SCENARIOS`).
    models
        Zoo strings.
    options
        Runs, harness settings, repeat tag and reference model of every campaign; default
        :class:`OpCampaignOptions`.
    budget_s
        Time budget of the whole call, every scenario together; ``None`` for none.
    export
        The dataset file to write afterwards; one scenario only.
    progress
        Show progress bars.
    command
        Command line stored as provenance.
    home
        The edgeplan home: its Store holds the rows, its caches the ONNX exports and int8 models.

    Returns
    -------
    OpsProfileResult

    Raises
    ------
    InvalidInputError
        For an unknown scenario, an export of several scenarios, a non-positive budget, or a campaign of the
        Store measured with other settings (:func:`run_op_campaign`).
    """
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.scenarios import get_scenario

    chosen = [get_scenario(s) for s in scenarios]
    if export is not None and len(chosen) != 1:
        raise InvalidInputError("--export writes one scenario's dataset; give one --scenario")
    if budget_s is not None and not budget_s > 0:
        raise InvalidInputError(f"the time budget must be positive or None, got {budget_s}")
    options = options or OpCampaignOptions()
    started = time.monotonic()
    reports, not_started = [], []
    with Store.open(default_store_path(home)) as store:
        for scenario in chosen:
            left = None if budget_s is None else budget_s - (time.monotonic() - started)
            if left is not None and left <= 0:
                not_started.append(scenario.name)
                continue
            reports.append(run_op_campaign(store, scenario, models, options=options, budget_s=left,
                                           progress=progress, command=command, home=home))
        summary = None
        if export is not None:
            summary = export_campaign(store, chosen[0], export.path, command=command, repeat=options.repeat,
                                      options=OpExportOptions(scale_from=export.scale_from, only=list(models)))
    return OpsProfileResult(tuple(reports), tuple(not_started), summary)


@dataclass(frozen=True)
class RangeSweep:
    """What :func:`profile_range_tables` did for one model at one thread count."""

    model: str
    threads: int
    report: CampaignReport


@dataclass(frozen=True)
class RangeProfileResult:
    """What :func:`profile_range_tables` did.

    Attributes
    ----------
    store
        The Store the rows went to.
    sweeps
        One per model and thread count measured, models first.
    not_started
        ``(model, threads)`` the time budget left no time for (run again to measure them).
    exported_tables
        Tables written by the export, or ``None`` without one.
    """

    store: str
    sweeps: tuple[RangeSweep, ...]
    not_started: tuple[tuple[str, int], ...] = ()
    exported_tables: int | None = None

    @property
    def failed(self) -> int:
        """Ranges that could not be measured, over every sweep."""
        return sum(len(s.report.failed) for s in self.sweeps)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-serialisable dict."""
        return {"store": self.store, "campaigns": [s.report.to_dict() for s in self.sweeps],
                "not_started": [{"model": m, "threads": t} for m, t in self.not_started],
                "exported_tables": self.exported_tables}


def profile_range_tables(models: Sequence[str], threads: Sequence[int] = (1,), *, config: SweepConfig | None = None,
                         budget_s: float | None = None, export: Path | None = None, progress: bool = False,
                         command: str = "", home: str | Path | None = None) -> RangeProfileResult:
    """Measure every layer range of each model at each thread count into the edgeplan home's Store, then export
    them (``profile ranges``).

    One :func:`~edgeplan.measure.range_profile.profile_ranges` per model and thread count, all within one time
    budget: those the budget leaves no time for are not started, and running the same call again resumes where
    this one stopped.

    Parameters
    ----------
    models
        Zoo strings.
    threads
        Intra-op thread counts.
    config
        Sweep repeats and warm-up (:func:`~edgeplan.measure.range_profile.profile_ranges`).
    budget_s
        Time budget of the whole call, every model and thread count together; ``None`` for none.
    export
        A JSON file to write the models' tables to afterwards, with provenance (:func:`export_range_tables`).
    progress
        Show progress bars.
    command
        Command line stored as provenance.
    home
        The edgeplan home whose Store holds the rows.

    Returns
    -------
    RangeProfileResult

    Raises
    ------
    InvalidInputError
        For an invalid thread count, a non-positive budget, a sweep of the Store begun with other settings, or an
        export file that cannot be written.
    """
    from edgeplan.measure.harness import check_thread_count
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.range_profile import profile_ranges

    for t in threads:
        check_thread_count(t)
    if budget_s is not None and not budget_s > 0:
        raise InvalidInputError(f"the time budget must be positive or None, got {budget_s}")
    started = time.monotonic()
    sweeps, not_started = [], []
    with Store.open(default_store_path(home)) as store:
        for model in models:
            for t in threads:
                left = None if budget_s is None else budget_s - (time.monotonic() - started)
                if left is not None and left <= 0:
                    not_started.append((model, t))
                    continue
                report = profile_ranges(store, model, threads=t, config=config, budget_s=left, progress=progress,
                                        command=command)
                sweeps.append(RangeSweep(model, t, report))
        exported = None
        if export is not None:
            try:
                exported = export_range_tables(store, list(models), Path(export), command)
            except OSError as e:
                raise InvalidInputError(f"cannot write {export}: {e.strerror}; the measurements are safe in "
                                        f"{store.path}, export again to a writable path") from e
    return RangeProfileResult(str(store.path), tuple(sweeps), tuple(not_started), exported)


def estimate_duration_s(plan: CampaignPlan, reference: Sequence[MeasurementRecord],
                        quantile: float = 0.9) -> float | None:
    """A rough time for ``plan`` from the rates of another campaign (e.g. the main one), or ``None``.

    Each primitive's first run is predicted as its ``quantile`` of time per dense MAC in ``reference`` times the
    configuration's MACs (the FFT primitive scales differently: its estimate is rougher); over ``call_cap_ms``
    that is all, else it is followed by the warm-up and the timed runs of :class:`TimingPlan`. Transformations
    scale with ``c im^2``. ``None`` when ``reference`` has no rate for a primitive of ``plan``.
    """
    rates: dict[str, list[float]] = {}
    for rec in reference:
        if rec.extra.get("status") not in ("measured", OVER_CAP):  # an over-cap row holds its first run
            continue
        config = rec.extra["config"]
        size = (work_units(ConvSpec(*(int(config[n]) for n in SHAPE_COLUMNS)), with_fft=False)
                if rec.kind == PRIMITIVE_KIND else float(config["c"]) * float(config["im"]) ** 2)
        rates.setdefault(rec.subject, []).append(rec.latency_ms / size)
    quantiles = {name: sorted(r)[min(len(r) - 1, int(quantile * len(r)))] for name, r in rates.items()}
    total_ms, tensors = 0.0, set()
    for spec in plan.configs:
        cells = [(p.name, work_units(spec, with_fft=False)) for p in resolve_primitives(plan.primitives)
                 if p.applies(spec)]
        if (spec.c, spec.im) not in tensors:
            tensors.add((spec.c, spec.im))
            cells += [(t, float(spec.c * spec.im * spec.im)) for t in TRANSFORM_COLUMNS]
        for name, size in cells:
            if name not in quantiles:
                return None
            first = quantiles[name] * size
            if first > plan.timing.call_cap_ms:
                total_ms += first  # one run, over cap
            else:
                total_ms += first * (1 + (first < plan.timing.target_ms) + plan.timing.repeats_for(first))
    return total_ms / 1e3


@dataclass(frozen=True)
class PrimitiveJob:
    """What :func:`profile_primitive_campaign` measures, and where.

    Attributes
    ----------
    configs
        Explicit configurations instead of the zoo space.
    networks
        Zoo models whose conv layers are measured instead of the zoo space (:func:`network_configs`); not with
        ``configs`` or ``max_configs``.
    seed
        Seed of the measurement order and of the sample.
    max_configs
        Measure a seeded random sample of this many configurations of the zoo space; not with ``configs``.
    primitives
        Names of the primitives to measure; default all.
    threads
        Intra-op threads of every measurement (part of the campaign's name).
    torch_device
        Where the primitives run: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (part of the campaign's name).
    """

    configs: Sequence[ConvSpec] | None = None
    networks: Sequence[str] = ()
    seed: int = 0
    max_configs: int | None = None
    primitives: Sequence[str] | None = None
    threads: int = 1
    torch_device: str = "cpu"


@dataclass(frozen=True)
class PrimitiveProfileResult:
    """What :func:`profile_primitive_campaign` did.

    Attributes
    ----------
    store
        The Store of the edgeplan home.
    plan
        The campaign.
    report
        What the measurement did; ``None`` for a dry run.
    export
        What the export wrote, or ``None`` without one.
    """

    store: str
    plan: CampaignPlan
    report: ProfileReport | None = None
    export: ExportSummary | None = None

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-serialisable dict: the campaign's size, then the plan's parameters (a dry run) or
        the report and the export."""
        plan = self.plan
        summary = {"store": self.store, "campaign": plan.name, "space_size": plan.space_size,
                   "configs": len(plan.configs), "primitives": len(plan.primitives)}
        if self.report is None:
            return {**summary, "params": dict(plan.params)}
        return {**summary, **self.report.to_dict(), **({"export": self.export.to_dict()} if self.export else {})}


def profile_primitive_campaign(job: PrimitiveJob | None = None, *, budget_s: float | None = None,
                               dry_run: bool = False, export: str | Path | None = None, progress: bool = False,
                               command: str = "", home: str | Path | None = None) -> PrimitiveProfileResult:
    """Plan the campaign of ``job`` on this machine, measure it into the edgeplan home's Store and export it
    (``profile primitives``).

    The campaign is :func:`primitive_campaign` on the device :func:`~edgeplan.measure.device.describe_device`
    describes (torch, ``job.threads``, ``job.torch_device``); :func:`profile_primitives` measures what is missing.
    A dry run only plans: it writes nothing, and opens the home's Store only when there is one.

    Parameters
    ----------
    job
        The configurations, primitives, threads and torch device; default :class:`PrimitiveJob`.
    budget_s
        Time budget of the measurement; ``None`` for none.
    dry_run
        Plan only: measure and write nothing.
    export
        Then write the campaign's completely measured configurations to this CSV with its provenance
        (:func:`~edgeplan.measure.primitive_export.export_dataset`); not with ``dry_run``.
    progress
        Show a progress bar.
    command
        Command line stored as provenance.
    home
        The edgeplan home whose Store holds the rows.

    Returns
    -------
    PrimitiveProfileResult

    Raises
    ------
    InvalidInputError
        For networks with explicit configurations or a sample size, a sample size with explicit configurations, a
        dry run with an export, or what :func:`primitive_campaign` refuses.
    """
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.primitive_export import export_dataset as export_table
    from edgeplan.measure.primitive_export import find_campaign
    from edgeplan.measure.primitive_space import network_configs

    job = job or PrimitiveJob()
    configs = job.configs or None
    if job.networks and (configs or job.max_configs is not None):
        raise InvalidInputError("--network measures a model's layers; drop --config and --max-configs")
    if configs and job.max_configs is not None:
        raise InvalidInputError("--max-configs samples the zoo space; drop it with --config")
    if dry_run and export:
        raise InvalidInputError("--dry-run measures nothing and --export writes what was measured: give one")
    if job.networks:
        configs = network_configs(job.networks)
    device = describe_device("torch", job.threads, torch_device=job.torch_device)
    selection = ConfigSelection(configs=configs, seed=job.seed, max_configs=job.max_configs)
    plan = primitive_campaign(device.key, primitives=job.primitives or None, threads=job.threads,
                              device=job.torch_device, selection=selection)
    real_store = default_store_path(home)
    if dry_run and (not real_store.is_file() or real_store.stat().st_size == 0):
        return PrimitiveProfileResult(str(real_store), plan)  # no Store yet: none is made
    with Store.open(real_store) as store:
        if dry_run:
            return PrimitiveProfileResult(str(real_store), plan)
        report = profile_primitives(store, plan, device, budget_s=budget_s, progress=progress, command=command)
        exported = export_table(store, find_campaign(store, plan.name), export, command=command) if export else None
    return PrimitiveProfileResult(str(real_store), plan, report, exported)
