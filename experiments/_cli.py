"""What every reproduction script shares: one-line errors, the machine it ran on, and its JSON output.

Each paper's script ends with a small click command and ``main(argv)``; ``python -m experiments.PAPER --json``
prints a JSON object with the paper's figures and edgeplan's, the command that made them and a description of the
machine (``experiments/results.py`` turns those files into ``docs/results.md``).
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

__all__ = ["command_line", "describe", "emit", "machine", "run_command", "skip"]

#: ISA extensions that change a CPU's latency figures, reported when the CPU has them.
_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "avx_vnni")


def _cpuinfo() -> dict[str, str]:
    """The first processor's ``key: value`` lines of ``/proc/cpuinfo`` (empty where the file is absent)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


def _caches() -> dict[str, str]:
    """Cache sizes of CPU 0 by level (``L1d``, ``L2``, ``L3``) from sysfs."""
    out: dict[str, str] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind != "Instruction":
            out[f"L{level}" + ("d" if kind == "Data" else "")] = size
    return out


def machine() -> dict[str, Any]:
    """What makes this machine's figures differ from another's: CPU model, family, ISA, caches, cores, versions,
    and how busy it was (the 1-minute load average)."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    try:
        import torch

        torch_version: str | None = torch.__version__
    except ImportError:
        torch_version = None
    return {
        "cpu": info.get("model name") or platform.processor() or "unknown",
        "vendor": info.get("vendor_id"),
        "family_model": (f"{info['cpu family']}/{info['model']}" if "cpu family" in info and "model" in info
                         else None),
        "isa": [f for f in _FLAGS if f in flags],
        "caches": _caches(),
        "logical_cores": os.cpu_count() or 0,
        "torch": torch_version,
        "python": platform.python_version(),
        "os": platform.system(),
        "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def describe(m: dict[str, Any]) -> str:
    """``machine()`` in one line."""
    parts = [str(m.get("cpu", "unknown"))]
    if m.get("family_model"):
        parts.append(f"family/model {m['family_model']}")
    if m.get("isa"):
        parts.append(" ".join(m["isa"]))
    if m.get("caches"):
        parts.append(", ".join(f"{k} {v}" for k, v in m["caches"].items()))
    parts.append(f"{m.get('logical_cores', '?')} logical cores")
    if m.get("torch"):
        parts.append(f"torch {m['torch']}")
    if m.get("load_average") is not None:  # other work on the machine slows every timing in the run
        parts.append(f"load average {m['load_average']:g} when the run ended")
    return "; ".join(parts)


def command_line(prog: str, argv: Sequence[str]) -> str:
    """The command a reader types to get the same result."""
    return " ".join(["python -m", prog, *(shlex.quote(a) for a in argv)])


def _finite(data: Any) -> Any:
    """NaN and infinities as None (JSON has no such numbers); tuples as lists."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {str(k): _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    return data


def emit(result: dict[str, Any], lines: Sequence[str], as_json: bool) -> None:
    """Print ``result`` as a JSON object (with ``command`` and ``machine`` added), or its text ``lines``."""
    if not as_json:
        for line in lines:
            click.echo(line)
        return
    ctx = click.get_current_context()
    root = ctx.find_root()
    prog = root.info_name or "experiments"
    argv = root.obj["argv"] if isinstance(root.obj, dict) else []
    payload = {"command": command_line(prog, argv), "machine": machine(), **result}
    click.echo(json.dumps(_finite(payload), indent=2, default=str, allow_nan=False))


def skip(reason: str, as_json: bool) -> None:
    """Say why a reproduction did not run (its data are absent) and leave with exit code 0."""
    if as_json:
        emit({"skipped": reason}, [], True)
    click.echo(f"skipped: {reason}", err=True)


def run_command(command: click.Command, prog: str, argv: Sequence[str] | None) -> int:
    """Run a script's click command as the ``edgeplan`` CLI runs its own: errors on one line and a non-zero exit
    code (``--debug``: the traceback)."""
    from edgeplan.cli.main import run_group

    args = list(sys.argv[1:] if argv is None else argv)
    kept = [a for a in args if a != "--debug"]
    return run_group(command, prog, kept, obj={"argv": kept}, debug="--debug" in args)
