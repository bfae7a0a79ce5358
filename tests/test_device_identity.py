"""Devices told apart: CPUs of one name but another family, model, ISA or cache get another fingerprint, old
descriptors still load with their keys, and a decision says when its costs are another device's."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edgeplan.measure import Timing
from edgeplan.measure.device import (
    DESCRIPTOR_VERSION,
    DeviceDescriptor,
    _cache_kib,
    _cpu_identity,
    _isa,
    describe_device,
    device_differences,
    same_device,
)
from edgeplan.measure.store import Store

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse4_2 avx avx2 fma f16c

processor\t: 1
vendor_id\t: AuthenticAMD
"""
ZEN5 = ZEN3.replace("cpu family\t: 25", "cpu family\t: 26").replace("model\t\t: 1", "model\t\t: 2").replace(
    "f16c", "f16c avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx_vnni")
ARM = "processor\t: 0\nFeatures\t: fp asimd asimddp sve i8mm\nCPU implementer\t: 0x41\nCPU architecture: 8\n" \
      "CPU part\t: 0xd0c\nCPU revision\t: 1\n"

#: A descriptor as edgeplan stored it before the CPU's identity was recorded (version 1), and its key then.
OLD = {"cpu_model": "AMD EPYC", "logical_cores": 2, "physical_cores": 2, "threads": 1, "runtime": "torch",
       "runtime_version": "2.14.1+cu130", "dtype": "float32", "accelerator": None, "hostname": "vm", "os": "Linux",
       "python": "3.11.7"}
OLD_KEY = "b8239d6bdea4347b"


def _described(text: str, **changes: object) -> DeviceDescriptor:
    vendor, family, model, stepping = _cpu_identity(text)
    base = DeviceDescriptor(**OLD, cpu_vendor=vendor, cpu_family=family, cpu_model_number=model,  # type: ignore[arg-type]
                            cpu_stepping=stepping, isa=_isa(text), l1d_kib=32, l2_kib=1024, l3_kib=32768,
                            descriptor_version=DESCRIPTOR_VERSION)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_cpuinfo_is_read_for_x86_and_arm() -> None:
    assert _cpu_identity(ZEN3) == ("AuthenticAMD", 25, 1, 1)
    assert _isa(ZEN3) == ("avx", "avx2", "f16c", "fma", "sse4_2")
    assert "avx512_vnni" in (_isa(ZEN5) or ())
    assert _cpu_identity(ARM) == ("0x41", 8, 0xD0C, 1) and _isa(ARM) == ("asimd", "asimddp", "i8mm", "sve")
    assert _cpu_identity("") == (None, None, None, None) and _isa("") is None


def test_cache_sizes_from_sysfs(tmp_path: Path) -> None:
    for i, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                             ("2", "Unified", "1024K"), ("3", "Unified", "32M")]):
        (tmp_path / f"index{i}").mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (tmp_path / f"index{i}" / name).write_text(value + "\n")
    assert _cache_kib(tmp_path) == (48, 1024, 32768)
    assert _cache_kib(tmp_path / "absent") == (None, None, None)


def test_fingerprint_tells_cpus_of_one_name_apart() -> None:
    zen3, zen5 = _described(ZEN3), _described(ZEN5)
    assert zen3.cpu_model == zen5.cpu_model == "AMD EPYC"
    assert zen3.fingerprint != zen5.fingerprint and zen3.key != zen5.key and not same_device(zen3, zen5)
    assert any(d.startswith("cpu_family: 25 vs 26") for d in device_differences(zen3, zen5))
    for change in ({"cpu_model_number": 7}, {"cpu_stepping": 2}, {"isa": ("avx2",)}, {"l3_kib": 16384},
                   {"l2_kib": 512}, {"runtime_version": "2.0"}, {"allocator": "glibc.malloc.trim_threshold=1"},
                   {"physical_cores": 1}):
        assert _described(ZEN3, **change).fingerprint != zen3.fingerprint, change
    # the measurement's settings and provenance are not the machine
    same = _described(ZEN3, threads=2, dtype="float16", hostname="other", os="other", python="3.12")
    assert same.fingerprint == zen3.fingerprint and same_device(same, zen3) and not device_differences(same, zen3)
    assert len(zen3.fingerprint) == 12


def test_old_descriptors_load_with_their_keys_and_match_nothing() -> None:
    old = DeviceDescriptor.from_dict({**OLD, "key": OLD_KEY})
    assert old.key == OLD_KEY and old.descriptor_version == 1 and not old.described and old.isa is None
    assert not same_device(old, old)  # no identity: it cannot be told apart from another CPU of that name
    assert "cannot be told from" in device_differences(old, _described(ZEN3))[0]
    new = _described(ZEN3)
    assert DeviceDescriptor.from_dict(json.loads(json.dumps({**new.to_dict(), "key": new.key}))) == new
    with pytest.raises(Exception, match="descriptor_version"):
        DeviceDescriptor.from_dict({**OLD, "descriptor_version": DESCRIPTOR_VERSION + 1})


def test_store_reads_rows_written_before_the_identity(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    timing = Timing.from_samples([1.0, 1.1, 0.9], "repeats")
    with Store.open(path) as store:
        store.add_measurement(timing, _described(ZEN3), model="m", task_key="new")
    with sqlite3.connect(path) as db:  # a row as an older edgeplan wrote it: the version-1 JSON, its key
        db.execute("INSERT INTO devices (key, descriptor) VALUES (?, ?)", (OLD_KEY, json.dumps(OLD)))
    with Store.open(path) as store:
        old = store.device(OLD_KEY)
        assert old is not None and old.key == OLD_KEY and not old.described
        assert store.device(_described(ZEN3).key) == _described(ZEN3)


def test_this_machine_is_described() -> None:
    pytest.importorskip("torch")
    here = describe_device("torch", 1)
    assert here.described and same_device(here, describe_device("torch", 2))
    assert here.key != describe_device("torch", 2).key  # the key still counts the threads


# ---------------------------------------------------------------------------------------- offloading's costs

MODEL = "nb201:|nor_conv_3x3~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|nor_conv_1x1~1|skip_connect~2|"


def test_offload_with_shipped_costs_of_another_device_says_so() -> None:
    from edgeplan.decisions.offload import OffloadSetup, plan_offload

    result = plan_offload(OffloadSetup("paper:alexnet", cloud_speedup=11.25, costs="shipped"))
    assert not result.costs_match_this_device and result.costs_from is not None
    assert result.costs_from.source == "shipped"
    assert result.warnings and "another device's" in result.warnings[0] and "--costs measure" in result.warnings[0]
    data = json.loads(json.dumps(result.to_dict()))
    assert data["costs_match_this_device"] is False and data["costs_from"]["device"]["fingerprint"]
    assert data["costs_from"]["this_device"] == describe_device("torch", 1).fingerprint


def test_offload_cli_prints_the_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from edgeplan.cli.main import main

    code = main(["--home", str(tmp_path), "offload", "paper:alexnet", "--costs", "shipped", "--cloud-speedup",
                 "11.25"])
    assert code == 0 and "warning: the costs are another device's" in capsys.readouterr().err


def test_offload_uses_matching_stored_costs(tmp_path: Path) -> None:
    from edgeplan.decisions.offload import OffloadSetup, plan_offload
    from edgeplan.measure.paths import default_store_path
    from edgeplan.measure.range_profile import SweepConfig, profile_ranges

    with Store.open(default_store_path(tmp_path)) as store:
        profile_ranges(store, MODEL, threads=1, config=SweepConfig(repeats=1, warmup=0))
    result = plan_offload(OffloadSetup(MODEL, cloud_speedup=4.0), home=tmp_path)  # costs="auto"
    assert result.costs_match_this_device and result.costs_from is not None
    assert result.costs_from.source == "store" and not result.warnings


def test_auto_measures_here_rather_than_take_another_devices_shipped_costs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import edgeplan.measure.range_files as range_files
    import edgeplan.measure.range_profile as range_profile
    from edgeplan.decisions.offload import OffloadSetup, offload_inputs
    from edgeplan.frontends.zoo import load_graph
    from edgeplan.ir.layer_chain import layer_chain
    from edgeplan.measure.range_profile import RangeTable

    names = tuple(layer.name for layer in layer_chain(load_graph(MODEL)).layers)
    n = len(names)
    other = _described(ZEN5, threads=1)  # another CPU of the same name
    table = RangeTable(MODEL, names, np.triu(np.ones((n, n))), np.zeros((n, n)), other, "shipped test file")
    monkeypatch.setattr(range_files, "shipped_range_table", lambda model, threads: table)
    setup = OffloadSetup(MODEL, cloud_speedup=4.0)
    _, _, shipped = offload_inputs(replace(setup, costs="shipped"), home=tmp_path)
    assert shipped.source == "shipped" and not shipped.matches_here and shipped.warning()
    sweep = range_profile.profile_ranges  # one quick sweep: the test is about where the costs come from
    monkeypatch.setattr(range_profile, "profile_ranges", lambda *a, **k: sweep(
        *a, **k, config=range_profile.SweepConfig(repeats=1, warmup=0)))
    costs, _, origin = offload_inputs(setup, home=tmp_path)
    assert origin.source == "measured here" and origin.matches_here and origin.warning() is None
    assert not np.allclose(costs.mobile_ms[np.triu_indices(n)], 1.0)



# ---------------------------------------------------------------------------------------- selection's costs


def test_select_trusts_tables_measured_here_and_warns_of_others(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from edgeplan.cli.main import main
    from edgeplan.decisions.select import SHIPPED, SHIPPED_TABLES, select

    here = describe_device("torch", 1)
    table = tmp_path / "mine.csv"
    shutil.copy(SHIPPED / SHIPPED_TABLES[0], table)
    (tmp_path / "mine.provenance.json").write_text(json.dumps({"devices": [{"key": here.key,
                                                                             "descriptor": here.to_dict()}]}))
    mine = select("torchvision:squeezenet1_0", tables=[table])
    assert mine.costs_match_this_device and not mine.warnings and mine.costs_from is not None
    assert mine.costs_from.source == "table"
    (tmp_path / "mine.provenance.json").write_text(json.dumps({"devices": [{"key": "x", "descriptor": OLD}]}))
    assert not select("torchvision:squeezenet1_0", tables=[table]).costs_match_this_device
    code = main(["--home", str(tmp_path), "select", "torchvision:squeezenet1_0", "--json"])
    captured = capsys.readouterr()
    assert code == 0 and "warning: the costs are another device's (the shipped tables" in captured.err
    assert json.loads(captured.out)["costs_match_this_device"] is False
