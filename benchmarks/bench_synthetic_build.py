"""Build all 1000 networks of the li2023 synthetic NAS space (seeds 0..999) and time it.

li2023 (§4.3.2) samples 1000 architectures; ``tests/test_synthetic.py`` samples all 1000 but builds only a few, as
building them all takes tens of seconds on a 2-core machine. Prints the number of networks built, the failures
(seed and error) and the wall time, with the machine it ran on. ``--forward`` also runs each network once on a
random 224x224 input and checks the (1, 1000) output.

Usage, from the repository root (with edgeplan installed, or ``PYTHONPATH=.``)::

    python benchmarks/bench_synthetic_build.py [--count N] [--threads T] [--forward]
"""

from __future__ import annotations

import argparse
import sys
import time

from _machine import machine


def build_one(seed: int, forward: bool) -> None:
    """Build the network of ``seed``; with ``forward``, run it once and check the output shape."""
    import torch

    from edgeplan.frontends.synthetic import build_synthetic

    module, shapes = build_synthetic(seed)
    if forward:
        with torch.no_grad():
            out = module(torch.randn(*shapes[0]))
        if tuple(out.shape) != (1, 1000):
            raise RuntimeError(f"output shape {tuple(out.shape)}, expected (1, 1000)")


def main(argv: list[str] | None = None) -> int:
    """Build the networks and print the count, failures, time and machine; return 1 if any build failed."""
    parser = argparse.ArgumentParser(description="Build all li2023 synthetic networks and time it.")
    parser.add_argument("--count", type=int, default=1000, help="build seeds 0..N-1 (default 1000)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--forward", action="store_true", help="also run each network once")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    failures: list[tuple[int, str]] = []
    start = time.perf_counter()
    for seed in range(args.count):
        try:
            build_one(seed, args.forward)
        except Exception as error:  # noqa: BLE001 - a benchmark reports every failure and goes on
            failures.append((seed, f"{type(error).__name__}: {error}"))
    elapsed = time.perf_counter() - start
    what = "built and ran" if args.forward else "built"
    print(
        f"li2023 synthetic: {what} {args.count - len(failures)} of {args.count} networks in {elapsed:.1f} s "
        f"({1000 * elapsed / max(args.count, 1):.1f} ms each); {len(failures)} failures"
    )
    for seed, message in failures[:20]:
        print(f"  FAILED seed {seed}: {message}")
    print(f"machine: {machine(args.threads)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
