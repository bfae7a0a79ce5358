"""The one error hierarchy of edgeplan.

Every error a user can provoke is an :class:`EdgeplanError`. Messages name the offending object and say what
to do; the CLI prints them on one line and exits non-zero (a traceback only with ``--debug``).
"""

from __future__ import annotations

__all__ = [
    "EdgeplanError",
    "InfeasibleError",
    "InvalidGraphError",
    "InvalidInputError",
    "MeasurementError",
    "NotFittedError",
    "SolverError",
    "StoreError",
    "UnsupportedOperatorError",
]


class EdgeplanError(Exception):
    """Base class of every error edgeplan raises on purpose."""

    exit_code: int = 1


class InvalidInputError(EdgeplanError, ValueError):
    """A user-supplied value is wrong: unknown model name, malformed cell string, bad option value, bad file."""

    exit_code = 2


class InvalidGraphError(EdgeplanError, ValueError):
    """A :class:`~edgeplan.ir.Graph` breaks one of its invariants; the message names the node."""


class UnsupportedOperatorError(EdgeplanError):
    """A frontend met an operator edgeplan does not know.

    Parameters
    ----------
    operator
        The operator as the source framework names it (e.g. ``aten.grid_sampler_2d.default`` or ``GridSample``).
    node
        The name of the node in the source graph.
    """

    def __init__(self, operator: str, node: str, detail: str = "") -> None:
        self.operator = operator
        self.node = node
        msg = f"unsupported operator {operator!r} at node {node!r}"
        if detail:
            msg += f": {detail}"
        msg += ("; edgeplan cannot cost or run it. `edgeplan inspect --allow-opaque` (Python: import with "
                "opaque=True) shows the rest of the graph with it as an explicit opaque node, and `edgeplan predict "
                "--allow-opaque` predicts the rest with it listed as unpredicted; to plan, replace the operator in "
                "the model or cut the model before it")
        super().__init__(msg)


class NotFittedError(EdgeplanError, ValueError):
    """A cost model was asked to predict before it was fitted."""


class InfeasibleError(EdgeplanError):
    """A planning problem has no solution under its constraints."""


class SolverError(EdgeplanError):
    """A solver failed for a reason other than infeasibility."""


class MeasurementError(EdgeplanError):
    """A measurement could not be made or is not trustworthy."""


class StoreError(EdgeplanError):
    """The measurement Store cannot be opened, read or written."""
