"""Named sets of zoo models for campaigns, and expansion of ranges such as ``synthetic:0-999``.

Ranges work for every synthetic space: ``synthetic:0-999``, ``synthetic-wide:0-299``, ``synthetic-aligned:0-299``,
``synthetic-heads:0-299``, ``synthetic-stages:0-299``, ``synthetic-modern:0-299``, ``synthetic-mixed:0-299``,
``synthetic-nf:0-299``.

============================  ===============================================================================
set                           models
============================  ===============================================================================
``synthetic``                 ``synthetic:0`` .. ``synthetic:999``, li2023's 1000 sampled networks (§4.3.2)
``synthetic-wide``            ``synthetic-wide:0`` .. ``synthetic-wide:299``, edgeplan's wide synthetic space
                              (:mod:`edgeplan.frontends.synthetic`): training networks at the zoo CNNs' widths
``synthetic-aligned``         ``synthetic-aligned:0`` .. ``synthetic-aligned:299``, the wide space at the zoo's
                              channel alignment (multiples of 16-64) and group counts
``synthetic-heads``           ``synthetic-heads:0`` .. ``synthetic-heads:299``, the aligned space's body with
                              sampled classifiers (flattened maps, hidden FC layers, output widths)
``synthetic-stages``          ``synthetic-stages:0`` .. ``synthetic-stages:299``, the aligned space in stages:
                              blocks repeated at stride 1 with residuals, as in real CNNs' stages
``synthetic-modern``          ``synthetic-modern:0`` .. ``synthetic-modern:299``, the stages space with ConvNeXt
                              blocks and SiLU, hard-swish, ReLU and GELU activations
``synthetic-mixed``           ``synthetic-mixed:0`` .. ``synthetic-mixed:299``, the modern space with ResNet /
                              ResNeXt / RegNet bottlenecks, DenseNet blocks, 2x2 pools and sampled heads
``synthetic-nf``              ``synthetic-nf:0`` .. ``synthetic-nf:299``, the mixed space with weight-standardized
                              convolutions (NF-ResNets' and NFNets') in half its blocks
``torchvision-cnns``          every torchvision classification model but the transformers (ViT, Swin, MaxViT)
``timm-cnns``                 the timm CNNs listed in ``edgeplan/data/model_sets/timm_cnns.txt`` (60 families'
                              representatives, from ResNets and EfficientNets to RepVGG and ConvNeXt)
``timm-transformers``         the timm vision transformers and hybrids listed in
                              ``edgeplan/data/model_sets/timm_transformers.txt`` (29: ViT, DeiT, Swin, LeViT,
                              MobileViT, EdgeNeXt, EVA-02, ...)
``nb201-sample``              200 NAS-Bench-201 cells drawn uniformly (seed 0) from the 15,625: this machine's
                              measurements of the benchmark's operation shapes (32x32 inputs, 16-64 channels)
============================  ===============================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.synthetic import SPACES, family_of

__all__ = ["MODEL_SETS", "expand_models", "model_set", "read_models_file"]

#: The sets of edgeplan's synthetic spaces (300 seeds each): one per space but li2023's.
_SPACE_SETS: tuple[str, ...] = tuple(family_of(space) for space in SPACES if space != "li2023")

#: Names accepted by :func:`model_set`.
MODEL_SETS: tuple[str, ...] = ("synthetic", *_SPACE_SETS, "torchvision-cnns", "timm-cnns", "timm-transformers",
                               "nb201-sample")

_TRANSFORMERS = re.compile(r"^(vit_|swin_|maxvit_)")
_RANGE = re.compile(rf"^({'|'.join(family_of(space) for space in SPACES)}):(\d+)-(\d+)$")


def _timm_list(file: str) -> list[str]:
    text = resources.files("edgeplan.data").joinpath(f"model_sets/{file}").read_text()
    return [f"timm:{line.strip()}" for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _nb201_sample(n: int, seed: int) -> list[str]:
    """``n`` distinct NAS-Bench-201 cells, each of the 5**6 equally likely, drawn with ``seed``."""
    import random

    from edgeplan.frontends.nb201 import NB201_OPS

    rng = random.Random(seed)
    picks = rng.sample(range(len(NB201_OPS) ** 6), n)
    out = []
    for code in picks:
        ops = [NB201_OPS[(code // len(NB201_OPS) ** i) % len(NB201_OPS)] for i in range(6)]
        out.append(f"nb201:|{ops[0]}~0|+|{ops[1]}~0|{ops[2]}~1|+|{ops[3]}~0|{ops[4]}~1|{ops[5]}~2|")
    return out


def model_set(name: str) -> list[str]:
    """The zoo strings of the named set (see the module docstring).

    Raises
    ------
    InvalidInputError
        For an unknown set name.
    """
    if name == "synthetic":
        return [f"synthetic:{i}" for i in range(1000)]
    if name in _SPACE_SETS:
        return [f"{name}:{i}" for i in range(300)]
    if name == "torchvision-cnns":
        from edgeplan.frontends.zoo import torchvision_names

        return [f"torchvision:{n}" for n in torchvision_names() if not _TRANSFORMERS.match(n)]
    if name == "timm-cnns":
        return _timm_list("timm_cnns.txt")
    if name == "timm-transformers":
        return _timm_list("timm_transformers.txt")
    if name == "nb201-sample":
        return _nb201_sample(200, seed=0)
    raise InvalidInputError(f"unknown model set {name!r}; choose one of {', '.join(MODEL_SETS)}")


#: Most models one ``family:A-B`` range may name (a typo such as ``0-999999999`` would fill the memory).
MAX_RANGE = 100_000


def expand_models(specs: Iterable[str]) -> list[str]:
    """Expand ``synthetic:A-B`` and ``synthetic-{wide,aligned,heads}:A-B`` ranges (both ends included)
    and ``set:NAME``; keep order, drop repeats.

    Raises
    ------
    InvalidInputError
        For an empty range, one of more than :data:`MAX_RANGE` models, or an unknown set.
    """
    out: list[str] = []
    for spec in specs:
        spec = spec.strip()
        m = _RANGE.match(spec)
        if m:
            family, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
            if hi < lo:
                raise InvalidInputError(f"empty range {spec!r}: write {family}:LOW-HIGH with LOW <= HIGH")
            if hi - lo >= MAX_RANGE:
                raise InvalidInputError(f"range {spec!r} names {hi - lo + 1} models, more than {MAX_RANGE} in one "
                                        "range; split it into smaller ranges")
            out.extend(f"{family}:{i}" for i in range(lo, hi + 1))
        elif spec.startswith("set:"):
            out.extend(model_set(spec[4:]))
        elif spec:
            out.append(spec)
    return list(dict.fromkeys(out))


def read_models_file(path: str | Path) -> list[str]:
    """The model strings of a models file: one per line (zoo strings, ranges such as ``synthetic:0-99`` or sets such
    as ``set:timm-cnns``, expanded by :func:`expand_models`); blank lines and lines starting with ``#`` are skipped.

    Raises
    ------
    InvalidInputError
        For a missing file.
    """
    file = Path(path)
    if not file.is_file():
        raise InvalidInputError(f"models file {file} does not exist; give a text file with one model per line")
    return [line for line in file.read_text().splitlines() if line.strip() and not line.startswith("#")]
