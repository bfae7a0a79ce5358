"""Which implementation a runtime runs an operator with, chosen from its shapes (li2023 §3.2: the runtime selects a
kernel per operation, and each selected kernel gets a predictor of its own).

Eager PyTorch on a CPU runs ``aten::conv2d`` either with oneDNN (``aten::mkldnn_convolution``) or with its own
im2col + GEMM (``aten::thnn_conv2d``), decided at every call by ATen's ``ConvParams::use_mkldnn`` from the batch,
kernel, stride, dilation, groups, input size and intra-op threads. For one image, a dense convolution of at most
3x3 over at most 20,480 input values runs natively: a 3x3 convolution of 400 channels at 7x7 (19,600 values) does,
the same of 512 channels (25,088) runs on oneDNN; on one thread, so does every unstrided 1x1 convolution. li2023's
synthetic networks hold many of the first kind (their 7x7 blocks have at most 400 channels) and the zoo's ResNets
mostly the second, so one predictor over both learns a mix that fits neither.

The rules are data: the ``implementations`` table of a rule file (``edgeplan/data/kernel_rules/torch.json``), one
entry per runtime kernel kind, with the child operators ``torch.profiler`` records under each implementation so
that a deduction can be checked against a run
(:func:`edgeplan.measure.kernel_check.check_torch_implementations`). Loads without torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from edgeplan.errors import InvalidInputError
from edgeplan.ir.kernels.rules import rule_files

__all__ = ["implementation", "implementation_entries", "implementation_kinds", "node_facts"]

_COMPARE = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


@cache
def _table(family: str) -> Mapping[str, Any]:
    for data in rule_files().values():
        if data["family"] == family:
            return data.get("implementations", {})
    raise InvalidInputError(f"no kernel rules of runtime family {family!r}")


def implementation_kinds(family: str = "torch") -> tuple[str, ...]:
    """The runtime kernel kinds of ``family`` whose implementation is selected by shape (``aten::conv2d``)."""
    return tuple(k for k in _table(family) if k != "description")


def implementation_entries(kind: str, family: str = "torch") -> tuple[Mapping[str, Any], ...]:
    """The rule entries of every implementation of ``kind`` (each with its ``implementation`` name and the
    ``profiler`` operators that show it), in the order the rules try them."""
    rule = _table(family).get(kind)
    if rule is None:
        raise InvalidInputError(f"the {family} kernel rules select no implementation of {kind!r}")
    return (*rule["choose"], rule["otherwise"])


def _pair(value: Any, default: int = 1) -> list[int]:
    if value is None:
        return [default, default]
    if isinstance(value, int):
        return [value, value]
    return [int(v) for v in value] or [default, default]


def node_facts(lead: Mapping[str, Any], threads: int) -> dict[str, int]:
    """The facts of an operation's first IR node (a node dict, :func:`edgeplan.ir.serialize.node_to_dict`) that
    implementation rules compare, run with ``threads`` intra-op threads."""
    attrs = lead.get("attrs", {})
    shapes = [s for s in lead.get("input_shapes", []) if s]
    first: Sequence[int] = shapes[0] if shapes else [1]
    kernel = _pair(attrs.get("kernel") or attrs.get("kernel_size"))
    return {
        "batch": int(first[0]),
        "kernel_min": min(kernel),
        "kernel_max": max(kernel),
        "stride": max(_pair(attrs.get("stride"))),
        "dilation": max(_pair(attrs.get("dilation"))),
        "groups": int(attrs.get("groups", 1)),
        "input_numel": math.prod(int(d) for d in first),
        "threads": int(threads),
    }


def _holds(term: Sequence[Any], facts: Mapping[str, int]) -> bool:
    fact, op, value = term
    if fact not in facts or op not in _COMPARE:
        raise InvalidInputError(f"implementation rule term {list(term)} compares an unknown fact or with an unknown "
                                f"operator (facts: {', '.join(facts)}; operators: {' '.join(_COMPARE)})")
    return bool(_COMPARE[op](facts[fact], value))


def implementation(kind: str, lead: Mapping[str, Any], threads: int, family: str = "torch") -> str | None:
    """The implementation runtime ``family`` runs a kernel of ``kind`` with, or None when it has a single one.

    Parameters
    ----------
    kind
        The runtime kernel kind (``aten::conv2d``).
    lead
        The kernel's first IR node, as a node dict.
    threads
        The scenario's intra-op threads.
    family
        The runtime family whose rules decide.

    Returns
    -------
    str or None
        ``onednn`` or ``native`` for eager PyTorch's ``aten::conv2d``; None for a kind without rules.
    """
    rule = _table(family).get(kind)
    if rule is None or lead.get("op") not in rule["ops"]:
        return None
    facts = node_facts(lead, threads)
    for entry in rule["choose"]:
        if all(any(_holds(t, facts) for t in group["any"]) for group in entry["all"]):
            return str(entry["implementation"])
    return str(rule["otherwise"]["implementation"])
