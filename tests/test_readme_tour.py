"""Every ``$ edgeplan ...`` line of the README's tour runs, with tiny inputs where the real one takes minutes.

The substitutions keep each command's options and change only what makes it slow: a smaller model, a few rows of a
timing table, the shipped costs instead of a measuring campaign. A README line that no substitution covers runs as
written.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from edgeplan.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "edgeplan" / "data" / "primitives"


def tour_lines() -> list[str]:
    """The README's ``$ edgeplan ...`` lines, continuation lines joined."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    return [re.sub(r"\s+", " ", m.group(1)).strip() for m in re.finditer(r"^\$ edgeplan (.+)$", text, re.M)]


def _table(tmp: Path) -> Path:
    """Every 25th row of the shipped timing table (many layer sizes, few rows), in the mulder2021 format."""
    lines = (SHIPPED / "reference_cpu_1t.csv").read_text(encoding="utf-8").splitlines()
    path = tmp / "table.csv"
    path.write_text("\n".join([lines[0], *lines[1::25]]) + "\n", encoding="utf-8")
    return path


def _measurements(tmp: Path) -> Path:
    """Ten models with latencies, the CSV ``calibrate --measurements`` reads."""
    rng = np.random.default_rng(0)
    rows = [f"synthetic:{i},{float(rng.uniform(5.0, 30.0)):.3f}" for i in range(10)]
    path = tmp / "measured.csv"
    path.write_text("model,latency_ms\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _tiny(args: list[str], tmp: Path) -> list[str]:
    """``args`` with the slow parts made small."""
    out = []
    for a in args:
        if a.endswith(("intel.csv", "amd.csv", "reference_cpu_1t.csv")):
            a = str(_table(tmp))
        elif a == "measured.csv":
            a = str(_measurements(tmp))
        elif a.startswith(("torchvision:resnet", "paper:chair")) and args[0] in ("measure", "select", "partition",
                                                                                  "offload"):
            a = {"measure": "synthetic:0", "select": "torchvision:squeezenet1_0", "partition": "synthetic:0",
                 "offload": "paper:alexnet"}[args[0]]
        elif a.endswith("/") or a in ("nn2-intel", "nn2-amd"):
            a = str(tmp / a.strip("/"))
        out.append(a)
    extra = {"offload": ["--costs", "shipped"], "partition": ["--no-compute"], "measure": ["--max-time", "1"],
             "select": ["--costs", "measured", "--data", str(SHIPPED / "reference_cpu_1t.csv")]}.get(args[0], [])
    if args[:2] == ["primitives", "fit"]:
        extra = ["--max-epochs", "2"]
    if args[0] == "select":
        out = [a for i, a in enumerate(out) if not (a == "--costs" or (i and out[i - 1] == "--costs"))]
    return out + extra


def test_the_readme_has_a_tour() -> None:
    assert len(tour_lines()) >= 8


@pytest.mark.parametrize("line", tour_lines())
def test_each_tour_line_runs(line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    args = _tiny(shlex.split(line), tmp_path)
    if args[:2] == ["primitives", "transfer"] or args[:2] == ["primitives", "evaluate"]:
        if "--model" in args and not Path(args[args.index("--model") + 1]).exists():
            assert main(["--home", str(tmp_path / "home"), "primitives", "fit", "--data", str(_table(tmp_path)),
                         "--out", args[args.index("--model") + 1], "--max-epochs", "2"]) == 0
    code = main(["--home", str(tmp_path / "home"), *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
