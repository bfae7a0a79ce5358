"""Build every NAS-Bench-201 network of ``../shared/data/help-nasbench201/latency_ms.csv`` and time it.

Too slow for the test suite (minutes on a 2-core machine), so it lives here; ``tests/test_nb201.py`` builds a seeded
sample. Prints the number of networks built, the failures (cell string and error) and the wall time, with the
machine it ran on.

Usage, from the repository root (with edgeplan installed, or ``PYTHONPATH=.``)::

    python benchmarks/bench_nb201_build.py [--limit N] [--threads T]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

from _machine import machine

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "help-nasbench201" / "latency_ms.csv"


def main(argv: list[str] | None = None) -> int:
    """Build the networks and print the count, failures, time and machine; return 1 if any build failed."""
    parser = argparse.ArgumentParser(description="Build every NAS-Bench-201 network and time it.")
    parser.add_argument("--limit", type=int, default=None, help="build only the first N cell strings")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"data file not found: {DATA} (it lives in ../shared/data beside the repository)")
        return 2

    import torch

    from edgeplan.frontends.nb201 import build_nb201

    torch.set_num_threads(args.threads)
    with DATA.open(newline="") as handle:
        cells = [row["arch"] for row in csv.DictReader(handle)]
    if args.limit is not None:
        cells = cells[: args.limit]
    failures: list[tuple[str, str]] = []
    start = time.perf_counter()
    for cell in cells:
        try:
            build_nb201(cell)
        except Exception as error:  # noqa: BLE001 - a benchmark reports every failure and goes on
            failures.append((cell, f"{type(error).__name__}: {error}"))
    elapsed = time.perf_counter() - start
    built = len(cells) - len(failures)
    print(
        f"NAS-Bench-201: built {built} of {len(cells)} networks in {elapsed:.1f} s "
        f"({1000 * elapsed / max(len(cells), 1):.1f} ms each); {len(failures)} failures"
    )
    for cell, message in failures[:20]:
        print(f"  FAILED {cell}: {message}")
    print(f"machine: {machine(args.threads)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
