"""``edgeplan offload`` and the offloading API on the shipped measurements: plans, JSON, errors, a real run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeplan.cli.main import main
from edgeplan.decisions.offload import (
    DEFAULT_MOBILE_POWER,
    OffloadSetup,
    mobile_power,
    offload_costs,
    offload_lookup,
    offload_network,
    plan_offload,
    run_offload,
)
from edgeplan.errors import InvalidInputError
from edgeplan.planners.offload import check_plan, evaluate_schedule, network_preset
from experiments import eshratifar2018

PAPERS = {"eshratifar2018": eshratifar2018.main}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    paper = next((a for a in args if a in PAPERS), None)  # "reproduce PAPER ...": python -m experiments.PAPER ...
    code = PAPERS[paper](list(args[args.index(paper) + 1:])) if paper else main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_costs_from_shipped_ranges_and_derived_cloud() -> None:
    measured, chain = offload_costs(OffloadSetup("paper:alexnet", costs="shipped"))
    derived, _ = offload_costs(OffloadSetup("paper:alexnet", cloud_speedup=11.25, costs="shipped"))
    n = len(chain)
    assert measured.n == n == 20 and measured.boundary_bytes == chain.boundary_bytes
    assert measured.boundary_bytes[0] == 3 * 227 * 227 * 4
    upper = np.triu_indices(n)
    assert (measured.mobile_ms[upper] > 0).all() and (measured.cloud_ms[upper] > 0).all()
    np.testing.assert_allclose(derived.cloud_ms[upper], measured.mobile_ms[upper] / 11.25)
    assert measured.cloud_label.startswith("measured") and derived.cloud_label.startswith("derived")


def test_plan_is_checked_and_derived_devices_cannot_run() -> None:
    result = plan_offload(OffloadSetup("paper:overfeat", cloud_speedup=11.25, costs="shipped"), "4g")
    check = check_plan(result.problem, result.plan)
    assert check.feasible and check.matches
    assert evaluate_schedule(result.problem, result.plan.segments).latency_ms == pytest.approx(
        result.plan.latency_ms)
    data = result.to_dict()
    assert data["network"]["up_mbps"] == 5.85 and len(data["layer_nodes"]) == 18
    with pytest.raises(InvalidInputError, match="derived"):
        run_offload(result)


def test_offload_json_carries_every_cost_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "--home", str(tmp_path), "offload", "paper:nin", "--network", "3g", "--costs",
                       "shipped", "--cloud-speedup", "11.25", "--objective", "energy", "--json")
    assert code == 0
    data = json.loads(out)
    n = len(data["costs"]["layers"])
    assert len(data["costs"]["boundary_bytes"]) == n + 1
    assert data["network"]["name"] and data["mobile_power"]["compute_mw"] == 7500.0
    assert data["plan"]["objective"] == "energy" and data["plan"]["segments"][0]["first"] == 0


def test_offload_table_and_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "plan.png"
    code, out, _ = run(capsys, "--home", str(tmp_path), "offload", "paper:alexnet", "--costs", "shipped",
                       "--up-mbps", "50", "--down-mbps", "100", "--cloud-speedup", "11.25", "--plot", str(png))
    assert code == 0 and "mobile-only" in out and "cloud-only" in out and "schedule" in out
    assert png.stat().st_size > 1000


@pytest.mark.parametrize(("args", "message"), [
    (("--network", "5g"), "5g"),
    (("--up-mbps", "3"), "both --up-mbps and --down-mbps"),
    (("--battery-mj", "0.001"), "battery budget"),
    (("--mobile-threads", "0"), "thread count"),
    (("--plot", "/nonexistent-dir/plan.png", "--cloud-speedup", "2"), "cannot write the figure"),
])
def test_offload_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...],
                                       message: str) -> None:
    code, _, err = run(capsys, "--home", str(tmp_path), "offload", "paper:alexnet", "--costs", "shipped", *args)
    assert code != 0 and message in err and "Traceback" not in err


def test_store_source_without_measurements_says_what_to_run(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    code, _, err = run(capsys, "--home", str(tmp_path), "offload", "paper:alexnet", "--costs", "store")
    assert code == 2 and "edgeplan profile ranges paper:alexnet" in err and "Traceback" not in err


def test_network_and_mobile_power_from_raw_values() -> None:
    assert offload_network("wifi") == network_preset("wifi")
    custom = offload_network("4g", 5.0, 20.0)
    assert (custom.up_mbps, custom.down_mbps) == (5.0, 20.0)
    assert custom.alpha_up_mw_per_mbps == network_preset("4g").alpha_up_mw_per_mbps
    with pytest.raises(InvalidInputError, match="both"):
        offload_network("wifi", 5.0, None)
    assert mobile_power() is DEFAULT_MOBILE_POWER
    power = mobile_power(2.5, "stated")
    assert (power.compute_mw, power.idle_mw, power.source) == (2500.0, 0.0, "stated")


def test_lookup_grid_solves_the_plan_again_at_every_speed_pair() -> None:
    result = plan_offload(OffloadSetup("paper:nin", costs="shipped"), offload_network("wifi", 1000.0, 1000.0))
    table = offload_lookup(result, [1.0, 1000.0], like="wifi")
    assert [(e.up_mbps, e.down_mbps) for e in table] == [(1.0, 1.0), (1.0, 1000.0), (1000.0, 1.0), (1000.0, 1000.0)]
    assert table[0].pattern == "M" and table[-1].latency_ms <= result.plan.latency_ms * (1 + 1e-9)


@pytest.mark.slow
def test_real_split_run_from_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # a fast link makes the 2-thread cloud worth the transfer, so the plan offloads
    code, out, _ = run(capsys, "--home", str(tmp_path), "offload", "paper:nin", "--costs", "shipped",
                       "--up-mbps", "1000", "--down-mbps", "1000", "--run", "--json",
                       "--lookup-grid", "1,1000")
    assert code == 0
    data = json.loads(out)
    assert data["run"]["measured_latency_ms"] > 0 and data["run"]["max_abs_output_error"] < 1e-5
    assert data["run"]["uploaded_bytes"] > 0
    assert data["lookup"][0]["pattern"] == "M"  # at 1 Mbps both ways the phone keeps everything
    assert len(data["lookup"]) == 4


def test_reproduce_eshratifar2018_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "--home", str(tmp_path), "reproduce", "eshratifar2018", "--costs", "shipped",
                       "--paper-regime", "--json")
    assert code == 0
    data = json.loads(out)
    assert len(data["rows"]) == 18
    assert data["edgeplan"]["alexnet_cloud_only_comm_share"]["wifi"] == pytest.approx(0.81)
    assert all(r["speedup"] >= 1 - 1e-9 and r["energy_reduction"] >= 1 - 1e-9 for r in data["rows"])
