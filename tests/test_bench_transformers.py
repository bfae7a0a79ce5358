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
