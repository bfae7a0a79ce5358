"""Bad input found by a CLI audit: each is refused with a clear message and a non-zero exit code, and stores nothing."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from repo_data import data_file

from edgeplan.cli.common import emit_json
from edgeplan.cli.main import main
from edgeplan.costmodels.opwise.profiles import shipped_devices
from edgeplan.decisions.calibrate import read_measurements
from edgeplan.errors import InvalidInputError, UnsupportedOperatorError
from edgeplan.measure.model_sets import MAX_RANGE, expand_models, read_models_file
from experiments import eshratifar2018, mulder2020, parthasarathy2022

PAPERS = {"eshratifar2018": eshratifar2018.main, "mulder2020": mulder2020.main,
          "parthasarathy2022": parthasarathy2022.main}

NB201 = "nb201:|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|avg_pool_3x3~0|none~1|nor_conv_1x1~2|"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    paper = next((a for a in args if a in PAPERS), None)  # "reproduce PAPER ...": python -m experiments.PAPER ...
    code = PAPERS[paper](list(args[args.index(paper) + 1:])) if paper else main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("offload", "paper:alexnet", "--costs", "shipped", "--cloud-speedup", "5", "--cloud-threads", "2"),
         "--cloud-threads has no effect"),
        (("offload", "paper:alexnet", "--costs", "shipped", "--mobile-power-w", "-1"), "power draw in watts"),
        (("offload", "torchvision:mobilenet_v2", "--costs", "shipped"), "with --costs measure"),
        (("reproduce", "eshratifar2018", "--cloud", "measured", "--cloud-speedup", "5"), "has no effect"),
        (("reproduce", "mulder2020", "--platforms", ",", "--data-dir", "."), "at least one table"),
        (("measure", "synthetic:0", "--max-time", "0"), "--max-time"),
        (("profile", "ops", "synthetic:0", "--scenario", "torch-fp32-1t", "--budget-s", "inf"),
         "--budget-s must be a positive number"),
        (("profile", "ops", "synthetic:0", "--scenario", "torch-fp32-1t", "--scenario", "torch-fp32-2t", "--export",
          "x.jsonl.gz"), "give one --scenario"),
        (("profile", "primitives", "--dry-run", "--budget-s", "inf"), "--budget-s must be a positive number"),
        (("profile", "ranges", "paper:alexnet", "--budget-s", "-1"), "positive number of seconds"),
        (("profile", "ranges", "paper:alexnet", "--budget-s", "nan"), "positive number of seconds"),
        (("inspect", "torchvision:resnet18", "--input-shape", "1x3x224"), "keep its rank and channels"),
        (("inspect", "torchvision:resnet18", "--input-shape", "1x1x224x224"), "keep its rank and channels"),
        (("predict", "synthetic:0-999999999"), "split it into smaller ranges"),
        (("select", "paper:alexnet", "--threads", "4"), "--costs predicted"),
    ],
)
def test_refused_without_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...],
                                   message: str) -> None:
    code, out, err = run(capsys, "--home", str(tmp_path), *args)
    assert code != 0
    assert message in err
    assert "Traceback" not in err and not out
    assert not (tmp_path / "store.sqlite").exists()


def test_more_threads_than_cores_is_measured_with_a_warning(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    code, out, err = run(capsys, "--home", str(tmp_path), "measure", "synthetic:0", "--threads", str(cores + 1),
                         "--repeats", "1", "--json")
    assert code == 0 and json.loads(out)["threads"] == cores + 1
    assert f"on the {cores} core(s)" in err and "contention" in err


def test_os_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "--home", str(tmp_path), "predict", "synthetic:0", "--device", "a" * 300)
    assert code == 1 and "File name too long" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    blocker = tmp_path / "file"
    blocker.write_text("keep")
    data = data_file("latency", "ort-int8-1t.jsonl.xz")
    code, _, err = run(capsys, "ops", "fit", "--data", str(data), "--train", "synthetic:0-20", "--method", "lasso",
                       "--out", str(blocker / "out"))
    assert code == 1 and "Not a directory" in err and "Traceback" not in err and blocker.read_text() == "keep"
    code, _, err = run(capsys, "ops", "fit", "--data", str(data), "--train", "synthetic:5000", "--method", "lasso",
                       "--out", str(tmp_path / "out"))
    assert code != 0 and "none of the training models (--train)" in err and not (tmp_path / "out").exists()


def test_measurements_csv_refuses_extra_cells_and_reads_a_bom(tmp_path: Path) -> None:
    comma = tmp_path / "comma.csv"
    comma.write_text(f"model,latency_ms\n{NB201},3,6\n")
    with pytest.raises(InvalidInputError, match="line 2: more cells than the header"):
        read_measurements(comma)
    trailing = tmp_path / "trailing.csv"
    trailing.write_text(f"model,latency_ms\n{NB201},3.6,\n")  # an empty cell past the header: nothing is lost
    assert read_measurements(trailing) == [(NB201, 3.6)]
    bom = tmp_path / "bom.csv"
    bom.write_text(f"\ufeffmodel,latency_ms\n{NB201},3.6\n", encoding="utf-8")
    assert read_measurements(bom) == [(NB201, 3.6)]


def test_calibrate_refuses_a_shipped_name_and_stores_nothing(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    assert {"torch-fp32-1t", "torch-fp32-2t", "ort-int8-1t"} <= shipped_devices()
    csv = tmp_path / "m.csv"
    csv.write_text(f"model,latency_ms\n{NB201},3.6\n")
    home = tmp_path / "home"
    code, _, err = run(capsys, "--home", str(home), "calibrate", "--measurements", str(csv), "--name",
                       "torch-fp32-1t")
    assert code != 0 and "is a shipped profile's" in err
    assert not (home / "devices").exists()


def test_parthasarathy_unknown_model_fails_after_its_report(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    code, out, err = run(capsys, "--home", str(tmp_path), "reproduce", "parthasarathy2022", "--models",
                         "torchvision:nosuchnet", "--nodes", "2", "--memories", "64", "--classes", "2", "--runs", "1",
                         "--fig10-trials", "1")
    assert code != 0
    assert "torchvision:nosuchnet" in out and "could not be loaded" in err and "Traceback" not in err


def test_json_has_no_nan_or_infinity(capsys: pytest.CaptureFixture[str]) -> None:
    emit_json({"ci_rel": math.inf, "spread": [1.0, math.nan], "n": 1, "nested": {"x": -math.inf}})
    text = capsys.readouterr().out
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text) == {"ci_rel": None, "spread": [1.0, None], "n": 1, "nested": {"x": None}}


def test_dry_run_creates_no_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "--home", str(tmp_path), "profile", "primitives", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["store"] == str(tmp_path / "store.sqlite")
    assert not (tmp_path / "store.sqlite").exists()


def test_huge_range_is_refused_before_expanding() -> None:
    assert len(expand_models([f"synthetic:0-{MAX_RANGE - 1}"])) == MAX_RANGE
    with pytest.raises(InvalidInputError, match="more than"):
        expand_models([f"synthetic:0-{MAX_RANGE}"])


def test_models_file_has_one_model_a_line_and_comments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    listed = tmp_path / "models.txt"
    listed.write_text("# training models\nsynthetic:0-1\n\nset:nb201-sample\n#synthetic:9\n")
    assert read_models_file(listed) == ["synthetic:0-1", "set:nb201-sample"]
    with pytest.raises(InvalidInputError, match="does not exist"):
        read_models_file(tmp_path / "missing.txt")
    code, _, err = run(capsys, "--home", str(tmp_path), "predict", "--models-file", str(tmp_path / "missing.txt"))
    assert code != 0 and f"--models-file {tmp_path / 'missing.txt'} does not exist" in err


def test_unsupported_operator_names_the_command_that_has_allow_opaque() -> None:
    message = str(UnsupportedOperatorError("GridSample", "gs"))
    assert "'GridSample'" in message and "edgeplan inspect --allow-opaque" in message
    assert "edgeplan predict --allow-opaque" in message


def test_select_run_of_an_onnx_file_says_what_to_do(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An ONNX file is selected from its graph, but --run swaps PyTorch modules: it used to end in a hint at a
    Python function (``use load_graph()``)."""
    import torch

    from edgeplan.frontends.onnx_export import cache_export

    path = tmp_path / "conv.onnx"
    cache_export(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()).eval(),
                 (torch.randn(1, 3, 32, 32),), path)
    code, out, err = run(capsys, "--home", str(tmp_path), "select", str(path), "--costs", "predicted", "--run")
    assert code != 0 and "select it without --run" in err and "Traceback" not in err and not out


def test_predict_refuses_an_unknown_operator_by_name_or_predicts_the_rest_with_allow_opaque(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import torch
    import torch.nn.functional as F

    from edgeplan.frontends.onnx_export import cache_export

    class Sampler(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(F.grid_sample(self.conv(x), torch.zeros(1, 4, 4, 2), align_corners=False))

    path = tmp_path / "sampler.onnx"
    cache_export(Sampler().eval(), (torch.randn(1, 3, 16, 16),), path)
    code, out, err = run(capsys, "predict", str(path))
    assert code != 0 and "'GridSample'" in err and "predict --allow-opaque" in err and "Traceback" not in err
    code, out, err = run(capsys, "predict", str(path), "--allow-opaque", "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert len(row["unpredicted_ops"]) == 1 and "opaque" in row["unpredicted_ops"][0]
    assert row["latency_ms"] > 0  # the convolution and the ReLU, the sampler left out
    code, out, err = run(capsys, "predict", str(path), "--allow-opaque")
    assert code == 0 and "a lower bound" in out
