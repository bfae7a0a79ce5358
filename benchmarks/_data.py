"""The repository's ``data/`` folder, the datasets benchmarks read (not in the wheel; each with its provenance)."""

from __future__ import annotations

import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def need(*paths: Path) -> None:
    """Exit with a clear message when a file a benchmark reads is absent."""
    for path in paths:
        if not path.exists():
            where = " (the repository's data/ folder: a checkout has it, the wheel does not)" if DATA in path.parents \
                else ""
            sys.exit(f"{path} is not here{where}")
