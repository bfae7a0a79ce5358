"""The primitive profiling campaign: configuration space, resumable measurement, mulder2021 CSV export, CLI."""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import itertools
import json
import math
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from edgeplan.cli.common import Context
from edgeplan.cli.main import cli
from edgeplan.errors import InvalidInputError
from edgeplan.measure import primitive_campaign as pc
from edgeplan.measure import primitive_export as pe
from edgeplan.measure import primitive_space as ps
from edgeplan.measure.device import describe_device
from edgeplan.measure.harness import Timing
from edgeplan.measure.primitive_data import load_primitive_csv
from edgeplan.measure.profile_jobs import estimate_duration_s
from edgeplan.measure.store import MeasurementRecord, Store
from edgeplan.primitives import ConvSpec, applicable, primitive_names

FAST = ps.TimingPlan(target_ms=0.5, min_repeats=2, max_repeats=3)
# Two tiny layers: a 3x3 stride-1 one (Winograd-3 and kn2 apply) and a 1x1 stride-2 one (neither does).
CONFIGS = (ConvSpec(4, 4, 6, 3, 1), ConvSpec(3, 5, 7, 1, 2))


def _expected_tasks(configs: tuple[ConvSpec, ...], names: tuple[str, ...]) -> int:
    prims = sum(sum(p.name in names for p in applicable(spec)) for spec in configs)
    return prims + 9 * len({(s.c, s.im) for s in configs})


def _invoke(*args: str, home: Path | None = None) -> click.testing.Result:
    """``edgeplan [--home HOME] profile primitives ARGS`` for ``profile``, else ``edgeplan primitives ARGS``."""
    command = ["profile", "primitives", *args[1:]] if args and args[0] == "profile" else ["primitives", *args]
    argv = [*(["--home", str(home)] if home else []), *command]
    return CliRunner().invoke(cli, argv, obj=Context(argv=tuple(argv)))


# ---------------------------------------------------------------------------------------------- configuration space


def test_config_space_crosses_f_and_s_drops_impossible_and_dedups() -> None:
    space = ps.config_space([(3, 8, 5), (4, 4, 2), (3, 8, 5)])
    # im = 5 admits f in {1, 3, 5} (x 3 strides); im = 2 only f = 1 (x 3 strides); the duplicate triplet adds nothing
    assert len(space) == 3 * 3 + 1 * 3
    assert all(spec.f <= spec.im and spec.padding is None for spec in space)
    assert {(s.f, s.s) for s in space if s.im == 2} == {(1, 1), (1, 2), (1, 4)}
    assert list(space) == sorted(space, key=lambda s: (s.c, s.k, s.im, s.f, s.s))
    full = ps.config_space([(64, 64, 56)])
    assert len(full) == len(ps.KERNEL_SIZES) * len(ps.STRIDES)


def test_extract_triplets_from_the_zoo_dedups() -> None:
    found = ps.extract_triplets(["torchvision:resnet18", "torchvision:resnet18"])
    assert (3, 64, 224) in found and (64, 64, 56) in found and (512, 512, 7) in found
    assert all(models == ("torchvision:resnet18",) for models in found.values())
    assert list(found) == sorted(found)
    shipped = ps.load_triplets()
    assert len(shipped) == len(set(shipped)) == 385 and set(found) <= set(shipped)


def test_selection_is_seeded_capped_and_a_sample() -> None:
    space = ps.config_space(ps.load_triplets())
    chosen = ps.select_configs(space, work_cap=1e7, seed=3, with_fft=False)
    assert chosen == ps.select_configs(space, work_cap=1e7, seed=3, with_fft=False)
    assert chosen != ps.select_configs(space, work_cap=1e7, seed=4, with_fft=False)
    assert all(ps.work_units(s, with_fft=False) <= 1e7 for s in chosen)
    assert len(set(chosen)) == len(chosen) == sum(ps.work_units(s, with_fft=False) <= 1e7 for s in space)
    assert set(ps.select_configs(space, work_cap=1e7, seed=3, max_configs=10, with_fft=False)) <= set(chosen)
    with pytest.raises(InvalidInputError, match="work cap"):
        ps.select_configs(space, work_cap=0, seed=0)


def test_a_designed_selection_spreads_the_sample_and_names_its_campaign() -> None:
    space = ps.config_space(ps.load_triplets())
    chosen = ps.select_configs(space, work_cap=3e8, seed=0, max_configs=40, design="kmeans")
    assert len(chosen) == 40 == len(set(chosen)) and all(ps.work_units(s) <= 3e8 for s in chosen)
    assert chosen == ps.select_configs(space, work_cap=3e8, seed=0, max_configs=40, design="kmeans")
    assert len({(s.c, s.k, s.im) for s in chosen}) == 40  # forty different layer sizes
    stride1 = sum(s.s == 1 for s in chosen)  # stride-1 shapes have more primitives (Winograd, 1x1 GEMMs)
    assert stride1 > sum(s.s == 1 for s in ps.select_configs(space, work_cap=3e8, seed=0, max_configs=40))
    plan = pc.primitive_campaign("dev", selection=pc.ConfigSelection(max_configs=40, design="kmeans"))
    assert plan.name == "primitives|zoo-cap3e+08-n40-kmeans-seed0|torch|1t|dev"
    assert plan.params["space"]["design"] == "kmeans" and set(plan.configs) == set(chosen)
    assert "design" not in pc.primitive_campaign("dev", selection=pc.ConfigSelection(max_configs=40)).params["space"]
    with pytest.raises(InvalidInputError, match="unknown sample design"):
        ps.select_configs(space, work_cap=3e8, seed=0, max_configs=40, design="latin")


def test_main_campaign_identity_is_frozen() -> None:
    # The reference campaign is resumed and exported by name: its name, parameters (primitives and timing
    # included) and measurement order must not change, or `profile` refuses to resume the Store's campaign.
    plan = pc.primitive_campaign("dev")
    assert plan.name == "primitives|zoo-cap3e+08-seed0|torch|1t|dev" and len(plan.configs) == 3872
    frozen = json.dumps([plan.params, [[s.c, s.k, s.im, s.f, s.s] for s in plan.configs]], sort_keys=True)
    assert hashlib.sha256(frozen.encode()).hexdigest() == (
        "f0f9e44b5880f1a70c191aa424e2b4240daaf6a534492d87b81bca6e2b2a8631")


def test_cuda_campaign_leaves_out_cpu_only_primitives_and_keeps_cpu_identity() -> None:
    cpu = pc.primitive_campaign("dev", selection=pc.ConfigSelection(configs=CONFIGS))
    gpu = pc.primitive_campaign("gpu", device="cuda", selection=pc.ConfigSelection(configs=CONFIGS))
    assert "device" not in cpu.params and gpu.params["device"] == "cuda"
    assert {"torch-onednn-chw", "torch-onednn-hwc"} <= set(cpu.primitives)
    assert set(cpu.primitives) - set(gpu.primitives) == {"torch-onednn-chw", "torch-onednn-hwc"}
    assert "torch-native-chw" in gpu.primitives and "winograd-2x2-3x3" in gpu.primitives
    with pytest.raises(InvalidInputError, match="torch-onednn-chw do not run on device 'cuda:0'"):
        pc.primitive_campaign("gpu", device="cuda:0", primitives=["torch-onednn-chw", "mec-col"],
                              selection=pc.ConfigSelection(configs=CONFIGS))
    with pytest.raises(InvalidInputError, match="unknown device 'tpu'"):
        pc.primitive_campaign("gpu", device="tpu", selection=pc.ConfigSelection(configs=CONFIGS))
    from edgeplan.measure.device import is_cuda_device

    assert [is_cuda_device(d) for d in ("cuda", "cuda:1", "cpu", "cuda:", "cuda:x", "cudax")] == [
        True, True, False, False, False, False]


def test_profile_on_cuda_without_cuda_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = _invoke("profile", "--torch-device", "cuda", "--config", "4,4,6,3,1", home=tmp_path)
    assert result.exit_code != 0 and "CUDA is not available" in str(result.exception or result.output)
    assert not (tmp_path / "store.sqlite").exists()


@pytest.mark.skipif("not __import__('torch').cuda.is_available()")
def test_tiny_campaign_on_cuda(tmp_path: Path) -> None:
    device = describe_device("torch", 1, torch_device="cuda")
    plan = pc.primitive_campaign(device.key, timing=FAST, device="cuda", selection=pc.ConfigSelection(configs=CONFIGS))
    with Store.open(tmp_path / "s.sqlite") as store:
        report = pc.profile_primitives(store, plan, device)
        assert not report.failed and report.remaining == 0
        rows = store.measurements(campaign=plan.name)
        assert len(rows) == _expected_tasks(CONFIGS, plan.primitives)
        assert all(r.latency_ms > 0 and r.device_key == device.key for r in rows) and device.accelerator


def test_cap_coverage_counts_the_triplets_kept_per_f_and_s() -> None:
    # (3, 8, 5): work c k f^2 out^2 = 600 (f 1, s 1), 5400 (f 3, s 1), 15000 (f 5, s 1); (4, 4, 2) admits f = 1 only
    rows = {(r.f, r.s): r for r in ps.cap_coverage([(3, 8, 5), (4, 4, 2)], work_cap=5400, with_fft=False)}
    assert list(rows) == [(f, s) for f in ps.KERNEL_SIZES for s in ps.STRIDES]
    assert (rows[1, 1].triplets, rows[1, 1].kept) == (2, 2)
    assert (rows[3, 1].triplets, rows[3, 1].kept, rows[3, 1].max_work) == (1, 1, 5400)
    assert (rows[5, 1].triplets, rows[5, 1].kept, rows[5, 1].max_work) == (1, 0, 15000)
    assert rows[11, 1].triplets == 0 and math.isnan(rows[11, 1].fraction_kept)
    assert rows[11, 1].to_dict()["fraction_kept"] is None and rows[5, 1].to_dict()["dropped"] == 1


def test_work_units_counts_the_fft_primitive_where_it_applies() -> None:
    spec = ConvSpec(1024, 256, 14, 1, 1)
    assert ps.work_units(spec, with_fft=False) == 1024 * 256 * 14 * 14
    assert ps.work_units(spec) == 6 * 256 * 1024 * 14 * 8
    assert ps.work_units(ConvSpec(1024, 256, 14, 1, 2)) == 1024 * 256 * 7 * 7  # fft needs s = 1


def test_timing_plan_repeats_are_clamped() -> None:
    plan = ps.TimingPlan(target_ms=20, min_repeats=3, max_repeats=50)
    assert plan.repeats_for(100.0) == 3 and plan.repeats_for(5.0) == 4 and plan.repeats_for(0.001) == 50
    with pytest.raises(InvalidInputError):
        ps.TimingPlan(min_repeats=5, max_repeats=2)


# ---------------------------------------------------------------------------------------------- measuring


def test_tiny_campaign_measures_everything_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = describe_device("torch", 1)
    plan = pc.primitive_campaign(device.key, timing=FAST, selection=pc.ConfigSelection(configs=CONFIGS))
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
        assert {r.kind for r in rows} == {ps.PRIMITIVE_KIND, ps.TRANSFORM_KIND}
        assert all(2 <= r.repeats <= 3 and r.extra["status"] == "measured" for r in rows)


def test_export_is_the_mulder_csv_in_ns(tmp_path: Path) -> None:
    device = describe_device("torch", 1)
    names = ("direct-sum2d", "winograd-2x2-3x3", "conv-1x1-gemm-ab-ik", "im2col-scan-ab-ki")
    plan = pc.primitive_campaign(device.key, primitives=list(reversed(names)), timing=FAST,
                                 selection=pc.ConfigSelection(configs=CONFIGS))
    with Store.open(tmp_path / "s.sqlite") as store:
        pc.profile_primitives(store, plan, device)
        campaign = pe.find_campaign(store)
        summary = pe.export_dataset(store, campaign, tmp_path / "out.csv", command="test")
        rows = {r.task_key: r for r in store.measurements(campaign=plan.name)}
    with (tmp_path / "out.csv").open() as handle:
        header, *lines = list(csv.reader(handle))
    registry_order = [n for n in primitive_names() if n in names]
    assert header == [*ps.SHAPE_COLUMNS, *ps.TRANSFORM_COLUMNS, *registry_order]
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


def _faked_time(monkeypatch: pytest.MonkeyPatch, over: set[str], failing: set[str]) -> None:
    """Make the primitives and transformations in ``over`` come out over cap, those in ``failing`` raise."""
    real_time = pc._time

    def fake(fn: functools.partial[object], plan: ps.TimingPlan) -> tuple[Timing, bool, int]:
        owner = getattr(fn.func, "__self__", None)
        name = owner.name if owner is not None else f"{fn.args[1]}-to-{fn.args[2]}"
        if name in failing:
            raise RuntimeError(f"{name} failed")
        if name in over:
            return Timing.from_samples([9.0], "time_cap"), True, 0
        return real_time(fn, plan)

    monkeypatch.setattr(pc, "_time", fake)


def test_over_cap_is_distinct_from_not_applicable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = describe_device("torch", 1)
    names = ["direct-sum2d", "im2col-scan-ab-ki", "conv-1x1-gemm-ab-ik"]  # conv-1x1 does not apply to f = 3
    plan = pc.primitive_campaign(device.key, primitives=names, timing=FAST,
                                 selection=pc.ConfigSelection(configs=CONFIGS[:1]))
    _faked_time(monkeypatch, over={"direct-sum2d", "chw-to-hwc"}, failing={"im2col-scan-ab-ki"})
    with Store.open(tmp_path / "s.sqlite") as store:
        report = pc.profile_primitives(store, plan, device)
        assert sorted(report.over_cap) == ["c4-im6|chw-to-hwc", "c4-k4-im6-f3-s1|direct-sum2d"]
        assert report.configs_done_now == 0 and report.configs_not_exportable == 0 and len(report.failed) == 1
        campaign = pe.find_campaign(store)
        left_out = pe.export_dataset(store, campaign, tmp_path / "a.csv", provenance=False)
        assert left_out.rows == 0 and left_out.incomplete == 1 and left_out.provenance_path is None
        assert left_out.not_measured_path is None and not (tmp_path / "a.not_measured.csv").exists()
        kept = pe.export_dataset(store, campaign, tmp_path / "b.csv", include_incomplete=True)
        assert (kept.rows, kept.over_cap_cells, kept.missing_cells, kept.not_exportable) == (1, 2, 1, 0)
    header, row = (line.split(",") for line in (tmp_path / "b.csv").read_text().splitlines())
    cells = dict(zip(header, row, strict=True))
    empty = {column for column, value in cells.items() if value == ""}
    assert empty == {"chw-to-hwc", "direct-sum2d", "im2col-scan-ab-ki", "conv-1x1-gemm-ab-ik"}  # the format's way
    assert kept.not_measured_path == tmp_path / "b.not_measured.csv"
    with kept.not_measured_path.open() as handle:
        listed = {(r["column"], r["reason"]) for r in csv.DictReader(handle)
                  if (r["c"], r["k"], r["im"], r["f"], r["s"]) == ("4", "4", "6", "3", "1")}
    # the sidecar tells over cap from missing; the not-applicable conv-1x1 cell is not in it
    assert listed == {("chw-to-hwc", "over_cap"), ("direct-sum2d", "over_cap"), ("im2col-scan-ab-ki", "missing")}
    provenance = json.loads((tmp_path / "b.provenance.json").read_text())
    assert provenance["not_measured"] == {**provenance["not_measured"], "csv": "b.not_measured.csv",
                                          "over_cap_cells": 2, "missing_cells": 1}
    assert "b.not_measured.csv" in provenance["cell"] and provenance["incomplete_included"] is True


def test_measured_but_not_exportable_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("profile", "--config", "4,4,6,3,1", "--config", "3,5,7,1,2",
            "--primitive", "direct-sum2d", "--primitive", "conv-1x1-gemm-ab-ik")
    _faked_time(monkeypatch, over={"conv-1x1-gemm-ab-ik"}, failing=set())  # applies to (3, 5, 7, 1, 2) only
    result = _invoke(*args, home=tmp_path)
    assert result.exit_code == 0, result.output
    assert "measured but not exportable: 1 configurations" in result.output and "exportable: 1" in result.output
    out = str(tmp_path / "d.csv")
    (tmp_path / "d.not_measured.csv").write_text("stale\n")
    report = json.loads(_invoke(*args, "--export", out, "--json", home=tmp_path).output)  # resumed: nothing left
    assert report["remaining"] == 0 and report["configs_not_exportable"] == 1 and report["configs_exportable"] == 1
    assert report["export"]["rows"] == 1 and report["export"]["not_exportable"] == 1
    assert report["export"]["not_measured"] is None
    assert not (tmp_path / "d.not_measured.csv").exists()  # a stale sidecar is not left beside a complete export
    result = _invoke(*args, "--export", out, home=tmp_path)
    assert "wrote 1 configurations to" in result.output


def test_remeasure_subset_is_a_separate_campaign(tmp_path: Path) -> None:
    device = describe_device("torch", 1)
    plan = pc.primitive_campaign(device.key, primitives=["im2col-scan-ab-ki"], timing=FAST,
                                 selection=pc.ConfigSelection(configs=CONFIGS))
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
        main = pe.find_campaign(store)
        assert main.name == plan.name  # the subset is not a main campaign
        again = pe.find_remeasure(store, main)
        floor = pe.noise_floor(pe.campaign_dataset(store, main), pe.campaign_dataset(store, again))
    assert (floor.shared_configs, floor.reference_configs, floor.again_configs) == (1, 2, 1)
    assert [c.cells for c in floor.primitives] == [1] and floor.median_primitive_mdrae >= 0
    assert floor.transform_tensors == 1 and len(floor.transforms) == 9


# ---------------------------------------------------------------------------------------------- above the cap


def test_above_cap_sample_is_stratified_seeded_and_above_the_cap() -> None:
    space = ps.config_space(ps.load_triplets())
    options = ps.AboveCapOptions(n=20, bins=4, seed=1, work_cap=1e8, max_work=1e10)
    chosen = ps.sample_above_cap(space, options)
    works = [ps.work_units(s) for s in chosen]
    assert len(chosen) == 20 and all(1e8 < w <= 1e10 for w in works)
    edges = [1e8 * 10 ** (0.5 * i) for i in range(5)]  # four bins of half a decade
    assert [sum(lo < w <= hi for w in works) for lo, hi in itertools.pairwise(edges)] == [5, 5, 5, 5]
    assert chosen == ps.sample_above_cap(space, options)
    assert chosen != ps.sample_above_cap(space, ps.AboveCapOptions(n=20, bins=4, seed=2, work_cap=1e8))
    thin = ps.sample_above_cap(ps.config_space([(1024, 1024, 14)]), ps.AboveCapOptions(n=50, bins=2))
    assert len(thin) == sum(3e8 < ps.work_units(s) <= 1e10 for s in ps.config_space([(1024, 1024, 14)]))
    with pytest.raises(InvalidInputError, match="max_work"):
        ps.AboveCapOptions(n=5, work_cap=1e10, max_work=1e9)


def test_above_cap_campaign_is_separate_and_resumes_its_layers(tmp_path: Path) -> None:
    calls: list[int] = []

    def layers() -> list[tuple[int, int, int, int, int]]:
        calls.append(1)
        return [(1024, 1024, 14, 3, 1), (64, 64, 56, 3, 1)]  # work 1.8e9 (above the cap) and 1.2e8 (below)

    options = ps.AboveCapOptions(n=6, bins=3)
    plan = pc.above_cap_campaign("dev", options, real_layers=layers, primitives=["im2col-scan-ab-ki"])
    main = pc.primitive_campaign("dev", primitives=["im2col-scan-ab-ki"])
    assert plan.name.startswith("primitives|abovecap-") and plan.name != main.name
    assert ConvSpec(1024, 1024, 14, 3, 1) in plan.configs and ConvSpec(64, 64, 56, 3, 1) not in plan.configs
    assert len(plan.configs) == 7 and not set(plan.configs) & set(main.configs)
    assert plan.params["above_cap"]["real_layers"] == [[1024, 1024, 14, 3, 1]] and plan.timing.call_cap_ms == 1000
    with Store.open(tmp_path / "s.sqlite") as store:
        store.campaign(plan.name, params=plan.params)
        store.campaign(main.name, params=main.params)
        again = pc.above_cap_campaign("dev", options, real_layers=layers, store=store,
                                      primitives=["im2col-scan-ab-ki"])
        assert again == plan and len(calls) == 1  # resumed from the Store, the layers not loaded again
        assert pe.find_campaign(store).name == main.name  # the above-cap campaign is not a main campaign


def _record(kind: str, subject: str, latency_ms: float, config: dict[str, int]) -> MeasurementRecord:
    values: dict[str, object] = {f.name: 0 for f in dataclasses.fields(MeasurementRecord)}
    values.update(kind=kind, subject=subject, latency_ms=latency_ms, extra={"config": config, "status": "measured"})
    return MeasurementRecord(**values)  # type: ignore[arg-type]


def test_estimated_duration_from_reference_rates() -> None:
    spec = ConvSpec(4, 4, 6, 3, 1)  # 4 * 4 * 9 * 36 = 5184 MACs; c im^2 = 144
    timing = ps.TimingPlan(target_ms=20, min_repeats=3, max_repeats=50, call_cap_ms=500)
    plan = pc.CampaignPlan("p", (spec,), ("direct-sum2d",), timing, {}, 1)
    config = {"c": 4, "k": 4, "im": 6, "f": 3, "s": 1}
    reference = [_record(ps.PRIMITIVE_KIND, "direct-sum2d", 1000.0, config)]  # same layer: first run 1 s, over cap
    assert estimate_duration_s(plan, reference) is None  # no rate for the transformations
    reference += [_record(ps.TRANSFORM_KIND, t, 100.0, config) for t in ps.TRANSFORM_COLUMNS]
    # 1 s (one run, over cap) + 9 x 100 ms x (1 first run + 3 timed runs)
    assert estimate_duration_s(plan, reference) == pytest.approx(1.0 + 9 * 0.4)


# ---------------------------------------------------------------------------------------------- noise floor

_NOISE_HEADER = "c,k,im,f,s,chw-to-hwc,hwc-to-hwc,chw-to-hcw,p1,p2"
# Shared layers (1,2,8,3,1) and (1,2,8,1,1), one (c, im) = (1, 8). p1: RAE 0.1 and 0.15 -> 0.125; p2: one paired
# cell, RAE 0.5, one unpaired; chw-to-hwc and chw-to-hcw: RAE 0.2; hwc-to-hwc (identity, left out of the median) 2.
_RUN_A = (_NOISE_HEADER, "1,2,8,3,1,100,10,50,100,1000", "1,2,8,1,1,100,10,50,200,300", "4,2,8,3,1,400,20,80,400,2000")
_RUN_B = (_NOISE_HEADER + ",p3", "1,2,8,1,1,120,30,60,230,,", "1,2,8,3,1,120,30,60,90,1500,", "9,9,9,1,1,1,1,1,1,,7")


def _csv(path: Path, lines: tuple[str, ...]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_noise_floor_of_two_runs_in_closed_form(tmp_path: Path) -> None:
    a, b = _csv(tmp_path / "a.csv", _RUN_A), _csv(tmp_path / "b.csv", _RUN_B)
    floor = pe.noise_floor(load_primitive_csv(a), load_primitive_csv(b))
    assert (floor.shared_configs, floor.reference_configs, floor.again_configs) == (2, 3, 3)
    prims = {c.column: c for c in floor.primitives}
    assert prims["p1"].mdrae == pytest.approx(0.125) and prims["p1"].cells == 2 and prims["p1"].unpaired == 0
    assert prims["p2"].mdrae == pytest.approx(0.5) and (prims["p2"].cells, prims["p2"].unpaired) == (1, 1)
    moves = {c.column: c.mdrae for c in floor.transforms}
    assert floor.transform_tensors == 1 and moves == pytest.approx({"chw-to-hwc": 0.2, "hwc-to-hwc": 2.0,
                                                                    "chw-to-hcw": 0.2})
    assert floor.median_primitive_mdrae == pytest.approx(0.3125)
    assert floor.median_transform_mdrae == pytest.approx(0.2)  # the identity transformation is left out
    assert floor.only_in_reference == () and floor.only_in_again == ("p3",)
    assert pe.noise_floor(load_primitive_csv(a), load_primitive_csv(a)).median_primitive_mdrae == 0


def test_noise_floor_refuses_disjoint_or_repeated_layers(tmp_path: Path) -> None:
    a = load_primitive_csv(_csv(tmp_path / "a.csv", _RUN_A[:2]))
    with pytest.raises(InvalidInputError, match="no configuration"):
        pe.noise_floor(a, load_primitive_csv(_csv(tmp_path / "b.csv", (_RUN_A[0], _RUN_A[3]))))
    with pytest.raises(InvalidInputError, match="twice"):
        pe.noise_floor(a, load_primitive_csv(_csv(tmp_path / "c.csv", (*_RUN_A[:2], _RUN_A[1]))))


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
    out = tmp_path / "d.csv"
    args = ("profile", "--config", "4,4,6,3,1", "--primitive", "direct-sum2d", "--primitive", "kn2row",
            "--export", str(out), "--json")
    result = _invoke(*args, home=tmp_path)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["configs_done_now"] == 1 and report["rows_now"] == 2 + 9 and report["remaining"] == 0
    assert report["export"]["rows"] == 1 and report["export"]["csv"] == str(out)
    assert out.read_text().splitlines()[0].endswith("hwc-to-hwc,direct-sum2d,kn2row")
    assert json.loads((tmp_path / "d.provenance.json").read_text())["campaign"]["params"]["threads"] == 1
    dry = json.loads(_invoke("profile", "--dry-run", "--json", home=tmp_path).output)
    assert dry["space_size"] == 5457 and 3000 <= dry["configs"] < dry["space_size"]


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("profile", "--primitive", "im2col-nope", "--dry-run"), InvalidInputError, "unknown primitive"),
        (("list", "--family", "nope"), InvalidInputError, "unknown primitive family"),
        (("profile", "--config", "4,4,6,3,1", "--max-configs", "5", "--dry-run"), InvalidInputError, "--config"),
        (("profile", "--dry-run", "--export", "x.csv"), InvalidInputError, "give one"),
        (("profile", "--budget-s", "0", "--dry-run"), InvalidInputError, "--budget-s"),
    ],
)
def test_bad_input_errors(tmp_path: Path, args: tuple[str, ...], error: type[Exception], message: str) -> None:
    result = _invoke(*args, home=tmp_path)
    assert isinstance(result.exception, error) and message in str(result.exception)


def test_bad_config(tmp_path: Path) -> None:
    result = _invoke("profile", "--config", "4,4,six,3,1", "--dry-run", home=tmp_path)
    assert result.exit_code == 2 and "C,K,IM,F,S" in result.output


def test_the_group_offers_the_cost_model_commands() -> None:
    result = _invoke("--help")
    assert all(name in result.output for name in ("list", "fit", "evaluate", "transfer"))
    assert "profile" not in result.output.split("Commands:")[1]


def test_network_campaign_measures_a_models_layers_with_its_threads(tmp_path: Path) -> None:
    result = _invoke("profile", "--network", "torchvision:resnet18", "--threads", "2", "--dry-run", "--json",
                     home=tmp_path)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["configs"] == 11 and "|torch|2t|" in out["campaign"]  # 20 conv layers, 11 distinct shapes
    assert out["params"]["threads"] == 2
    clash = _invoke("profile", "--network", "torchvision:resnet18", "--config", "64,64,56,3,1", "--dry-run",
                    home=tmp_path)
    assert clash.exit_code != 0 and "--network" in str(clash.exception)
