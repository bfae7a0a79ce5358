"""The configuration space of the primitive profiling campaign (mulder2020 §3.2.1), and how one call is timed.

1. **Triplets.** ``(c, k, im)`` as they occur in the architectures of mulder2020 Table 7 (:data:`ARCHITECTURES`,
   the 25 of them the zoo has), extracted from their IR graphs by :func:`extract_triplets`: for every ``conv2d``
   node, ``c`` = input channels, ``k`` = output channels, ``im`` = side of its (square) input at the model's default
   input size. Groups are ignored, as in the mulder2021 dataset. The distinct triplets ship in
   ``edgeplan/data/primitives/zoo_triplets.json`` (:func:`load_triplets`).
2. **Crossing.** Each triplet is combined with every ``f`` in :data:`KERNEL_SIZES` and ``s`` in :data:`STRIDES`
   ('same' padding ``(f - 1) // 2``), and the impossible ones, ``f > im``, are dropped (:func:`config_space`).
3. **Sampling** (:func:`select_configs`). A configuration is kept when its work
   ``max(c k f^2 out^2, 6 k c P (P // 2 + 1))`` (:func:`work_units`: dense multiply-accumulates; the second term,
   the FFT primitive's complex products on the padded side ``P = im + 2p``, only where that primitive applies) is
   at most ``work_cap`` (default :data:`DEFAULT_WORK_CAP`), so that every applicable primitive of every kept
   configuration is affordable on one thread; the kept ones are shuffled by a seeded RNG (the measurement order, so
   that drift of the machine does not correlate with the configuration) and optionally truncated to
   ``max_configs`` (a uniform random sample).

**Configurations above the work cap are not in the dataset.** The cut is far from uniform over ``(f, s)``
(:func:`cap_coverage` counts it): what is dropped is the large-channel, large-input end of each ``(f, s)``, so a cost
model fitted on this data extrapolates on large layers. The separate above-cap campaign
(:func:`~edgeplan.measure.primitive_campaign.above_cap_campaign`, sampled by :func:`sample_above_cap`) measures a
stratified sample above the cap and the zoo's real layers there, to check that extrapolation.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.measure.device import collect_versions
from edgeplan.primitives.spec import LAYOUTS, ConvSpec

__all__ = [
    "ARCHITECTURES",
    "AboveCapOptions",
    "CAMPAIGN_PREFIX",
    "CapCoverage",
    "DATASET_FORMAT",
    "DEFAULT_ABOVE_CAP_MAX_WORK",
    "DEFAULT_WORK_CAP",
    "KERNEL_SIZES",
    "PRIMITIVE_KIND",
    "SHAPE_COLUMNS",
    "STRIDES",
    "Shape",
    "TRANSFORM_COLUMNS",
    "TRANSFORM_KIND",
    "TimingPlan",
    "Triplet",
    "applies",
    "cap_coverage",
    "config_key",
    "config_space",
    "digest",
    "extract_layers",
    "extract_triplets",
    "load_triplets",
    "network_configs",
    "now_utc",
    "sample_above_cap",
    "select_configs",
    "shape_list",
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


TRIPLETS_FORMAT = "edgeplan-conv-triplets/1"


DATASET_FORMAT = "edgeplan-primitive-dataset/1"


SHIPPED_TRIPLETS = "primitives/zoo_triplets.json"


CAMPAIGN_PREFIX = "primitives|"


Triplet = tuple[int, int, int]


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
    data = {"format": TRIPLETS_FORMAT, "extracted_at": now_utc(), "command": command,
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
    where = str(path) if path is not None else f"edgeplan/data/{SHIPPED_TRIPLETS}"
    try:
        text = (Path(path).read_text(encoding="utf-8") if path is not None
                else resources.files("edgeplan.data").joinpath(SHIPPED_TRIPLETS).read_text(encoding="utf-8"))
        data = json.loads(text)
    except OSError as e:
        raise InvalidInputError(f"cannot read the triplets file {where}: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{where} is not JSON ({e}); regenerate it with extract_triplets and "
                                "write_triplets (edgeplan.measure.primitive_space)") from e
    if not isinstance(data, dict) or data.get("format") != TRIPLETS_FORMAT:
        raise InvalidInputError(f"{where} is not a {TRIPLETS_FORMAT} file")
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


#: Default largest work of the above-cap sample (about 33x the default cap; every real layer of the zoo is below).
DEFAULT_ABOVE_CAP_MAX_WORK = 1e10


Shape = tuple[int, int, int, int, int]


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


def network_configs(models: Sequence[str]) -> tuple[ConvSpec, ...]:
    """The distinct layers of the conv nodes of ``models`` that a primitive can run, in the order met.

    A node counts when :func:`~edgeplan.primitives.spec.conv_shape` gives it a shape (one group, no dilation,
    square kernel, stride and input, equal padding) and a primitive applies to it at its own padding; its layer is
    written with 'same' padding, as the dataset format has no padding column.

    Parameters
    ----------
    models
        Zoo strings.

    Returns
    -------
    tuple of ConvSpec
    """
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.primitives.registry import applicable
    from edgeplan.primitives.spec import conv_shape

    found: dict[tuple[int, ...], None] = {}
    for model in models:
        for node in load_graph(model).nodes:
            shape = conv_shape(node)
            if shape is not None and applicable(ConvSpec(*shape[:5], padding=shape[5])):
                found.setdefault(shape[:5])
    return tuple(ConvSpec(*shape) for shape in found)


def sample_above_cap(space: Sequence[ConvSpec], options: AboveCapOptions, *,
                     with_fft: bool = True) -> tuple[ConvSpec, ...]:
    """A seeded sample of the configurations of ``space`` with work in ``(work_cap, max_work]``, stratified by
    log-work bins (:class:`AboveCapOptions`), sorted by shape."""
    low, high = math.log(options.work_cap), math.log(options.max_work)
    strata: list[list[ConvSpec]] = [[] for _ in range(options.bins)]
    for spec in sorted(space, key=shape_list):
        work = work_units(spec, with_fft)
        if options.work_cap < work <= options.max_work:
            strata[min(options.bins - 1, int((math.log(work) - low) / (high - low) * options.bins))].append(spec)
    chosen: list[ConvSpec] = []
    for i, members in enumerate(strata):
        wanted = options.n // options.bins + (i < options.n % options.bins)
        chosen += random.Random(f"{options.seed}|{i}").sample(members, min(wanted, len(members)))
    return tuple(sorted(chosen, key=shape_list))


def applies(name: str, spec: ConvSpec) -> bool:
    """Whether primitive ``name`` runs the layer ``spec``."""
    from edgeplan.primitives.registry import get_primitive

    return get_primitive(name).applies(spec)


def config_key(spec: ConvSpec) -> str:
    """The Store key of a configuration: ``c64-k64-im56-f3-s1``."""
    return f"c{spec.c}-k{spec.k}-im{spec.im}-f{spec.f}-s{spec.s}"


def shape_list(spec: ConvSpec) -> list[int]:
    """``spec`` as ``[c, k, im, f, s]``."""
    return [spec.c, spec.k, spec.im, spec.f, spec.s]


def digest(value: object) -> str:
    """A short content hash of a JSON-able ``value``."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def now_utc() -> str:
    """The time now, UTC, to the second (ISO 8601)."""
    return datetime.now(UTC).isoformat(timespec="seconds")
