"""edgeplan: latency prediction and deployment planning for neural networks on edge hardware.

Importing this package is cheap: torch, onnx and the heavy libraries load only when a frontend, the harness
or a runtime needs them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
