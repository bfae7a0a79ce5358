"""`edgeplan --help` wall time (lazy imports keep it under 1 s): median of 7 fresh processes."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from _machine import machine


def main() -> int:
    times = []
    for _ in range(7):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "edgeplan", "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    med = statistics.median(times)
    print(f"edgeplan --help: median {med:.3f} s over {len(times)} runs (min {min(times):.3f}, max {max(times):.3f}); "
          f"target <= 1 s: {'met' if med <= 1.0 else 'NOT met'}")
    print(f"machine: {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
