"""The model zoo: one string per model.

=========================  =====================================================================  ===============
spec                       what it builds                                                          default input
=========================  =====================================================================  ===============
``torchvision:NAME``       a torchvision classification model, random weights                      1x3x224x224
``timm:NAME``              a timm model, random weights (``pretrained=False``)                     the model's cfg
``paper:NAME``             a model of eshratifar2018 Table 4 that no zoo has (AlexNet, ...)        per model
``nb201:CELL``             a NAS-Bench-201 network from its cell string                            1x3x32x32
``nb201-official:CELL``    the same, with ``none`` edges as the official ``x * 0`` terms          1x3x32x32
``synthetic:SEED``         a network of li2023's synthetic NAS space (§4.3.2), seeded              1x3x224x224
``synthetic-wide:SEED``    a network of edgeplan's wide synthetic space (the zoo CNNs' widths)     1x3x224x224
``synthetic-aligned:SEED`` the wide space at the zoo's channel alignment and group counts          1x3x224x224
``synthetic-heads:SEED``   the aligned space with sampled classifiers (VGG-like FC heads)          1x3x224x224
``synthetic-stages:SEED``  the aligned space in stages of repeated blocks with residuals           1x3x224x224
``synthetic-modern:SEED``  the stages space with ConvNeXt blocks and other activations             1x3x224x224
``synthetic-mixed:SEED``   the modern space with ResNet, RegNet and DenseNet blocks, 2x2 pools     1x3x224x224
``synthetic-nf:SEED``      the mixed space with weight-standardized convolutions (NFNets')        1x3x224x224
``PATH.onnx``              an ONNX file                                                            from the file
=========================  =====================================================================  ===============

Nothing is downloaded: every architecture is built with random weights, which is all latency needs.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.synthetic import SPACES, family_of

if TYPE_CHECKING:
    import torch

    from edgeplan.ir import Graph

__all__ = ["FAMILIES", "LISTED_FAMILIES", "ZooModel", "build_model", "family_models", "load_graph", "parse_shape",
           "parse_spec", "torchvision_names"]

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Family:
    """A zoo family: its prefix, what it is, and example specs.

    ``listed`` is True for a family of named models, which :func:`family_models` lists; the others are spaces
    (a seed, a cell string or a file path names a model) with no list of their own.
    """

    prefix: str
    description: str
    examples: tuple[str, ...]
    default_input: str
    listed: bool = False


FAMILIES: tuple[Family, ...] = (
    Family("torchvision", "torchvision classification models (random weights)",
           ("torchvision:resnet18", "torchvision:mobilenet_v2", "torchvision:googlenet"),
           "1x3x224x224 (inception 299)", listed=True),
    Family("timm", "timm models (pretrained=False)", ("timm:efficientnet_b0", "timm:mobilenetv3_large_100"),
           "the model's pretrained_cfg input_size", listed=True),
    Family("paper", "paper models of eshratifar2018 Table 4 that no zoo has",
           ("paper:alexnet", "paper:overfeat", "paper:vgg16", "paper:nin", "paper:chair", "paper:pix2pix"),
           "per model", listed=True),
    Family("nb201", "NAS-Bench-201 networks from a cell string",
           ("nb201:|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|",),
           "1x3x32x32"),
    Family("nb201-official", "NAS-Bench-201 networks as the official code builds them (none edges as x * 0)",
           ("nb201-official:|nor_conv_3x3~0|+|none~0|nor_conv_3x3~1|+|skip_connect~0|none~1|nor_conv_3x3~2|",),
           "1x3x32x32"),
    Family("synthetic", "li2023 §4.3.2 synthetic NAS space, seeded", ("synthetic:0", "synthetic:42"), "1x3x224x224"),
    Family("synthetic-wide", "li2023's space at the zoo CNNs' widths (edgeplan's), seeded",
           ("synthetic-wide:0", "synthetic-wide:42"), "1x3x224x224"),
    Family("synthetic-aligned", "the wide space with the zoo's channel alignment and group counts (edgeplan's), "
           "seeded", ("synthetic-aligned:0", "synthetic-aligned:42"), "1x3x224x224"),
    Family("synthetic-heads", "the aligned space with sampled classifiers: flattened maps, hidden FC layers, output "
           "widths (edgeplan's), seeded", ("synthetic-heads:0", "synthetic-heads:42"), "1x3x224x224"),
    Family("synthetic-stages", "the aligned space in stages: blocks repeated at stride 1 with residuals, as real "
           "CNNs' stages (edgeplan's), seeded", ("synthetic-stages:0", "synthetic-stages:42"), "1x3x224x224"),
    Family("synthetic-modern", "the stages space with ConvNeXt blocks and SiLU, hard-swish, ReLU and GELU "
           "activations (edgeplan's), seeded", ("synthetic-modern:0", "synthetic-modern:42"), "1x3x224x224"),
    Family("synthetic-mixed", "the modern space with ResNet / ResNeXt / RegNet bottlenecks, DenseNet blocks, 2x2 "
           "pools and the heads space's classifiers (edgeplan's), seeded", ("synthetic-mixed:0", "synthetic-mixed:42"),
           "1x3x224x224"),
    Family("synthetic-nf", "the mixed space in which half the blocks standardize their convolutions' weights at "
           "every call, as NF-ResNets and NFNets do (edgeplan's), seeded", ("synthetic-nf:0", "synthetic-nf:42"),
           "1x3x224x224"),
    Family("onnx", "an ONNX file given by its path", ("model.onnx",), "from the file"),
    Family("tflite", "a LiteRT (.tflite) file given by its path", ("model.tflite",), "from the file"),
)


@dataclass(frozen=True)
class ZooModel:
    """A built zoo model: the torch module and the shapes of its example inputs."""

    spec: str
    module: torch.nn.Module
    input_shapes: tuple[Shape, ...]

    def example_inputs(self, seed: int = 0) -> tuple[torch.Tensor, ...]:
        """Random example tensors of :attr:`input_shapes` (seeded)."""
        import torch

        gen = torch.Generator().manual_seed(seed)
        return tuple(torch.randn(s, generator=gen) for s in self.input_shapes)


def parse_shape(text: str) -> Shape:
    """Parse ``1x3x224x224`` (or ``1,3,224,224``) into a shape; :class:`InvalidInputError` when malformed."""
    parts = text.replace(",", "x").lower().split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise InvalidInputError(f"input shape {text!r} is not of the form 1x3x224x224") from None
    if not shape or any(d <= 0 for d in shape):
        raise InvalidInputError(f"input shape {text!r} must have positive dimensions, e.g. 1x3x224x224")
    return shape


def model_spec(spec: object) -> str:
    """``spec`` as a model string: a zoo string as is, a path (``pathlib.Path``) as text.

    Raises
    ------
    InvalidInputError
        For anything else (None, a number, a list).
    """
    if isinstance(spec, os.PathLike):
        return os.fsdecode(spec)
    if not isinstance(spec, str):
        raise InvalidInputError(f"model {spec!r}: give a zoo string such as torchvision:resnet18 or the path of an "
                                ".onnx file")
    return spec


def is_onnx_path(spec: str) -> bool:
    """True when ``spec`` names an ONNX file rather than a zoo model."""
    return model_spec(spec).lower().endswith(".onnx")


def is_tflite_path(spec: str) -> bool:
    """True when ``spec`` names a LiteRT (``.tflite``) file rather than a zoo model."""
    return model_spec(spec).lower().endswith(".tflite")


def parse_spec(spec: str) -> tuple[str, str]:
    """Split a zoo string into (family, name); :class:`InvalidInputError` for an unknown family."""
    spec = model_spec(spec)
    if is_onnx_path(spec):
        return "onnx", spec
    if is_tflite_path(spec):
        return "tflite", spec
    family, sep, name = spec.partition(":")
    known = [f.prefix for f in FAMILIES if f.prefix not in ("onnx", "tflite")]
    if not sep or family not in known or not name:
        raise InvalidInputError(
            f"unknown model {spec!r}: use FAMILY:NAME with FAMILY one of {', '.join(known)} "
            "(e.g. torchvision:resnet18), or a path to an .onnx or .tflite file; `edgeplan zoo` lists them"
        )
    return family, name


LISTED_FAMILIES: tuple[str, ...] = tuple(f.prefix for f in FAMILIES if f.listed)
"""The families of named models, which :func:`family_models` lists."""


def family_models(family: str) -> list[str]:
    """The model string of every model of a family of named models (:data:`LISTED_FAMILIES`).

    Raises
    ------
    InvalidInputError
        For a family whose models are named by a seed, a cell string or a path: it has no list.
    """
    if family == "torchvision":
        return [f"torchvision:{n}" for n in torchvision_names()]
    if family == "timm":
        import timm

        return [f"timm:{n}" for n in timm.list_models()]
    if family == "paper":
        from edgeplan.frontends.paper_models import PAPER_MODELS

        return [f"paper:{n}" for n in PAPER_MODELS]
    raise InvalidInputError(f"family {family!r} has no list of models (only {', '.join(LISTED_FAMILIES)} have); its "
                            "models are named by a seed, a cell string or a path: see the examples in `edgeplan zoo`")


def torchvision_names() -> list[str]:
    """All torchvision classification model names."""
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def _unknown(family: str, name: str, choices: list[str]) -> InvalidInputError:
    close = difflib.get_close_matches(name, choices, n=3)
    hint = f"; did you mean {', '.join(f'{family}:{c}' for c in close)}?" if close else ""
    return InvalidInputError(f"unknown {family} model {name!r}{hint} (`edgeplan zoo --family {family}` lists them)")


def _torchvision(name: str) -> tuple[Any, tuple[Shape, ...]]:
    import torchvision

    names = torchvision_names()
    if name not in names:
        raise _unknown("torchvision", name, names)
    kwargs: dict[str, Any] = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(init_weights=False, aux_logits=False)
    size = 299 if name == "inception_v3" else 224
    return torchvision.models.get_model(name, **kwargs), ((1, 3, size, size),)


def _timm(name: str) -> tuple[Any, tuple[Shape, ...]]:
    import timm

    if not timm.is_model(name):
        raise _unknown("timm", name, timm.list_models())
    model = timm.create_model(name, pretrained=False)
    cfg: dict[str, Any] = dict(getattr(model, "pretrained_cfg", None) or {})
    size = tuple(cfg.get("input_size", (3, 224, 224)))
    return model, ((1, *size),)


def _synthetic_seed(family: str, name: str) -> int:
    """The seed of ``{family}:{name}``, or a clear error."""
    try:
        seed = int(name)
    except ValueError:
        seed = -1
    if seed < 0:
        raise InvalidInputError(f"{family}:{name}: the seed must be a non-negative integer, e.g. {family}:42")
    return seed


#: Zoo family of each synthetic space -> the space (:data:`edgeplan.frontends.synthetic.SPACES`).
_SYNTHETIC_SPACES = {family_of(space): space for space in SPACES}


def _synthetic(family: str) -> Any:
    """The builder of a synthetic family's networks."""

    def build(name: str) -> tuple[Any, tuple[Shape, ...]]:
        from edgeplan.frontends.synthetic import build_synthetic

        return build_synthetic(_synthetic_seed(family, name), _SYNTHETIC_SPACES[family])

    return build


def _paper(name: str) -> tuple[Any, tuple[Shape, ...]]:
    from edgeplan.frontends.paper_models import build_paper_model

    return build_paper_model(name.lower())


def _nb201(name: str) -> tuple[Any, tuple[Shape, ...]]:
    from edgeplan.frontends.nb201 import build_nb201

    return build_nb201(name)


def _nb201_official(name: str) -> tuple[Any, tuple[Shape, ...]]:
    from edgeplan.frontends.nb201 import build_nb201

    return build_nb201(name, official=True)


_BUILDERS = {
    "torchvision": _torchvision,
    "timm": _timm,
    "paper": _paper,
    "nb201": _nb201,
    "nb201-official": _nb201_official,
    **{family: _synthetic(family) for family in _SYNTHETIC_SPACES},
}


def build_model(spec: str, input_shape: Shape | None = None) -> ZooModel:
    """Build the torch module of a zoo string (not for ONNX paths), with its default or given input shape."""
    spec = model_spec(spec)
    family, name = parse_spec(spec)
    if family in ("onnx", "tflite"):
        raise InvalidInputError(f"{spec!r} is an {family.upper()} file, not a torch model; use load_graph() for it")
    module, shapes = _BUILDERS[family](name)
    if input_shape is not None:
        if isinstance(input_shape, str) or not all(isinstance(d, Integral) and not isinstance(d, bool) and d > 0
                                                   for d in input_shape):
            raise InvalidInputError(f"input shape {input_shape!r}: give positive integers such as (1, 3, 224, 224) "
                                    "(the CLI's --input-shape takes 1x3x224x224)")
        default = tuple(shapes[0])
        image = len(default) == 4
        if len(input_shape) != len(default) or (image and input_shape[1] != default[1]):
            keep = (f"keep its rank and channels, e.g. {'x'.join(map(str, (*default[:-2], 160, 160)))}" if image
                    else "keep its rank")
            raise InvalidInputError(f"input shape {'x'.join(map(str, input_shape))} does not fit {spec}, whose "
                                    f"input is {'x'.join(map(str, default))}: {keep}")
        shapes = (input_shape, *shapes[1:])
    return ZooModel(spec=spec, module=module.eval(), input_shapes=tuple(tuple(s) for s in shapes))


def load_graph(spec: str, input_shape: Shape | None = None, opaque: bool = False) -> Graph:
    """The validated IR graph of a zoo string, an ONNX path or a LiteRT path.

    Parameters
    ----------
    spec
        ``torchvision:NAME``, ``timm:NAME``, ``paper:NAME``, ``nb201:CELL``, ``nb201-official:CELL``,
        ``synthetic:SEED``, ``synthetic-wide:SEED``, ``synthetic-aligned:SEED``, ``synthetic-heads:SEED``,
        ``PATH.onnx`` or ``PATH.tflite``.
    input_shape
        Overrides the first input's default shape (batch included).
    opaque
        Keep operators edgeplan does not know as explicit ``opaque`` nodes instead of raising.
    """
    spec = model_spec(spec)
    family, name = parse_spec(spec)
    if family == "onnx":
        from edgeplan.frontends.onnx_frontend import graph_from_onnx

        if input_shape is not None:
            raise InvalidInputError(f"{spec}: an ONNX file has its own input shapes; drop --input-shape")
        return graph_from_onnx(Path(name), name=spec, opaque=opaque)
    if family == "tflite":
        from edgeplan.frontends.tflite_frontend import graph_from_tflite

        if input_shape is not None:
            raise InvalidInputError(f"{spec}: a LiteRT file has its own input shapes; drop --input-shape")
        return graph_from_tflite(Path(name), name=spec, opaque=opaque)
    if family in ("nb201", "nb201-official", *_SYNTHETIC_SPACES) and input_shape is None:  # built directly, in ms
        from edgeplan.frontends.direct import nb201_graph, synthetic_graph

        if family in _SYNTHETIC_SPACES:
            return synthetic_graph(_synthetic_seed(family, name), _SYNTHETIC_SPACES[family])
        return nb201_graph(name, official=True) if family == "nb201-official" else nb201_graph(name)
    from edgeplan.frontends.torch_frontend import graph_from_torch

    model = build_model(spec, input_shape)
    return graph_from_torch(model.module, model.example_inputs(), name=spec, opaque=opaque)

