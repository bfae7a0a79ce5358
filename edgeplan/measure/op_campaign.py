"""Per-op latency campaigns: measure models in a scenario into the Store, resumably, and export them.

One task per model: the Store row holds the end-to-end timing (no profiler) and, in its ``extra``, every op's
profiled latency and the IR nodes the ops compute (:class:`edgeplan.measure.op_profile.ModelProfile`). Running
the campaign again measures only the models without a row; a model that cannot be measured (an operator the
frontend does not know, ops that do not match the kernel rules) is reported by name and retried next time.

:func:`export_dataset` writes a campaign's rows as a dataset file (:mod:`edgeplan.measure.op_dataset`), at one
reference latency when the models were measured beside a reference model. :func:`profile_ops` runs the campaigns
of several scenarios within one time budget and exports them: the ``edgeplan profile ops`` command.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from edgeplan.errors import EdgeplanError, InvalidInputError, MeasurementError
from edgeplan.measure.allocator import KEEP_MEMORY, allocator_settings
from edgeplan.measure.campaign import CampaignReport, MeasurementResult, Task, run_campaign
from edgeplan.measure.device import describe_device
from edgeplan.measure.harness import TimingConfig
from edgeplan.measure.op_dataset import (
    DATASET_FORMAT,
    OpDataset,
    RetraceReport,
    _write_dataset,
    compact_dataset,
    load_dataset,
    open_dataset_file,
    retrace_dataset,
)
from edgeplan.measure.scenarios import Scenario
from edgeplan.measure.store import Store

__all__ = [
    "DATASET_FORMAT",
    "OpDataset",
    "compact_dataset",
    "open_dataset_file",
    "OpCampaignOptions",
    "OpExportOptions",
    "ReferenceScaleWarning",
    "RetraceReport",
    "campaign_name",
    "export_dataset",
    "load_dataset",
    "retrace_dataset",
    "run_op_campaign",
]


class ReferenceScaleWarning(UserWarning):
    """A repeat campaign exported at its own reference latency, its main campaign missing from the Store."""


def campaign_name(scenario: Scenario, repeat: str = "") -> str:
    """The Store campaign of a scenario's per-op measurements; ``repeat`` names an independent re-measurement."""
    if repeat and not repeat.replace("-", "").replace("_", "").isalnum():
        raise InvalidInputError(f"repeat tag {repeat!r}: use letters, digits, '-' and '_'")
    return f"ops/{scenario.name}" + (f"/{repeat}" if repeat else "")


@dataclass(frozen=True)
class OpCampaignOptions:
    """How :func:`run_op_campaign` measures, and which campaign the rows go to.

    ``runs``, ``plain_per_run`` and ``reference`` are part of the campaign's parameters: a resumed campaign must use
    the same values.

    Attributes
    ----------
    runs
        Profiled runs per model (the per-op median is over them).
    config
        End-to-end harness settings (default: adaptive to +-2% CI, at most 10 s per model).
    plain_per_run
        Unprofiled timed runs before each profiled one (the end-to-end latency is their median); 0 measures end
        to end separately with ``config``.
    repeat
        Tag of an independent re-measurement (its own campaign), e.g. to measure the noise floor.
    reference
        A zoo model timed just before every call of every measured model
        (:func:`edgeplan.measure.op_profile.reference_runner`): the rows keep each model's times over the
        reference's, which :func:`export_dataset` turns into milliseconds at the scenario's typical speed. Use the
        same reference for a scenario's main campaign and its repeats.
    """

    runs: int = 10
    config: TimingConfig | None = None
    plain_per_run: int = 3
    repeat: str = ""
    reference: str | None = None


def run_op_campaign(
    store: Store,
    scenario: Scenario,
    models: Sequence[str],
    *,
    options: OpCampaignOptions | None = None,
    budget_s: float | None = None,
    progress: bool = False,
    command: str = "",
    home: str | Path | None = None,
) -> CampaignReport:
    """Measure ``models`` per op and end to end in ``scenario``; resume where an earlier call stopped.

    Parameters
    ----------
    store
        Where rows go.
    scenario
        The scenario (runtime, threads, dtype).
    models
        Zoo strings.
    options
        Runs, harness settings, repeat tag and reference model; default :class:`OpCampaignOptions`.
    budget_s
        Time budget of this call; the campaign stops between models once it is spent.
    progress
        Show a progress bar.
    command
        Command line stored as provenance.
    home
        The edgeplan home (ONNX exports and int8 models are cached there).

    Returns
    -------
    CampaignReport
    """
    from edgeplan.frontends.zoo import is_onnx_path
    from edgeplan.measure.op_profile import profile_model, reference_runner
    from edgeplan.measure.ort_op_profile import onnx_file_digest

    options = options or OpCampaignOptions()
    runs, plain_per_run, reference = options.runs, options.plain_per_run, options.reference
    if runs < 1:
        raise InvalidInputError(f"runs must be a positive integer, got {runs}")
    if reference is not None and plain_per_run < 1:
        raise InvalidInputError("a reference model is timed beside the unprofiled runs: give plain_per_run >= 1")
    config = options.config or TimingConfig()
    device = describe_device(scenario.runtime, scenario.threads, scenario.dtype)
    try:
        ref = (reference, reference_runner(reference, scenario, home)) if reference else None
    except EdgeplanError as e:
        raise InvalidInputError(f"reference model {reference!r} cannot be built: {e}") from e

    def measure(task: Task) -> MeasurementResult:
        try:
            profile = profile_model(task.model, scenario, runs=runs, config=config, home=home,
                                    plain_per_run=plain_per_run, reference=ref)
        except MeasurementError:
            raise
        except EdgeplanError as e:  # an operator or a model the tools cannot handle: name it, go on
            raise MeasurementError(f"{task.model}: {e}") from e
        return MeasurementResult(profile.end_to_end, device, profile.extra())

    # An ONNX file of the user's is measured again when its bytes change (an edited model is another model).
    tasks = [Task(key=f"{m}|{onnx_file_digest(m)}" if is_onnx_path(m) else m, model=m, kind="model_ops")
             for m in models]
    params: dict[str, Any] = {"scenario": scenario.name, "runs": runs, "plain_per_run": plain_per_run}
    if device.allocator is not None:  # freed memory kept or not changes big operations' times: never one campaign
        params["allocator"] = device.allocator
    if reference:
        params["reference"] = reference
        params["reference_warm"] = True  # timed after an untimed call of it (op_timing.timed_reference_ms)
    name = campaign_name(scenario, options.repeat)
    found = store.find_campaign(name)
    earlier = found.params if found is not None else None
    if earlier is not None and dict(earlier) != params:
        allocator = ""
        if earlier.get("allocator") != params.get("allocator"):
            kept = earlier.get("allocator") == allocator_settings(KEEP_MEMORY)
            allocator = (" --keep-memory" if kept else f" under allocator settings {earlier['allocator']}"
                         if earlier.get("allocator") else " under glibc's default allocator") + (
                f" (this process runs under {params['allocator']})" if params.get("allocator")
                else " (this process runs under glibc's defaults)")
        settings = (f"--runs {earlier.get('runs')} ({earlier.get('plain_per_run')} plain runs per profiled run)"
                    f"{allocator}") + (
            f" --reference {earlier['reference']}" if earlier.get("reference") else " and no --reference")
        if earlier.get("reference") and not earlier.get("reference_warm"):
            settings += (" by an edgeplan that timed the reference right after each call (an older version; its "
                         "ratios are not comparable with this one's)")
        raise InvalidInputError(
            f"the Store at {store.path} already holds campaign {name!r}, measured with {settings}; run with those "
            "to add models to it, or measure these settings as an independent campaign (--repeat TAG; Python: "
            "OpCampaignOptions(repeat=TAG)) or in another --home")
    return run_campaign(store, name, tasks, measure, budget_s, progress, command=command, params=params)


@dataclass(frozen=True)
class OpExportOptions:
    """Which of a campaign's models :func:`export_dataset` writes, into which file, at which scale.

    Attributes
    ----------
    merge
        An earlier dataset file of the same scenario and repeat (possibly ``out`` itself) whose models the Store
        does not hold are kept: its records first, in its order, then the Store's. A model in both is the
        Store's (the newer measurement). Its provenance is kept in the header under ``merged``, and the dates span
        both. Both must be measured with the same reference model or both without, or the file without one and
        the Store's campaign with one: with a reference in both, the Store's ratios are converted at the earlier
        file's reference latency; into a file without, at the latency that matches the models both hold to the
        file's times (:func:`_matched_scale`; at least :data:`MIN_MATCHED` of them), recorded under ``reference``
        for later merges. Either way every row of the file shares one scale.
    match_on
        Merging a paired campaign into a file without a reference: match the scale on these models only (those
        both hold), e.g. synthetic networks the file and the campaign measured on the same footing, not models the
        file holds from a day the machine ran slower. These bridge models keep the file's rows (the campaign
        measured them to find the scale, not to replace them); every other model the campaign holds is written as
        it measured it. Refused in any other export.
    scale_from
        A dataset file of the scenario measured beside the same reference model: the campaign's ratios are written
        at that file's reference latency, so that the new file's times and the earlier file's share one scale (a
        file of more models, kept apart from it: transformers beside the CNNs a device profile was fitted on).
        Recorded under ``reference.scale_from``. Not with ``merge``, which converts at its file's latency anyway.
    only
        Write only these models of the Store's (at least one; the others stay in the Store, and those not measured
        are named in a warning). With ``merge``, only these join the file: it keeps its own rows of the others the
        Store holds too (models measured again only to check the two measurements agree).
    """

    merge: str | Path | None = None
    match_on: Collection[str] | None = None
    scale_from: str | Path | None = None
    only: Collection[str] | None = None


def export_dataset(store: Store, scenario: Scenario, out: str | Path, command: str = "", repeat: str = "",
                   options: OpExportOptions | None = None) -> int:
    """Write every measured model of ``scenario``'s campaign (or of its ``repeat``) to ``out`` (gzip'd JSON lines).

    A campaign measured beside a reference model is written at the scenario's reference latency (see
    :func:`_reference_scale`); a repeat whose main campaign is not in the Store is written at its own and warns
    (:class:`ReferenceScaleWarning`): its times are then not comparable with the main campaign's export. Merged
    into a paired file (``options.merge``), it is written at that file's latency instead, silently.

    Parameters
    ----------
    store, scenario, out, command, repeat
        The Store, the scenario and repeat tag of the campaign, the file to write and the command that exports.
    options
        Merge, scale and model choice; default :class:`OpExportOptions` (the Store's models only, at the
        campaign's own scale).

    Returns
    -------
    int
        Number of models written (with ``merge``, the merged file's).

    Raises
    ------
    InvalidInputError
        When the Store has no rows for the scenario, ``merge`` is not a dataset of the same scenario, repeat and
        reference, ``match_on`` is given where no scale is matched, ``scale_from`` is not a file of the scenario
        measured beside the campaign's reference model (or comes with ``merge``), or ``only`` names none of the
        Store's models. Nothing is written then (``out`` is replaced only once the new
        file is complete).
    """
    options = options or OpExportOptions()
    merge, match_on, scale_from, only = options.merge, options.match_on, options.scale_from, options.only
    name = campaign_name(scenario, repeat)
    # The latest measurement of each model (an ONNX file edited since is measured again under a new key).
    records = list({r.model: r for r in store.measurements(campaign=name)}.values())
    if not records:
        raise InvalidInputError(
            f"the Store {store.path} has no measurements in campaign {name!r}; run "
            f"`edgeplan profile ops MODEL... --scenario {scenario.name}` first"
        )
    warm = _reference_warm(store, scenario, name)
    scale = _reference_scale(store, scenario, records, name)  # of the whole campaign, whatever is written
    if scale is not None and warm:
        scale["warm"] = True  # the reference was timed after an untimed call of it (op_timing.timed_reference_ms)
    campaign_records, wanted = records, None if only is None else set(only)
    if wanted is not None:
        records = [r for r in records if r.model in wanted]
        if not records:
            raise InvalidInputError(f"none of the {len(wanted)} models to export (--only) is measured in campaign "
                                    f"{name!r}; measure them with `edgeplan profile ops` first, or check --scenario "
                                    "and --repeat")
        missing = sorted(wanted - {r.model for r in records})
        if missing:
            warnings.warn(f"{len(missing)} of the --only models are not measured in campaign {name!r} and are left "
                          f"out: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}", stacklevel=2)
    if scale_from is not None:
        if merge is not None:
            raise InvalidInputError("--scale-from and --merge both set the scale of the file; a merge writes at its "
                                    "file's reference latency already: drop --scale-from")
        scale = _scale_of(scale_from, scenario, scale, match_on=match_on, records=campaign_records)
    earlier = _mergeable(merge, scenario, repeat, scale) if merge is not None else None
    matching = earlier is not None and scale is not None and not earlier.provenance.get("reference")
    if match_on is not None and not matching and scale_from is None:
        raise InvalidInputError("--match-on chooses the models that match a paired campaign's scale to a file "
                                "measured without a reference, or to a --scale-from file whose reference was timed "
                                "otherwise; this export matches no scale: drop --match-on")
    if earlier is not None and scale is not None:
        before = earlier.provenance.get("reference")
        scale = dict(before) if before else _matched_scale(earlier, campaign_records, scale, str(merge), match_on)
    elif scale is not None and scale["from_campaign"] != campaign_name(scenario):
        _warn_own_scale(name, scale, campaign_name(scenario))  # at its own latency: neither a file's nor the main's
    # The models a scale was matched on are its bridge to the file: the file keeps its own rows for them.
    bridge = set(match_on or ()) & set(earlier.models()) if earlier is not None else set()
    written = [r for r in records if r.model not in bridge]
    measured = {r.model for r in written}
    kept = [] if earlier is None else [r for r in earlier.records if r["model"] not in measured]
    first = records[0]
    device = store.device(first.device_key)
    since, until = min(r.created_at for r in records), max(r.created_at for r in records)
    header: dict[str, Any] = {
        "format": DATASET_FORMAT,
        "scenario": scenario.name,
        "repeat": repeat,
        "runtime": scenario.runtime,
        "threads": scenario.threads,
        "dtype": scenario.dtype,
        "device": device.to_dict() if device else {"key": first.device_key},
        "versions": dict(first.versions),
        "measured_from": since,
        "measured_to": until,
        "campaign_command": first.command,
        "exported_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "export_command": command,
        "models": len(kept) + len(written),
    }
    if scale is not None:
        header["reference"] = scale
    if earlier is not None:
        before = earlier.provenance
        header["measured_from"] = min(str(before.get("measured_from", since)), since)
        header["measured_to"] = max(str(before.get("measured_to", until)), until)
        header["merged"] = {"file": str(merge), "kept_models": len(kept),
                            "replaced_models": len(earlier.records) - len(kept), "bridge_models": len(bridge),
                            "provenance": before}
    rows = list(kept)
    for r in written:
        extra = r.extra
        iqr_rel = (r.p75_ms - r.p25_ms) / r.latency_ms if r.latency_ms > 0 else 0.0
        row = {"model": r.model, "latency_ms": r.latency_ms, "latency_min_ms": r.min_ms, "iqr_rel": iqr_rel,
               "ci_rel": r.ci_rel, "repeats": r.repeats, "op_sum_ms": extra["op_sum_ms"],
               "op_sum_min_ms": extra.get("op_sum_min_ms"), "ops": extra["ops"], "nodes": extra["nodes"]}
        if "folded_work_ms" in extra:  # eager PyTorch's operators the IR folds away, timed as no op's
            row["folded_work_ms"] = extra["folded_work_ms"]
        if "folded_ops" in extra:  # and those of them that move data, one by one
            row["folded_ops"] = extra["folded_ops"]
        rows.append(_normalised(row, extra["reference"], scale["ms"], scale["min_ms"]) if scale is not None else row)
    _write_dataset(out, header, rows)
    return len(rows)


# ---------------------------------------------------------------------------------------------- the whole command


def _reference_warm(store: Store, scenario: Scenario, name: str) -> bool:
    """Whether campaign ``name`` timed its reference after an untimed call of it
    (:func:`edgeplan.measure.op_timing.timed_reference_ms`); a repeat that timed it another way than its main
    campaign is refused: its ratios would be written at the main campaign's reference latency, but they are not
    comparable with its ratios."""
    main_name = campaign_name(scenario)
    main, mine = store.find_campaign(main_name), store.find_campaign(name)
    ours = bool(mine is not None and mine.params.get("reference") and mine.params.get("reference_warm"))
    if name == main_name or main is None or mine is None:
        return ours
    if not (main.params.get("reference") and mine.params.get("reference")):
        return ours
    theirs = bool(main.params.get("reference_warm"))
    if ours != theirs:
        raise InvalidInputError(
            f"campaign {name!r} timed its reference {_pairing(ours)} and its main campaign {main_name!r} "
            f"{_pairing(theirs)}: their ratios are not comparable; measure both with one edgeplan, e.g. the main "
            "campaign again in another --home")
    return ours


def _pairing(warm: bool) -> str:
    """How a campaign timed its reference model (:func:`edgeplan.measure.op_timing.timed_reference_ms`)."""
    return "after an untimed call of it" if warm else "straight after each call (as older versions of edgeplan did)"


def _mergeable(path: str | Path, scenario: Scenario, repeat: str, scale: Mapping[str, Any] | None) -> OpDataset:
    """The dataset at ``path``, checked to be of ``scenario`` and ``repeat`` with the same reference model."""
    earlier = load_dataset(path)
    before = earlier.provenance
    if before.get("scenario") != scenario.name or before.get("repeat", "") != repeat:
        raise InvalidInputError(f"--merge {path}: it holds scenario {before.get('scenario')!r}"
                                f"{' repeat ' + repr(before.get('repeat')) if before.get('repeat') else ''}, not "
                                f"{scenario.name!r}{' repeat ' + repr(repeat) if repeat else ''}; merge a file of "
                                "the campaign being exported")
    ref = before.get("reference")
    theirs, ours = (ref or {}).get("model"), (scale or {}).get("model")
    if theirs != ours and theirs is not None:  # an unpaired file takes paired rows at a matched scale
        raise InvalidInputError(f"--merge {path}: it was measured {_beside(theirs)}, the Store's campaign "
                                f"{_beside(ours)}; their times are on different scales and cannot share a file")
    if theirs is not None and ours is not None:
        _check_pairing(f"--merge {path}", ref or {}, scale or {})
    return earlier


def _check_pairing(what: str, file_ref: Mapping[str, Any], scale: Mapping[str, Any]) -> None:
    """Refuse to put a campaign's ratios on a file's scale when the two timed their reference differently."""
    theirs, ours = bool(file_ref.get("warm")), bool(scale.get("warm"))
    if theirs != ours:
        raise InvalidInputError(f"{what}: its reference was timed {_pairing(theirs)}, the Store's campaign's "
                                f"{_pairing(ours)}; their ratios are not comparable and cannot share a scale")


#: Fewest models a paired campaign must share with an unpaired dataset to be merged into it (:func:`_matched_scale`).
MIN_MATCHED = 10


def _matched_scale(earlier: OpDataset, records: Sequence[Any], scale: Mapping[str, Any], path: str,
                   match_on: Collection[str] | None = None,
                   why: str = "--merge {path}: it was measured without a reference model and") -> dict[str, Any]:
    """The reference latency that puts a paired campaign's ratios on an unpaired dataset's scale.

    An unpaired dataset (measured before the reference pairing) has no reference latency; the models it shares
    with the campaign (of ``match_on`` only, when given) give one: the median over them of the dataset's time
    divided by the campaign's ratio to the reference (separately for the medians and the fastest runs). Their
    spread is recorded beside it. The same matches a campaign to a ``--scale-from`` file whose reference was
    timed otherwise (``why`` begins the message of a refusal).

    Raises
    ------
    InvalidInputError
        When fewer than :data:`MIN_MATCHED` models are in both (and in ``match_on``).
    """
    rows = {r["model"]: r for r in earlier.records}
    allowed = None if match_on is None else set(match_on)
    common = [r for r in records if r.model in rows and (allowed is None or r.model in allowed)]
    if len(common) < MIN_MATCHED:
        among = "" if allowed is None else f" among the {len(allowed)} --match-on models"
        raise InvalidInputError(f"{why.format(path=path)} shares {len(common)} models with the Store's "
                                f"campaign{among}; re-measure at least {MIN_MATCHED} of its models beside the "
                                "reference too (they put the two on one scale)")
    ms = np.array([rows[r.model]["latency_ms"] / r.extra["reference"]["ratio"] for r in common])
    fastest = np.array([rows[r.model]["latency_min_ms"] / r.extra["reference"]["min_ratio"] for r in common])
    q1, q3 = np.percentile(ms, [25, 75])
    return {**scale, "ms": float(np.median(ms)), "min_ms": float(np.median(fastest)),
            "matched": {"file": path, "models": len(common), "match_on": None if allowed is None else len(allowed),
                        "iqr_rel": float((q3 - q1) / np.median(ms)),
                        "campaign_reference_ms": scale["ms"], "campaign_reference_min_ms": scale["min_ms"]}}


def _scale_of(path: str | Path, scenario: Scenario, scale: Mapping[str, Any] | None,
              match_on: Collection[str] | None = None, records: Sequence[Any] = ()) -> dict[str, Any]:
    """The reference latency of the dataset at ``path`` for a campaign measured beside the same reference model.

    A campaign that timed its reference otherwise than the file (after an untimed call of it, the file straight
    after each call) has ratios on another footing: with ``match_on``, the latency is the one that matches the
    campaign's times of those models to the file's (:func:`_matched_scale` over ``records``, the campaign's),
    bridge models measured again for that, and the file's own reference latency is kept beside it
    (``scale_from.file_reference_ms``: the scale of the file, which the campaign's times now share); without it,
    such a file is refused."""
    other = load_dataset(path)
    ref = other.provenance.get("reference")
    if other.scenario != scenario.name:
        raise InvalidInputError(f"--scale-from {path}: it holds scenario {other.scenario!r}, not {scenario.name!r}")
    if scale is None or not ref or ref.get("model") != scale["model"]:
        raise InvalidInputError(f"--scale-from {path}: it was measured {_beside((ref or {}).get('model'))}, the "
                                f"Store's campaign {_beside((scale or {}).get('model'))}; only times measured beside "
                                "the same reference model can be put on its scale")
    source = {"file": str(path), "campaign_reference_ms": scale["ms"], "campaign_reference_min_ms": scale["min_ms"]}
    if match_on is not None:
        matched = _matched_scale(other, records, scale, str(path), match_on,
                                 why="--scale-from {path}: its reference was timed otherwise, and it")
        source["matched"] = matched.pop("matched")
        source["file_reference_ms"], source["file_reference_min_ms"] = ref["ms"], ref["min_ms"]
        return {**ref, "ms": matched["ms"], "min_ms": matched["min_ms"], "warm": bool(scale.get("warm")),
                "scale_from": source}
    try:
        _check_pairing(f"--scale-from {path}", ref, scale)
    except InvalidInputError as err:
        raise InvalidInputError(f"{err}; or re-measure at least {MIN_MATCHED} of its models in the campaign and "
                                "give them with --match-on, to match the two scales on them") from None
    return {**ref, "scale_from": source}


def _beside(model: str | None) -> str:
    return f"beside the reference model {model}" if model else "without a reference model"


def _reference_scale(store: Store, scenario: Scenario, records: Sequence[Any], name: str) -> dict[str, Any] | None:
    """The scenario's typical reference latency, when ``records`` were measured beside a reference model.

    It is the median, over the models of the scenario's main campaign (the campaign itself when there is none), of
    the reference's median (and fastest) time beside each model, so that a scenario's main campaign and its repeats
    convert ratios to milliseconds with the same factor. A repeat without its main campaign in the Store gets its
    own latency (``from_campaign`` says which): :func:`export_dataset` warns then, unless it merges into a paired
    file, whose latency it converts at instead.
    """
    refs = [r.extra.get("reference") for r in records]
    if all(x is None for x in refs):
        return None
    if any(x is None for x in refs):
        raise InvalidInputError(f"campaign {name!r} mixes rows measured with and without a reference model")
    model = refs[0]["model"]
    main = campaign_name(scenario)
    main_refs = refs if name == main else [r.extra.get("reference") for r in store.measurements(campaign=main)]
    base, source = [x for x in main_refs if x and x["model"] == model], main
    if not base:  # a repeat without its main campaign in this Store
        base, source = refs, name
    return {"model": model, "ms": float(np.median([x["ms"] for x in base])),
            "min_ms": float(np.median([x["min_ms"] for x in base])), "from_campaign": source, "models": len(base)}


def _warn_own_scale(name: str, scale: Mapping[str, Any], main: str) -> None:
    """Warn that campaign ``name``'s ratios are converted at its own reference latency (:func:`_reference_scale`),
    not at its main campaign ``main``'s."""
    warnings.warn(f"campaign {name!r}: the Store has no main campaign measured beside the reference "
                  f"{scale['model']}, so its ratios are converted at its own reference latency ({scale['ms']:.4g} "
                  f"ms, fastest {scale['min_ms']:.4g} ms), not the main campaign's: its times are not comparable "
                  "with the main campaign's export (a noise floor between the two is refused); export it from the "
                  f"Store that holds the main campaign ({main!r}), or merge it into a repeat file measured beside "
                  "the same reference (`--merge`)", ReferenceScaleWarning, stacklevel=3)


def _normalised(row: dict[str, Any], ref: Mapping[str, Any], ms: float, min_ms: float) -> dict[str, Any]:
    """A dataset row whose times are its ratios to the reference multiplied by the scenario's reference latency,
    and whose ``iqr_rel`` is the spread of its end-to-end ratios; the times and spread as measured are kept as
    ``raw_*``."""
    def paired(o: Mapping[str, Any]) -> dict[str, Any]:
        o = dict(o)
        if o.get("ratio") is not None:
            o["raw_ms"], o["raw_min_ms"] = o["ms"], o["min_ms"]
            o["ms"], o["min_ms"] = o["ratio"] * ms, o["min_ratio"] * min_ms
        return o

    ops = [paired(o) for o in row["ops"]]
    if "folded_ops" in row:
        row = {**row, "folded_ops": [paired(o) for o in row["folded_ops"]]}
    if "folded_work_ms" in row:  # no ratio of its own: kept as measured
        row = {k: v for k, v in row.items() if k != "folded_work_ms"} | {"raw_folded_work_ms":
                                                                            row["folded_work_ms"]}
    return {**row, "raw_latency_ms": row["latency_ms"], "raw_latency_min_ms": row["latency_min_ms"],
            "raw_iqr_rel": row["iqr_rel"], "latency_ms": ref["ratio"] * ms, "latency_min_ms": ref["min_ratio"] * min_ms,
            "iqr_rel": ref["iqr_rel"], "ops": ops, "op_sum_ms": sum(o["ms"] for o in ops),
            "op_sum_min_ms": sum(o["min_ms"] for o in ops)}


