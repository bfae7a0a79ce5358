"""The parthasarathy2022 simulation on a tiny grid: structure, invariants, report and figures."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from edgeplan.errors import InfeasibleError, InvalidInputError
from experiments.parthasarathy2022 import (
    PAPER,
    SimulationConfig,
    SimulationResult,
    check_claims,
    fig8_rows,
    fig9_rows,
    format_report,
    run_simulation,
)
from experiments.parthasarathy2022 import main as parthasarathy_main
from experiments.parthasarathy2022_plots import figure_folder, plot_partition_figures

# synthetic:0 loads in well under a second; at 4 MB a segment fits no node, at 8 MB Alg. 1 cuts 6 stages (more
# than 5 nodes, fewer than 10), at 48 MB the model fits one node.
CONFIG = SimulationConfig(models=("synthetic:0",), memories_mb=(4, 8, 48), nodes=(5, 10), classes=(2, 5), runs=3,
                          fig10_trials=5, fig10_nodes=10, fig10_memory_mb=8)
EPS = 1e-9


@pytest.fixture(scope="module")
def result() -> SimulationResult:
    return run_simulation(CONFIG)


def _mean(values: list[float | None]) -> float:
    return statistics.fmean(v for v in values if v is not None)


def _ratios(nums: list[float | None], dens: list[float | None]) -> list[float | None]:
    return [None if a is None or b is None else a / b for a, b in zip(nums, dens, strict=True)]


@pytest.fixture(scope="module")
def per_run() -> dict[str, list[float | None]]:
    """The feasible cell's (8 MB, 10 nodes) per-run bottlenecks, and Fig. 10's per-trial ones, recomputed with the
    public planners on the clusters the simulation documents (cluster seed = run index)."""
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.cut_points import cut_points
    from edgeplan.planners.partition import PlacementProblem, place_exact, shortest_partition_path, theorem1_bound
    from edgeplan.planners.partition.from_graph import partition_problem
    from edgeplan.planners.partition.joint import joint_greedy, joint_random, plan_own
    from edgeplan.planners.partition.kpath import place_kpath
    from edgeplan.planners.partition.simulate import random_cluster

    pp = partition_problem(cut_points(load_graph("synthetic:0")), 8 * 2**20)
    plan = shortest_partition_path(pp)
    out: dict[str, list[float | None]] = {}

    def kpath(problem: PlacementProblem, classes: int, seed: int) -> float | None:
        try:
            return place_kpath(problem, classes=classes, trials=CONFIG.kpath_trials, seed=seed).bottleneck_ms
        except InfeasibleError:
            return None

    for run in range(CONFIG.runs):
        bw = random_cluster(10, seed=run, link=CONFIG.link)
        problem = PlacementProblem(plan.transfers_bytes, bw)
        for key, value in (("opt", place_exact(problem).bottleneck_ms), ("theorem1", theorem1_bound(problem)),
                           ("greedy", joint_greedy(pp, bw).bottleneck_ms),
                           ("random", joint_random(pp, bw, seed=run).bottleneck_ms),
                           ("own", plan_own(pp, bw, time_limit_s=60.0).bottleneck_ms),
                           *((f"kpath-{k}", kpath(problem, k, run)) for k in CONFIG.classes)):
            out.setdefault(key, []).append(value)
    for trial in range(CONFIG.fig10_trials):
        problem = PlacementProblem(plan.transfers_bytes, random_cluster(CONFIG.fig10_nodes, seed=trial,
                                                                        link=CONFIG.link))
        out.setdefault("fig10-opt", []).append(place_exact(problem).bottleneck_ms)
        out.setdefault("fig10-theorem1", []).append(theorem1_bound(problem))
        out.setdefault("fig10-kpath", []).append(kpath(problem, CONFIG.fig10_classes, trial))
    return out


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
        # the own planner has Alg. 1's partitions among its candidates: never worse than their optimum
        own = c.ratio_opt["own"]
        assert own is not None and own <= 1 + EPS
    row = result.fig10[0]
    assert row.status == "ok" and row.trials == 5 and row.stages == 6
    assert row.ratio_theorem1 is not None and row.ratio_opt is not None and row.opt_over_theorem1 is not None
    assert row.ratio_theorem1 >= row.ratio_opt * (1 - EPS) >= 1 - EPS
    assert row.opt_over_theorem1 >= 1 - EPS


def test_cell_means_and_ratios_match_a_recomputation(result: SimulationResult,
                                                     per_run: dict[str, list[float | None]]) -> None:
    cell = next(c for c in result.cells if c.status == "ok")
    assert (cell.memory_mb, cell.nodes, cell.runs) == (8, 10, CONFIG.runs)
    opt = per_run["opt"]
    for method in ("opt", "theorem1", "greedy", "random"):
        assert cell.mean_ms[method] == pytest.approx(_mean(per_run[method]), rel=1e-9), method
    for method in ("greedy", "random"):  # mean of per-run ratios, not a ratio of means
        assert cell.ratio_opt[method] == pytest.approx(_mean(_ratios(per_run[method], opt)), rel=1e-9), method
    # the simulation's own planner runs under a time budget: never better than the finished search
    assert cell.mean_ms["own"] is not None and cell.mean_ms["own"] >= _mean(per_run["own"]) * (1 - EPS)
    assert cell.ratio_opt["own"] is not None
    assert cell.ratio_opt["own"] >= _mean(_ratios(per_run["own"], opt)) * (1 - EPS)
    for s in cell.kpath:
        kp = per_run[f"kpath-{s.classes}"]
        assert s.mean_ms == pytest.approx(_mean(kp), rel=1e-9)
        assert s.ratio_opt == pytest.approx(_mean(_ratios(kp, opt)), rel=1e-9)
        assert s.ratio_theorem1 == pytest.approx(_mean(_ratios(kp, per_run["theorem1"])), rel=1e-9)
        below = [None if r is None else 1 - r for r in _ratios(kp, per_run["greedy"])]
        assert s.below_greedy == pytest.approx(_mean(below), rel=1e-9, abs=1e-12)
        assert s.random_over_kpath == pytest.approx(_mean(_ratios(per_run["random"], kp)), rel=1e-9)
    row = result.fig10[0]
    kp10 = per_run["fig10-kpath"]
    assert row.ratio_theorem1 == pytest.approx(_mean(_ratios(kp10, per_run["fig10-theorem1"])), rel=1e-9)
    assert row.ratio_opt == pytest.approx(_mean(_ratios(kp10, per_run["fig10-opt"])), rel=1e-9)
    assert row.opt_over_theorem1 == pytest.approx(_mean(_ratios(per_run["fig10-opt"], per_run["fig10-theorem1"])),
                                                  rel=1e-9)


def test_figure_rows_aggregate_the_cells(result: SimulationResult) -> None:
    cell = next(c for c in result.cells if c.status == "ok")
    (row8,) = fig8_rows(result)
    assert (row8.nodes, row8.cells) == (10, 1)
    assert row8.random_ms == pytest.approx(cell.mean_ms["random"], rel=1e-12)
    assert row8.kpath_ms == pytest.approx(_mean([s.mean_ms for s in cell.kpath]), rel=1e-12)
    assert row8.random_over_kpath == pytest.approx(_mean([s.random_over_kpath for s in cell.kpath]), rel=1e-12)
    row9 = next(r for r in fig9_rows(result) if r.nodes == 10)
    assert row9.below_greedy == pytest.approx(_mean([s.below_greedy for s in cell.kpath]), rel=1e-12, abs=1e-15)
    assert row9.by_model == pytest.approx({"synthetic:0": row9.below_greedy}, rel=1e-12, abs=1e-15)
    assert [r.nodes for r in fig9_rows(result)] == [5, 10]
    assert next(r for r in fig9_rows(result) if r.nodes == 5).below_greedy is None  # no feasible cell at 5 nodes


def test_report_claims_carry_the_measured_numbers(result: SimulationResult,
                                                  per_run: dict[str, list[float | None]]) -> None:
    text = format_report(result)
    claims = check_claims(result)
    assert [line for line in text.splitlines() if line.startswith("paper claim")] == [c.line() for c in claims]
    cell = next(c for c in result.cells if c.status == "ok")
    # Fig. 8: the mean over k-path's classes of the per-run random / k-path ratio, recomputed from the runs
    m8 = _mean([_mean(_ratios(per_run["random"], per_run[f"kpath-{k}"])) for k in CONFIG.classes])
    fig8 = next(c for c in claims if c.claim.startswith("Fig. 8"))
    assert f"{m8:.1f}x lower" in fig8.measured and fig8.holds == (m8 >= PAPER["random_over_kpath"])
    # Fig. 9 (the joint greedy): the mean over classes of 1 - kpath / greedy
    m9 = _mean([s.below_greedy for s in cell.kpath])
    fig9 = [c for c in claims if c.claim.startswith("Fig. 9") and f"{m9:.1%} below greedy" in c.measured]
    assert fig9 and all(c.holds == (m9 >= PAPER["below_greedy_at_50_nodes"]) for c in fig9)
    # Fig. 10: k-path over Theorem 1 and over the optimum, per trial
    m10 = _mean(_ratios(per_run["fig10-kpath"], per_run["fig10-theorem1"]))
    o10 = _mean(_ratios(per_run["fig10-kpath"], per_run["fig10-opt"]))
    fig10 = next(c for c in claims if c.claim.startswith("Fig. 10: mean ratio to Theorem 1"))
    assert f"{m10:.3f} over 1 models" in fig10.measured and f"to the true optimum: {o10:.3f}" in fig10.measured
    assert fig10.holds == (m10 <= PAPER["fig10_ratio_theorem1"])
    assert f"({CONFIG.fig10_nodes} nodes, {CONFIG.fig10_memory_mb} MB, {CONFIG.fig10_trials} trials)" in fig10.claim
    # the tables carry the same numbers
    lines = text.splitlines()
    at8 = next(i for i, line in enumerate(lines) if line.startswith("Fig. 8"))
    table8 = next(line for line in lines[at8:] if line.strip().startswith("synthetic:0"))
    assert f"{cell.mean_ms['random']:.1f}" in table8 and f"{_mean([s.mean_ms for s in cell.kpath]):.1f}" in table8
    assert f"{m8:.2f}x" in table8
    t = result.timings
    assert t.exact_proven == t.exact_count == CONFIG.runs  # no time limit: every exact placement is certified
    assert f"proven optimal {t.exact_proven}/{t.exact_count}" in text
    assert f"{cell.ratio_opt['own']:.4f}" in next(line for line in text.splitlines() if line.startswith("own planner:"))


def test_figures_are_written(result: SimulationResult, tmp_path: Path) -> None:
    paths = plot_partition_figures(result, tmp_path / "figs")
    assert [p.name for p in paths] == ["fig7_heatmaps.png", "fig8_random.png", "fig9_greedy.png", "fig10_bound.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000


def test_a_figure_folder_that_cannot_be_made_is_named(result: SimulationResult, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(InvalidInputError, match=f"cannot write figures into the folder {blocker / 'figs'}: "):
        plot_partition_figures(result, blocker / "figs")
    with pytest.raises(InvalidInputError, match="give a folder that can be created and written"):
        figure_folder(blocker)
    assert figure_folder(tmp_path / "new" / "figs").is_dir()


def test_reproduce_names_a_bad_plots_folder_before_simulating(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import experiments.parthasarathy2022 as experiment

    def no_simulation(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated before checking --plots")

    monkeypatch.setattr(experiment, "run_simulation", no_simulation)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code = parthasarathy_main(["--models", "synthetic:0", "--plots", str(blocker / "figs")])
    out, err = capsys.readouterr()
    assert code != 0 and "Traceback" not in out + err
    assert err.startswith(f"error: cannot write figures into the folder {blocker / 'figs'}: ")
    assert "give a folder that can be created and written" in err


def test_reproduce_cli_text_json_and_plots(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from experiments.parthasarathy2022 import cli

    args = ["--models", "synthetic:0", "--memories", "8,48", "--nodes", "10",
            "--classes", "2,5", "--runs", "2", "--fig10-trials", "2"]
    text = CliRunner().invoke(cli, [*args, "--plots", str(tmp_path / "figs")])
    assert text.exit_code == 0, text.output
    assert "Fig. 10: 10 nodes, 8 MB, 5 classes, 2 trials" in text.output and "paper claim" in text.output
    assert (tmp_path / "figs" / "fig10_bound.png").exists()
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["config"]["runs"] == 2 and {c["status"] for c in data["cells"]} == {"ok", "single_device"}
    bad = CliRunner().invoke(cli, [*args[:2], "--nodes", "ten"])
    assert bad.exit_code != 0 and "comma-separated list of integers" in bad.output
