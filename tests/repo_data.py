"""The repository's ``data/`` folder: datasets that tests, benchmarks and the paper reproductions read (not in the
wheel; each with its provenance file). A test that needs one skips where the folder is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


def data_file(*parts: str) -> Path:
    """``data/<parts>``; the calling test is skipped when it is not there."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (the repository's data/ folder)")
    return path
