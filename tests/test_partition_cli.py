"""``edgeplan partition`` and the partitioning API: plans on simulated and given clusters, JSON, drawings, errors."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from edgeplan.cli.main import main
from edgeplan.decisions.partition import (
    Cluster,
    PartitionOptions,
    PartitionResult,
    load_cluster,
    plan_partition,
    run_partition,
    simulated_cluster,
)
from edgeplan.errors import InfeasibleError, InvalidInputError
from edgeplan.planners.partition import PlacementProblem, bottleneck_ms, place_exact


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("solver", ["own", "exact", "kpath", "greedy", "random"])
def test_every_solver_gives_a_consistent_plan(solver: str) -> None:
    cluster = simulated_cluster(12, seed=1, memory_mb=24)
    result = plan_partition("torchvision:resnet18", cluster, PartitionOptions(solver, compute=False))
    runs = result.runs
    assert runs[0][0] == 0 and runs[-1][1] == len(result.points) - 1
    assert all(b + 1 == a for (_, b), (a, _) in itertools.pairwise(runs))
    assert len(set(result.nodes)) == len(result.nodes) == len(runs)
    assert all(m <= 24 * 2**20 for m in result.stage_memory_bytes)
    problem = PlacementProblem(result.transfers_bytes, cluster.bandwidth_mbps)
    assert result.bottleneck_ms == pytest.approx(bottleneck_ms(problem, result.nodes))
    assert result.bottleneck_ms >= result.matching_bound_ms * (1 - 1e-9) >= result.theorem1_bound_ms * (1 - 1e-9)
    if solver in ("own", "exact"):
        assert result.proven_optimal
    if solver == "exact":
        assert result.bottleneck_ms == pytest.approx(place_exact(problem).bottleneck_ms)


def test_cli_json_has_everything_to_recheck_the_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    figure = tmp_path / "placement.png"
    code, out, _ = run(capsys, "partition", "torchvision:resnet18", "--nodes", "10", "--memory-mb", "24",
                       "--simulate", "3", "--plot", str(figure), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["solver"] == "own" and data["cut_points"][-1] == "fc"
    bw = data["cluster"]["bandwidth_mbps"]
    stages = data["stages"]
    for s, nxt in itertools.pairwise(stages):  # recompute every link from the JSON alone
        assert s["link_mbps"] == bw[s["node"]][nxt["node"]]
        assert s["link_ms"] == pytest.approx(s["sends_bytes"] * 8 / (s["link_mbps"] * 1e3))
        assert nxt["point_range"][0] == s["point_range"][1] + 1
    worst = max([s["link_ms"] for s in stages[:-1]] + [s["compute_ms"] for s in stages])
    assert data["bottleneck_ms"] == pytest.approx(worst)
    assert data["lower_bound_ms"]["theorem1"] <= data["lower_bound_ms"]["matching"]
    assert figure.stat().st_size > 10_000


def test_cli_text_table_and_bandwidth_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    csv = tmp_path / "bw.csv"
    csv.write_text("0,10,20\n10,0,5\n20,5,0\n")
    code, out, _ = run(capsys, "partition", "torchvision:resnet18", "--memory-mb", "30", "--bandwidth", str(csv),
                       "--no-compute")
    assert code == 0 and "pipeline: [" in out and "Theorem 1" in out
    from edgeplan.reports.placement_plot import plan_lines

    exact = "\n".join(plan_lines(plan_partition("torchvision:resnet18", load_cluster(csv, None, 30.0),
                                                 PartitionOptions("exact", compute=False))))
    assert "(optimal placement of these partitions)" in exact and "proven optimal" not in exact
    # unequal nodes from JSON: the own planner puts no stage on a node too small for it
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps({"bandwidth_mbps": [[0, 10, 20, 8], [10, 0, 5, 8], [20, 5, 0, 8], [8, 8, 8, 0]],
                                "memory_mb": [64, 8, 32, 32], "speed": [1, 1, 2, 1]}))
    cluster = load_cluster(spec, None)
    result = plan_partition("torchvision:resnet18", cluster, PartitionOptions("own", compute=False))
    assert all(result.stage_memory_bytes[i] <= cluster.memory_bytes[v] for i, v in enumerate(result.nodes))


@pytest.mark.parametrize(("content", "message"), [
    ("0,10\n10,0,5\n", "square"),
    ("0,10\n-1,0\n", "positive"),
    ("0,10\n12,0\n", "symmetric"),
    ("0,x\nx,0\n", "row 0, column 1: 'x' is not a number"),
    ("0,inf\ninf,0\n", "'inf' is not a finite number"),
])
def test_bad_bandwidth_files_are_named(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bw.csv"
    path.write_text(content)
    with pytest.raises(InvalidInputError, match=message):
        load_cluster(path, None, 16.0)


def test_cli_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "partition", "torchvision:resnet18", "--nodes", "4", "--memory-mb", "16")
    assert code != 0 and "exactly one of --bandwidth" in err
    csv = tmp_path / "bw.csv"
    csv.write_text("0,10\n10,0\n")
    code, _, err = run(capsys, "partition", "torchvision:resnet18", "--nodes", "3", "--memory-mb", "24",
                       "--bandwidth", str(csv))
    assert code != 0 and "describes 2 nodes but --nodes is 3" in err and "Traceback" not in err
    code, _, err = run(capsys, "partition", "torchvision:resnet18", "--nodes", "5", "--memory-mb", "1",
                       "--simulate", "0", "--no-compute")
    assert code != 0 and "more than a node's 1.0 MiB" in err and "use nodes with at least" in err
    # Alg. 1 cuts more stages than there are nodes (exact), and no candidate fits in two stages (own)
    with pytest.raises(InfeasibleError, match="6 stages need 6 nodes, the cluster has 2"):
        plan_partition("torchvision:resnet18", simulated_cluster(2, 0, 20.0), PartitionOptions("exact", compute=False))
    code, _, err = run(capsys, "partition", "torchvision:resnet18", "--nodes", "2", "--memory-mb", "20",
                       "--simulate", "0", "--no-compute")
    assert code != 0 and "with at most 2 stages: in nodes of 20.0 MiB it needs 6; use at least 6 nodes" in err


def test_run_of_a_one_stage_plan_is_skipped_and_says_why() -> None:
    result = plan_partition("torchvision:resnet18", simulated_cluster(3, 0, 1024.0), PartitionOptions(compute=False))
    assert len(result.runs) == 1  # without compute, one node that holds it all has no link to wait for
    run = run_partition(result)
    assert run.pipeline is None and "one stage" in run.skipped and run.to_dict() == {"skipped": run.skipped}


@pytest.mark.slow
def test_cli_run_deploys_the_plan_on_local_ray(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    csv = tmp_path / "bw.csv"
    csv.write_text("0,200,100\n200,0,50\n100,50,0\n")
    code, out, _ = run(capsys, "partition", "torchvision:resnet18", "--memory-mb", "30", "--bandwidth", str(csv),
                       "--run", "--json")
    assert code == 0
    data = json.loads(out)
    stages = data["stages"]
    assert len(stages) >= 2 and data["run"]["outputs_match"]
    assert data["run"]["cuts"] == [s["last_point"] for s in stages[:-1]]
    assert data["run"]["link_mbps"] == [s["link_mbps"] for s in stages[:-1]]
    assert data["run"]["period_mean_ms"] > 0 and data["run"]["nodes"] == [s["node"] for s in stages]


# ------------------------------------------------------------------ cluster files: every bad value is named


def _json_cluster(tmp_path: Path, spec: object, name: str = "cluster.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return path


BW2 = [[0, 10], [10, 0]]


@pytest.mark.parametrize(("spec", "message"), [
    ({"bandwidth_mbps": BW2, "memory_mb": ["a", "b"]}, 'memory_mb[0] must be a finite number, got "a"'),
    ({"bandwidth_mbps": BW2, "memory_mb": 64, "speed": [1, None]}, "speed[1] must be a finite number, got null"),
    ({"bandwidth_mbps": BW2, "memory_mb": 64, "speed": True}, "speed must be a finite number, got true"),
    ({"bandwidth_mbps": BW2, "memory_mb": [64]}, "memory_mb has 1 entries for 2 nodes"),
    ({"bandwidth_mbps": BW2, "memory_mb": -4}, "memory_mb must be positive, got -4"),
    ({"bandwidth_mbps": BW2, "memory_mb": [64, 0]}, "memory_mb[1] must be positive, got 0"),
    ({"bandwidth_mbps": [[0, "fast"], ["fast", 0]], "memory_mb": 64},
     'bandwidth_mbps[0][1] must be a finite number, got "fast"'),
    ({"bandwidth_mbps": [1, 2], "memory_mb": 64}, "bandwidth_mbps must be a list of rows"),
    ({"bandwidth": BW2, "memory_mb": 64}, "unknown key(s) 'bandwidth'; the keys are bandwidth_mbps, memory_mb, speed"),
    ({"memory_mb": 64}, "no 'bandwidth_mbps' key"),
])
def test_bad_json_clusters_are_named(tmp_path: Path, spec: object, message: str) -> None:
    path = _json_cluster(tmp_path, spec)
    with pytest.raises(InvalidInputError) as info:
        load_cluster(path, None)
    assert message in str(info.value) and str(path) in str(info.value)


def test_scalar_memory_and_speed_mean_every_node(tmp_path: Path) -> None:
    bw3 = [[0, 10, 20], [10, 0, 5], [20, 5, 0]]
    cluster = load_cluster(_json_cluster(tmp_path, {"bandwidth_mbps": bw3, "memory_mb": 64, "speed": 2}), 3)
    assert cluster.memory_bytes == (64 * 2**20,) * 3 and cluster.speed == (2.0,) * 3
    # a bare matrix takes its memory from the argument (--memory-mb), speed 1
    cluster = load_cluster(_json_cluster(tmp_path, bw3, "bare.json"), None, 16.0)
    assert cluster.memory_bytes == (16 * 2**20,) * 3 and cluster.speed == (1.0,) * 3


def test_memory_from_the_file_and_the_option_must_agree(tmp_path: Path) -> None:
    path = _json_cluster(tmp_path, {"bandwidth_mbps": BW2, "memory_mb": [64, 32]})
    with pytest.raises(InvalidInputError, match=r"gives memory_mb \[64, 32\] but --memory-mb is 32; leave out"):
        load_cluster(path, None, 32.0)
    same = _json_cluster(tmp_path, {"bandwidth_mbps": BW2, "memory_mb": 32}, "same.json")
    assert load_cluster(same, None, 32.0).memory_bytes == (32 * 2**20,) * 2  # agreeing is fine
    bare = _json_cluster(tmp_path, {"bandwidth_mbps": BW2}, "bare.json")
    with pytest.raises(InvalidInputError, match="gives no memory_mb: add --memory-mb"):
        load_cluster(bare, None)


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    latin = tmp_path / "bw.csv"
    latin.write_bytes("0,10 # d\xe9bit\n10,0\n".encode("latin-1"))
    with pytest.raises(InvalidInputError, match="is not UTF-8 text"):
        load_cluster(latin, None, 16.0)
    broken = tmp_path / "bw.json"
    broken.write_text("{bandwidth_mbps: [[0, 1], [1, 0]]}")
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        load_cluster(broken, None, 16.0)
    with pytest.raises(InvalidInputError, match="cannot read the bandwidth file"):
        load_cluster(tmp_path / "missing.csv", None, 16.0)


def _clean_error(code: int, out: str, err: str, message: str) -> None:
    assert code != 0
    assert message in err, err
    assert "Traceback" not in out + err
    assert len([line for line in err.splitlines() if line.strip()]) <= 3  # one line, or click's usage and error


@pytest.mark.parametrize(("spec", "extra", "message"), [
    ({"bandwidth_mbps": BW2, "memory_mb": ["a", "b"]}, (), 'memory_mb[0] must be a finite number, got "a"'),
    ({"bandwidth_mbps": BW2, "memory_mb": 64, "speed": [1, None]}, (), "speed[1] must be a finite number, got null"),
    ({"bandwidth_mbps": BW2, "memory_mb": [64, 8]}, ("--memory-mb", "16"),
     "gives memory_mb [64, 8] but --memory-mb is 16; leave out --memory-mb or make it agree"),
    ({"bandwidth_mbps": BW2}, (), "gives no memory_mb: add --memory-mb"),
])
def test_cli_names_bad_cluster_files(capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: object,
                                     extra: tuple[str, ...], message: str) -> None:
    path = _json_cluster(tmp_path, spec)
    code, out, err = run(capsys, "partition", "synthetic:0", "--bandwidth", str(path), "--no-compute", *extra)
    _clean_error(code, out, err, message)
    assert err.startswith("error: ")


def test_cli_names_a_file_that_is_not_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bw.csv"
    path.write_bytes(b"\xff\xfe0\x00,\x001\x00\n")
    code, out, err = run(capsys, "partition", "synthetic:0", "--bandwidth", str(path), "--memory-mb", "8")
    _clean_error(code, out, err, f"{path} is not UTF-8 text")


def test_cli_accepts_a_scalar_memory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bw = [[0.0 if i == j else 10.0 + i + j for j in range(8)] for i in range(8)]
    path = _json_cluster(tmp_path, {"bandwidth_mbps": bw, "memory_mb": 8})
    code, out, _ = run(capsys, "partition", "synthetic:0", "--bandwidth", str(path), "--no-compute", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["cluster"]["memory_bytes"] == [8 * 2**20] * 8
    assert all(s["memory_bytes"] <= 8 * 2**20 for s in data["stages"])


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--memory-mb", "0", "Invalid value for '--memory-mb': 0.0 is not in the range x>0"),
    ("--memory-mb", "inf", "must be a finite number of MiB, got inf"),
])
def test_cli_rejects_non_positive_budgets_and_memories(capsys: pytest.CaptureFixture[str], option: str, value: str,
                                                       message: str) -> None:
    code, out, err = run(capsys, "partition", "synthetic:0", "--nodes", "10", "--simulate", "0", "--no-compute",
                         option, value)
    _clean_error(code, out, err, message)


def test_cli_names_a_plot_folder_that_does_not_exist_before_planning(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import edgeplan.decisions.partition

    def no_planning(*args: object, **kwargs: object) -> None:
        raise AssertionError("planned before checking --plot")

    monkeypatch.setattr(edgeplan.decisions.partition, "plan_partition", no_planning)
    missing = tmp_path / "no" / "such" / "plan.png"
    code, out, err = run(capsys, "partition", "synthetic:0", "--nodes", "10", "--memory-mb", "8", "--simulate", "0",
                         "--no-compute", "--plot", str(missing))
    _clean_error(code, out, err, f"{missing.parent} is not an existing folder")


# ------------------------------------------------------------------ what "optimal" means, scoped by the solver


def test_own_claims_optimality_over_its_candidates_only(capsys: pytest.CaptureFixture[str]) -> None:
    from edgeplan.reports.placement_plot import plan_lines

    result = plan_partition("synthetic:0", simulated_cluster(10, seed=0, memory_mb=8),
                            PartitionOptions("own", compute=False, time_limit_s=30.0))
    assert result.proven_optimal and result.search_complete
    assert result.candidates_total is not None and result.candidates_tried is not None
    assert 1 <= result.candidates_tried <= result.candidates_total
    text = "\n".join(plan_lines(result))
    assert f"(optimal over its {result.candidates_total} candidate partitionings)" in text
    assert "proven optimal" not in text
    assert f"of {result.candidates_total} candidates, {result.candidates_tried} placed exactly" in text
    assert "optimal over these candidates" in text and "time budget" not in text
    data = result.to_dict()
    assert data["proven_optimal"] is True and data["optimal_over"] == "candidate partitionings"
    assert data["search_complete"] is True
    assert data["candidates"] == {"placed": result.candidates_tried, "total": result.candidates_total}


def test_own_stopped_by_the_clock_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import edgeplan.planners.partition as planners
    from edgeplan.reports.placement_plot import plan_lines

    real = planners.plan_own

    def hurried(*args: object, **kwargs: object) -> object:  # as if the budget ran out after the first candidate
        plan = real(*args, **kwargs)  # type: ignore[arg-type]
        assert plan.candidates_total >= 2
        return dataclasses.replace(plan, proven_optimal=False, search_complete=False, candidates_tried=1)

    monkeypatch.setattr(planners, "plan_own", hurried)
    result = plan_partition("synthetic:0", simulated_cluster(10, seed=0, memory_mb=8),
                            PartitionOptions("own", compute=False, time_limit_s=0.5))
    assert not result.proven_optimal and not result.search_complete and result.candidates_tried == 1
    total = result.candidates_total
    text = "\n".join(plan_lines(result))
    assert (f"(best found within the time budget: search stopped after 1 of {total} candidate partitionings)"
            in text)
    assert "optimal over" not in text and "lower bounds could not beat it" not in text
    assert f"of {total} candidates, 1 placed exactly; the time budget (0.5 s) stopped the search there" in text
    data = result.to_dict()
    assert data["proven_optimal"] is False and data["search_complete"] is False
    assert data["optimal_over"] == "candidate partitionings" and data["candidates"] == {"placed": 1, "total": total}


def test_own_search_note_follows_how_the_search_ended() -> None:
    from edgeplan.decisions.partition import own_search_note
    from edgeplan.planners.partition import Placement
    from edgeplan.planners.partition.joint import JointPlan

    def plan(tried: int, proven: bool, complete: bool) -> JointPlan:
        return JointPlan(((0, 1), (2, 3)), (1e6,), Placement((0, 1), 10.0, "own", proven), "own",
                         proven_optimal=proven, candidates_tried=tried, candidates_total=5, notes=("alg1-sum",),
                         search_complete=complete)

    assert own_search_note(plan(5, True, True), 0.8) == ("partitioning: alg1-sum (of 5 candidates, 5 placed exactly: "
                                                          "every candidate placed and the best kept, optimal over "
                                                          "these candidates)")
    assert "the others were pruned (their lower bounds could not beat it)" in own_search_note(plan(2, True, True), 0.8)
    stopped = own_search_note(plan(2, False, False), 0.8)
    assert "2 placed exactly; the time budget (0.8 s) stopped the search there" in stopped
    assert "could not beat" not in stopped and "optimal over" not in stopped
    unproven = own_search_note(plan(5, False, True), 0.8)
    assert "every candidate was placed or pruned, but the time budget (0.8 s) left a placement unproven" in unproven


@pytest.mark.parametrize(("solver", "scope", "claim"), [
    ("exact", "placements of these partitions", "(optimal placement of these partitions)"),
    ("kpath", None, None),
    ("greedy", None, None),
])
def test_other_solvers_scope_their_claims(solver: str, scope: str | None, claim: str | None) -> None:
    from edgeplan.reports.placement_plot import plan_lines

    result = plan_partition("synthetic:0", simulated_cluster(10, seed=0, memory_mb=8),
                            PartitionOptions(solver, compute=False))
    data = result.to_dict()
    assert data["optimal_over"] == scope and data["candidates"] is None and data["search_complete"] is True
    assert data["proven_optimal"] is (solver == "exact")
    header = plan_lines(result)[1]
    assert (claim in header) if claim else ("optimal" not in header)


# ------------------------------------------------------------------ the drawing marks what is slowest


def _hand_result(link_ms: tuple[float, ...], compute_ms: tuple[float, ...] | None,
                 solver: str = "own") -> PartitionResult:
    k = len(link_ms) + 1
    n = k + 1
    bw = tuple(tuple(0.0 if i == j else 10.0 for j in range(n)) for i in range(n))
    cluster = Cluster(bw, (1e9,) * n, (1.0,) * n, "hand-made")
    links = max(link_ms, default=0.0)
    with_compute = None if compute_ms is None else max(links, *compute_ms)
    return PartitionResult(
        model="toy", solver=solver, points=tuple(f"p{i}" for i in range(k)), runs=tuple((i, i) for i in range(k)),
        nodes=tuple(range(1, k + 1)), transfers_raw_bytes=tuple(ms * 1250.0 for ms in link_ms),
        transfers_bytes=tuple(ms * 1250.0 for ms in link_ms), compression=None, stage_memory_bytes=(1e6,) * k,
        stage_compute_ms=compute_ms, link_mbps=(10.0,) * len(link_ms), link_ms=link_ms,
        bottleneck_ms=with_compute if solver == "own" and with_compute is not None else links,
        bottleneck_with_compute_ms=with_compute, theorem1_bound_ms=0.0, matching_bound_ms=0.0, proven_optimal=False,
        planning_ms=1.0, cluster=cluster, notes=(), threads=1)


def test_drawing_marks_the_slowest_stage_when_compute_is_the_bottleneck(tmp_path: Path) -> None:
    from edgeplan.reports.placement_plot import BOTTLENECK, LINK, STAGE, placement_colours, plan_lines, plot_placement

    compute_bound = _hand_result((10.0, 20.0), (5.0, 50.0, 3.0))
    assert compute_bound.bottleneck_parts() == (("stage", 1),)
    assert placement_colours(compute_bound) == ([LINK, LINK], [STAGE, BOTTLENECK, STAGE])
    assert "  slowest: stage 1's compute on node 2 (50.0 ms)" in plan_lines(compute_bound)
    assert compute_bound.to_dict()["bottleneck_at"] == [{"kind": "stage", "index": 1}]
    link_bound = _hand_result((10.0, 20.0), (5.0, 15.0, 3.0))
    assert placement_colours(link_bound) == ([LINK, BOTTLENECK], [STAGE, STAGE, STAGE])
    assert "  slowest: the link from stage 1 to 2 (node 2 to 3, 20.0 ms)" in plan_lines(link_bound)
    # the paper's solvers optimise links only, but the drawing shows the pipeline's real bottleneck
    paper = _hand_result((10.0, 20.0), (5.0, 50.0, 3.0), solver="kpath")
    assert paper.bottleneck_ms == 20.0 and paper.period_ms == 50.0
    assert placement_colours(paper) == ([LINK, LINK], [STAGE, BOTTLENECK, STAGE])
    tie = _hand_result((50.0, 20.0), (5.0, 50.0, 3.0))
    assert placement_colours(tie) == ([BOTTLENECK, LINK], [STAGE, BOTTLENECK, STAGE])
    no_compute = _hand_result((10.0, 20.0), None)
    assert placement_colours(no_compute) == ([LINK, BOTTLENECK], [STAGE, STAGE, STAGE])
    figure = plot_placement(compute_bound, tmp_path / "plan.png")
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
