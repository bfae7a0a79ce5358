"""One small handler per ATen operator family: a :class:`Call` in, an :class:`Emit` or an alias value out.

:data:`HANDLERS` maps the operator's overload-packet name (``conv2d``, ``relu_``, ...) to its handler. The handlers
live in :mod:`.layers` (operators with weights or windows) and :mod:`.tensors` (tensor manipulation and element-wise
operators); importing this package registers them all.
"""

from __future__ import annotations

from edgeplan.frontends.aten_handlers import layers, tensors
from edgeplan.frontends.aten_handlers.registry import HANDLERS, Handler

__all__ = ["HANDLERS", "Handler"]

#: The modules whose import registers the handlers, in registration order.
_HANDLER_MODULES = (layers, tensors)
