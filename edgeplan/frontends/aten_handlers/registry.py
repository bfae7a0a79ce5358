"""The handler table: :data:`HANDLERS` maps an ATen operator's overload-packet name to its handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edgeplan.frontends.aten_values import Call

__all__ = ["HANDLERS", "Handler"]

Handler = Callable[[Call], Any]
HANDLERS: dict[str, Handler] = {}


def _register(*names: str) -> Callable[[Handler], Handler]:
    """Decorator: register the handler under each name and its in-place variant (``name_``)."""
    def deco(fn: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = fn
            HANDLERS[name + "_"] = fn  # in-place variant
        return fn

    return deco
