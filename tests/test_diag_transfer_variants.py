"""The fine-tuning variants of benchmarks/diag_transfer_variants.py: the ``relative`` loss, the trained parts, the
oracle level."""

from __future__ import annotations

import numpy as np
import torch
from benchmark_loader import load_benchmark

from edgeplan.costmodels import TRANSFORM_COLUMNS, PrimitiveDataset, _mlp


def _case() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    pred = torch.randn(5, 6, generator=gen)  # 5 rows, 2 nets of 3 outputs
    target = torch.randn(5, 6, generator=gen)
    mask = torch.rand(5, 6, generator=gen) > 0.3
    return pred, target, mask


def test_relative_loss_at_lam_one_is_the_plain_squared_error_and_restores_it() -> None:
    variants = load_benchmark("diag_transfer_variants")
    plain = _mlp.masked_sse_per_net
    pred, target, mask = _case()
    with variants.relative_loss(1.0):
        assert _mlp.masked_sse_per_net is not plain
        sq, count = _mlp.masked_sse_per_net(pred, target, mask, 2)
    assert _mlp.masked_sse_per_net is plain
    want_sq, want_count = plain(pred, target, mask, 2)
    assert torch.allclose(sq, want_sq, atol=1e-5) and torch.equal(count, want_count)


def test_relative_loss_at_lam_zero_ignores_a_shift_of_a_whole_row() -> None:
    variants = load_benchmark("diag_transfer_variants")
    pred, target, mask = _case()
    shifted = target + torch.tensor([[0.5], [-1.0], [2.0], [0.0], [3.0]])  # one level per row, both nets
    with variants.relative_loss(0.0):
        sq, _ = _mlp.masked_sse_per_net(shifted, target, mask, 2)
        assert torch.allclose(sq, torch.zeros(2), atol=1e-5)
        sq_half, _ = _mlp.masked_sse_per_net(pred, target, mask, 2)
    assert (sq_half > 0).all()


def test_trained_part_trains_only_that_part_and_unfreezes_after() -> None:
    variants = load_benchmark("diag_transfer_variants")
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(16, 2, generator=gen).numpy().astype(float)
    y = (x[:, :1] * 2.0 - x[:, 1:]).repeat(2, axis=1)
    for part, moved in (("head", {2}), ("body", {0, 1}), ("first", {0}), ("ends", {0, 2}),
                        ("bias", set())):
        net = _mlp.StackedMLP(1, (2, 4, 4, 2), seed=0)
        before = [w.detach().clone() for w in net.weights]
        biases = [b.detach().clone() for b in net.biases]
        with variants.trained_part(part):
            _mlp.train_masked(net, x, y, x, y, _mlp.TrainConfig(lr=0.01, batch_size=8, max_epochs=5, patience=5))
        changed = {i for i, (w, w0) in enumerate(zip(net.weights, before, strict=True)) if not torch.equal(w, w0)}
        assert changed == moved, part
        if part == "bias":
            assert not changed and any(not torch.equal(b, b0) for b, b0 in zip(net.biases, biases, strict=True))
        assert all(p.requires_grad for p in net.parameters())


def test_the_oracle_level_rescales_each_primitive_to_its_test_part_median() -> None:
    variants = load_benchmark("diag_transfer_variants")
    rng = np.random.default_rng(0)
    x = np.unique(np.column_stack([rng.choice([16, 32, 64, 128], 200), rng.choice([16, 32, 64], 200),
                                   rng.choice([7, 14, 28, 56], 200), rng.choice([1, 3], 200),
                                   np.ones(200)]).astype(float), axis=0)
    measured = np.column_stack([x[:, 0] * x[:, 2] * 100.0, x[:, 1] * 50.0 + 1e3])
    table = PrimitiveDataset(x, ("p0", "p1"), measured, TRANSFORM_COLUMNS, np.ones((len(x), 9)), "t.csv")

    class Halved:  # predicts p0 at half its time and p1 at three times; "p2" is not in the table
        primitive_names, transform_names = ("p0", "p1", "p2"), ()
        kind, transforms_paper = "fake", None

        def __init__(self) -> None:
            self.info: dict[str, object] = {}

        def predict_primitives(self, f: np.ndarray) -> np.ndarray:
            rows = [np.flatnonzero((x == r).all(axis=1))[0] for r in f]
            return np.column_stack([measured[rows, 0] / 2, measured[rows, 1] * 3, np.full(len(rows), 7.0)])

    leveled = variants.OracleLevel(Halved(), table)
    np.testing.assert_allclose(leveled.scales, [2.0, 1 / 3, 1.0])
    np.testing.assert_allclose(leveled.predict_primitives(x)[:, :2], measured)
