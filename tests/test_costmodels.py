"""Primitive performance models (mulder2020): data format, split, masked loss, Lin/NN1/NN2, save/load, CLI."""

from __future__ import annotations

import json
import math
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgeplan.cli.common import Context
from edgeplan.cli.costmodel_cmd import evaluate, fit
from edgeplan.costmodels import (
    TRANSFORM_COLUMNS,
    LinearModel,
    NN1Model,
    NN2Model,
    evaluate_performance_model,
    fit_performance_model,
    load_performance_model,
    load_primitive_csv,
    mdrae,
    mdrae_per_column,
    save_performance_model,
    split_indices,
)
from edgeplan.costmodels.primitive_models import pow2_valuation
from edgeplan.errors import InvalidInputError, NotFittedError

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mulder2021"
FAST = {"max_epochs": 40, "patience": 20, "threads": 1}


def synthetic_rows(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Layer shapes and three 'primitives' with known closed forms; the third only for f = 3, s = 1."""
    rng = np.random.default_rng(seed)
    c = rng.choice([3, 16, 32, 64, 128, 256], n)
    k = rng.choice([16, 32, 64, 128], n)
    im = rng.choice([7, 14, 28, 56, 112], n)
    f = rng.choice([1, 3, 5], n)
    s = np.where(f == 1, 1, rng.choice([1, 2], n))
    x = np.column_stack([c, k, im, f, s]).astype(float)
    macs = c * k * (im / s) ** 2 * f * f
    y = np.column_stack([10 * macs + 1e4, 3 * macs ** 0.9 + 5e3, np.where((f == 3) & (s == 1), 2 * macs, np.nan)])
    return x, y


def write_csv(path: Path, x: np.ndarray, y: np.ndarray, names: list[str], transforms: bool = True) -> Path:
    header = ["c", "k", "im", "f", "s"] + (list(TRANSFORM_COLUMNS) if transforms else []) + names
    lines = [",".join(header)]
    for row, times in zip(x, y, strict=True):
        c, im = row[0], row[2]
        cells = [f"{int(v)}" for v in row]
        if transforms:
            cells += [f"{(1.0 + j % 3) * c * im * im + 50:g}" for j in range(9)]
        cells += ["" if math.isnan(t) else f"{t:g}" for t in times]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


# -- data format and split ---------------------------------------------------------------------------------------

def test_loader_handles_missing_and_empty_columns(tmp_path: Path) -> None:
    x, y = synthetic_rows(30)
    y = np.column_stack([y, np.full(len(y), np.nan)])  # a primitive column empty in every row
    path = write_csv(tmp_path / "t.csv", x, y, ["p0", "p1", "wino", "never"], transforms=False)
    data = load_primitive_csv(path)
    assert data.primitives == ("p0", "p1", "wino") and data.dropped == ("never",)
    assert data.transforms == () and data.transform_ns.shape == (30, 0)
    assert np.isnan(data.primitive_ns[:, 2]).sum() == np.isnan(y[:, 2]).sum()
    with_t = load_primitive_csv(write_csv(tmp_path / "u.csv", x, y[:, :3], ["p0", "p1", "wino"]))
    assert with_t.transforms == TRANSFORM_COLUMNS
    table = with_t.transform_table()
    assert len(table) == len(np.unique(x[:, [0, 2]], axis=0))


@pytest.mark.parametrize(("text", "message"), [
    ("c,k,im,f\n1,2,3,4\n", "no column(s) s"),
    ("c,k,im,f,s,p\n1,2,3,3,1,abc\n", "not a number"),
    ("c,k,im,f,s,p\n1,2,3,3,1,-5\n", "not positive"),
    ("c,k,im,f,s,p\n1,2,3,3\n", "cells"),
    ("", "empty"),
])
def test_loader_rejects_bad_input(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        load_primitive_csv(path)
    with pytest.raises(InvalidInputError, match="no such file"):
        load_primitive_csv(tmp_path / "missing.csv")


def test_split_is_deterministic_disjoint_and_80_10_10() -> None:
    x, _ = synthetic_rows(1000)
    x[:, 0] = np.arange(1000) + 1  # distinct rows
    a, b, c = split_indices(x, 3), split_indices(x, 3), split_indices(x, 4)
    assert all(np.array_equal(getattr(a, p), getattr(b, p)) for p in ("train", "val", "test"))
    assert not np.array_equal(a.test, c.test)
    assert (len(a.train), len(a.val), len(a.test)) == (800, 100, 100)
    assert len(np.unique(np.concatenate([a.train, a.val, a.test]))) == 1000
    # the split follows the layer, not its position in the file
    perm = np.random.default_rng(0).permutation(1000)
    shuffled = split_indices(x[perm], 3)
    assert {tuple(r) for r in x[perm][shuffled.test]} == {tuple(r) for r in x[a.test]}


# -- metric and masked loss -----------------------------------------------------------------------------------------

def test_mdrae() -> None:
    assert mdrae([100, 200, 400], [110, 180, 400]) == pytest.approx(0.1)
    assert mdrae([100, np.nan, 100], [101, 5, 103]) == pytest.approx(0.02)  # undefined truth is not scored
    assert mdrae([100, 100, 100], [np.nan, np.nan, 100]) == math.inf  # a missing prediction is an error
    assert math.isnan(mdrae([np.nan], [1.0]))
    per = mdrae_per_column(np.array([[1.0, 2.0], [2.0, np.nan]]), np.array([[1.5, 2.0], [2.0, 9.0]]), ["a", "b"])
    assert per == {"a": pytest.approx(0.25), "b": 0.0}


def test_masked_loss_ignores_undefined_outputs_and_their_gradients() -> None:
    torch = pytest.importorskip("torch")
    from edgeplan.costmodels._mlp import masked_mse_per_net

    pred = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    target = torch.tensor([[1.5, float("nan"), 3.0], [4.0, float("nan"), float("nan")]])
    mask = ~torch.isnan(target)
    loss = masked_mse_per_net(pred, target, mask, 1)
    assert loss.item() == pytest.approx(0.25 / 3)  # three defined cells, one error of 0.5
    loss.sum().backward()
    assert pred.grad is not None and torch.isfinite(pred.grad).all()
    assert (pred.grad[~mask] == 0).all() and pred.grad[0, 0] != 0
    per_net = masked_mse_per_net(pred.detach(), target, mask, 3)  # three one-output nets
    assert per_net.tolist() == pytest.approx([0.125, 0.0, 0.0])


# -- estimators -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [LinearModel, NN1Model, NN2Model])
def test_models_learn_better_than_a_constant(cls: type) -> None:
    x, y = synthetic_rows(600, seed=1)
    xt, yt = synthetic_rows(200, seed=2)
    params = {"log_inputs": True} if cls is LinearModel else {**FAST, "max_epochs": 150, "log_inputs": True,
                                                                "hidden": (32, 32)}
    model = cls(**params).fit(x, y, output_names=["a", "b", "w"])
    pred = model.predict(xt)
    assert np.isnan(pred[:, 2]).tolist() == np.isnan(yt[:, 2]).tolist()  # applicability learnt from the pattern
    constant = np.broadcast_to(np.nanmedian(y, axis=0), yt.shape)
    for j in range(3):
        assert mdrae(yt[:, j], pred[:, j]) < 0.5 * mdrae(yt[:, j], constant[:, j])


def test_estimator_contract() -> None:
    model = NN2Model(lr=0.01, threads=1)
    assert model.get_params()["lr"] == 0.01 and "hidden" in model.get_params()
    with pytest.raises(NotFittedError):
        model.predict([[1, 2, 3, 3, 1]])
    with pytest.raises(InvalidInputError, match="no parameter"):
        model.set_params(nope=1)
    x, y = synthetic_rows(50)
    fitted = LinearModel().fit(x, y)
    assert fitted.get_feature_names_out() == ("y0", "y1", "y2")
    with pytest.raises(InvalidInputError, match="5 columns"):
        fitted.predict([[1, 2, 3]])
    assert np.isnan(fitted.predict([[16, 16, 14, 9, 3]])).all()  # an (f, s) never seen applies to nothing
    assert pow2_valuation(np.array([[64.0, 3.0, 2048.0, 96.0]])).tolist() == [[6.0, 0.0, 10.0, 5.0]]


# -- save / load ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["lin", "nn1", "nn2"])
def test_save_load_round_trip_without_pickle(tmp_path: Path, kind: str) -> None:
    x, y = synthetic_rows(120)
    data = load_primitive_csv(write_csv(tmp_path / "d.csv", x, y, ["p0", "p1", "wino"]))
    params = {} if kind == "lin" else {**FAST, "max_epochs": 5, "pow2_features": True}
    model = fit_performance_model(data, kind, split_seed=1, params=params)
    folder = save_performance_model(model, tmp_path / "m")
    loaded = load_performance_model(folder)
    np.testing.assert_array_equal(loaded.predict_primitives(x), model.predict_primitives(x))
    np.testing.assert_array_equal(loaded.predict_transforms(x[:, [0, 2]]), model.predict_transforms(x[:, [0, 2]]))
    assert loaded.primitives.get_params() == model.primitives.get_params()
    for f in folder.iterdir():
        assert f.suffix in (".json", ".npz")
        if f.suffix == ".npz":
            with zipfile.ZipFile(f) as z:
                for member in z.namelist():
                    assert z.read(member)[:6] == b"\x93NUMPY"  # plain arrays
            with np.load(f, allow_pickle=False) as arrays:  # would raise on an object (pickled) array
                assert all(arrays[k].dtype != object for k in arrays.files)
        else:
            json.loads(f.read_text())


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no saved performance model"):
        load_performance_model(tmp_path / "nothing")
    (tmp_path / "model.json").write_text('{"format": "something else"}')
    with pytest.raises(InvalidInputError, match="not an edgeplan"):
        load_performance_model(tmp_path)


def test_evaluate_on_shared_columns_of_another_table(tmp_path: Path) -> None:
    x, y = synthetic_rows(200)
    a = load_primitive_csv(write_csv(tmp_path / "a.csv", x, y, ["p0", "p1", "wino"]))
    b = load_primitive_csv(write_csv(tmp_path / "b.csv", x, y[:, :2] * 1.1, ["p0", "p1"]))
    model = fit_performance_model(a, "lin")
    own = evaluate_performance_model(model, a, "test")
    other = evaluate_performance_model(model, b, "test")
    assert set(other.primitive_mdrae) == {"p0", "p1"} and other.only_in_model == ("wino",)
    assert own.rows == other.rows == 20 and set(own.primitive_mdrae) == {"p0", "p1", "wino"}
    assert not math.isnan(other.median_primitive_mdrae) and not math.isnan(own.median_transform_mdrae)


# -- CLI --------------------------------------------------------------------------------------------------------------

def invoke(command: object, args: list[str]) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(command, args, obj=Context())  # type: ignore[arg-type]
    return result.exit_code, result.output, result.exception


def test_cli_fit_and_evaluate(tmp_path: Path) -> None:
    x, y = synthetic_rows(150)
    csv = write_csv(tmp_path / "d.csv", x, y, ["p0", "p1", "wino"])
    out = tmp_path / "model"
    code, text, exc = invoke(fit, ["--data", str(csv), "--out", str(out), "--model", "nn2", "--threads", "1",
                                   "--max-epochs", "3", "--json"])
    assert code == 0, (text, exc)
    assert json.loads(text)["train_rows"] == 120 and (out / "primitives.npz").is_file()
    code, text, exc = invoke(evaluate, ["--model", str(out), "--data", str(csv), "--json"])
    assert code == 0, (text, exc)
    data = json.loads(text)
    assert set(data["primitive_mdrae"]) == {"p0", "p1", "wino"} and data["rows"] == 15
    code, text, _ = invoke(evaluate, ["--model", str(out), "--data", str(csv), "--split", "all"])
    assert code == 0 and "median over primitives" in text


@pytest.mark.parametrize("case", ["missing_file", "no_shape_columns", "no_model_dir"])
def test_cli_bad_input(tmp_path: Path, case: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    args = {
        "missing_file": (fit, ["--data", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "m")], "no such file"),
        "no_shape_columns": (fit, ["--data", str(bad), "--out", str(tmp_path / "m")], "no column(s) c, k, im"),
        "no_model_dir": (evaluate, ["--model", str(tmp_path / "absent"), "--data", str(bad)],
                         "no saved performance model"),
    }[case]
    code, _, exc = invoke(args[0], args[1])
    assert code != 0 and isinstance(exc, InvalidInputError) and args[2] in str(exc)


@pytest.mark.skipif(not (DATA / "intel.csv").is_file(), reason="mulder2021 data not present")
def test_cli_on_an_intel_subset(tmp_path: Path) -> None:
    lines = (DATA / "intel.csv").read_text().splitlines()
    subset = tmp_path / "intel_subset.csv"
    subset.write_text("\n".join(lines[:1] + lines[1::7]) + "\n")
    out = tmp_path / "lin"
    code, text, exc = invoke(fit, ["--data", str(subset), "--out", str(out), "--model", "lin", "--json"])
    assert code == 0, (text, exc)
    code, text, exc = invoke(evaluate, ["--model", str(out), "--data", str(DATA / "amd.csv"), "--json"])
    assert code == 0, (text, exc)
    result = json.loads(text)
    assert "winograd-2-3-vec-8" in result["only_in_model"] and result["median_primitive_mdrae"] > 0
