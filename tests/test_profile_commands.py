"""The library functions behind ``edgeplan profile ops|ranges|primitives``: one time budget for the whole command,
and the conv layers a ``--network`` campaign measures."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from edgeplan.cli.main import main
from edgeplan.errors import InvalidInputError
from edgeplan.measure import profile_jobs, range_profile
from edgeplan.measure.campaign import CampaignReport
from edgeplan.measure.profile_jobs import (
    OpsExport,
    PrimitiveJob,
    profile_ops,
    profile_primitive_campaign,
    profile_range_tables,
)


def _slow_campaign(calls: list[tuple[Any, float | None]]) -> Any:
    """A campaign that takes 0.6 s and measures nothing; it records what it was given and its budget."""

    def run(store: Any, what: Any, *_: Any, budget_s: float | None = None, **__: Any) -> CampaignReport:
        calls.append((what, budget_s))
        time.sleep(0.6)
        return CampaignReport(str(what), 1, 0, 0, 1, (), True, 0.6)

    return run


def test_profile_ops_spends_one_budget_over_every_scenario(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[Any, float | None]] = []
    monkeypatch.setattr(profile_jobs, "run_op_campaign", _slow_campaign(calls))
    result = profile_ops(["torch-fp32-1t", "torch-fp32-2t"], ["synthetic:0"], budget_s=0.5, home=tmp_path)
    (scenario, budget), = calls
    assert scenario.name == "torch-fp32-1t" and budget is not None and 0 < budget <= 0.5
    assert len(result.campaigns) == 1 and result.not_started == ("torch-fp32-2t",) and result.export is None
    assert result.to_dict()["not_started"] == ["torch-fp32-2t"]
    with pytest.raises(InvalidInputError, match="give one --scenario"):
        profile_ops(["torch-fp32-1t", "torch-fp32-2t"], ["synthetic:0"], export=OpsExport(tmp_path / "d.jsonl.gz"),
                    home=tmp_path)
    args = ["--home", str(tmp_path), "profile", "ops", "synthetic:0", "--scenario", "torch-fp32-1t", "--scenario",
            "ort-fp32-1t", "--budget-s", "0.5"]
    assert main(args) == 0
    assert "ort-fp32-1t: not started; stopped by the budget" in capsys.readouterr().out


def test_profile_range_tables_spends_one_budget_over_models_and_threads(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    calls: list[tuple[Any, float | None]] = []
    monkeypatch.setattr(range_profile, "profile_ranges", _slow_campaign(calls))
    result = profile_range_tables(["paper:alexnet", "paper:chair"], (1, 2), budget_s=0.5, home=tmp_path)
    assert [c[0] for c in calls] == ["paper:alexnet"]
    assert [(s.model, s.threads) for s in result.sweeps] == [("paper:alexnet", 1)]
    assert result.not_started == (("paper:alexnet", 2), ("paper:chair", 1), ("paper:chair", 2))
    assert result.to_dict()["store"] == str(tmp_path / "store.sqlite") and result.exported_tables is None


def test_network_configs_are_the_layers_select_can_run() -> None:
    """Cross-check: the layers a `--network` campaign measures are those the selection's structure selects."""
    from edgeplan.decisions.select import runnable
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.measure.primitive_space import network_configs
    from edgeplan.planners.pbqp.network import selection_structure
    from edgeplan.primitives.spec import ConvSpec

    model = "torchvision:resnet18"
    structure = selection_structure(load_graph(model), selectable=runnable)
    selected = {n.conv[:5] for n in structure.nodes if n.kind == "conv" and n.conv is not None}
    configs = network_configs([model])
    assert {(s.c, s.k, s.im, s.f, s.s) for s in configs} == selected and len(configs) == len(selected)
    assert all(isinstance(s, ConvSpec) and s.padding is None for s in configs)


def test_a_primitive_dry_run_plans_without_a_store(tmp_path: Path) -> None:
    job = PrimitiveJob(max_configs=3)
    result = profile_primitive_campaign(job, dry_run=True, home=tmp_path)
    assert result.report is None and len(result.plan.configs) == 3 and not (tmp_path / "store.sqlite").exists()
    assert result.to_dict()["params"] == dict(result.plan.params)
    with pytest.raises(InvalidInputError, match="give one"):
        profile_primitive_campaign(job, dry_run=True, export=tmp_path / "x.csv", home=tmp_path)
    with pytest.raises(InvalidInputError, match="drop --config and --max-configs"):
        profile_primitive_campaign(PrimitiveJob(networks=("paper:alexnet",), max_configs=3), home=tmp_path)
