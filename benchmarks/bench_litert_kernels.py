"""Deduced LiteRT + XNNPACK kernels (profiles ``litert-xnnpack``, ``-int8``) against the operators litert-torch writes.

For every torchvision classification model and the timm CNNs of the set ``timm-cnns``: the torch-frontend graph's
deduced kernels (:func:`edgeplan.ir.kernels.deduce_kernels`) against the converted ``.tflite`` file's operators and
the XNNPACK delegate's partitions (:func:`edgeplan.measure.litert_delegate.check_litert`: counts per kind, then the
two sequences in order), and the same for the graph read back from the file (it must deduce to exactly the file's
operators). The conversion is the cached one of :func:`edgeplan.frontends.litert_export.cache_tflite` under
``--home`` (made, in a subprocess, where it is missing; ``--no-convert`` only reads the cache). A model the converter
cannot convert is reported as such and not counted as a match. ``--dtype int8`` checks the int8 conversions against
the profile ``litert-xnnpack-int8`` (li2023's synthetic networks: ``--models synthetic:900-999``).

Prints one row per model (kernels deduced, operators in the file, mismatches on the torch IR and on the file's IR,
seconds of the check), the count of models that match, every mismatch in words, the machine; exits 1 on any
mismatch or model that could not be checked. Usage:
python benchmarks/bench_litert_kernels.py [--home DIR] [--models SPEC ...] [--only torchvision|timm] [--no-convert]
    [--dtype int8]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from _machine import ROOT, machine

#: Seconds a conversion may take (the largest torchvision models take minutes on 2 cores).
CONVERT_TIMEOUT = 1800


@dataclass
class Row:
    """One model: kernels deduced and operators in the file, mismatches on both IRs, or why it was not checked."""

    spec: str
    deduced: int = 0
    observed: int = 0
    on_torch: list[str] = field(default_factory=list)
    on_file: list[str] = field(default_factory=list)
    seconds: float = 0.0
    failed: str = ""  # the conversion or the check could not run
    unconverted: bool = False  # the converter refused the model

    @property
    def matches(self) -> bool:
        """Whether the model was checked and every comparison agreed."""
        return not self.failed and not self.on_torch and not self.on_file


def specs(only: str | None) -> list[str]:
    """Every torchvision classification model, then the timm CNNs of the set ``timm-cnns``."""
    from edgeplan.frontends.zoo import torchvision_names
    from edgeplan.measure.model_sets import model_set

    out = []
    if only in (None, "torchvision"):
        out += [f"torchvision:{n}" for n in torchvision_names()]
    if only in (None, "timm"):
        out += model_set("timm-cnns")
    return out


def converted(spec: str, home: Path, convert: bool, dtype: str) -> tuple[Path | None, str]:
    """The cached conversion of ``spec`` to ``dtype`` (made in a subprocess where missing), or None and why not."""
    from edgeplan.frontends.litert_export import tflite_cache_path

    path = tflite_cache_path(spec, None, dtype, home)
    if path.is_file():
        return path, ""
    if not convert:
        return None, "not converted (run without --no-convert)"
    code = ("import sys; from pathlib import Path; from edgeplan.frontends.litert_export import cache_tflite; "
            f"cache_tflite({spec!r}, None, {dtype!r}, Path({str(home)!r}))")
    try:
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CONVERT_TIMEOUT,
                             cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None, f"the conversion ran over {CONVERT_TIMEOUT} s"
    if run.returncode != 0 or not path.is_file():
        lines = [line for line in run.stderr.strip().splitlines() if line.strip()]
        return None, (lines[-1] if lines else f"exit status {run.returncode}")[:300]
    return path, ""


def check(spec: str, home: Path, convert: bool, dtype: str = "float32") -> Row:
    """Deduce ``spec``'s kernels and compare them with its conversion to ``dtype``, on the torch IR and the file's
    IR."""
    from edgeplan.errors import EdgeplanError
    from edgeplan.frontends.tflite_frontend import graph_from_tflite, read_tflite
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.kernels import deduce_kernels
    from edgeplan.measure.litert_delegate import check_litert
    from edgeplan.measure.scenarios import Scenario

    row = Row(spec)
    path, why = converted(spec, home, convert, dtype)
    profile = Scenario("", "litert", 1, dtype).kernel_profile
    if path is None:
        row.failed, row.unconverted = why, "not converted" not in why
        return row
    start = time.perf_counter()
    try:
        graph = load_graph(spec)
        deduced = deduce_kernels(graph, profile)
        row.deduced = len(deduced.kernels)
        row.on_torch = [m.message for m in check_litert(graph, path, profile, deduced=deduced)]
        row.observed = len(read_tflite(path).ops)
    except EdgeplanError as e:
        row.failed = f"{type(e).__name__}: {e}"[:300]
    try:
        row.on_file = [m.message for m in check_litert(graph_from_tflite(path, opaque=True), path, profile)]
    except EdgeplanError as e:
        row.on_file = [f"the file's IR could not be deduced: {type(e).__name__}: {e}"[:300]]
    row.seconds = time.perf_counter() - start
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="edgeplan home whose litert/ cache holds the conversions (default: "
                                       "$EDGEPLAN_HOME or the user cache)")
    parser.add_argument("--models", nargs="+", help="zoo strings (ranges, sets) to check instead of the default sets")
    parser.add_argument("--only", choices=("torchvision", "timm"), help="only the torchvision models or timm CNNs")
    parser.add_argument("--no-convert", action="store_true", help="check only the models already converted")
    parser.add_argument("--dtype", default="float32", choices=("float32", "int8"), help="the conversions checked")
    args = parser.parse_args()
    from edgeplan.measure.paths import edgeplan_home

    home = edgeplan_home(args.home)
    print(machine(1), flush=True)
    print(f"conversions: {home / 'litert'}\n")
    print(f"{'model':<40} {'deduced':>8} {'file':>6} {'mismatches torch IR':>20} {'file IR':>8} {'check s':>8}",
          flush=True)
    rows = []
    from edgeplan.measure.model_sets import expand_models

    for spec in expand_models(args.models) if args.models else specs(args.only):
        row = check(spec, home, not args.no_convert, args.dtype)
        rows.append(row)
        if row.failed:
            label = "not convertible" if row.unconverted else "not checked"
            print(f"{spec:<40} {label}: {row.failed[:150]}", flush=True)
        else:
            print(f"{spec:<40} {row.deduced:>8} {row.observed:>6} {len(row.on_torch):>20} {len(row.on_file):>8} "
                  f"{row.seconds:>8.1f}", flush=True)
    checked = [r for r in rows if not r.failed]
    unconvertible = [r for r in rows if r.unconverted]
    unchecked = [r for r in rows if r.failed and not r.unconverted]
    matched = sum(r.matches for r in checked)
    print(f"\n{matched} of {len(rows)} models match ({len(checked)} checked, {len(unconvertible)} the converter "
          f"could not convert, {len(unchecked)} not checked)")
    for r in rows:
        for ir, found in (("torch IR", r.on_torch), ("file IR", r.on_file)):
            for message in found:
                print(f"  {r.spec} {ir}: {message}")
    for r in unconvertible:
        print(f"  {r.spec}: the converter could not convert it: {r.failed}")
    for r in unchecked:
        print(f"  {r.spec}: not checked: {r.failed}")
    return 0 if matched == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
