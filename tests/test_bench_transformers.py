"""The extension benchmark's families: leaving a family out keeps every variant of a held-out network out of its
training models."""

from __future__ import annotations

from benchmark_loader import load_benchmark


def test_a_family_is_the_model_name_up_to_its_first_underscore() -> None:
    bench = load_benchmark("bench_transformers")
    names = ["timm:hrnet_w18_small", "timm:hrnet_w32", "timm:ghostnetv2_100", "timm:ghostnetv2_160",
             "torchvision:vit_b_16", "timm:levit_128s"]
    assert [bench.family(n) for n in names] == ["timm:hrnet", "timm:hrnet", "timm:ghostnetv2", "timm:ghostnetv2",
                                                "torchvision:vit", "timm:levit"]
    assert bench.family("torchvision:alexnet") == "torchvision:alexnet"


def test_every_model_is_held_out_once_by_folds_and_by_families() -> None:
    import numpy as np

    bench = load_benchmark("bench_transformers")
    names = ["timm:nf_regnet_b0", "timm:dm_nfnet_f0", "timm:nf_resnet50", "timm:eca_nfnet_l0", "timm:nf_resnet26"]
    order = np.random.default_rng(0).permutation(len(names))
    for by_family in (False, True):
        folds = bench.held_out_folds(names, order, 2, by_family=by_family)
        assert sorted(int(i) for f in folds for i in f) == list(range(len(names)))
    families = bench.held_out_folds(names, order, 2, by_family=True)
    assert [sorted(names[i] for i in f) for f in families] == [
        ["timm:nf_regnet_b0", "timm:nf_resnet26", "timm:nf_resnet50"], ["timm:dm_nfnet_f0"], ["timm:eca_nfnet_l0"]]
