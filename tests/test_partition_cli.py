"""``edgeplan partition`` and the partitioning API: plans on simulated and given clusters, JSON, drawings, errors."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from edgeplan.cli.main import main
from edgeplan.errors import InvalidInputError
from edgeplan.partition import load_cluster, plan_partition, simulated_cluster
from edgeplan.planners.partition import PlacementProblem, bottleneck_ms, place_exact


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("solver", ["own", "exact", "kpath", "greedy", "random"])
def test_every_solver_gives_a_consistent_plan(solver: str) -> None:
    cluster = simulated_cluster(12, seed=1, memory_mb=24)
    result = plan_partition("torchvision:resnet18", cluster, solver, compute=False)
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
                       "--no-compute", "--solver", "exact")
    assert code == 0 and "pipeline: [" in out and "proven optimal" in out and "Theorem 1" in out
    # unequal nodes from JSON: the own planner puts no stage on a node too small for it
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps({"bandwidth_mbps": [[0, 10, 20, 8], [10, 0, 5, 8], [20, 5, 0, 8], [8, 8, 8, 0]],
                                "memory_mb": [64, 8, 32, 32], "speed": [1, 1, 2, 1]}))
    cluster = load_cluster(spec, None, 0.0)
    result = plan_partition("torchvision:resnet18", cluster, "own", compute=False)
    assert all(result.stage_memory_bytes[i] <= cluster.memory_bytes[v] for i, v in enumerate(result.nodes))


@pytest.mark.parametrize(("content", "message"), [
    ("0,10\n10,0,5\n", "square"),
    ("0,10\n-1,0\n", "positive"),
    ("0,10\n12,0\n", "symmetric"),
    ("0,x\nx,0\n", "not a bandwidth matrix"),
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
    assert code != 0 and "MiB" in err  # names the memory a partition needs
    code, _, err = run(capsys, "partition", "torchvision:resnet18", "--nodes", "2", "--memory-mb", "8",
                       "--simulate", "0", "--no-compute", "--solver", "exact")
    assert code != 0 and "nodes" in err


def test_cli_run_deploys_the_plan_on_local_ray(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    csv = tmp_path / "bw.csv"
    csv.write_text("0,200,100\n200,0,50\n100,50,0\n")
    code, out, _ = run(capsys, "partition", "torchvision:resnet18", "--memory-mb", "30", "--bandwidth", str(csv),
                       "--solver", "exact", "--run", "--run-inputs", "3", "--json")
    assert code == 0
    data = json.loads(out)
    stages = data["stages"]
    assert len(stages) >= 2 and data["run"]["outputs_match"]
    assert data["run"]["cuts"] == [s["last_point"] for s in stages[:-1]]
    assert data["run"]["link_mbps"] == [s["link_mbps"] for s in stages[:-1]]
    assert data["run"]["period_mean_ms"] > 0 and data["run"]["nodes"] == [s["node"] for s in stages]
