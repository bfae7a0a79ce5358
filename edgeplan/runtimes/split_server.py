"""The cloud side of a split execution (started by :func:`edgeplan.runtimes.split.run_split`).

Builds the model's graph with the same seeded weights as the mobile side, listens on a local port (printed as
``READY <port>``), and for each request runs the asked layer ranges on the tensors it received and sends back
the tensors live after the last one, paced at the download speed.
"""

from __future__ import annotations

import argparse
import socket
import sys

from edgeplan.ir.layer_chain import layer_chain
from edgeplan.measure.graph_exec import GraphExecutor
from edgeplan.measure.harness import set_threads
from edgeplan.runtimes.split import recv_message, send_message


def main(argv: list[str] | None = None) -> int:
    """Serve one mobile client until it sends ``quit``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--down-mbps", type=float, required=True)
    parser.add_argument("--input-shape", default=None)
    args = parser.parse_args(argv)

    import torch

    from edgeplan.frontends.zoo import load_graph, parse_shape

    set_threads(args.threads)
    graph = load_graph(args.model, parse_shape(args.input_shape) if args.input_shape else None)
    chain = layer_chain(graph)
    executor = GraphExecutor(graph, seed=args.seed)
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(120)  # a mobile that never connects must not leave this process behind
        print(f"READY {server.getsockname()[1]}", flush=True)
        conn, _ = server.accept()
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn, torch.inference_mode():
            while True:
                header, env = recv_message(conn)
                if header.get("op") == "quit":
                    return 0
                ranges = header["ranges"]
                assert isinstance(ranges, list)
                for first, last in ranges:
                    env = executor.run_layers(chain, int(first), int(last), env)
                send_message(conn, {"op": "result"}, env, args.down_mbps)


if __name__ == "__main__":
    sys.exit(main())
