"""li2023 (Li et al., ICPE 2023) on this machine: operation-wise latency prediction, paper vs edgeplan.

Every figure is computed from per-op datasets (by default the repository's ``data/latency/{scenario}.jsonl.xz``, made
by ``edgeplan ops profile`` + ``edgeplan ops export``; not in the wheel); nothing is measured here.

- **§5.1** synthetic NAS space: train on ``synthetic:0-899``, test on ``synthetic:900-999``, all four methods;
  end-to-end MAPE and the MAPE of the op categories that dominate latency (paper Fig. 13).
- **§5.3** trained on the 900 synthetic networks, tested on the real-world zoo CNNs of the dataset (none of which
  is in training; paper Fig. 18a). When the dataset also holds networks of edgeplan's synthetic spaces
  (``synthetic-wide:SEED``, ``synthetic-aligned:SEED``, ``synthetic-heads:SEED``, ``synthetic-stages:SEED``,
  ``synthetic-modern:SEED``, ``synthetic-mixed:SEED``, ``synthetic-nf:SEED``,
  :mod:`edgeplan.frontends.synthetic`), §5.3 is also reported trained on the 900 plus all of those, on the 900 plus
  each space (with two or more), and on the first 30
  networks of each space alone: still synthetic networks only, none of the zoo's.
- **§5.5** training sizes 30, 100 and 900 synthetic networks (the first N seeds), tested on both (paper Fig. 21).
- **§5.6** an nn-Meter-like baseline on the same data: one random forest per kernel kind with nn-Meter's
  features (no group count, dense-convolution FLOPs) and its fixed hyperparameters, no overhead term (paper
  Fig. 24).

The noise floor printed beside the errors is the MAPE between two independent measurements of the same models
(the ``{scenario}.repeat.jsonl.xz`` dataset, ``edgeplan ops profile --repeat``): no predictor can be expected to
beat it on this machine. With zoo CNNs in the repeat it is given per group, and §5.3 prints the zoo's.
"""

from __future__ import annotations

import functools
import math
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np

from edgeplan.costmodels.opwise.calibrate import (
    DEDUCTIONS,
    PER_OP,
    CalibratedDevice,
    CalibrationSamples,
    calibrate,
    fold_constant_terms,
    source_terms,
)
from edgeplan.costmodels.opwise.estimator import OpLatencyEstimator
from edgeplan.costmodels.opwise.features import CONTEXT_FEATURES, NETWORK_AUTO, network_choice
from edgeplan.costmodels.opwise.model import LatencyModel
from edgeplan.costmodels.opwise.model_files import scenario_threads
from edgeplan.costmodels.opwise.op_correction import MeasuredOps, measured_ops
from edgeplan.costmodels.opwise.ops import (
    OpInput,
    Prediction,
    network_values,
    op_ms,
    record_latency,
    record_ops,
    with_context,
)
from edgeplan.costmodels.opwise.predictors import METHODS
from edgeplan.decisions.calibrate import model_terms, read_measurements
from edgeplan.errors import InvalidInputError
from edgeplan.frontends.synthetic import SPACES, family_of
from edgeplan.measure.metrics import mape
from edgeplan.measure.op_dataset import OpDataset, load_dataset

__all__ = [
    "INSIGHTS",
    "INSIGHT_SCENARIOS",
    "PAPER",
    "data_dir",
    "dataset_path",
    "FEWSHOT_POOLS",
    "fewshot_measured",
    "format_fewshot_measured",
    "format_floor",
    "measured_latencies",
    "measured_records",
    "group_floor",
    "format_insight",
    "main",
    "format_report",
    "noise_floor",
    "reproduce",
    "speedup_insight",
]

#: li2023's CPU figures (average over its six phones' CPU scenarios).
PAPER: dict[str, Any] = {
    "5.1": {"lasso": 11.2, "rf": 2.8, "gbdt": 2.4, "mlp": 2.8,
            "note": "Fig. 13, mean MAPE over 6 CPUs (RF, GBDT, MLP: 'below 2.8%'; GBDT 2.4%)"},
    "5.3": {"lasso": 5.4, "note": "Fig. 18a: Lasso 5.4% on 102 real-world NAs, 'similar to RF and GBDT'"},
    "5.5": {"gbdt@30": 8.1, "lasso@30 real": 6.5, "note": "§1/§5.5: GBDT 8.1% from 30 synthetic NAs; Lasso 6.5% "
            "on real-world NAs from 30"},
    "5.6": {"note": "Fig. 24: the paper's predictors beat nn-Meter's RF on synthetic and real-world NAs at every "
            "training size"},
}

_SIZES = (30, 100, 900)


def data_dir() -> Path:
    """The repository's ``data/`` folder (the datasets of the reproductions and benchmarks; not in the wheel): the one
    beside the ``pyproject.toml`` above this file, else ``data`` in the working directory."""
    here = Path(__file__).resolve()
    root = next((p for p in here.parents if (p / "pyproject.toml").is_file()), None)
    return root / "data" if root is not None else Path("data")


def dataset_path(scenario: str, repeat: bool = False) -> Path:
    """The dataset of ``scenario`` in the repository's ``data/latency`` (or its independent re-measurement)."""
    name = f"{scenario}.repeat.jsonl.xz" if repeat else f"{scenario}.jsonl.xz"
    return data_dir() / "latency" / name


def _seed(model: str) -> int | None:
    if model.startswith("synthetic:"):
        return int(model.split(":", 1)[1])
    return None


def _split(data: OpDataset) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(synthetic train 0-899, synthetic test 900-999, real-world zoo CNNs), each in seed / file order.

    Real-world means torchvision, timm and paper models; NAS-Bench-201 cells and the wide synthetic space's networks
    are neither (they are left out; :func:`_spaces` has the latter).
    """
    train, test, zoo = [], [], []
    for r in data.records:
        s = _seed(r["model"])
        if s is None:
            if r["model"].split(":", 1)[0] in REAL_WORLD:
                zoo.append(r)
        elif s < 900:
            train.append(r)
        else:
            test.append(r)
    train.sort(key=lambda r: _seed(r["model"]) or 0)
    return train, test, zoo


#: The zoo families of edgeplan's synthetic spaces (:mod:`edgeplan.frontends.synthetic`), in report order.
EDGEPLAN_SPACES: tuple[str, ...] = tuple(family_of(s) for s in SPACES if s != "li2023")

#: The zoo families of real-world CNNs (§5.3's test set, the ``zoo`` group of a noise floor).
REAL_WORLD: tuple[str, ...] = ("torchvision", "timm", "paper")


def _spaces(data: OpDataset) -> dict[str, list[dict[str, Any]]]:
    """The dataset's networks of each of edgeplan's synthetic spaces that it holds, each in seed order."""
    out = {}
    for family in EDGEPLAN_SPACES:
        rs = [r for r in data.records if r["model"].split(":", 1)[0] == family]
        if rs:
            out[family] = sorted(rs, key=lambda r: int(r["model"].split(":", 1)[1]))
    return out


def noise_floor(data: OpDataset, repeat: OpDataset | None, statistic: str = "min") -> dict[str, Any] | None:
    """MAPE between two independent end-to-end measurements of the models the two datasets share.

    For datasets measured beside a reference model, ``raw_mape`` is the same between the times as measured (before
    the conversion from ratios): how much the pairing removes.

    Parameters
    ----------
    data, repeat
        A dataset and its independent re-measurement (None: no floor).
    statistic
        Compare the ``min`` or ``median`` latencies.

    Returns
    -------
    dict or None
        ``models`` (how many both have), ``mape`` and, for paired datasets, ``raw_mape``; None without a repeat or
        a shared model. When the shared models are not all synthetic networks (zoo CNNs among them, or only
        them), ``groups`` holds the same per group: the zoo's floor is what §5.3's errors sit on, the synthetic
        one §5.1's.

    Raises
    ------
    InvalidInputError
        When the two datasets' times are at different reference scales (their ``reference`` headers differ: another
        reference model or latency, or one without a reference): ratios converted at different scales differ by
        the scales' ratio, which is no measurement noise.
    """
    if repeat is None:
        return None
    _check_same_scale(data, repeat)
    first = {r["model"]: r for r in data.records}
    shared = [(r, first[r["model"]]) for r in repeat.records if r["model"] in first]
    if not shared:
        return None
    out = _floor(shared, statistic)
    groups: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for a, b in shared:
        groups[_group(a["model"])].append((a, b))
    if set(groups) != {"synthetic"}:  # say which group(s) the floor is of, unless it is the synthetic one alone
        out["groups"] = {g: _floor(pairs, statistic) for g, pairs in sorted(groups.items())}
    return out


def _group(model: str) -> str:
    """The noise floor group of a model: ``zoo`` (real-world CNNs), ``synthetic`` (any synthetic space) or its
    family."""
    family = model.split(":", 1)[0]
    if family in REAL_WORLD:
        return "zoo"
    return "synthetic" if family == "synthetic" or family in EDGEPLAN_SPACES else family


def _floor(shared: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], statistic: str) -> dict[str, Any]:
    """MAPE (and before the pairing, ``raw_mape``) between the (repeat, first) records of ``shared``."""
    out: dict[str, Any] = {"models": len(shared), "mape": mape([record_latency(a, statistic) for a, _ in shared],
                                                               [record_latency(b, statistic) for _, b in shared])}
    key = "raw_latency_min_ms" if statistic == "min" else "raw_latency_ms"
    if all(key in a and key in b for a, b in shared):
        out["raw_mape"] = mape([a[key] for a, _ in shared], [b[key] for _, b in shared])
    return out


def _same_scale(data: OpDataset, repeat: OpDataset) -> bool:
    """Whether two datasets' times are at one reference scale: neither paired, or both converted from ratios to
    the same reference model at the same latency."""
    a, b = data.provenance.get("reference"), repeat.provenance.get("reference")
    if a is None or b is None:
        return a is None and b is None
    return a.get("model") == b.get("model") and all(math.isclose(float(a[k]), float(b[k]), rel_tol=1e-9)
                                                    for k in ("ms", "min_ms"))


def _check_same_scale(data: OpDataset, repeat: OpDataset) -> None:
    """Refuse two datasets whose times were converted from ratios at different reference scales."""
    if _same_scale(data, repeat):
        return
    a, b = data.provenance.get("reference"), repeat.provenance.get("reference")

    def scale(ref: Mapping[str, Any] | None) -> str:
        if ref is None:
            return "no reference (times as measured)"
        return (f"reference {ref.get('model')} at {float(ref['ms']):.6g} ms (fastest {float(ref['min_ms']):.6g} ms, "
                f"from campaign {ref.get('from_campaign', '?')})")

    raise InvalidInputError(
        f"the noise floor compares times at one reference scale, but {data.path or 'the dataset'} has "
        f"{scale(a)} and {repeat.path or 'its repeat'} has {scale(b)}: ratios converted at different scales are not "
        "comparable. Export both campaigns from the Store that holds the main campaign (`edgeplan ops export "
        "--scenario S` and `--scenario S --repeat TAG`), so that the repeat is converted at the main campaign's "
        "reference latency; both must be measured beside the same --reference"
    )


def format_floor(floor: Mapping[str, Any] | None) -> str:
    """One line for a :func:`noise_floor` result."""
    if not floor:
        return "not measured (no repeat)"
    if floor.get("groups"):
        return "; ".join(f"{g} {format_floor(f)}" for g, f in floor["groups"].items())
    raw = (f" (times as measured, before the reference pairing: {floor['raw_mape']:.2f}%)"
           if "raw_mape" in floor else "")
    return f"{floor['mape']:.2f}% over {floor['models']} models{raw}"


def group_floor(floor: Mapping[str, Any] | None, group: str) -> Mapping[str, Any] | None:
    """The floor of one group (``synthetic``, ``zoo``) of a :func:`noise_floor` result: None when the repeat holds
    none of that group (a floor without ``groups`` is the synthetic networks' alone)."""
    if not floor:
        return None
    if floor.get("groups"):
        return floor["groups"].get(group)
    return floor if group == "synthetic" else None


def _per_category(model: LatencyModel, records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """MAPE of each op category over the ops of ``records`` that have a prediction."""
    pred: dict[str, list[float]] = defaultdict(list)
    true: dict[str, list[float]] = defaultdict(list)
    for r in records:
        ops = record_ops(r, model.statistic)
        p = model.predict_ops(ops)
        for o, q in zip(ops, p.ops, strict=True):
            if q.ms is not None and o.measured_ms and o.measured_ms > 0:
                pred[o.category].append(q.ms)
                true[o.category].append(o.measured_ms)
    return {c: mape(pred[c], true[c]) for c in sorted(pred)}


@functools.cache
def _folded_work(spec: str, kernel_profile: str) -> tuple[list[OpInput], list[str]]:
    """The folded operators ``kernel_profile`` runs for the zoo model ``spec``, from its graph (a dataset records
    their time, not their shapes): :func:`~edgeplan.costmodels.opwise.graph_ops.folded_work_ops`."""
    from edgeplan.costmodels.opwise.graph_ops import folded_work_ops
    from edgeplan.errors import EdgeplanError
    from edgeplan.frontends.zoo import load_graph

    try:
        graph = load_graph(spec)
    except EdgeplanError as e:  # named with the unpredicted ops, not counted as 0 ms, and the report goes on
        return [], [f"folded work@{spec} (its graph did not import here: {e})"]
    return folded_work_ops(graph, kernel_profile)


def predict_with_folded_work(model: LatencyModel, record: Mapping[str, Any]) -> Prediction:
    """``model``'s prediction of a dataset record's model, with the operators eager PyTorch runs that the IR folds
    away: a record with folded work (``folded_work_ms``, NFNets' weight standardization, MobileOne's identities)
    adds them as :func:`~edgeplan.costmodels.opwise.graph_ops.graph_ops` does for ``edgeplan predict``, priced or
    named as unpredicted; the record's own ops only otherwise."""
    ops = record_ops(record, model.statistic)
    if "folded_ops" in record or ("folded_work_ms" not in record and "raw_folded_work_ms" not in record):
        return model.predict_ops(ops)  # no folded work, or its operators timed in the record (among ``ops``)
    from edgeplan.costmodels.opwise.graph_ops import with_skipped
    from edgeplan.measure.scenarios import SCENARIOS

    scenario = SCENARIOS.get(model.scenario)
    if scenario is None:  # no runtime to say what it folds: the record's own ops
        return model.predict_ops(ops)
    folded, skipped = _folded_work(str(record["model"]), scenario.kernel_profile)
    folded = with_context(folded, network_values(ops))  # the network's values are its kernels' (the record's ops)
    return with_skipped(model.predict_ops([*ops, *folded]), skipped)


def _evaluate(model: LatencyModel, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    preds = [predict_with_folded_work(model, r) for r in records]
    unpredicted = sorted({u.split("@")[0] + " (" + u.rsplit(" (", 1)[-1] for p in preds for u in p.unpredicted})
    truth = [record_latency(r, model.statistic) for r in records]
    return {"models": len(records), "mape": mape([p.latency_ms for p in preds], truth),
            "unpredicted": unpredicted}


def _nnmeter_features(nodes: Sequence[Mapping[str, Any]], kind: str) -> tuple[str, list[float]]:
    """nn-Meter's kernel features: HW, CIN, COUT, kernel, stride, and FLOPs/params of a *dense* convolution."""
    from edgeplan.costmodels.opwise.features import features

    lead = nodes[0]
    cat, x = features(nodes, kind)
    shape = (lead.get("input_shapes") or [[1, 1, 1, 1]])[0]
    out = (lead.get("output_shapes") or [[1, 1, 1, 1]])[0]
    hw = float(shape[2]) if len(shape) > 2 else 1.0
    cin = float(shape[1]) if len(shape) > 1 else 1.0
    cout = float(out[1]) if len(out) > 1 else 1.0
    attrs = lead.get("attrs", {})
    k = float((attrs.get("kernel") or [1])[0])
    s = float((attrs.get("stride") or [1])[0])
    if cat in ("conv", "gconv"):  # nn-Meter has no group count: a grouped conv looks dense
        ohw = float(out[2]) if len(out) > 2 else 1.0
        flops = 2 * ohw * ohw * cin * cout * k * k
        return "conv", [hw, cin, cout, k, s, flops, cin * cout * k * k]
    if cat == "dwconv":
        ohw = float(out[2]) if len(out) > 2 else 1.0
        return cat, [hw, cin, k, s, 2 * ohw * ohw * cin * k * k, cin * k * k]
    if cat == "fc":
        return cat, x
    if cat == "pool":
        return cat, [hw, cin, k, s]
    return cat, [hw, cin, cout]


def _nnmeter(train: Sequence[Mapping[str, Any]], test: Sequence[Mapping[str, Any]], statistic: str,
             seed: int = 0) -> float:
    """End-to-end MAPE of the nn-Meter-like baseline (sum of per-kernel RF predictions, no overhead)."""
    from sklearn.ensemble import RandomForestRegressor

    def rows(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, list[float], float]]:
        out = []
        for i, r in enumerate(records):
            for op in r["ops"]:
                cat, x = _nnmeter_features([r["nodes"][n] for n in op["nodes"]], op["kind"])
                out.append((i, f"{op['kind']}|{cat}", x, op_ms(op, statistic)))
        return out

    by_key: dict[str, list[tuple[list[float], float]]] = defaultdict(list)
    for _, key, x, y in rows(train):
        by_key[key].append((x, y))
    forests = {}
    for key, data in by_key.items():
        xs, ys = np.array([d[0] for d in data]), np.array([d[1] for d in data])
        forests[key] = RandomForestRegressor(n_estimators=100, max_depth=70, min_samples_leaf=1, min_samples_split=2,
                                             random_state=seed, n_jobs=1).fit(xs, ys)
    totals = np.zeros(len(test))
    by_test: dict[str, list[tuple[int, list[float]]]] = defaultdict(list)
    for i, key, x, _ in rows(test):
        by_test[key].append((i, x))
    for key, items in by_test.items():  # one batched call per kernel kind; unknown kinds count 0, as nn-Meter's do
        if key in forests:
            np.add.at(totals, [i for i, _ in items], forests[key].predict(np.array([x for _, x in items])))
    return mape(totals, [record_latency(r, statistic) for r in test])


def reproduce(scenario: str = "torch-fp32-1t", methods: Sequence[str] = METHODS, data_file: Path | None = None,
              repeat_file: Path | None = None, progress: bool = False, statistic: str = "min",
              implementations: bool = True, context: bool = True, overhead: str = "linear",
              network: bool | str = False
              ) -> dict[str, Any]:
    """Compute §5.1, §5.3, §5.5 and §5.6 on a scenario's dataset.

    Parameters
    ----------
    scenario
        Whose shipped dataset to use (ignored when ``data_file`` is given).
    methods
        Predictor methods to compare.
    data_file, repeat_file
        Other dataset files (an export of your own campaign, and its re-measurement). Without ``repeat_file`` the
        scenario's shipped repeat gives the noise floor if its times are at ``data_file``'s reference scale.
    progress
        Progress bars while fitting.
    statistic
        Learn and evaluate the fastest runs (``min``) or the medians.
    implementations
        Separate predictors per implementation the runtime selects for a kernel kind by shape (eager PyTorch's
        oneDNN or native convolution at the scenario's threads: :meth:`LatencyModel.key_of`, li2023 §3.2's
        "kernels selected differently"); False keys every predictor by kernel kind alone. The nn-Meter-like
        baseline (§5.6) keeps its own keys either way.
    context
        Give the predictors each op's place in its network
        (:data:`~edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`: how often the same op and the same kind ran
        before it); False fits on the op's own features alone, as li2023 does. The nn-Meter-like baseline keeps its
        own features either way.
    overhead
        How the end-to-end overhead is learnt (:data:`~edgeplan.costmodels.opwise.model.OVERHEAD_FORMS`): ``linear``
        (default), ``stacked`` or li2023's ``mean``.
    network
        Give the predictors each op's network's footprint too: ``True`` or ``"distinct"``, ``"total"``, ``"peak"``
        (:data:`~edgeplan.costmodels.opwise.features.NETWORK_CHOICES`), or ``"auto"`` (``peak`` for the models fitted on
        enough networks: :data:`~edgeplan.costmodels.opwise.model.NETWORK_AUTO`); off by default, as in li2023.

    Returns
    -------
    dict
        Per section: paper figures and edgeplan's, and the noise floor.

    Raises
    ------
    InvalidInputError
        When the dataset is missing or has no synthetic test networks, or ``repeat_file``'s times are at another
        reference scale (:func:`noise_floor`).
    """
    path = data_file or dataset_path(scenario)
    if not path.is_file():
        raise InvalidInputError(f"no per-op dataset {path}; measure one with `edgeplan ops profile` and export it")
    data = load_dataset(path)
    rpath = repeat_file or dataset_path(data.scenario, repeat=True)
    repeat = load_dataset(rpath) if rpath.is_file() else None
    if repeat is not None and repeat_file is None and not _same_scale(data, repeat):
        repeat = None  # the shipped repeat of another campaign than ``data_file``'s: no floor (given, it is refused)
    train, test, zoo = _split(data)
    if not train or not test:
        raise InvalidInputError(f"{path} needs synthetic:0-899 for training and synthetic:900-999 for testing; it "
                                f"has {len(train)} and {len(test)}")
    out: dict[str, Any] = {"scenario": data.scenario, "dataset": str(path), "device": data.provenance.get("device"),
                           "train": len(train), "test": len(test), "zoo": len(zoo),
                           "noise_floor": noise_floor(data, repeat, statistic), "paper": PAPER,
                           "statistic": statistic}
    out["keys"] = "implementation" if implementations else "kind"
    out["context"] = context
    out["overhead"] = overhead
    out["network"] = network
    threads = scenario_threads(data.scenario) if implementations else None

    def fit(records: Sequence[Mapping[str, Any]], m: str) -> LatencyModel:
        return OpLatencyEstimator(method=m, scenario=data.scenario, statistic=statistic, threads=threads,
                                  context=context, overhead=overhead, network=network).fit(records,
                                                                                           progress=progress).model_

    sizes = sorted({min(n, len(train)) for n in _SIZES})
    full = sizes[-1]
    fitted = {(m, n): fit(train[:n], m) for m in methods for n in sizes}
    out["5.1"] = {m: {**_evaluate(fitted[(m, full)], test), "per_category": _per_category(fitted[(m, full)], test)}
                  for m in methods}
    out["5.3"] = {m: _evaluate(fitted[(m, full)], zoo) for m in methods} if zoo else {}
    out["5.5"] = {}
    for m, n in sorted(fitted):
        syn = _evaluate(fitted[(m, n)], test)
        real = _evaluate(fitted[(m, n)], zoo) if zoo else None
        out["5.5"][f"{m}@{n}"] = {"synthetic": syn["mape"], "zoo": real["mape"] if real else None,
                                  "unpredicted": sorted(set(syn["unpredicted"]) | set(real["unpredicted"] if real
                                                                                       else []))}
    out["5.6"] = {f"nnmeter@{n}": {"synthetic": _nnmeter(train[:n], test, statistic),
                                   "zoo": _nnmeter(train[:n], zoo, statistic) if zoo
                                   else None} for n in sizes}
    spaces = _spaces(data)
    wide = [r for rs in spaces.values() for r in rs]
    out["wide"] = len(wide)
    out["spaces"] = {family: len(rs) for family, rs in spaces.items()}
    out["5.3-wide"] = {}
    if wide and zoo:
        few = min([_SIZES[0], *(len(rs) for rs in spaces.values())])
        for m in methods:
            both = fit(train + wide, m)
            out["5.3-wide"][m] = {
                "zoo": _evaluate(both, zoo), "synthetic": _evaluate(both, test)["mape"],
                "by_space": ({family: _evaluate(fit(train + rs, m), zoo)["mape"] for family, rs in spaces.items()}
                             if len(spaces) > 1 else {}),
                "few": {"networks": few, "zoo": {family: _evaluate(fit(rs[:few], m), zoo)["mape"]
                                                 for family, rs in spaces.items()}}}
    return out


def _network_option(network: bool | str) -> str:
    """``--network-context``'s value for a run's ``network``; ``auto`` with the networks it takes its feature from."""
    if network == "auto":
        feature, fewest = NETWORK_AUTO
        return f"auto: {feature} for the models fitted on {fewest} networks or more"
    return str(network_choice(network))


def format_report(result: Mapping[str, Any]) -> list[str]:
    """The result as text tables."""
    lines = [f"li2023 on {result['scenario']}: trained on {result['train']} synthetic networks, tested on "
             f"{result['test']} synthetic and {result['zoo']} real-world zoo CNNs; latency = the {result['statistic']} "
             "over runs; predictors keyed by "
             + ("kernel kind and the implementation the runtime selects (--kind-keys: kind alone, as li2023)"
                if result.get("keys", "kind") == "implementation" else "kernel kind (li2023)")
             + ("; features: the op's own and its place in the network (--no-context: its own alone, as li2023)"
                if result.get("context") else "; features: the op's own (li2023)")
             + (f"; and its network's footprint (--network-context {_network_option(result['network'])})"
                if result.get("network") else "")
             + {"linear": "; overhead: linear in the op count, the measured ops' sum and the parameters they read "
                          "(--overhead mean: li2023's mean difference)",
                "stacked": "; overhead: linear in the op count and the ops' sum as the fitted predictors give it "
                           "(--overhead stacked)"}.get(result.get("overhead", "mean"),
                                                       "; overhead: the mean difference (li2023)")]
    dev = result.get("device") or {}
    if dev:
        lines.append(f"  measured on: {dev.get('cpu_model')} ({dev.get('threads')} thread(s), {dev.get('runtime')} "
                     f"{dev.get('runtime_version')})")
    floor = result.get("noise_floor")
    lines.append("  noise floor (end-to-end MAPE between two independent measurements): " + format_floor(floor))
    lines += ["", "§5.1 synthetic 900/100: end-to-end MAPE (paper Fig. 13, CPUs)",
              f"  {'method':<8} {'paper':>8} {'edgeplan':>9}   per category (edgeplan)"]
    for m, r in result["5.1"].items():
        paper = result["paper"]["5.1"].get(m)
        cats = ", ".join(f"{c} {v:.1f}%" for c, v in r["per_category"].items())
        missing = f"; unpredicted ops: {', '.join(r['unpredicted'])}" if r["unpredicted"] else ""
        lines.append(f"  {m:<8} {paper if paper is not None else '-':>7}% {r['mape']:>8.2f}%   {cats}{missing}")
    if result["5.3"]:
        zoo_floor = group_floor(floor, "zoo")
        lines += ["", f"§5.3 trained on synthetic, tested on {result['zoo']} zoo CNNs (paper Fig. 18a: Lasso 5.4%); "
                      f"noise floor of the zoo CNNs: {format_floor(zoo_floor) if zoo_floor else 'not measured'}"]
        for m, r in result["5.3"].items():
            extra = f"   unpredicted ops: {', '.join(r['unpredicted'])}" if r["unpredicted"] else ""
            lines.append(f"  {m:<8} {r['mape']:>8.2f}%{extra}")
    if result.get("5.3-wide"):
        first = next(iter(result["5.3-wide"].values()))
        few, spaces = first["few"]["networks"], result.get("spaces") or {"synthetic-wide": result["wide"]}
        short = {f: f.split("-", 1)[1] for f in spaces}
        held = ", ".join(f"{n} {f}" for f, n in spaces.items())
        lines += ["", f"§5.3 with edgeplan's synthetic spaces ({held} networks, not the paper's): zoo MAPE trained "
                      f"on the 900 and all of them{', on the 900 and each space' if first['by_space'] else ''}, and "
                      f"on the first {few} of each space alone; synthetic 900-999 MAPE of the first",
                  f"  {'method':<8} {'900 + all':>10}"
                  + "".join(f" {'900 + ' + short[f]:>14}" for f in first["by_space"])
                  + "".join(f" {f'{few} ' + short[f]:>11}" for f in first["few"]["zoo"]) + f" {'synthetic':>10}"]
        for m, r in result["5.3-wide"].items():
            extra = f"   unpredicted ops: {', '.join(r['zoo']['unpredicted'])}" if r["zoo"]["unpredicted"] else ""
            lines.append(f"  {m:<8} {r['zoo']['mape']:>9.2f}%"
                         + "".join(f" {v:>13.2f}%" for v in r["by_space"].values())
                         + "".join(f" {v:>10.2f}%" for v in r["few"]["zoo"].values())
                         + f" {r['synthetic']:>9.2f}%{extra}")
    lines += ["", "§5.5 training size (paper: GBDT 8.1% synthetic from 30; Lasso 6.5% real-world from 30)",
              f"  {'method@N':<12} {'synthetic':>10} {'zoo':>8}"]
    for k, r in result["5.5"].items():
        zoo = f"{r['zoo']:.2f}%" if r["zoo"] is not None else "-"
        missing = f"   unpredicted ops (left out of the sum): {', '.join(r['unpredicted'])}" if r.get("unpredicted") \
            else ""
        lines.append(f"  {k:<12} {r['synthetic']:>9.2f}% {zoo:>8}{missing}")
    lines += ["", "§5.6 nn-Meter-like RF baseline on the same data (paper Fig. 24: worse than li2023's at every size)"]
    for k, r in result["5.6"].items():
        zoo = f"{r['zoo']:.2f}%" if r["zoo"] is not None else "-"
        lines.append(f"  {k:<12} {r['synthetic']:>9.2f}% {zoo:>8}")
    return lines


# --- NAS-Bench-201 few-shot (HELP's devices) ----------------------------------------------------------------------

#: HELP's 10 reference architectures (indices into the 15,625), which describe a new device.
HELP_REFERENCE: tuple[int, ...] = (11982, 431, 55, 9, 14451, 8636, 9881, 13479, 6196, 1462)

#: Where the HELP latency file is expected (``../shared`` beside the repository).
HELP_DATA = Path("../shared/data/help-nasbench201/latency_ms.csv")


def read_help(path: Path = HELP_DATA) -> tuple[list[str], dict[str, np.ndarray[Any, Any]]]:
    """The cell strings (by index) and every device's latency column of the HELP NAS-Bench-201 file.

    Raises
    ------
    InvalidInputError
        When the file is missing or malformed.
    """
    import csv

    if not path.is_file():
        raise InvalidInputError(f"HELP NAS-Bench-201 latencies not found at {path}; pass --help-data PATH")
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        if header[:2] != ["index", "arch"]:
            raise InvalidInputError(f"{path}: expected columns index,arch,<device>..., got {header[:3]}")
        rows = list(reader)
    rows.sort(key=lambda r: int(r[0]))
    cells = [r[1] for r in rows]
    devices = {name: np.array([float(r[j]) for r in rows]) for j, name in enumerate(header) if j >= 2}
    return cells, devices


def nb201_terms(cells: Sequence[str], source: LatencyModel, progress: bool = False, official: bool = True,
                deduction: str = "as-source") -> list[dict[str, float]]:
    """The source model's prediction terms (:func:`edgeplan.costmodels.opwise.calibrate.source_terms`) of every cell.

    Graphs come from the direct NAS-Bench-201 builder (the official module, ``none`` edges as ``x * 0``, unless
    ``official`` is False), kernels from ``deduction``; predictions of repeated operations are computed once.
    """
    return nb201_terms_by(cells, source, (deduction,), progress, official)[deduction]


def nb201_terms_by(cells: Sequence[str], source: LatencyModel, deductions: Sequence[str], progress: bool = False,
                   official: bool = True) -> dict[str, list[dict[str, float]]]:
    """:func:`nb201_terms` under each of ``deductions``, every graph built once."""
    from edgeplan.costmodels.opwise.graph_ops import graph_ops
    from edgeplan.costmodels.opwise.ops import OpPrediction
    from edgeplan.costmodels.opwise.profiles import kernel_profile_of
    from edgeplan.frontends.direct import nb201_graph
    from edgeplan.measure.progress import counting_bar

    profile = kernel_profile_of(source)
    memo: dict[tuple[str, tuple[float, ...]], OpPrediction] = {}

    def seen(o: OpInput) -> tuple[float, ...]:  # what the source's prediction of an op depends on
        if source.uses_network:
            return tuple(o.vector)
        return (*o.x, *o.context[:len(CONTEXT_FEATURES)]) if source.uses_context else tuple(o.x)

    out: dict[str, list[dict[str, float]]] = {d: [] for d in deductions}
    with counting_bar(progress, "NAS-Bench-201 graphs", total=len(cells)) as advance:
        for cell in cells:
            graph = nb201_graph(cell, official=True) if official else nb201_graph(cell)
            for deduction in deductions:
                ops, skipped = graph_ops(graph, profile, deduction)
                if skipped:
                    raise InvalidInputError(f"{graph.name}: kernels without IR nodes: {', '.join(skipped)}")
                todo: list[OpInput] = [o for o in ops if (o.key, seen(o)) not in memo]
                if todo:
                    fresh = source.predict_ops(todo)
                    for o, p in zip(todo, fresh.ops, strict=True):
                        memo[(o.key, seen(o))] = p
                done = source.prediction([memo[(o.key, seen(o))] for o in ops])
                out[deduction].append(source_terms(done, ops))
            advance(1)
    return out


def _scores(pred: np.ndarray[Any, Any], true: np.ndarray[Any, Any]) -> dict[str, float]:
    from scipy.stats import spearmanr

    rel = np.abs(pred - true) / true
    return {"spearman": float(spearmanr(pred, true).statistic), "mape": float(100 * rel.mean()),
            "acc10": float(100 * np.mean(rel <= 0.10))}


def nb201_fewshot(source: LatencyModel, source_device: str, help_data: Path = HELP_DATA, seeds: int = 5,
                  samples: int = 10, progress: bool = False, official: bool = True,
                  deductions: Sequence[str] = ("as-source", "fold-zeros")) -> dict[str, Any]:
    """Calibrate every HELP device from 10 architectures and predict all 15,625 (item 7 of the issue).

    For each device: from HELP's 10 reference architectures, and from ``samples`` random ones for each of
    ``seeds`` seeds (mean over seeds); Spearman rank correlation, MAPE and the share within +-10%, over all
    architectures. No other data of the device is used. The networks are the official module's (``official``;
    False: ``none`` edges dropped), and each calibration chooses among ``deductions`` by its samples.
    """

    cells, devices = read_help(help_data)
    if "as-source" not in deductions:
        raise InvalidInputError("the nb201 few-shot needs the as-source deduction among its deductions")
    by_deduction = nb201_terms_by(cells, source, deductions, progress, official)
    terms = by_deduction["as-source"]
    if "fold-zeros" in by_deduction:  # what a device calibrated to fold-constants runs
        by_deduction["fold-constants"] = fold_constant_terms(terms, by_deduction["fold-zeros"])
    out: dict[str, Any] = {"source": source_device, "method": source.method, "architectures": len(cells),
                           "samples": samples, "seeds": seeds, "module": "official" if official else "lean",
                           "deductions": list(deductions), "devices": {}}
    draws = {"help": [list(HELP_REFERENCE)],
             "random": [[int(i) for i in np.random.default_rng(s).choice(len(cells), samples, replace=False)]
                        for s in range(seeds)]}
    for name, lat in devices.items():
        row: dict[str, Any] = {}
        for label, picks in draws.items():
            runs: list[dict[str, Any]] = []
            forms: set[str] = set()
            for idx in picks:
                alternatives = {d: [t[i] for i in idx] for d, t in by_deduction.items() if d in deductions
                                and d != "as-source"}
                dev = calibrate(name, CalibrationSamples([terms[i] for i in idx], [float(lat[i]) for i in idx],
                                                         alternatives=alternatives), source, source_device)
                pred = np.array([dev.predict_terms(t) for t in by_deduction[dev.deduction]])
                tests = dev.info.get("deduction_test", {})
                runs.append({**_scores(pred, lat), "form": dev.form, "deduction": dev.deduction,
                             "deduction_test": {d: dict(v) for d, v in tests.items()}})
                forms.add(dev.form if dev.deduction == "as-source" else f"{dev.form} {dev.deduction}")
            row[label] = {k: float(np.mean([r[k] for r in runs])) for k in ("spearman", "mape", "acc10")}
            row[label]["forms"] = sorted(forms)
            row[label]["draws"] = runs  # per draw: scores, the chosen form and deduction, the deduction test
        out["devices"][name] = row
    for label in ("help", "random"):
        out[f"mean_{label}"] = {k: float(np.mean([d[label][k] for d in out["devices"].values()]))
                                for k in ("spearman", "mape", "acc10")}
    return out


def format_nb201(result: Mapping[str, Any]) -> list[str]:
    """The few-shot result as a table (HELP reports mean Spearman 0.93 from 10 samples)."""
    lines = [f"NAS-Bench-201 few-shot: {result['samples']} measured architectures per device, all "
             f"{result['architectures']} predicted; source {result['source']} ({result['method']}); "
             f"{result.get('module', 'official')} module, deductions {', '.join(result.get('deductions', []))}",
             "  paper (HELP, NeurIPS 2021): mean Spearman 0.93 from 10 samples",
             f"  {'device':<16} {'help: rho':>9} {'MAPE':>7} {'±10%':>6}   {'random: rho':>11} {'MAPE':>7} {'±10%':>6}"
             "   forms"]
    for name, row in result["devices"].items():
        h, r = row["help"], row["random"]
        lines.append(f"  {name:<16} {h['spearman']:>9.3f} {h['mape']:>6.1f}% {h['acc10']:>5.0f}%   "
                     f"{r['spearman']:>11.3f} {r['mape']:>6.1f}% {r['acc10']:>5.0f}%   {','.join(h['forms'])}")
    h, r = result["mean_help"], result["mean_random"]
    lines.append(f"  {'mean':<16} {h['spearman']:>9.3f} {h['mape']:>6.1f}% {h['acc10']:>5.0f}%   "
                 f"{r['spearman']:>11.3f} {r['mape']:>6.1f}% {r['acc10']:>5.0f}%")
    worst = max(((name, seed, d) for name, row in result["devices"].items()
                 for seed, d in enumerate(row["random"].get("draws", []))), key=lambda t: t[2]["mape"], default=None)
    if worst is not None:
        name, seed, d = worst
        tested = "; ".join(f"{alt} leave-one-out gain {t['loo_gain']:+.2f} +- {t['standard_error']:.2f} points"
                           for alt, t in d["deduction_test"].items()) or "no other deduction tried"
        lines.append(f"  worst random draw: {name} seed {seed}, MAPE {d['mape']:.1f}%, Spearman {d['spearman']:.3f} "
                     f"({d['form']} under {d['deduction']}; {tested})")
    return lines


# --- few-shot calibration scored on a user's own measurements ---------------------------------------------------

#: The draws of :func:`fewshot_measured`: which measured models the calibration samples come from.
FEWSHOT_POOLS: tuple[str, ...] = ("any", "synthetic", "zoo")


def _fewshot_group(model: str, transformers: frozenset[str]) -> str:
    if _group(model) == "synthetic":
        return "synthetic"
    return "transformers" if model in transformers else "zoo"


def measured_latencies(path: str | Path, statistic: str = "median") -> list[tuple[str, float]]:
    """``(model, latency_ms)`` of a measurements CSV (``model,latency_ms``, checked as ``calibrate`` checks it) or of
    a dataset exported by ``edgeplan ops export`` (``.jsonl.gz`` or ``.jsonl.xz``: each model's end-to-end
    ``statistic`` over runs, paired with the reference model when the campaign had one)."""
    return measured_records(path, statistic)[0]


def measured_records(path: str | Path, statistic: str = "median",
                     ) -> tuple[list[tuple[str, float]], dict[str, dict[str, Any]] | None]:
    """:func:`measured_latencies` of ``path`` read once, and for a dataset its records by model (the operations
    measured too, which the ``per-op`` correction learns from); None for a CSV."""
    if str(path).endswith((".gz", ".xz")):
        records = load_dataset(path).records
        return ([(r["model"], float(record_latency(r, statistic))) for r in records],
                {r["model"]: r for r in records})
    return read_measurements(path), None


def fewshot_measured(source: LatencyModel, source_device: str, rows: Sequence[tuple[str, float]],
                     again: Sequence[tuple[str, float]] | None = None, samples: int = 10, seeds: int = 20,
                     progress: bool = False, records: Mapping[str, Mapping[str, Any]] | None = None,
                     statistic: str = "median") -> dict[str, Any]:
    """Few-shot calibration scored on measured models: ``calibrate`` from ``samples`` of ``rows``, the rest predicted.

    For each pool of :data:`FEWSHOT_POOLS` (the calibration samples drawn from all models, the synthetic networks
    only, or the real-world ones only) and each of ``seeds`` random draws, :func:`~edgeplan.costmodels.opwise.calibrate.
    calibrate` chooses its correction form and kernel deduction on the samples as ``edgeplan calibrate`` does, and
    every model not drawn is predicted; also the one-factor correction (``scale``) from the same samples, and the
    source as it is. Scores (MAPE, Spearman, share within +-10 %) per group of test models (``synthetic``, ``zoo``
    CNNs, ``transformers``) are means over the draws, with the MAPE's quartiles over draws.

    ``again`` (the same models measured once more, independently) gives the noise floor: the MAPE of one
    measurement against the other, per group.

    ``records`` (dataset records by model, e.g. of the ``ops export`` file the latencies come from) holds the
    operations measured on the device: the samples' operations are then given to ``calibrate`` (its ``per-op``
    form becomes a candidate), the ``per-op`` form is also scored on its own, and a model whose measured
    operations the source cannot predict is left out (named). Operation times in ``statistic``. A ``per-op``
    device predicts every model from its operations as measured (the kernels the runtime ran).
    """
    from edgeplan.measure.model_sets import expand_models
    from edgeplan.measure.progress import counting_bar

    if samples < 1:
        raise InvalidInputError(f"samples must be at least 1, got {samples}")
    measured = dict(rows)
    by_deduction, models, left = model_terms(list(measured), source, DEDUCTIONS, progress=progress)
    if "fold-zeros" in by_deduction:
        by_deduction["fold-constants"] = fold_constant_terms(by_deduction["as-source"], by_deduction["fold-zeros"])
    if len(models) <= samples:
        raise InvalidInputError(f"{len(models)} measured models can be predicted, and a calibration from {samples} "
                                "leaves none to test: measure more models or give fewer samples")
    per_op: list[MeasuredOps] | None = None
    if records is not None:
        per_op, models, by_deduction = _with_measured_ops(records, source, models, by_deduction, left, statistic)
        if len(models) <= samples:
            raise InvalidInputError(f"{len(models)} models have measured operations the source can predict, and a "
                                    f"calibration from {samples} leaves none to test: measure more models or give "
                                    "fewer samples")
    terms = by_deduction["as-source"]
    lat = np.array([measured[m] for m in models])
    transformers = frozenset(expand_models(["set:timm-transformers"]))
    groups = np.array([_fewshot_group(m, transformers) for m in models])
    present = [g for g in ("synthetic", "zoo", "transformers") if np.any(groups == g)]

    def scored(pred: np.ndarray[Any, Any], test: np.ndarray[Any, Any]) -> dict[str, dict[str, float]]:
        out = {"all": _scores(pred[test], lat[test])}
        for g in present:
            sel = test & (groups == g)
            if sel.sum() >= 3:
                out[g] = _scores(pred[sel], lat[sel])
        return out

    everything = np.ones(len(models), dtype=bool)
    direct = np.array([t["total"] for t in terms])
    result: dict[str, Any] = {"source": source_device, "method": source.method, "samples": samples, "seeds": seeds,
                              "models": len(models), "groups": {g: int(np.sum(groups == g)) for g in present},
                              "left_out": left, "direct": scored(direct, everything), "pools": {}}
    with counting_bar(progress, "calibrations", total=len(FEWSHOT_POOLS) * seeds) as advance:
        for pool in FEWSHOT_POOLS:
            candidates = np.flatnonzero(everything if pool == "any" else
                                        (groups == "synthetic") if pool == "synthetic" else (groups != "synthetic"))
            if len(candidates) < samples + 1:
                advance(seeds)
                continue
            runs: dict[str, list[dict[str, dict[str, float]]]] = {"calibrated": [], "scale": [],
                                                                  **({PER_OP: []} if per_op is not None else {})}
            forms: dict[str, int] = defaultdict(int)
            for seed in range(seeds):
                idx = np.random.default_rng(seed).choice(candidates, samples, replace=False)
                test = everything.copy()
                test[idx] = False
                alternatives = {d: [t[i] for i in idx] for d, t in by_deduction.items()
                                if d in DEDUCTIONS and d != "as-source"}
                sampled_ops = None if per_op is None else [per_op[i] for i in idx]
                drawn = CalibrationSamples([terms[i] for i in idx], lat[idx].tolist(), models=[models[i] for i in idx],
                                           alternatives=alternatives, measured_ops=sampled_ops)
                dev = calibrate("fewshot", drawn, source, source_device)
                runs["calibrated"].append(scored(_fewshot_predictions(dev, by_deduction[dev.deduction], per_op), test))
                if per_op is not None:
                    own = dev if dev.form == PER_OP else calibrate(  # the same fit when chosen
                        "fewshot", CalibrationSamples([terms[i] for i in idx], lat[idx].tolist(),
                                                      measured_ops=sampled_ops), source, source_device, forms=(PER_OP,))
                    runs[PER_OP].append(scored(_fewshot_predictions(own, terms, per_op), test))
                forms[dev.form if dev.deduction == "as-source" else f"{dev.form} {dev.deduction}"] += 1
                one = calibrate("fewshot", CalibrationSamples([terms[i] for i in idx], lat[idx].tolist()), source,
                                source_device, forms=("scale",))
                runs["scale"].append(scored(np.array([one.predict_terms(t) for t in terms]), test))
                advance(1)
            summary: dict[str, Any] = {}
            for label, draws in runs.items():
                summary[label] = {}
                for g in draws[0]:
                    mapes = [d[g]["mape"] for d in draws]
                    summary[label][g] = {**{k: float(np.mean([d[g][k] for d in draws])) for k in draws[0][g]},
                                         "mape_quartiles": list(_quartiles(mapes))}
            summary["forms"] = dict(sorted(forms.items(), key=lambda kv: -kv[1]))
            result["pools"][pool] = summary
    if again is not None:
        second = dict(again)
        shared = [i for i, m in enumerate(models) if m in second]
        if shared:
            idx = np.array(shared)
            other = np.array([second[models[i]] for i in shared])
            floor = {"all": float(100 * np.mean(np.abs(other - lat[idx]) / lat[idx]))}
            for g in present:
                sel = groups[idx] == g
                if sel.any():
                    floor[g] = float(100 * np.mean(np.abs(other[sel] - lat[idx][sel]) / lat[idx][sel]))
            result["floor"] = floor
            result["floor_models"] = len(shared)
    return result


def _with_measured_ops(records: Mapping[str, Mapping[str, Any]], source: LatencyModel, models: Sequence[str],
                       by_deduction: Mapping[str, Sequence[dict[str, float]]], left: dict[str, str],
                       statistic: str) -> tuple[list[MeasuredOps], list[str], dict[str, list[dict[str, float]]]]:
    """The measured operations of ``models`` with the source's predictions; a model without a record, or with an
    operation the source cannot predict, moves to ``left`` (and out of the models and their terms)."""
    from edgeplan.errors import EdgeplanError

    per_op, kept = [], []
    for i, m in enumerate(models):
        record = records.get(m)
        if record is None:
            left[m] = "no measured operations in the dataset"
            continue
        try:
            per_op.append(measured_ops(record, source, statistic))
        except EdgeplanError as e:
            left[m] = str(e)
            continue
        kept.append(i)
    return (per_op, [models[i] for i in kept],
            {d: [t[i] for i in kept] for d, t in by_deduction.items()})


def _fewshot_predictions(dev: CalibratedDevice, terms: Sequence[Mapping[str, float]],
                         per_op: Sequence[MeasuredOps] | None) -> np.ndarray[Any, Any]:
    """Every model's prediction by a calibrated device: from its terms, or from its measured operations' source
    predictions for the ``per-op`` form."""
    if dev.op_correction is not None and per_op is not None:
        return np.array([p.latency_ms for p in dev.predict_batch([list(m.ops) for m in per_op])])
    return np.array([dev.predict_terms(t) for t in terms])


def format_fewshot_measured(result: Mapping[str, Any]) -> list[str]:
    """:func:`fewshot_measured` as a table: MAPE (Spearman) per group of test models, beside the noise floor."""
    groups = ["all", *result["groups"]]
    counts = ", ".join(f"{n} {g}" for g, n in result["groups"].items())
    lines = [f"few-shot calibration of {result['source']} ({result['method']}) from {result['samples']} measured "
             f"models, the rest predicted; {result['models']} models ({counts}); means over {result['seeds']} "
             "random draws (MAPE quartiles over draws)",
             "  " + f"{'samples from':<13} {'correction':<11}" + "".join(f" {g:>26}" for g in groups)]

    def cells(scores: Mapping[str, Mapping[str, Any]]) -> str:
        out = ""
        for g in groups:
            s = scores.get(g)
            if s is None:
                out += f" {'-':>26}"
                continue
            q = s.get("mape_quartiles")
            spread = f" [{q[0]:.1f},{q[2]:.1f}]" if q else ""
            out += f" {s['mape']:>6.1f}%{spread:<12} rho {s['spearman']:.2f}"
        return out

    lines.append("  " + f"{'-':<13} {'none':<11}" + cells(result["direct"]))
    for pool, summary in result["pools"].items():
        for label in ("calibrated", PER_OP, "scale"):
            if label in summary:
                lines.append("  " + f"{pool:<13} {label:<11}" + cells(summary[label]))
    if "floor" in result:
        lines.append("  " + f"{'noise floor':<25}" + "".join(
            f" {result['floor'][g]:>6.1f}%{'':<19}" if g in result["floor"] else f" {'-':>26}" for g in groups)
            + f"   (the same {result['floor_models']} models measured again)")
    for pool, summary in result["pools"].items():
        lines.append(f"  forms chosen ({pool}): " + ", ".join(f"{f} x{n}" for f, n in summary["forms"].items()))
    for model, why in result["left_out"].items():
        lines.append(f"  left out: {model}: {why.splitlines()[0]}")
    return lines


# --- §3.1.1 / §3.1.2 insights: speed-up per op category between two scenarios --------------------------------------

#: What li2023 observed (§3.1, Figs. 3-6), printed beside ours.
INSIGHTS: dict[str, dict[str, str]] = {
    "threads": {
        "title": "§3.1.1 multithreading: 1 -> 2 threads",
        "paper": "Insight 1 (Figs. 3-4, TFLite on homogeneous phone cores): sublinear end-to-end speed-up; conv, "
                 "depthwise conv and FC speed up sublinearly, the other operations negligibly (no parallel kernels)",
    },
    "int8": {
        "title": "§3.1.2 quantization: fp32 -> int8",
        "paper": "Insight 2 (Figs. 5-6, TFLite int8): distinct end-to-end speed-up; most operations faster, but "
                 "padding and element-wise operations slower (element-wise 2.55x / 2.60x slower on Snapdragon 855 / "
                 "Exynos 9820: matching the inputs' quantization ranges)",
    },
}

#: The scenario pairs each insight compares (base, other) when no files are given.
INSIGHT_SCENARIOS: dict[str, tuple[str, str]] = {
    "threads": ("torch-fp32-1t", "torch-fp32-2t"),
    "int8": ("ort-fp32-1t", "ort-int8-1t"),
}


def _op_category(op: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]]) -> str:
    """An op's li2023 category from its IR nodes; a kernel the runtime inserted (layout, precision) by its kind."""
    from edgeplan.costmodels.opwise.features import category
    from edgeplan.measure.kernel_check import INSERTED_KINDS

    inserted = op["kind"] in INSERTED_KINDS and op["kernel"] not in op["nodes"]  # not the model's own Transpose
    if not inserted and op["nodes"] and op["nodes"][0] in nodes:
        return category(nodes[op["nodes"][0]], op["kind"])
    return f"[{op['kind']}]"


def _category_ms(record: Mapping[str, Any], statistic: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for op in record["ops"]:
        out[_op_category(op, record["nodes"])] += op_ms(op, statistic)
    return dict(out)


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    q1, q2, q3 = np.percentile(np.asarray(values, dtype=float), [25, 50, 75])
    return float(q1), float(q2), float(q3)


def speedup_insight(base: OpDataset, other: OpDataset, statistic: str = "min") -> dict[str, Any]:
    """Speed-up from scenario ``base`` to ``other`` end to end and per op category, over the models both measured.

    Parameters
    ----------
    base, other
        Per-op datasets of the same models in two scenarios (e.g. 1 and 2 threads, fp32 and int8).
    statistic
        ``min`` or ``median`` latencies.

    Returns
    -------
    dict
        ``models`` (how many both have), ``end_to_end`` (quartiles of the per-model speed-up ``base / other``),
        and per category: ``share`` and ``other_share`` (of each scenario's summed op time), ``speedup`` (summed
        base time over summed other time; None when only one scenario runs the category), the quartiles of the
        per-model speed-up, and ``models`` (how many have the category in both). Kernels a runtime inserts (layout
        reorders, (de)quantization) are their own ``[kind]`` categories.

    Raises
    ------
    InvalidInputError
        When the datasets share no model.
    """
    first = {r["model"]: r for r in base.records}
    pairs = [(first[r["model"]], r) for r in other.records if r["model"] in first]
    if not pairs:
        raise InvalidInputError(f"the {base.scenario} and {other.scenario} datasets share no model; measure the same "
                                "models in both scenarios (`edgeplan ops profile ... --scenario A --scenario B`)")
    e2e = [record_latency(a, statistic) / record_latency(b, statistic) for a, b in pairs]
    totals_a: dict[str, float] = defaultdict(float)
    totals_b: dict[str, float] = defaultdict(float)
    per_model: dict[str, list[float]] = defaultdict(list)
    for a, b in pairs:
        ca, cb = _category_ms(a, statistic), _category_ms(b, statistic)
        for c in ca.keys() | cb.keys():
            totals_a[c] += ca.get(c, 0.0)
            totals_b[c] += cb.get(c, 0.0)
            if ca.get(c, 0.0) > 0 and cb.get(c, 0.0) > 0:
                per_model[c].append(ca[c] / cb[c])
    grand, grand_b = sum(totals_a.values()), sum(totals_b.values())
    cats = {}
    for c in sorted(totals_a.keys() | totals_b.keys(), key=lambda c: -(totals_a[c] + totals_b[c])):
        q = _quartiles(per_model[c]) if per_model[c] else None
        cats[c] = {"share": totals_a[c] / grand if grand else 0.0,
                   "other_share": totals_b[c] / grand_b if grand_b else 0.0,
                   "speedup": totals_a[c] / totals_b[c] if totals_a[c] > 0 and totals_b[c] > 0 else None,
                   "base_ms": totals_a[c], "other_ms": totals_b[c],
                   "quartiles": q, "models": len(per_model[c])}
    return {"base": base.scenario, "other": other.scenario, "statistic": statistic, "models": len(pairs),
            "end_to_end": _quartiles(e2e), "categories": cats, "device": other.provenance.get("device", {})}


def format_insight(kind: str, result: Mapping[str, Any]) -> list[str]:
    """A :func:`speedup_insight` result beside li2023's observation."""
    text = INSIGHTS[kind]
    q1, q2, q3 = result["end_to_end"]
    lines = [f"{text['title']} ({result['base']} -> {result['other']}, {result['models']} models both measured, "
             f"latency = the {result['statistic']} over runs)",
             f"  li2023: {text['paper']}",
             f"  edgeplan end to end: speed-up median {q2:.2f}x (quartiles {q1:.2f}-{q3:.2f}x)"]
    width = max([8, *map(len, result["categories"])])
    lines.append(f"  {'category':<{width}} {'share1':>6} {'share2':>6} {'speed-up':>9} {'per model (quartiles)':>24} "
                 f"{'models':>7}")
    for c, r in result["categories"].items():
        sp = f"{r['speedup']:.2f}x" if r["speedup"] is not None else "-"
        qs = "{:.2f} / {:.2f} / {:.2f}".format(*r["quartiles"]) if r["quartiles"] else (
            f"only in {result['other']}" if r["base_ms"] == 0 else f"only in {result['base']}")
        lines.append(f"  {c:<{width}} {r['share'] * 100:>5.1f}% {r['other_share'] * 100:>5.1f}% {sp:>9} {qs:>24} "
                     f"{r['models']:>7}")
    lines.append(f"  (share1, share2: of {result['base']}'s and of {result['other']}'s op time; speed-up = "
                 f"{result['base']} time / {result['other']} time, summed over the models)")
    return lines


# ---------------------------------------------------------------------------------------------------- command line


def _source_model(source: str, home: str | None) -> LatencyModel:
    """The latency model of device ``source`` (its default method); a calibrated device's own source scenario's."""
    from edgeplan.costmodels.opwise.profiles import load_device_model, source_method

    model = load_device_model(source, source_method(source, None, home), home)
    return model if isinstance(model, LatencyModel) else model.source


def _floor_run(scenario: str, data_file: Path | None, repeat_file: Path | None, as_json: bool) -> None:
    """``--floor``: the noise floor of a dataset against its repeat, for both statistics."""
    from experiments._cli import emit

    data = load_dataset(data_file or dataset_path(scenario))
    rpath = repeat_file or dataset_path(data.scenario, repeat=True)
    if not rpath.is_file():
        raise InvalidInputError(f"no repeat {rpath}: measure one with `edgeplan ops profile ... --repeat TAG`, "
                                "export it and give it with --repeat-data")
    again = load_dataset(rpath)
    floors = {st: noise_floor(data, again, st) for st in ("min", "median")}
    lines = [f"noise floor of {data.scenario} (end-to-end MAPE between two independent measurements)"]
    lines += [f"  {st:<7} {format_floor(f)}" for st, f in floors.items()]
    emit({"experiment": "li2023-floor", "scenario": data.scenario, "noise_floor": floors}, lines, as_json)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--scenario", default="torch-fp32-1t", show_default=True, help="Whose shipped per-op dataset to use.")
@click.option("--method", "methods", type=click.Choice(list(METHODS)), multiple=True,
              default=tuple(METHODS), show_default=True, help="Predictor methods to compare; repeat for several.")
@click.option("--data", "data_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Your own per-op dataset instead of the scenario's (an `ops export` file).")
@click.option("--repeat-data", "repeat_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Its independent re-measurement, for the noise floor (with --fewshot: the same models measured "
                   "again, a CSV or a dataset).")
@click.option("--statistic", type=click.Choice(["min", "median"]), default="median", show_default=True,
              help="Learn and evaluate the medians over runs or the fastest runs.")
@click.option("--nb201", is_flag=True,
              help="Instead: few-shot calibration of every HELP NAS-Bench-201 device from 10 architectures "
                   "(skipped when --help-data's default file is absent).")
@click.option("--insight", type=click.Choice(["threads", "int8"]), default=None,
              help="Instead: li2023 §3.1.1 (threads: torch-fp32-1t vs -2t) or §3.1.2 (int8: ort-fp32-1t vs "
                   "ort-int8-1t) speed-up per op category (or --data and --versus-data).")
@click.option("--fewshot", "fewshot_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Instead: how well --samples of your measured models calibrate --source, the others predicted, "
                   "over --seeds draws; a CSV model,latency_ms or an `ops export` dataset.")
@click.option("--floor", "floor_only", is_flag=True,
              help="Instead: only the noise floor of the dataset against its repeat, for both statistics.")
@click.option("--versus-data", "versus_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="--insight: the second scenario's dataset file.")
@click.option("--help-data", type=click.Path(dir_okay=False, path_type=Path), default=HELP_DATA, show_default=True,
              help="--nb201: HELP's latency table.")
@click.option("--source", default="torch-fp32-1t", show_default=True,
              help="--nb201, --fewshot: the device profile calibrated.")
@click.option("--seeds", type=click.IntRange(min=1), default=5, show_default=True,
              help="--nb201, --fewshot: random draws of --samples models (per device).")
@click.option("--samples", type=click.IntRange(min=1), default=10, show_default=True,
              help="--nb201, --fewshot: measured models a calibration is given.")
@click.option("--network-context", type=click.Choice(["auto"]), default=None,
              help="Also give the op predictors fitted on 900 networks or more log2 of their network's largest "
                   "output: lower §5.1 errors on the synthetic networks, higher on the zoo CNNs (off: li2023's "
                   "features).")
@click.option("--home", type=click.Path(file_okay=False), default=None, envvar="EDGEPLAN_HOME",
              help="Folder of your device profiles (--source of a calibrated device).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def cli(scenario: str, methods: tuple[str, ...], data_file: Path | None, repeat_file: Path | None, statistic: str,
        nb201: bool, insight: str | None, fewshot_file: Path | None, floor_only: bool, versus_file: Path | None,
        help_data: Path, source: str, seeds: int, samples: int, network_context: str | None, home: str | None,
        as_json: bool) -> None:
    """Latency prediction (li2023 §5.1, §5.3, §5.5, §5.6) on the shipped per-op datasets; or --nb201 few-shot,
    --fewshot on your own measurements, --floor, or an --insight of §3.1.

    Example: python -m experiments.li2023 --method gbdt --json
    """
    from experiments._cli import emit, skip

    ctx = click.get_current_context()
    if versus_file is not None and not insight:
        raise InvalidInputError("--versus-data goes with --insight threads|int8")
    if sum(map(bool, (floor_only, insight, nb201, fewshot_file))) > 1:
        raise InvalidInputError("--floor, --insight, --nb201 and --fewshot are separate runs: give one of them")
    if ctx.get_parameter_source("scenario") == click.core.ParameterSource.COMMANDLINE and (
            insight or nb201 or fewshot_file):
        raise InvalidInputError(
            "--scenario picks the dataset of §5; --insight compares a fixed pair of scenarios (give other datasets "
            "with --data and --versus-data) and --nb201 and --fewshot start from --source"
        )
    if floor_only:
        _floor_run(scenario, data_file, repeat_file, as_json)
        return
    if insight:
        a, b = INSIGHT_SCENARIOS[insight]
        result = speedup_insight(load_dataset(data_file or dataset_path(a)),
                                 load_dataset(versus_file or dataset_path(b)), statistic)
        emit({"experiment": f"li2023-{insight}", **result}, format_insight(insight, result), as_json)
        return
    if fewshot_file:
        rows, records = measured_records(fewshot_file, statistic)  # records: an ops export's (the per-op form)
        repeat_rows = measured_latencies(repeat_file, statistic) if repeat_file else None
        result = fewshot_measured(_source_model(source, home), source, rows, repeat_rows, samples=samples,
                                  seeds=seeds, progress=not as_json, records=records, statistic=statistic)
        emit({"experiment": "li2023-fewshot", **result}, format_fewshot_measured(result), as_json)
        return
    if nb201:
        if not help_data.is_file():
            if ctx.get_parameter_source("help_data") is not click.core.ParameterSource.DEFAULT:
                raise click.BadParameter(f"no file {help_data}", param_hint="--help-data")
            skip(f"{help_data} is absent (HELP's NAS-Bench-201 latencies; see ../shared/data)", as_json)
            return
        few = nb201_fewshot(_source_model(source, home), source, help_data, seeds=seeds, samples=samples,
                            progress=not as_json)
        emit({"experiment": "li2023-nb201", **few}, format_nb201(few), as_json)
        return
    result = reproduce(scenario, methods, data_file, repeat_file, progress=not as_json, statistic=statistic,
                       **({"network": network_context} if network_context else {}))
    emit({"experiment": "li2023", **result}, format_report(result), as_json)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors on one line and a non-zero exit code."""
    from experiments._cli import run_command

    return run_command(cli, "experiments.li2023", argv)


if __name__ == "__main__":
    sys.exit(main())
