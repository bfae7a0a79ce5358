"""Real split execution over local TCP: outputs equal a local run, transfers are the live sets, pacing holds."""

from __future__ import annotations

import socket

import torch

from edgeplan.frontends.zoo import load_graph
from edgeplan.ir.layer_chain import layer_chain
from edgeplan.measure.graph_exec import GraphExecutor
from edgeplan.runtimes.split import SplitRunOptions, recv_message, run_split, send_message


def test_mobile_cloud_mobile_split_matches_local_run() -> None:
    graph = load_graph("paper:nin")
    chain = layer_chain(graph)
    executor = GraphExecutor(graph, seed=5)
    segments = [(0, 6, "mobile"), (7, 20, "cloud"), (21, len(chain) - 1, "mobile")]
    run = run_split(executor, chain, segments, model="paper:nin", up_mbps=1000.0, down_mbps=1000.0,
                    options=SplitRunOptions(repeats=1, warmup=0, seed=5))
    assert run.max_abs_error < 1e-5  # the cloud uses 2 threads: same math, another summation order
    assert run.uploaded_bytes == chain.boundary_bytes[7]
    assert run.downloaded_bytes == chain.boundary_bytes[21]
    assert len(run.samples_ms) == 1 and run.latency_ms > 0


def test_paced_send_takes_size_over_bandwidth() -> None:
    import time

    a, b = socket.socketpair()
    tensors = {__import__("edgeplan.ir", fromlist=["Ref"]).Ref("t"): torch.zeros(25_000)}  # 100 kB
    with a, b:
        t0 = time.perf_counter()
        import threading

        got: list[object] = []
        reader = threading.Thread(target=lambda: got.append(recv_message(b)))
        reader.start()
        size = send_message(a, {"op": "x"}, tensors, mbps=8.0)  # 1 MB/s -> 100 ms
        reader.join()
        elapsed = time.perf_counter() - t0
    assert size == 100_000
    header, env = got[0]  # type: ignore[misc]
    assert header == {"op": "x"} and torch.equal(next(iter(env.values())), tensors[next(iter(tensors))])
    assert elapsed >= 0.1  # pacing never sends faster than the emulated link
