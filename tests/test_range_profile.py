"""Layer-range profiling: n(n+1)/2 rows with provenance, resumable, and read back into a table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgeplan.errors import InvalidInputError
from edgeplan.frontends.zoo import load_graph
from edgeplan.ir.layer_chain import layer_chain
from edgeplan.measure.device import describe_device
from edgeplan.measure.range_files import export_range_tables, load_range_tables
from edgeplan.measure.range_profile import RANGE_KIND, SweepConfig, profile_ranges, range_table_from_records
from edgeplan.measure.store import Store

MODEL = "nb201:|nor_conv_3x3~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|nor_conv_1x1~1|skip_connect~2|"


def test_profile_store_table_and_export(tmp_path: Path) -> None:
    chain = layer_chain(load_graph(MODEL))
    n = len(chain)
    with Store.open(tmp_path / "s.sqlite") as store:
        report = profile_ranges(store, MODEL, threads=1, config=SweepConfig(repeats=2, warmup=0))
        assert report.done_now == n * (n + 1) // 2 and report.remaining == 0
        again = profile_ranges(store, MODEL, threads=1, config=SweepConfig(repeats=2, warmup=0))
        assert again.done_now == 0 and again.done_before == report.total
        rows = store.measurements(model=MODEL, kind=RANGE_KIND)
        assert len(rows) == n * (n + 1) // 2 and all(r.repeats == 2 and r.threads == 1 for r in rows)
        device = describe_device("torch", 1)
        table = range_table_from_records(MODEL, [layer.name for layer in chain.layers], rows, device, "test")
        assert table.complete and not table.missing()
        m = table.median_ms
        assert np.isnan(m[1, 0]) and (m[np.triu_indices(n)] > 0).all()
        # a longer range from the same start took longer in the same sweep
        assert all(m[0, j + 1] >= m[0, j] * 0.5 for j in range(n - 1))
        assert export_range_tables(store, [MODEL], tmp_path / "r.json", "test") == 1
        with pytest.raises(InvalidInputError, match="does not fit|names layers"):
            range_table_from_records(MODEL, ["other"] * n, rows, device, "test")
    (loaded,) = load_range_tables(tmp_path / "r.json")
    np.testing.assert_array_equal(loaded.median_ms, table.median_ms)
    assert loaded.layers == table.layers and loaded.device.threads == 1


def test_bad_range_file_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(InvalidInputError, match="not a edgeplan-layer-ranges"):
        load_range_tables(bad)
    bad.write_text("not json")
    with pytest.raises(InvalidInputError, match="not JSON"):
        load_range_tables(bad)


def test_budget_commits_whole_batches_and_resume_finishes(tmp_path: Path) -> None:
    from edgeplan.measure.range_profile import BATCH_STARTS

    chain = layer_chain(load_graph(MODEL))
    n = len(chain)
    assert n > BATCH_STARTS  # the model needs several batches
    per_start = [n - i for i in range(n)]
    whole_batches = {sum(per_start[:k]) for k in range(0, n + 1, BATCH_STARTS)} | {n * (n + 1) // 2}
    with Store.open(tmp_path / "s.sqlite") as store:
        first = profile_ranges(store, MODEL, threads=1, config=SweepConfig(repeats=1, warmup=0), budget_s=0.02)
        assert first.done_now in whole_batches and first.done_now + first.remaining == first.total
        second = profile_ranges(store, MODEL, threads=1, config=SweepConfig(repeats=1, warmup=0))
        assert second.done_before == first.done_now and second.remaining == 0
        assert len(store.measurements(model=MODEL, kind=RANGE_KIND)) == n * (n + 1) // 2


def test_offload_finishes_a_range_campaign_with_its_own_repeats(tmp_path: Path) -> None:
    """`profile-ranges --repeats 1` then `offload` (which measures what is missing) used to be refused: the
    planner asked for the default 9 repeats under the campaign's name."""
    from edgeplan.decisions.offload import OffloadSetup, offload_costs
    from edgeplan.measure.paths import default_store_path

    n = len(layer_chain(load_graph(MODEL)))
    with Store.open(default_store_path(tmp_path)) as store:
        profile_ranges(store, MODEL, threads=1, config=SweepConfig(repeats=1, warmup=0))
    costs, _ = offload_costs(OffloadSetup(MODEL, mobile_threads=1, cloud_speedup=4.0, costs="measure"), home=tmp_path)
    assert costs.mobile_ms.shape == (n, n) and "1 thread(s)" in costs.mobile_label
    with Store.open(default_store_path(tmp_path)) as store:
        (campaign,) = store.campaigns()
        assert campaign.params["repeats"] == 1 and len(store.measurements()) == n * (n + 1) // 2


def test_other_repeats_over_an_earlier_campaign_say_which_options_to_use(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite") as store:
        profile_ranges(store, MODEL, threads=1, config=SweepConfig(repeats=1, warmup=0), budget_s=1e-9)
        with pytest.raises(InvalidInputError, match=r"swept with 1 repeat\(s\).*--repeats 1 to finish.*--store"):
            profile_ranges(store, MODEL, threads=1, config=SweepConfig(repeats=2, warmup=0))
