"""The CLI: JSON shapes, and one-line errors with a non-zero exit code on bad input (no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgeplan.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_inspect_json_has_nodes_and_totals(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", "paper:alexnet", "--json")
    assert code == 0
    data = json.loads(out)
    assert {"macs", "flops", "params"} <= set(data["totals"])
    assert data["totals"]["macs"] == sum(n["macs"] for n in data["nodes"])
    assert any(n["op"] == "lrn" for n in data["nodes"])


def test_inspect_table_and_zoo(capsys: pytest.CaptureFixture[str]) -> None:
    cell = "|nor_conv_3x3~0|+|none~0|skip_connect~1|+|avg_pool_3x3~0|none~1|nor_conv_1x1~2|"
    code, out, _ = run(capsys, "inspect", f"nb201:{cell}")
    assert code == 0 and "total" in out and "conv2d" in out
    code, out, _ = run(capsys, "zoo", "--json")
    families = {f["family"] for f in json.loads(out)}
    assert code == 0 and families >= {"torchvision", "timm", "paper", "nb201", "synthetic"}


def test_zoo_family_offers_only_the_families_it_lists(capsys: pytest.CaptureFixture[str]) -> None:
    """Every family `zoo --family` offers lists models that load; a family of seeds, cells or paths is not offered."""
    import click

    from edgeplan.cli.zoo_cmd import zoo
    from edgeplan.errors import InvalidInputError
    from edgeplan.frontends.zoo import FAMILIES, LISTED_FAMILIES, family_models, load_graph

    offered = next(o for o in zoo.params if o.name == "family").type
    assert isinstance(offered, click.Choice) and tuple(offered.choices) == LISTED_FAMILIES
    assert set(LISTED_FAMILIES) == {"torchvision", "timm", "paper"}
    for family in LISTED_FAMILIES:
        code, out, _ = run(capsys, "zoo", "--family", family, "--json")
        models = json.loads(out)["models"]
        assert code == 0 and models and all(m.startswith(f"{family}:") for m in models)
    assert load_graph(family_models("paper")[0]).nodes
    code, _, err = run(capsys, "zoo", "--family", "nb201")
    assert code != 0 and "'nb201' is not one of" in err
    for family in (f.prefix for f in FAMILIES if not f.listed):
        with pytest.raises(InvalidInputError, match="has no list of models"):
            family_models(family)


def test_measure_json_is_stored(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = "nb201:|skip_connect~0|+|none~0|none~1|+|none~0|none~1|none~2|"
    code, out, _ = run(capsys, "--home", str(tmp_path), "measure", spec, "--threads", "1", "--repeats", "5", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["latency_ms"] > 0 and data["p25_ms"] <= data["latency_ms"] <= data["p75_ms"]
    assert data["repeats"] == 5 and data["threads"] == 1
    from edgeplan.measure import Store

    with Store.open(tmp_path / "store.sqlite") as store:
        rows = store.measurements()
    assert len(rows) == 1 and rows[0].latency_ms == data["latency_ms"] and "measure" in rows[0].command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("inspect", "torchvision:resnet_nope"), "unknown torchvision model 'resnet_nope'"),
        (("inspect", "nosuchfamily:x"), "unknown model"),
        (("inspect", "nb201:|nor_conv_3x3~0|+|bogus~0|"), "NAS-Bench-201 cell"),
        (("inspect", "synthetic:abc"), "seed"),
        (("inspect", "torchvision:resnet18", "--input-shape", "1x3xfoo"), "input shape"),
        (("measure", "torchvision:resnet18", "--threads", "0"), "thread count must be a positive integer"),
        (("measure", "torchvision:resnet18", "--threads", "-2"), "thread count must be a positive integer"),
    ],
)
def test_bad_input_is_one_line_and_non_zero(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                            message: str) -> None:
    code, _, err = run(capsys, *args)
    assert code != 0
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_corrupt_and_truncated_onnx(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)
    code, _, err = run(capsys, "inspect", str(bad))
    assert code != 0 and "bad.onnx" in err and "Traceback" not in err
    code, _, err = run(capsys, "inspect", str(tmp_path / "missing.onnx"))
    assert code != 0 and "missing.onnx" in err


def test_unwritable_store_keeps_existing_data(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, _, err = run(capsys, "--home", str(blocker / "home"), "measure", "synthetic:1", "--repeats", "1")
    assert code != 0 and "cannot write the Store" in err and "EDGEPLAN_HOME" in err
    assert blocker.read_text() == "not a folder"


def test_debug_shows_traceback_and_help_is_cheap() -> None:
    res = subprocess.run([sys.executable, "-m", "edgeplan", "--debug", "inspect", "torchvision:nope"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "Traceback" in res.stderr
    code = "import sys; from edgeplan.cli.main import cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _leaves(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    import click

    assert isinstance(command, click.Command)
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        return [leaf for name in command.list_commands(ctx)
                for leaf in _leaves(command.get_command(ctx, name), (*path, name))]
    return [(path, command)]


def test_the_cli_is_small_and_every_command_shows_an_example() -> None:
    """At most 16 commands and 120 options (issue 66), each command's help with an example."""
    import click

    from edgeplan.cli.main import cli

    leaves = _leaves(cli)
    options = {path: [p for p in cmd.params if isinstance(p, click.Option)] for path, cmd in leaves}  # type: ignore[attr-defined]
    assert len(leaves) <= 16 and sum(map(len, options.values())) <= 120
    for path, command in leaves:
        assert "Example:" in (command.help or ""), path  # type: ignore[attr-defined]
    names = {" ".join(path) for path, _ in leaves}
    assert {"profile ops", "profile ranges", "profile primitives", "ops fit", "primitives transfer"} <= names
