"""The parthasarathy2022 simulation on a tiny grid: structure, invariants, report and figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgeplan.experiments.parthasarathy2022 import (
    SimulationConfig,
    SimulationResult,
    check_claims,
    format_report,
    run_simulation,
)
from edgeplan.reports.partition_report import plot_partition_figures

# synthetic:0 loads in well under a second; at 4 MB a segment fits no node, at 8 MB Alg. 1 cuts 6 stages (more
# than 5 nodes, fewer than 10), at 48 MB the model fits one node.
CONFIG = SimulationConfig(models=("synthetic:0",), memories_mb=(4, 8, 48), nodes=(5, 10), classes=(2, 5), runs=3,
                          fig10_trials=5, fig10_nodes=10, fig10_memory_mb=8)
EPS = 1e-9


@pytest.fixture(scope="module")
def result() -> SimulationResult:
    return run_simulation(CONFIG)


def test_structure_and_statuses(result: SimulationResult) -> None:
    assert len(result.cells) == 3 * 2
    status = {(c.memory_mb, c.nodes): c for c in result.cells}
    assert status[4, 5].status == status[4, 10].status == "infeasible"
    assert "cannot be split" in status[4, 5].reason
    assert status[8, 5].status == "infeasible" and "more than the 5 nodes" in status[8, 5].reason
    assert status[48, 5].status == status[48, 10].status == "single_device"
    ok = status[8, 10]
    assert ok.status == "ok" and ok.stages == 6 and ok.runs == 3
    assert [s.classes for s in ok.kpath] == [2, 5]
    assert json.loads(json.dumps(result.to_dict()))["cells"][0]["model"] == "synthetic:0"
    assert result.timings.nodes == 10 and result.timings.exact_count == 3 and result.timings.own_count == 3


def test_ratios_respect_the_optimum_and_the_bounds(result: SimulationResult) -> None:
    ok = [c for c in result.cells if c.status == "ok"]
    assert ok
    for c in ok:
        opt = c.mean_ms["opt"]
        assert opt is not None and c.mean_ms["theorem1"] is not None
        assert opt >= c.mean_ms["theorem1"] * (1 - EPS)
        for s in c.kpath:  # same partitions as the optimum: never below it, never below the bound
            assert s.ratio_opt is not None and s.ratio_theorem1 is not None
            assert s.ratio_theorem1 >= s.ratio_opt * (1 - EPS) >= 1 - EPS
            assert s.mean_classes_used is not None and 1 <= s.mean_classes_used <= s.classes
        # the joint baselines choose their own partitions; the own planner has Alg. 1's among its candidates
        for method in ("greedy", "random", "own"):
            assert c.ratio_opt[method] is not None and c.ratio_opt[method] > 0
        own = c.ratio_opt["own"]
        assert own is not None and own <= 1 + EPS
    row = result.fig10[0]
    assert row.status == "ok" and row.trials == 5 and row.stages == 6
    assert row.ratio_theorem1 is not None and row.ratio_opt is not None and row.opt_over_theorem1 is not None
    assert row.ratio_theorem1 >= row.ratio_opt * (1 - EPS) >= 1 - EPS
    assert row.opt_over_theorem1 >= 1 - EPS


def test_report_states_paper_figures_and_claims(result: SimulationResult) -> None:
    text = format_report(result)
    claims = [line for line in text.splitlines() if line.startswith("paper claim")]
    assert len(claims) == len(check_claims(result)) >= 4
    assert all(line.endswith(("holds", "does not hold", "not measured")) for line in claims)
    for figure in ("10x", "35%", "1.092"):
        assert figure in text
    assert "Fig. 7" in text and "Fig. 10" in text and "own planner" in text and "exact solver" in text


def test_figures_are_written(result: SimulationResult, tmp_path: Path) -> None:
    paths = plot_partition_figures(result, tmp_path / "figs")
    assert [p.name for p in paths] == ["fig7_heatmaps.png", "fig8_random.png", "fig9_greedy.png", "fig10_bound.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000


def test_reproduce_cli_text_json_and_plots(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from edgeplan.cli.main import cli

    args = ["reproduce", "parthasarathy2022", "--models", "synthetic:0", "--memories", "8,48", "--nodes", "10",
            "--classes", "2,5", "--runs", "2", "--fig10-trials", "2"]
    text = CliRunner().invoke(cli, [*args, "--plots", str(tmp_path / "figs")])
    assert text.exit_code == 0, text.output
    assert "Fig. 10: 10 nodes, 8 MB, 5 classes, 2 trials" in text.output and "paper claim" in text.output
    assert (tmp_path / "figs" / "fig10_bound.png").exists()
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["config"]["runs"] == 2 and {c["status"] for c in data["cells"]} == {"ok", "single_device"}
    bad = CliRunner().invoke(cli, [*args[:4], "--nodes", "ten"])
    assert bad.exit_code != 0 and "comma-separated list of integers" in bad.output
