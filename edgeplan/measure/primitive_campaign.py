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

Coverage: what the dataset does not hold
----------------------------------------
**Configurations above the work cap are not in the dataset: nothing is sampled above it.** At the default cap
3e8, 3872 of the 5457 configurations of the space are kept; 1585 (work 3.0e8 to 9.9e10) are not measured at all.
The cut is far from uniform over ``(f, s)`` (:func:`cap_coverage`; placeholder): of the zoo triplets with ``f <= im``, 91 % / 100 % / 100 % are kept for ``f = 1`` at
``s = 1 / 2 / 4``, 69 / 94 / 99 % for ``f = 3``, 41 / 79 / 95 % for ``f = 5``, 19 / 59 / 90 % for ``f = 7`` and
8 / 27 / 61 % for ``f = 11``; what is dropped is the large-channel, large-input end of each ``(f, s)``. A cost
model fitted on this data therefore **extrapolates** on large layers (big ``c k``, big ``im``, ``f >= 5`` at
stride 1): its test-split MdRAE says nothing about them. This touches real layers: of the 440 distinct square
``(c, k, im, f, s)`` conv layers of the 25 architectures (all in the space), 51 are above the cap (28 with
``f = 1``, mostly where the FFT term dominates; 16 with ``f = 3, s = 1``; 7 with ``f = 3, s = 2``), among them 7 of
VGG-11's 8 conv layers and most of ResNeXt's (whose grouped layers the dataset counts dense), and a planner's
costs for them are extrapolated. The separate, optional above-cap campaign (:func:`above_cap_campaign`) measures
a stratified sample above the cap and those real layers, to check that extrapolation; it never changes the main
campaign.

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
column per primitive; nanoseconds; empty = not applicable) plus a provenance JSON beside it. Only configurations
whose every cell is measured are written by default; a configuration with a cell over the per-call cap counts as
done for the campaign (it is not measured again) but is *measured and not exportable*, reported as such by
:func:`profile_primitives` and the export. With ``include_incomplete`` those rows are written too, their missing
and over-cap cells empty as the format demands, and every such cell is listed with its reason (``over_cap`` or
``missing``) in ``OUT.not_measured.csv``, so that an empty cell that applies is never mistaken for "not
applicable".

Noise floor (:func:`noise_floor`): the between-run MdRAE of two exports (or campaigns) on their shared
configurations, per column, with the same MdRAE as the cost models (:mod:`edgeplan.measure.metrics`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import random
import statistics
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
from edgeplan.measure.progress import PlainLines
from edgeplan.measure.runners import torch_device
from edgeplan.measure.store import Campaign, MeasurementRecord, Store
from edgeplan.primitives.spec import LAYOUTS, ConvSpec

if TYPE_CHECKING:
    from edgeplan.measure.primitive_data import PrimitiveDataset
    from edgeplan.primitives.base import Primitive

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_ABOVE_CAP_MAX_WORK",
    "DEFAULT_WORK_CAP",
    "KERNEL_SIZES",
    "MISSING",
    "NOT_MEASURED_COLUMNS",
    "OVER_CAP",
    "PRIMITIVE_KIND",
    "STRIDES",
    "TRANSFORM_COLUMNS",
    "TRANSFORM_KIND",
    "AboveCapOptions",
    "CampaignPlan",
    "CapCoverage",
    "ColumnNoise",
    "DatasetTable",
    "ExportSummary",
    "NoiseFloor",
    "NotMeasured",
    "ProfileReport",
    "TimingPlan",
    "above_cap_campaign",
    "campaign_dataset",
    "cap_coverage",
    "config_space",
    "dataset_table",
    "estimate_duration_s",
    "export_dataset",
    "extract_layers",
    "extract_triplets",
    "find_campaign",
    "find_remeasure",
    "load_triplets",
    "noise_floor",
    "primitive_campaign",
    "profile_primitives",
    "remeasure_campaign",
    "sample_above_cap",
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
        raise InvalidInputError(f"{where} is not JSON ({e}); regenerate it with edgeplan.measure.primitive_campaign.extract_triplets and write_triplets") from e
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
                   with_fft: bool = True, design: str = "uniform",
                   primitives: Sequence[str] | None = None) -> tuple[ConvSpec, ...]:
    """The configurations to measure, in measurement order (the sampling rule of the module docstring).

    With ``max_configs`` and ``design="kmeans"`` the configurations are not a uniform sample but those
    :func:`~edgeplan.measure.sampling.design_rows` chooses among the kept ones (spread over the layer
    sizes, the filter shapes in proportion to how many of ``primitives``, default all, apply to them), in a seeded
    order.
    """
    if not work_cap > 0:
        raise InvalidInputError(f"the work cap must be positive, got {work_cap}")
    if max_configs is not None and max_configs < 1:
        raise InvalidInputError(f"max_configs must be a positive integer, got {max_configs}")
    if design not in ("uniform", "kmeans"):
        raise InvalidInputError(f"unknown sample design {design!r}; use uniform or kmeans")
    kept = [spec for spec in space if work_units(spec, with_fft) <= work_cap]
    if design == "kmeans" and max_configs is not None and max_configs < len(kept):
        import numpy as np

        from edgeplan.measure.sampling import design_rows
        from edgeplan.primitives.registry import get_primitive, primitive_names

        prims = [get_primitive(n) for n in (primitives if primitives is not None else primitive_names())]
        features = np.array([(c.c, c.k, c.im, c.f, c.s) for c in kept], dtype=np.float64)
        cells = np.array([sum(p.applies(c) for p in prims) for c in kept], dtype=np.float64)
        rows = design_rows(features, np.arange(len(kept)), max_configs, seed, cells=cells)
        return tuple(kept[int(i)] for i in random.Random(seed).sample(list(rows), len(rows)))
    order = random.Random(seed).sample(kept, len(kept))
    return tuple(order if max_configs is None else order[:max_configs])


@dataclass(frozen=True)
class CapCoverage:
    """How much of one ``(f, s)`` of the space the work cap keeps (one row of :func:`cap_coverage`).

    Attributes
    ----------
    f, s
        Kernel size and stride.
    triplets
        Triplets with ``f <= im`` (the configurations of the space at this ``(f, s)``).
    kept
        Those whose work is at most the cap (in the dataset); the others are not measured at all.
    max_work
        Largest work at this ``(f, s)``, kept or not (how far a model extrapolates on the zoo's layers).
    """

    f: int
    s: int
    triplets: int
    kept: int
    max_work: float

    @property
    def fraction_kept(self) -> float:
        """``kept / triplets`` (NaN when no triplet admits this ``f``)."""
        return self.kept / self.triplets if self.triplets else math.nan

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-serialisable dict."""
        return {"f": self.f, "s": self.s, "triplets": self.triplets, "kept": self.kept,
                "dropped": self.triplets - self.kept, "fraction_kept": self.fraction_kept if self.triplets else None,
                "max_work": self.max_work}


def cap_coverage(triplets: Iterable[Triplet], work_cap: float = DEFAULT_WORK_CAP, *,
                 with_fft: bool = True) -> tuple[CapCoverage, ...]:
    """Per ``(f, s)`` of :data:`KERNEL_SIZES` x :data:`STRIDES`: how many triplets survive the work cap.

    Parameters
    ----------
    triplets
        The ``(c, k, im)`` triplets (the shipped zoo triplets for the main campaign).
    work_cap, with_fft
        The sampling rule of :func:`select_configs`.

    Returns
    -------
    tuple of CapCoverage
        One row per ``(f, s)``, in ``(f, s)`` order.
    """
    if not work_cap > 0:
        raise InvalidInputError(f"the work cap must be positive, got {work_cap}")
    rows: dict[tuple[int, int], list[float]] = {(f, s): [] for f in KERNEL_SIZES for s in STRIDES}
    for spec in config_space(triplets):
        rows[(spec.f, spec.s)].append(work_units(spec, with_fft))
    return tuple(CapCoverage(f, s, len(works), sum(w <= work_cap for w in works), max(works, default=0.0))
                 for (f, s), works in rows.items())


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
                       timing: TimingPlan | None = None, threads: int = 1, device: str = "cpu",
                       design: str = "uniform") -> CampaignPlan:
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
    device
        Torch device the primitives run on: ``"cpu"``, or ``"cuda"`` / ``"cuda:N"`` (then the primitives that run
        on the CPU only, oneDNN's, are left out, and every timed run ends with a device synchronisation).
    design
        How ``max_configs`` configurations are chosen from the zoo space: ``uniform`` (default) or ``kmeans``
        (:func:`select_configs`; part of the campaign's name and parameters).

    Returns
    -------
    CampaignPlan

    Raises
    ------
    InvalidInputError
        On an unknown primitive name, one named that does not run on ``device``, an explicit padding or an empty
        selection.
    """
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
        params["configs"] = [_shape(s) for s in space]
        tag = f"custom-{_digest(params['configs'])}"
    else:
        triplets = tuple(triplets) if triplets is not None else load_triplets()
        space = config_space(triplets)
        chosen = select_configs(space, work_cap=work_cap, seed=seed, max_configs=max_configs,
                                with_fft="fft" in names, design=design, primitives=names)
        params["space"] = {"triplets": len(triplets), "triplets_sha256": _digest(sorted(triplets)),
                           "kernel_sizes": list(KERNEL_SIZES), "strides": list(STRIDES), "work_cap": work_cap,
                           "max_configs": max_configs, "space_size": len(space), "selected": len(chosen)}
        tag = f"zoo-cap{work_cap:g}" + (f"-n{max_configs}" if max_configs else "")
        if design != "uniform" and max_configs:  # uniform campaigns keep the names and parameters they always had
            params["space"]["design"] = design
            tag += f"-{design}"
    if not chosen:
        raise InvalidInputError("the configuration selection is empty; raise --work-cap or give configurations")
    if primitives is not None:
        tag += f"-p{_digest(list(names))}"
    name = f"{_NAME_PREFIX}{tag}-seed{seed}|torch|{threads}t|{device_key}"
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


# ---------------------------------------------------------------------------------------------- above the cap


#: Default largest work of the above-cap sample (about 33x the default cap; every real layer of the zoo is below).
DEFAULT_ABOVE_CAP_MAX_WORK = 1e10

Shape = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class AboveCapOptions:
    """What the optional above-cap campaign (:func:`above_cap_campaign`) samples, and how it times.

    Parameters
    ----------
    n
        Configurations sampled above the cap (the real layers come on top).
    bins
        Log-work bins between ``work_cap`` and ``max_work``; each gets ``n // bins`` (the first ``n % bins`` one
        more), or all it has when it has fewer.
    seed
        Seed of the sample and of the measurement order.
    work_cap
        The main campaign's cap: only configurations above it are candidates.
    max_work
        The largest work sampled. The per-call cap stops repeats, not the first run, so this bounds the time of a
        first run.
    timing
        Default: a 1 s per-call cap and 2 to 5 timed runs (the main campaign: 2 s, 3 to 50).
    """

    n: int
    bins: int = 8
    seed: int = 0
    work_cap: float = DEFAULT_WORK_CAP
    max_work: float = DEFAULT_ABOVE_CAP_MAX_WORK
    timing: TimingPlan = field(default_factory=lambda: TimingPlan(min_repeats=2, max_repeats=5, call_cap_ms=1000.0))

    def __post_init__(self) -> None:
        if self.n < 1 or self.bins < 1 or not 0 < self.work_cap < self.max_work:
            raise InvalidInputError(f"the above-cap sample needs n >= 1, bins >= 1 and 0 < work_cap < max_work, "
                                    f"got {self}")


def extract_layers(models: Sequence[str] = ARCHITECTURES) -> tuple[dict[Shape, tuple[str, ...]], tuple[str, ...]]:
    """The distinct square ``(c, k, im, f, s)`` conv layers of ``models`` (groups and padding ignored).

    Returns
    -------
    tuple
        ``(layers, skipped)``: ``(c, k, im, f, s) -> models``, sorted; and ``model:node`` of each conv layer with a
        non-square kernel or stride, which no configuration can describe.
    """
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.ops import ConvAttrs, OpKind

    found: dict[Shape, list[str]] = {}
    skipped: list[str] = []
    for model in dict.fromkeys(models):
        for node in load_graph(model).nodes:
            if node.kind is not OpKind.CONV2D or not isinstance(node.attrs, ConvAttrs):
                continue
            (fh, fw), (sh, sw) = node.attrs.kernel, node.attrs.stride
            *_, h, w = node.input_shapes[0]
            if fh != fw or sh != sw or h != w:
                skipped.append(f"{model}:{node.name}")
                continue
            users = found.setdefault((node.attrs.in_channels, node.attrs.out_channels, int(h), fh, sh), [])
            if model not in users:
                users.append(model)
    return {s: tuple(found[s]) for s in sorted(found)}, tuple(skipped)


def sample_above_cap(space: Sequence[ConvSpec], options: AboveCapOptions, *,
                     with_fft: bool = True) -> tuple[ConvSpec, ...]:
    """A seeded sample of the configurations of ``space`` with work in ``(work_cap, max_work]``, stratified by
    log-work bins (:class:`AboveCapOptions`), sorted by shape."""
    low, high = math.log(options.work_cap), math.log(options.max_work)
    strata: list[list[ConvSpec]] = [[] for _ in range(options.bins)]
    for spec in sorted(space, key=_shape):
        work = work_units(spec, with_fft)
        if options.work_cap < work <= options.max_work:
            strata[min(options.bins - 1, int((math.log(work) - low) / (high - low) * options.bins))].append(spec)
    chosen: list[ConvSpec] = []
    for i, members in enumerate(strata):
        wanted = options.n // options.bins + (i < options.n % options.bins)
        chosen += random.Random(f"{options.seed}|{i}").sample(members, min(wanted, len(members)))
    return tuple(sorted(chosen, key=_shape))


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
           f"seed{options.seed}" + (f"-p{_digest(list(names))}" if primitives is not None else ""))
    name = f"{_NAME_PREFIX}{tag}|torch|{threads}t|{device_key}"
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
                 "triplets_sha256": _digest(sorted(triplets)), "sampled": len(sampled),
                 "real_layers": [list(s) for s in real]}
    if not configs:
        raise InvalidInputError(f"no configuration has work in ({options.work_cap:g}, {options.max_work:g}]; "
                                "raise the largest work")
    params = {"threads": threads, "seed": options.seed, "timing": asdict(options.timing), "primitives": list(names),
              "configs": [_shape(s) for s in configs], "above_cap": above}
    order = tuple(random.Random(options.seed).sample(configs, len(configs)))
    return CampaignPlan(name, order, names, options.timing, params, len(space))


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
        cells = [(p.name, work_units(spec, with_fft=False)) for p in _resolve(plan.primitives) if p.applies(spec)]
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
    campaign: Campaign
    plan: CampaignPlan
    device: DeviceDescriptor
    command: str
    versions: dict[str, str]
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
    run = _Run(store, campaign, plan, device, command, collect_versions(), set(store.completed_task_keys(campaign)),
               _over_cap_keys(store, campaign))
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
                advance(_config_key(spec) + (f", {not_exportable} not exportable" if not_exportable else ""))
    finally:
        complete = done_before + done_now == len(plan.configs)
        store.set_campaign_status(campaign, "complete" if complete else "partial")
    return ProfileReport(plan.name, len(plan.configs), done_before, done_now, run.rows, tuple(run.over_cap),
                         tuple(run.failed), stopped, time.monotonic() - started, not_exportable)


def _over_cap_keys(store: Store, campaign: Campaign) -> set[str]:
    """Task keys of ``campaign`` recorded over the per-call cap."""
    return {r.task_key for r in store.measurements(campaign=campaign) if r.extra.get("status") == OVER_CAP}


def _over_cap(run: _Run, spec: ConvSpec) -> bool:
    """Whether a task of ``spec`` (a primitive or one of its transformations) is recorded over cap."""
    return any(key in run.over_keys for key, _, _ in _jobs(run.plan, spec))


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
                subject_shape: dict[str, int] = dict(zip(SHAPE_COLUMNS, _shape(spec), strict=True))
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
        run.store.add_measurement(timing, run.device, model=model, task_key=key, kind=kind, subject=name,
                                  campaign=run.campaign, command=run.command, versions=run.versions, extra=extra)
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


#: Why an exported cell is empty although its column applies (the ``reason`` column of ``OUT.not_measured.csv``).
OVER_CAP = "over_cap"
MISSING = "missing"
NOT_MEASURED_COLUMNS: tuple[str, ...] = (*SHAPE_COLUMNS, "column", "reason")


@dataclass(frozen=True)
class NotMeasured:
    """An empty cell of an exported row whose column applies: ``reason`` is :data:`OVER_CAP` or :data:`MISSING`."""

    shape: tuple[int, ...]
    column: str
    reason: str


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
        Cells (primitives and transformations) over the per-call cap in the rows written.
    not_measured
        Every applicable cell left empty in the rows written, with its reason (empty unless incomplete rows are
        written).
    not_exportable
        Configurations with every cell measured but at least one over cap: done for the campaign, not exportable.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[int | None, ...], ...]
    complete_configs: frozenset[tuple[int, ...]]
    incomplete: int
    over_cap_cells: int
    not_measured: tuple[NotMeasured, ...] = ()
    not_exportable: int = 0

    @property
    def missing_cells(self) -> int:
        """Applicable cells with no measurement in the rows written."""
        return sum(1 for cell in self.not_measured if cell.reason == MISSING)


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
        Also write configurations (with at least one primitive row) that have missing or over-cap cells; those
        cells are empty and listed in :attr:`DatasetTable.not_measured`.
    """
    from edgeplan.primitives.registry import primitive_names

    known = set(primitive_names())
    prim: dict[tuple[int, ...], dict[str, int | None]] = {}
    trans: dict[tuple[int, ...], dict[str, int | None]] = {}  # None = over cap
    for rec in records:
        config = rec.extra["config"]
        names = SHAPE_COLUMNS if rec.kind == PRIMITIVE_KIND else ("c", "im")
        shape = tuple(int(config[n]) for n in names)
        value = None if rec.extra.get("status") == OVER_CAP else max(1, round(rec.latency_ms * 1e6))
        if rec.kind == PRIMITIVE_KIND:
            prim.setdefault(shape, {})[rec.subject] = value
        elif rec.kind == TRANSFORM_KIND:
            trans.setdefault(shape, {})[rec.subject] = value
    rows, complete, gaps = [], set(), []
    incomplete = not_exportable = 0
    for shape in sorted(prim):
        spec = ConvSpec(*shape)
        cells = prim[shape]
        needed = [p for p in primitives if (_applies(p, spec) if p in known else p in cells)]
        moves = trans.get((spec.c, spec.im), {})
        empty = [NotMeasured(shape, name, OVER_CAP if name in measured else MISSING)
                 for measured, columns in ((moves, TRANSFORM_COLUMNS), (cells, needed))
                 for name in columns if measured.get(name) is None]
        if not empty:
            complete.add(shape)
        else:
            incomplete += 1
            not_exportable += all(cell.reason == OVER_CAP for cell in empty)
            if not include_incomplete:
                continue
            gaps += empty
        rows.append((*shape, *(moves.get(t) for t in TRANSFORM_COLUMNS), *(cells.get(p) for p in primitives)))
    over = sum(1 for cell in gaps if cell.reason == OVER_CAP)
    return DatasetTable((*SHAPE_COLUMNS, *TRANSFORM_COLUMNS, *primitives), tuple(rows), frozenset(complete),
                        incomplete, over, tuple(gaps), not_exportable)


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_dataset` wrote.

    Attributes
    ----------
    csv_path, provenance_path, not_measured_path
        The files written (``None`` where not written).
    rows
        Configurations written.
    incomplete
        Configurations with a cell missing or over cap (written only with ``include_incomplete``).
    over_cap_cells, missing_cells
        Applicable cells left empty in the rows written, by reason (listed in ``not_measured_path``).
    not_exportable
        Configurations measured to the end but with a cell over cap (a part of ``incomplete``).
    """

    csv_path: Path
    provenance_path: Path | None
    rows: int
    incomplete: int
    over_cap_cells: int
    missing_cells: int = 0
    not_exportable: int = 0
    not_measured_path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-serialisable dict."""
        return {"csv": str(self.csv_path), "provenance": str(self.provenance_path) if self.provenance_path else None,
                "not_measured": str(self.not_measured_path) if self.not_measured_path else None,
                "rows": self.rows, "incomplete": self.incomplete, "not_exportable": self.not_exportable,
                "over_cap_cells": self.over_cap_cells, "missing_cells": self.missing_cells}


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
        main = [c for c in ours if not c.name.startswith((f"{_NAME_PREFIX}remeasure-", f"{_NAME_PREFIX}abovecap-"))]
        if len(main) == 1:
            return main[0]
    listed = "; ".join(c.name for c in ours) or "none"
    what = f"no primitive campaign {name!r}" if name is not None else f"{len(ours)} primitive campaigns, not one"
    raise InvalidInputError(f"the Store at {store.path} has {what} (it has: {listed}); run `edgeplan primitives "
                            "profile` first or pass --campaign NAME")


def export_dataset(store: Store, campaign: Campaign, out: str | os.PathLike[str], *, command: str = "",
                   include_incomplete: bool = False, provenance: bool = True) -> ExportSummary:
    """Write ``campaign``'s measurements as a mulder2021 CSV, and its provenance as ``OUT.provenance.json``.

    With ``include_incomplete``, configurations with missing or over-cap cells are written too (those cells
    empty, as the format has no other mark) and every such cell is listed, with its reason, in
    ``OUT.not_measured.csv`` (columns :data:`NOT_MEASURED_COLUMNS`); without it, a stale ``OUT.not_measured.csv``
    of an earlier export is removed.

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
    gaps_path = target.with_name(target.stem + ".not_measured.csv")
    if include_incomplete:
        gaps = [",".join(NOT_MEASURED_COLUMNS)]
        gaps += [",".join((*(str(v) for v in cell.shape), cell.column, cell.reason)) for cell in table.not_measured]
        _write_atomic(gaps_path, "\n".join(gaps) + "\n")
    else:
        _remove(gaps_path)
    prov_path = None
    if provenance:
        prov_path = target.with_name(target.stem + ".provenance.json")
        data = _provenance(store, campaign, records, table, target, command, include_incomplete)
        _write_atomic(prov_path, json.dumps(data, indent=1, default=str) + "\n")
    return ExportSummary(target, prov_path, len(table.rows), table.incomplete, table.over_cap_cells,
                         table.missing_cells, table.not_exportable, gaps_path if include_incomplete else None)


def _provenance(store: Store, campaign: Campaign, records: Sequence[MeasurementRecord], table: DatasetTable,
                target: Path, command: str, include_incomplete: bool) -> dict[str, Any]:
    devices = sorted({r.device_key for r in records})
    versions = sorted({json.dumps(dict(r.versions), sort_keys=True) for r in records})
    times = sorted(r.created_at for r in records)
    gaps = target.stem + ".not_measured.csv"
    cell = "median of the timed runs after warm-up (see timing); empty = the primitive does not apply to the layer"
    if include_incomplete and table.incomplete:
        cell += f", or applies but was not measured or was over the per-call cap: those cells are listed in {gaps}"
    return {
        "format": _DATASET_FORMAT, "csv": target.name, "rows": len(table.rows), "columns": list(table.columns),
        "units": "ns", "cell": cell,
        "incomplete_configs": table.incomplete, "incomplete_included": include_incomplete,
        "not_exportable_configs": table.not_exportable, "over_cap_cells": table.over_cap_cells,
        "not_measured": {"csv": gaps if include_incomplete else None, "over_cap_cells": table.over_cap_cells,
                         "missing_cells": table.missing_cells,
                         "rule": "an applicable cell left empty in a row written: over_cap = its first run was "
                                 "longer than call_cap_ms; missing = no measurement (not reached or failed)"},
        "coverage": "configurations above the campaign's work cap are not in the dataset (none sampled above it); "
                    "see edgeplan.measure.primitive_campaign.cap_coverage",
        "timing": "per (config, primitive): prepare untimed; one untimed run t1 (over call_cap_ms: recorded over "
                  "cap, not repeated); one more untimed run if t1 < target_ms; then clamp(ceil(target_ms / t1), "
                  "min_repeats, max_repeats) timed runs; median. One intra-op thread; random seeded inputs.",
        "config_space": "edgeplan.measure.primitive_campaign module docstring (triplets of mulder2020 Table 7 crossed "
                        "with f and s, f > im dropped, work cap, seeded order)",
        "campaign": {"name": campaign.name, "params": dict(campaign.params), "command": campaign.command,
                     "created_at": campaign.created_at, "status": campaign.status},
        "devices": [{"key": k, "descriptor": d.to_dict() if (d := store.device(k)) else None} for k in devices],
        "versions": [json.loads(v) for v in versions],
        "measured_from": times[0] if times else None, "measured_to": times[-1] if times else None,
        "exported_at": _now(), "export_command": command, "store": str(store.path),
    }


# ---------------------------------------------------------------------------------------------- noise floor


@dataclass(frozen=True)
class ColumnNoise:
    """Between-run MdRAE of one column (a fraction) over the cells both runs measured.

    Attributes
    ----------
    column
        A primitive or an ``X-to-Y`` transformation.
    cells
        Cells measured in both runs (configurations for a primitive, distinct ``(c, im)`` for a transformation).
    unpaired
        Cells measured in one run only: not scored, reported so that nothing is dropped silently.
    mdrae
        Median of ``|b - a| / a`` (``a`` the reference run); NaN when ``cells`` is 0.
    """

    column: str
    cells: int
    unpaired: int
    mdrae: float

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-serialisable dict (NaN as ``None``)."""
        return {"column": self.column, "cells": self.cells, "unpaired": self.unpaired,
                "mdrae": None if math.isnan(self.mdrae) else self.mdrae}


@dataclass(frozen=True)
class NoiseFloor:
    """How much two independent measurements of the same configurations differ (:func:`noise_floor`).

    Attributes
    ----------
    reference, again
        Where the two runs come from (``a`` and ``b`` of ``|b - a| / a``).
    shared_configs, reference_configs, again_configs
        Configurations in both runs, in the reference, in the other run.
    transform_tensors
        Distinct ``(c, im)`` of the shared configurations (the transformations' cells).
    primitives, transforms
        Per shared column, in the reference's order.
    only_in_reference, only_in_again
        Columns one run lacks (not scored).
    """

    reference: str
    again: str
    shared_configs: int
    reference_configs: int
    again_configs: int
    transform_tensors: int
    primitives: tuple[ColumnNoise, ...]
    transforms: tuple[ColumnNoise, ...]
    only_in_reference: tuple[str, ...] = ()
    only_in_again: tuple[str, ...] = ()

    @property
    def median_primitive_mdrae(self) -> float:
        """Median over the primitives of their between-run MdRAE: the noise floor of the primitive models."""
        return _median_of(c.mdrae for c in self.primitives)

    @property
    def median_transform_mdrae(self) -> float:
        """The same over the non-identity transformations (``X-to-X`` left out, as in the cost models)."""
        from edgeplan.measure.primitive_data import is_identity_transform

        return _median_of(c.mdrae for c in self.transforms if not is_identity_transform(c.column))

    def to_dict(self) -> dict[str, Any]:
        """The comparison as a JSON-serialisable dict (NaN as ``None``)."""
        med_p, med_t = self.median_primitive_mdrae, self.median_transform_mdrae
        return {"reference": self.reference, "again": self.again, "shared_configs": self.shared_configs,
                "reference_configs": self.reference_configs, "again_configs": self.again_configs,
                "transform_tensors": self.transform_tensors,
                "median_primitive_mdrae": None if math.isnan(med_p) else med_p,
                "median_transform_mdrae": None if math.isnan(med_t) else med_t,
                "primitives": [c.to_dict() for c in self.primitives],
                "transforms": [c.to_dict() for c in self.transforms],
                "only_in_reference": list(self.only_in_reference), "only_in_again": list(self.only_in_again)}


def noise_floor(reference: PrimitiveDataset, again: PrimitiveDataset) -> NoiseFloor:
    """Compare two measurements of the same configurations, column by column, by the cost models' MdRAE.

    Per shared column, the MdRAE (:func:`edgeplan.measure.metrics.mdrae`) of ``again`` against
    ``reference`` over the shared configurations (the layers both have) where both runs measured the cell;
    the transformations are compared per distinct ``(c, im)``, as the cost models score them.

    Parameters
    ----------
    reference, again
        Two timing tables (:func:`edgeplan.measure.primitive_data.load_primitive_csv` of two exports, or
        :func:`campaign_dataset`): typically the main campaign and its re-measured subset.

    Returns
    -------
    NoiseFloor

    Raises
    ------
    InvalidInputError
        If a table repeats a layer or the two share no layer.
    """
    import numpy as np

    rows_a, rows_b = _rows_by_shape(reference), _rows_by_shape(again)
    shared = sorted(set(rows_a) & set(rows_b))
    if not shared:
        raise InvalidInputError(f"{reference.source} and {again.source} have no configuration (c, k, im, f, s) in "
                                "common; compare a re-measured subset with the run it was drawn from")
    a = reference.subset(np.array([rows_a[k] for k in shared], dtype=np.int64))
    b = again.subset(np.array([rows_b[k] for k in shared], dtype=np.int64))
    prims = tuple(_column_noise(p, a.primitive_ns[:, i], b.primitive_ns[:, b.primitives.index(p)])
                  for i, p in enumerate(a.primitives) if p in b.primitives)
    ta, tb = a.transform_table(), b.transform_table()
    moves = tuple(_column_noise(t, ta.times_ns[:, i], tb.times_ns[:, tb.names.index(t)])
                  for i, t in enumerate(ta.names) if t in tb.names)
    columns_a, columns_b = (*a.transforms, *a.primitives), (*b.transforms, *b.primitives)
    return NoiseFloor(reference.source, again.source, len(shared), len(reference), len(again), len(ta), prims,
                      moves, tuple(c for c in columns_a if c not in columns_b),
                      tuple(c for c in columns_b if c not in columns_a))


def campaign_dataset(store: Store, campaign: Campaign) -> PrimitiveDataset:
    """The complete configurations of ``campaign`` as a timing table (what :func:`export_dataset` writes).

    Raises
    ------
    InvalidInputError
        If the campaign has no complete configuration.
    """
    import numpy as np

    from edgeplan.measure.primitive_data import PrimitiveDataset

    primitives = tuple(campaign.params.get("primitives", ()))
    table = dataset_table(store.measurements(campaign=campaign), primitives)
    if not table.rows:
        raise InvalidInputError(f"campaign {campaign.name!r} in the Store at {store.path} has no complete "
                                "configuration; measure it first")
    values = np.array([[math.nan if v is None else float(v) for v in row] for row in table.rows])
    first, last = len(SHAPE_COLUMNS), len(SHAPE_COLUMNS) + len(TRANSFORM_COLUMNS)
    return PrimitiveDataset(features=values[:, :first], primitives=primitives, primitive_ns=values[:, last:],
                            transforms=TRANSFORM_COLUMNS, transform_ns=values[:, first:last],
                            source=f"{store.path}:{campaign.name}")


def find_remeasure(store: Store, main: Campaign) -> Campaign:
    """The one re-measured subset of ``main`` in ``store`` (:func:`remeasure_campaign`).

    Raises
    ------
    InvalidInputError
        If there is none, or several (name one).
    """
    found = [c for c in store.campaigns() if c.params.get("remeasure_of") == main.name]
    if len(found) == 1:
        return found[0]
    listed = "; ".join(c.name for c in found) or "none"
    raise InvalidInputError(f"the Store at {store.path} has {len(found)} re-measured subsets of {main.name!r}, not "
                            f"one ({listed}); measure one with remeasure_campaign or name one")


def _rows_by_shape(table: PrimitiveDataset) -> dict[tuple[int, ...], int]:
    found: dict[tuple[int, ...], int] = {}
    for i, row in enumerate(table.features):
        shape = tuple(int(v) for v in row)
        if shape in found:
            raise InvalidInputError(f"{table.source} lists the layer {shape} twice (rows {found[shape] + 2} and "
                                    f"{i + 2}); the noise floor needs one row per layer")
        found[shape] = i
    return found


def _column_noise(column: str, a: Any, b: Any) -> ColumnNoise:
    import numpy as np

    from edgeplan.measure.metrics import mdrae

    ok_a, ok_b = ~np.isnan(a), ~np.isnan(b)
    both = ok_a & ok_b
    cells = int(both.sum())
    return ColumnNoise(column, cells, int((ok_a ^ ok_b).sum()), mdrae(a[both], b[both]) if cells else math.nan)


def _median_of(values: Iterable[float]) -> float:
    defined = [v for v in values if not math.isnan(v)]
    return statistics.median(defined) if defined else math.nan


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


def _remove(target: Path) -> None:
    try:
        target.unlink(missing_ok=True)
    except OSError as e:
        raise StoreError(f"cannot remove the stale {target}: {e.strerror or e}; delete it by hand") from e


def _write_atomic(target: Path, text: str) -> None:
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)
    except OSError as e:
        temporary.unlink(missing_ok=True)
        raise StoreError(f"cannot write {target}: {e.strerror or e}; choose a writable path") from e
