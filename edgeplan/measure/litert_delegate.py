"""Which operators of a LiteRT model the XNNPACK delegate takes, asked of the LiteRT interpreter itself."""

from __future__ import annotations

import os

from edgeplan.errors import MeasurementError

__all__ = ["delegated_ops"]


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
