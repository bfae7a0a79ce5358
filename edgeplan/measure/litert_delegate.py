"""Which operators of a LiteRT model the XNNPACK delegate takes, asked of the LiteRT interpreter itself, and the
comparison of a deduced ``litert-xnnpack`` kernel list (:mod:`edgeplan.ir.kernels.litert`) with a converted file."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence

from edgeplan.errors import MeasurementError
from edgeplan.ir.graph import Graph
from edgeplan.ir.kernels import Kernel, KernelDeduction, KernelMismatch, compare_kernels, deduce_kernels, load_rules

__all__ = ["check_litert", "delegated_ops", "file_kernels", "sequence_mismatches"]


def delegated_ops(path: str | os.PathLike[str], threads: int = 1) -> dict[int, int]:
    """Which operators LiteRT's XNNPACK delegate takes when it loads ``path``, and in which partition.

    The interpreter lists the file's operators and, after them, one ``DELEGATE`` node per partition, whose inputs
    and outputs are the partition's; an operator belongs to the partition whose outputs it computes, walking back
    from the partition's outputs to its inputs.

    Returns
    -------
    dict[int, int]
        Operator index -> partition number (0, 1, ... in execution order); the operators that are absent run on
        LiteRT's default kernels.
    """
    from edgeplan.measure.runners import litert_interpreter

    try:
        details = litert_interpreter(path, threads)._get_ops_details()
    except MeasurementError:
        raise
    except Exception as e:  # LiteRT's private listing; name the file
        raise MeasurementError(f"LiteRT could not list the operators of {path}: {e}") from e
    own = [d for d in details if d["op_name"] != "DELEGATE"]
    partitions = [d for d in details if d["op_name"] == "DELEGATE"]
    producer = {int(t): d["index"] for d in own for t in d["outputs"]}
    owner: dict[int, int] = {}
    for number, part in enumerate(partitions):
        boundary = {int(t) for t in part["inputs"]}
        stack = [int(t) for t in part["outputs"]]
        while stack:
            tensor = stack.pop()
            if tensor in boundary or tensor not in producer or producer[tensor] in owner:
                continue
            op = producer[tensor]
            owner[op] = number
            stack.extend(int(t) for t in details[op]["inputs"] if t >= 0)
    return owner


def file_kernels(path: str | os.PathLike[str], profile: str = "litert-xnnpack") -> list[Kernel]:
    """The operators of a ``.tflite`` file as kernels of a ``litert`` profile, in the file's order.

    Each is ``xnnpack.OP`` when the XNNPACK delegate takes it (:func:`delegated_ops`), else ``tflite.OP``, and is
    named ``OP_index`` (its position in the file); it covers no IR node.

    Parameters
    ----------
    path
        The ``.tflite`` file.
    profile
        A ``litert`` profile (its ``delegate`` prefixes name the kinds).

    Returns
    -------
    list[Kernel]
        One kernel per operator.
    """
    from edgeplan.frontends.tflite_frontend import read_tflite

    delegate = load_rules(profile).data["delegate"]
    owner = delegated_ops(path)
    return [Kernel(f"{op.type}_{op.index}",
                   (delegate["prefix"] if op.index in owner else delegate["default_prefix"]) + op.type, ())
            for op in read_tflite(path).ops]


def check_litert(graph: Graph, tflite_path: str | os.PathLike[str], profile: str = "litert-xnnpack",
                 deduced: KernelDeduction | None = None) -> list[KernelMismatch]:
    """Compare the kernels deduced for ``graph`` with the operators of the converted file and their delegation.

    Parameters
    ----------
    graph
        The model's IR: from the torch frontend (the model the file was converted from) or from the file itself
        (:func:`edgeplan.frontends.tflite_frontend.graph_from_tflite`).
    tflite_path
        The ``.tflite`` file litert-torch wrote.
    profile
        A ``litert`` profile.
    deduced
        The deduction, when already made (else :func:`~edgeplan.ir.kernels.deduce_kernels` of ``graph``).

    Returns
    -------
    list[KernelMismatch]
        Empty when they agree. First the counts per kind (``xnnpack.OP`` and ``tflite.OP`` apart); then the two
        sequences aligned in order (:class:`difflib.SequenceMatcher` on the kinds): each run of kernels where they
        differ, with the deduced kernels' names (``OP:node`` for an operator inserted for ``node``) and the file's
        (``OP_index``).
    """
    if deduced is None:
        deduced = deduce_kernels(graph, profile)
    observed = file_kernels(tflite_path, profile)
    return compare_kernels(deduced, observed, by_nodes=False) + sequence_mismatches(deduced.kernels, observed)


def sequence_mismatches(deduced: Sequence[Kernel], observed: Sequence[Kernel]) -> list[KernelMismatch]:
    """Where two kernel sequences differ once aligned on their kinds, one mismatch per differing run, in words."""
    mine, theirs = [k.kind for k in deduced], [k.kind for k in observed]
    found = []
    matcher = difflib.SequenceMatcher(a=mine, b=theirs, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        ours = tuple(f"{k.kind} ({k.name})" for k in deduced[i1:i2])
        file = tuple(f"{k.kind} ({k.name})" for k in observed[j1:j2])
        where = f"at deduced kernel {i1}, file operator {j1}"
        if tag == "insert":
            text = f"{where}: the file has {', '.join(file)}, not deduced"
        elif tag == "delete":
            text = f"{where}: deduced {', '.join(ours)}, not in the file"
        else:
            text = f"{where}: deduced {', '.join(ours)}; the file has {', '.join(file)}"
        kind = (deduced[i1].kind if i2 > i1 else observed[j1].kind)
        found.append(KernelMismatch("sequence", kind, ours, file, text))
    return found
