"""Torch frontend: an ``nn.Module`` with example inputs becomes a :class:`~edgeplan.ir.Graph`.

The module is captured with ``torch.export`` (ATen-level graph, real shapes from its fake tensors); when export
fails, ``make_fx`` (a ``torch.fx`` tracer at the ATen level) is the fallback. ATen operators are mapped to IR
nodes by the handlers of :mod:`edgeplan.frontends.aten_ops`; an operator without a handler raises
:class:`~edgeplan.errors.UnsupportedOperatorError`, or becomes an ``opaque`` node when ``opaque=True``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from edgeplan.errors import InvalidInputError
from edgeplan.ir import Graph

if TYPE_CHECKING:
    import torch

__all__ = ["capture", "graph_from_torch"]

log = logging.getLogger(__name__)


def capture(module: torch.nn.Module, example_inputs: tuple[Any, ...]) -> tuple[Any, dict[str, Any], str]:
    """Capture ``module`` as an ATen-level ``torch.fx`` graph.

    Returns
    -------
    fx_graph, constants, method
        The graph, a mapping from placeholder names that are parameters, buffers or lifted constants to their
        tensors, and the capture method used (``"torch.export"`` or ``"make_fx"``).
    """
    import torch

    module = module.eval()
    caught: list[warnings.WarningMessage] = []
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ep = torch.export.export(module, tuple(example_inputs))
    except Exception as export_error:  # noqa: BLE001 - any export failure falls back to make_fx
        log.info("torch.export failed (%s); falling back to make_fx", export_error)
        return _capture_make_fx(module, example_inputs, export_error)
    finally:
        for w in caught:  # export's advice to the model's author (e.g. timm's caches set during tracing)
            log.info("torch.export: %s", w.message)
    sig = ep.graph_signature
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    names: dict[str, Any] = {}
    for placeholder, target in {
        **sig.inputs_to_parameters,
        **sig.inputs_to_buffers,
        **getattr(sig, "inputs_to_lifted_tensor_constants", {}),
    }.items():
        names[placeholder] = state.get(target)
    return ep.graph, names, "torch.export"


def _capture_make_fx(
    module: torch.nn.Module, example_inputs: tuple[Any, ...], cause: Exception
) -> tuple[Any, dict[str, Any], str]:
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        with torch.no_grad():
            gm = make_fx(module, tracing_mode="fake")(*example_inputs)
    except Exception as e:
        raise InvalidInputError(
            f"cannot capture {type(module).__name__}: torch.export failed ({cause}) and make_fx failed ({e}); "
            "make the model traceable (no data-dependent control flow) or export it to ONNX"
        ) from e
    constants = {n.name: getattr(gm, str(n.target)) for n in gm.graph.nodes if n.op == "get_attr"}
    return gm.graph, constants, "make_fx"


def graph_from_torch(
    module: torch.nn.Module,
    example_inputs: Sequence[Any] | torch.Tensor,
    name: str | None = None,
    opaque: bool = False,
) -> Graph:
    """Build the IR graph of ``module`` called on ``example_inputs``.

    Parameters
    ----------
    module
        The model; it is put in eval mode.
    example_inputs
        Tensors with the shapes to trace with (batch included): a tuple of the call's arguments, or one tensor.
    name
        Name of the graph (default: the module's class name).
    opaque
        Keep unknown operators as ``opaque`` nodes instead of raising.

    Returns
    -------
    Graph
        A validated graph.

    Raises
    ------
    UnsupportedOperatorError
        For an ATen operator edgeplan does not know, when ``opaque`` is False.
    """
    import torch

    from edgeplan.frontends.aten_ops import Converter

    if isinstance(example_inputs, torch.Tensor):  # one argument: tuple() would split it along the batch
        example_inputs = (example_inputs,)
    if not isinstance(module, torch.nn.Module):
        raise InvalidInputError(f"graph_from_torch needs a torch.nn.Module instance, got {type(module).__name__}")
    fx_graph, constants, method = capture(module, tuple(example_inputs))
    converter = Converter(constants=constants, opaque=opaque, method=method)
    nodes, outputs = converter.convert(fx_graph)
    fused_calls = tuple(converter.fused_calls) + _fast_paths(module, nodes)
    return Graph(name=name or type(module).__name__, nodes=tuple(nodes), outputs=tuple(outputs),
                 folded_ops=tuple(converter.folded_ops), fused_calls=fused_calls,
                 folded_shapes=tuple(converter.folded_shapes), folded_at=tuple(converter.folded_at)).validate()


def _fast_paths(module: torch.nn.Module, nodes: Sequence[Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The ``nn.MultiheadAttention`` calls eager PyTorch runs through its fused fast path in eval mode: the fast path
    enabled (``torch.backends.mha``, when the graph is built), the module's own conditions (batch first, an even
    number of heads, one packed projection with its bias, no extra key or value bias, no zero attention), and in
    the graph one call of self-attention on a batched input without a mask (a packed query-key-value projection,
    one attention of three inputs). The call's IR nodes are those named under the module's path."""
    import torch

    from edgeplan.ir import OpKind

    if not torch.backends.mha.get_fastpath_enabled():
        return ()
    calls = []
    for path, m in module.named_modules():
        if not (path and isinstance(m, torch.nn.MultiheadAttention) and m.batch_first and m.num_heads % 2 == 0
                and m._qkv_same_embed_dim and m.in_proj_weight is not None and m.in_proj_bias is not None
                and m.bias_k is None and m.bias_v is None and not m.add_zero_attn):
            continue
        inner = [n for n in nodes if n.name.startswith(path + "/")]
        linears = [n for n in inner if n.kind is OpKind.LINEAR]
        attentions = [n for n in inner if n.kind is OpKind.ATTENTION]
        if (len(attentions) == 1 and len(attentions[0].inputs) == 3 and len(linears) == 2
                and linears[0].attrs.out_features == 3 * m.embed_dim and len(inner[0].input_shapes[0]) == 3):
            calls.append(("MultiheadAttention", tuple(n.name for n in inner)))
    return tuple(calls)
