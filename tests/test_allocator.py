"""The allocator settings a measurement runs under: read from the environment, part of the device's key when set,
never mixed within one campaign, and ``--keep-memory`` re-running a command under the tunables that keep memory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from edgeplan.cli.main import main
from edgeplan.errors import InvalidInputError
from edgeplan.measure import Store
from edgeplan.measure.allocator import KEEP_MEMORY, allocator_settings, keeps_memory, with_keep_memory
from edgeplan.measure.device import DeviceDescriptor

CELL = "nb201:|nor_conv_3x3~0|+|avg_pool_3x3~0|nor_conv_1x1~1|+|skip_connect~0|none~1|nor_conv_3x3~2|"
KEEP = "MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=268435456 MALLOC_TRIM_THRESHOLD_=4294967296"


def _descriptor(**changes: Any) -> DeviceDescriptor:
    fields = {"cpu_model": "Test CPU", "logical_cores": 2, "physical_cores": 1, "threads": 1, "runtime": "torch",
              "runtime_version": "0.0-test", "dtype": "float32", "accelerator": None, "hostname": "host",
              "os": "os", "python": "3.11"}
    return DeviceDescriptor(**{**fields, **changes})


def test_allocator_settings_name_the_tunables_and_a_preloaded_allocator_only() -> None:
    assert allocator_settings({}) is None
    assert allocator_settings({"PATH": "/bin", "MALLOC_CHECK": "3", "LD_PRELOAD": "/lib/libfoo.so"}) is None
    assert allocator_settings(KEEP_MEMORY) == KEEP  # sorted, whatever the order given
    env = {"GLIBC_TUNABLES": "glibc.rtld.nns=2:glibc.malloc.trim_threshold=1:glibc.malloc.arena_max=1",
           "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /lib/libfoo.so"}
    assert allocator_settings(env) == ("GLIBC_TUNABLES=glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=1 "
                                       "LD_PRELOAD=libjemalloc.so.2")


def test_keep_memory_environment() -> None:
    env = with_keep_memory({"PATH": "/bin", "MALLOC_TOP_PAD_": "1"})
    assert env["PATH"] == "/bin" and keeps_memory(env) and env["MALLOC_TOP_PAD_"] == str(2**28)
    assert not keeps_memory({}) and not keeps_memory({**KEEP_MEMORY, "MALLOC_TOP_PAD_": "1"})


def test_the_allocator_is_part_of_the_device_key_only_when_set() -> None:
    """glibc's defaults keep the key every earlier measurement was stored under (pinned), other settings are
    another device; a descriptor stored before the field existed reads back as the defaults."""
    plain = _descriptor()
    assert plain.key == "efe7a124d26b0bda" and plain.allocator is None
    keep = _descriptor(allocator=KEEP)
    assert keep.key != plain.key
    assert DeviceDescriptor.from_dict(keep.to_dict()) == keep
    old = {k: v for k, v in plain.to_dict().items() if k != "allocator"}
    assert DeviceDescriptor.from_dict({**old, "key": plain.key}) == plain
    with pytest.raises(InvalidInputError, match="allocator must be a string or null"):
        DeviceDescriptor.from_dict({**old, "allocator": 3})


def test_a_campaign_is_measured_all_under_one_allocator(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A campaign measured keeping memory records it (device and parameters); adding models to it under glibc's
    defaults is refused with both settings named, and nothing is stored."""
    home = str(tmp_path / "home")
    args = ["--home", home, "profile", "ops", CELL, "--scenario", "torch-fp32-1t", "--runs", "1"]
    for k, v in KEEP_MEMORY.items():
        monkeypatch.setenv(k, v)
    assert main([*args, "--keep-memory"]) == 0  # already under the tunables: measures in this process
    with Store.open(tmp_path / "home" / "store.sqlite") as store:
        (m,) = store.measurements()
        device = store.device(m.device_key)
        assert device is not None and device.allocator == KEEP
        assert store.find_campaign("ops/torch-fp32-1t").params["allocator"] == KEEP
    for k in KEEP_MEMORY:
        monkeypatch.delenv(k)
    capsys.readouterr()
    assert main(["--home", home, "profile", "ops", "synthetic:1", "--scenario", "torch-fp32-1t", "--runs", "1"]) == 2
    err = capsys.readouterr().err
    assert ("--runs 1 (3 plain runs per profiled run) --keep-memory (this process runs under glibc's defaults) "
            "and no --reference" in err)
    with Store.open(tmp_path / "home" / "store.sqlite") as store:
        assert [m.model for m in store.measurements()] == [CELL]


def test_keep_memory_reruns_the_command_under_the_tunables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the tunables set, ``--keep-memory`` runs the same command line again in this process's place
    (``python -m edgeplan ...``) with them added to its environment."""
    for k in KEEP_MEMORY:
        monkeypatch.delenv(k, raising=False)
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((path, argv, env))
        raise SystemExit(0)

    monkeypatch.setattr("os.execve", execve)
    args = ["--home", "/nonexistent", "measure", CELL, "--keep-memory", "--repeats", "1"]
    with pytest.raises(SystemExit):
        main(args)
    ((path, argv, env),) = calls
    assert path == sys.executable and argv == [sys.executable, "-m", "edgeplan", *args] and keeps_memory(env)
