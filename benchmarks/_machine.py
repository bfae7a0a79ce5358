"""The machine line every benchmark prints with its figure."""

from __future__ import annotations

import os
import platform


def machine() -> str:
    """CPU model, logical cores, Python and torch versions (torch only if already imported)."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import sys

    torch_v = sys.modules["torch"].__version__ if "torch" in sys.modules else "not loaded"
    return f"{cpu}, {os.cpu_count()} logical cores, Python {platform.python_version()}, torch {torch_v}"
