"""The primitive profiling campaign: configuration space, resumable measurement, mulder2021 CSV export, CLI."""

from __future__ import annotations

import csv
import importlib.machinery
import json
import sys
import types
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from edgeplan.cli.common import Context
from edgeplan.cli.primitives_cmd import primitives
from edgeplan.errors import InvalidInputError, StoreError
from edgeplan.measure.device import describe_device
from edgeplan.measure.store import Store
from edgeplan.primitives import ConvSpec, applicable, primitive_names
from edgeplan.primitives import campaign as pc

FAST = pc.TimingPlan(target_ms=0.5, min_repeats=2, max_repeats=3)
# Two tiny layers: a 3x3 stride-1 one (Winograd-3 and kn2 apply) and a 1x1 stride-2 one (neither does).
CONFIGS = (ConvSpec(4, 4, 6, 3, 1), ConvSpec(3, 5, 7, 1, 2))


def _expected_tasks(configs: tuple[ConvSpec, ...], names: tuple[str, ...]) -> int:
    prims = sum(sum(p.name in names for p in applicable(spec)) for spec in configs)
    return prims + 9 * len({(s.c, s.im) for s in configs})


def _invoke(*args: str, home: Path | None = None) -> click.testing.Result:
    return CliRunner().invoke(primitives, list(args), obj=Context(home=str(home) if home else None,
                                                                  argv=("primitives", *args)))


# ---------------------------------------------------------------------------------------------- configuration space


def test_config_space_crosses_f_and_s_drops_impossible_and_dedups() -> None:
    space = pc.config_space([(3, 8, 5), (4, 4, 2), (3, 8, 5)])
    # im = 5 admits f in {1, 3, 5} (x 3 strides); im = 2 only f = 1 (x 3 strides); the duplicate triplet adds nothing
    assert len(space) == 3 * 3 + 1 * 3
    assert all(spec.f <= spec.im and spec.padding is None for spec in space)
    assert {(s.f, s.s) for s in space if s.im == 2} == {(1, 1), (1, 2), (1, 4)}
    assert list(space) == sorted(space, key=lambda s: (s.c, s.k, s.im, s.f, s.s))
    full = pc.config_space([(64, 64, 56)])
    assert len(full) == len(pc.KERNEL_SIZES) * len(pc.STRIDES)


def test_extract_triplets_from_the_zoo_dedups() -> None:
    found = pc.extract_triplets(["torchvision:resnet18", "torchvision:resnet18"])
    assert (3, 64, 224) in found and (64, 64, 56) in found and (512, 512, 7) in found
    assert all(models == ("torchvision:resnet18",) for models in found.values())
    assert list(found) == sorted(found)
    shipped = pc.load_triplets()
    assert len(shipped) == len(set(shipped)) == 385 and set(found) <= set(shipped)


def test_selection_is_seeded_capped_and_a_sample() -> None:
    space = pc.config_space(pc.load_triplets())
    chosen = pc.select_configs(space, work_cap=1e7, seed=3, with_fft=False)
    assert chosen == pc.select_configs(space, work_cap=1e7, seed=3, with_fft=False)
    assert chosen != pc.select_configs(space, work_cap=1e7, seed=4, with_fft=False)
    assert all(pc.work_units(s, with_fft=False) <= 1e7 for s in chosen)
    assert len(set(chosen)) == len(chosen) == sum(pc.work_units(s, with_fft=False) <= 1e7 for s in space)
    assert set(pc.select_configs(space, work_cap=1e7, seed=3, max_configs=10, with_fft=False)) <= set(chosen)
    with pytest.raises(InvalidInputError, match="work cap"):
        pc.select_configs(space, work_cap=0, seed=0)


def test_work_units_counts_the_fft_primitive_where_it_applies() -> None:
    spec = ConvSpec(1024, 256, 14, 1, 1)
    assert pc.work_units(spec, with_fft=False) == 1024 * 256 * 14 * 14
    assert pc.work_units(spec) == 6 * 256 * 1024 * 14 * 8
    assert pc.work_units(ConvSpec(1024, 256, 14, 1, 2)) == 1024 * 256 * 7 * 7  # fft needs s = 1


def test_timing_plan_repeats_are_clamped() -> None:
    plan = pc.TimingPlan(target_ms=20, min_repeats=3, max_repeats=50)
    assert plan.repeats_for(100.0) == 3 and plan.repeats_for(5.0) == 4 and plan.repeats_for(0.001) == 50
    with pytest.raises(InvalidInputError):
        pc.TimingPlan(min_repeats=5, max_repeats=2)


# ---------------------------------------------------------------------------------------------- measuring


def test_tiny_campaign_measures_everything_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = describe_device("torch", 1)
    plan = pc.primitive_campaign(device.key, configs=CONFIGS, timing=FAST)
    total = _expected_tasks(CONFIGS, primitive_names())
    with Store.open(tmp_path / "s.sqlite") as store:
        nothing = pc.profile_primitives(store, plan, device, budget_s=1e-9)
        assert nothing.stopped_by_budget and nothing.configs_done_now == 0 and nothing.remaining == 2
        # an interruption after 7 committed rows loses nothing committed
        real_time, calls = pc._time, []

        def interrupted(*args: object, **kwargs: object) -> object:
            calls.append(1)
            if len(calls) > 7:
                raise KeyboardInterrupt
            return real_time(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(pc, "_time", interrupted)
        with pytest.raises(KeyboardInterrupt):
            pc.profile_primitives(store, plan, device)
        monkeypatch.setattr(pc, "_time", real_time)
        assert len(store.measurements(campaign=plan.name)) == 7
        assert {c.name: c.status for c in store.campaigns()}[plan.name] == "partial"
        first = {r.task_key: r.created_at for r in store.measurements(campaign=plan.name)}
        report = pc.profile_primitives(store, plan, device)
        assert report.rows_now == total - 7 and report.configs_done_now == 2 and report.remaining == 0
        assert report.configs_per_hour is not None and report.estimated_remaining_s == 0
        again = pc.profile_primitives(store, plan, device)
        assert again.rows_now == 0 and again.configs_done_before == 2
        rows = store.measurements(campaign=plan.name)
        assert len(rows) == total and all(r.threads == 1 and r.latency_ms > 0 for r in rows)
        assert all(first[k] == r.created_at for r in rows if (k := r.task_key) in first)
        assert {r.kind for r in rows} == {pc.PRIMITIVE_KIND, pc.TRANSFORM_KIND}
        assert all(2 <= r.repeats <= 3 and r.extra["status"] == "measured" for r in rows)


def test_export_is_the_mulder_csv_in_ns(tmp_path: Path) -> None:
    device = describe_device("torch", 1)
    names = ("direct-sum2d", "winograd-2x2-3x3", "conv-1x1-gemm-ab-ik", "im2col-scan-ab-ki")
    plan = pc.primitive_campaign(device.key, configs=CONFIGS, primitives=list(reversed(names)), timing=FAST)
    with Store.open(tmp_path / "s.sqlite") as store:
        pc.profile_primitives(store, plan, device)
        campaign = pc.find_campaign(store)
        summary = pc.export_dataset(store, campaign, tmp_path / "out.csv", command="test")
        rows = {r.task_key: r for r in store.measurements(campaign=plan.name)}
    with (tmp_path / "out.csv").open() as handle:
        header, *lines = list(csv.reader(handle))
    registry_order = [n for n in primitive_names() if n in names]
    assert header == [*pc.SHAPE_COLUMNS, *pc.TRANSFORM_COLUMNS, *registry_order]
    assert summary.rows == len(lines) == 2 and summary.incomplete == 0
    by_shape = {tuple(int(v) for v in line[:5]): dict(zip(header, line, strict=True)) for line in lines}
    three, one = by_shape[(4, 4, 6, 3, 1)], by_shape[(3, 5, 7, 1, 2)]
    assert three["conv-1x1-gemm-ab-ik"] == "" and three["winograd-2x2-3x3"] != ""
    assert one["winograd-2x2-3x3"] == "" and one["conv-1x1-gemm-ab-ik"] != ""  # conv-1x1: f = 1, p = 0, any s
    assert int(three["direct-sum2d"]) == round(rows["c4-k4-im6-f3-s1|direct-sum2d"].latency_ms * 1e6)
    assert int(one["chw-to-hwc"]) == round(rows["c3-im7|chw-to-hwc"].latency_ms * 1e6)
    provenance = json.loads((tmp_path / "out.provenance.json").read_text())
    assert provenance["units"] == "ns" and provenance["rows"] == 2 and provenance["campaign"]["name"] == plan.name
    assert provenance["devices"][0]["descriptor"]["threads"] == 1 and provenance["versions"][0]["torch"]


def test_over_cap_is_distinct_from_not_applicable(tmp_path: Path) -> None:
    device = describe_device("torch", 1)
    plan = pc.primitive_campaign(device.key, configs=CONFIGS[:1], primitives=["direct-sum2d"],
                                 timing=pc.TimingPlan(call_cap_ms=1e-6))
    with Store.open(tmp_path / "s.sqlite") as store:
        report = pc.profile_primitives(store, plan, device)
        assert len(report.over_cap) == 10 and report.configs_done_now == 1
        rows = store.measurements(campaign=plan.name)
        assert all(r.extra["status"] == "over_cap" and r.repeats == 1 and r.stopped_by == "time_cap" for r in rows)
        campaign = pc.find_campaign(store)
        left_out = pc.export_dataset(store, campaign, tmp_path / "a.csv", provenance=False)
        assert left_out.rows == 0 and left_out.incomplete == 1 and left_out.provenance_path is None
        kept = pc.export_dataset(store, campaign, tmp_path / "b.csv", include_incomplete=True)
        assert kept.rows == 1 and kept.over_cap_cells == 1
    assert (tmp_path / "b.csv").read_text().splitlines()[1] == "4,4,6,3,1" + "," * 10


def test_remeasure_subset_is_a_separate_campaign(tmp_path: Path) -> None:
    device = describe_device("torch", 1)
    plan = pc.primitive_campaign(device.key, configs=CONFIGS, primitives=["im2col-scan-ab-ki"], timing=FAST)
    with Store.open(tmp_path / "s.sqlite") as store:
        with pytest.raises(InvalidInputError, match="not in the Store"):
            pc.remeasure_campaign(store, plan, 1, seed=0)
        pc.profile_primitives(store, plan, device)
        with pytest.raises(InvalidInputError, match="fewer than the 5"):
            pc.remeasure_campaign(store, plan, 5, seed=0)
        subset = pc.remeasure_campaign(store, plan, 1, seed=0)
        assert subset.name != plan.name and len(subset.configs) == 1 and subset.configs[0] in CONFIGS
        report = pc.profile_primitives(store, subset, device)
        assert report.configs_done_now == 1
        assert pc.remeasure_campaign(store, plan, 1, seed=0).configs == subset.configs
        assert pc.find_campaign(store).name == plan.name  # the subset is not a main campaign


# ---------------------------------------------------------------------------------------------- command line


def test_list_json_fields() -> None:
    result = _invoke("list", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [row["name"] for row in data] == list(primitive_names())
    assert {"name", "family", "input_layout", "output_layout"} <= set(data[0])
    assert {row["input_layout"] for row in data} <= {"chw", "hcw", "hwc"}
    wino = json.loads(_invoke("list", "--family", "wino3", "--json").output)
    assert wino and all(row["family"] == "wino3" for row in wino)


def test_profile_and_export_through_the_cli(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    args = ("profile", "--store", store, "--config", "4,4,6,3,1", "--primitive", "direct-sum2d",
            "--primitive", "kn2row", "--target-ms", "0.5", "--json")
    result = _invoke(*args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["configs_done_now"] == 1 and report["rows_now"] == 2 + 9 and report["remaining"] == 0
    dry = json.loads(_invoke("profile", "--store", store, "--dry-run", "--json").output)
    assert dry["space_size"] == 5457 and 3000 <= dry["configs"] < dry["space_size"]
    result = _invoke("export", "--store", store, "--out", str(tmp_path / "d.csv"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["rows"] == 1
    assert (tmp_path / "d.csv").read_text().splitlines()[0].endswith("hwc-to-hwc,direct-sum2d,kn2row")


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("profile", "--primitive", "im2col-nope", "--dry-run"), InvalidInputError, "unknown primitive"),
        (("list", "--family", "nope"), InvalidInputError, "unknown primitive family"),
        (("export", "--out", "x.csv"), StoreError, "no Store at"),
        (("profile", "--config", "4,4,6,3,1", "--work-cap", "5", "--dry-run"), InvalidInputError, "--config"),
    ],
)
def test_bad_input_errors(tmp_path: Path, args: tuple[str, ...], error: type[Exception], message: str) -> None:
    result = _invoke(*args, home=tmp_path)
    assert isinstance(result.exception, error) and message in str(result.exception)


def test_bad_config_and_missing_campaign(tmp_path: Path) -> None:
    result = _invoke("profile", "--config", "4,4,six,3,1", "--dry-run", home=tmp_path)
    assert result.exit_code == 2 and "C,K,IM,F,S" in result.output
    Store.open(tmp_path / "empty.sqlite").close()
    result = _invoke("export", "--store", str(tmp_path / "empty.sqlite"), "--out", str(tmp_path / "x.csv"))
    assert isinstance(result.exception, InvalidInputError) and "primitives profile" in str(result.exception)


def test_costmodel_commands_join_the_group_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "edgeplan.cli.costmodel_cmd"
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)

    @click.command("fit")
    def fit() -> None:
        click.echo("fitted")

    module.fit = fit  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, module)
    result = _invoke("--help")
    assert "fit" in result.output and "evaluate" not in result.output
    assert _invoke("fit").output == "fitted\n"
