"""eshratifar2018 §4, paper vs edgeplan: the six-model x three-network table and the paper's claims."""

from __future__ import annotations

import sys

from _machine import machine

from experiments.eshratifar2018 import calibrated_slowdown, format_report, reproduce


def main() -> int:
    print(machine(1))
    slowdown = calibrated_slowdown(11.25)
    for label, speedup, slow in (
        ("cloud derived, 11.25x the mobile (the paper's ratio)", 11.25, None),
        (f"paper regime: mobile {slowdown:.1f}x slower (fitted to one number: AlexNet cloud-only Wi-Fi 81% "
         "transfer), cloud 11.25x faster than it", 11.25, slowdown),
        ("cloud measured: this machine at 2 threads", None, None),
    ):
        print(f"\n=== {label} ===")
        for line in format_report(reproduce(speedup, mobile_slowdown=slow)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
