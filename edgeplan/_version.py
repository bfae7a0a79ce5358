"""edgeplan's version, in a module of its own so that no layer imports the package root to read it."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
