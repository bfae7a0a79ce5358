"""The pipeline's Ray actors: a :class:`Stage` runs its part of the graph, a :class:`Link` forwards a message after
its transfer time. Neither torch nor Ray is imported at module level.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from edgeplan.ir import Graph
from edgeplan.runtimes.pipeline.stages import Message, PipelineStage, message_bytes, transfer_ms

if TYPE_CHECKING:
    from edgeplan.measure.graph_exec import GraphExecutor


__all__ = ["Link", "Stage"]

class Stage:
    """A pipeline stage: runs its nodes on the tensors it receives (a Ray actor in :func:`run_pipeline`).

    Parameters
    ----------
    graph
        The whole graph (every stage builds the same seeded weights).
    stage
        What this stage runs.
    seed
        Weight seed, the same on every stage.
    threads
        Torch intra-op threads of this process.
    """

    def __init__(self, graph: Graph, stage: PipelineStage, seed: int = 0, threads: int = 1) -> None:
        import torch

        from edgeplan.measure.graph_exec import GraphExecutor

        torch.set_num_threads(threads)
        self._executor: GraphExecutor = GraphExecutor(graph, seed=seed)
        self._stage = stage
        self._spans: list[tuple[float, float]] = []

    def _compute(self, message: Message) -> Message:
        import torch

        env = {r: torch.from_numpy(a if a.flags.writeable else a.copy())
               for r, a in zip(self._stage.receives, message, strict=True)}
        with torch.inference_mode():
            self._executor.run_nodes(self._stage.nodes, env)
        return tuple(np.ascontiguousarray(env[r].numpy()) for r in self._stage.sends)

    def run(self, message: Message) -> tuple[Message, float]:
        """Run the stage's nodes on ``message``; return what it sends and when it was ready (``time.time()``).

        Records the busy span. In the pipeline the two values are two Ray objects: the next link gets both.
        """
        t0 = time.perf_counter()
        out = self._compute(message)
        self._spans.append((t0, time.perf_counter()))
        return out, time.time()

    def profile(self, message: Message, repeats: int) -> tuple[Message, list[float]]:
        """Run once untimed, then ``repeats`` timed runs; return the output and the times (ms)."""
        out = self._compute(message)
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = self._compute(message)
            samples.append((time.perf_counter() - t0) * 1e3)
        return out, samples

    def spans(self) -> list[tuple[float, float]]:
        """``(start, end)`` of every :meth:`run` so far, on this process's ``time.perf_counter`` clock."""
        return list(self._spans)

    def host(self) -> str:
        """The host name of the machine the stage runs on."""
        import socket

        return socket.gethostname()


class Link:
    """An emulated network link: holds each message for its transfer time, then forwards it.

    Parameters
    ----------
    bandwidth_mbps
        Link speed in Mbit/s.
    compression
        The message's bytes are divided by this ratio (1: uncompressed).
    """

    def __init__(self, bandwidth_mbps: float, compression: float = 1.0) -> None:
        self._mbps = bandwidth_mbps
        self._ratio = compression
        self._free_at = 0.0  # time.time() at which the last transfer ends
        self._spans: list[tuple[float, float]] = []

    def send(self, message: Message, ready_at: float | None = None) -> Message:
        """Return ``message`` when its transfer is over; records the busy span.

        The transfer starts when the message was ready (``ready_at``, a ``time.time()`` stamp from the sender;
        ``None``: now) or when the previous transfer ended, whichever is later, as on a real link where a queued
        message goes out right after the one before it. The time this actor spends between calls (Ray returning
        the last message and delivering this one) thus overlaps the transfer instead of adding to it.
        """
        t0 = time.perf_counter()
        now = time.time()
        ready = now if ready_at is None else min(ready_at, now)  # never in the future (clock skew across hosts)
        start = max(ready, self._free_at)
        self._free_at = start + transfer_ms(message_bytes(message), self._mbps, self._ratio) / 1e3
        remaining = self._free_at - time.time()
        if remaining > 0:
            time.sleep(remaining)
        self._spans.append((t0, time.perf_counter()))
        return message

    def spans(self) -> list[tuple[float, float]]:
        """``(start, end)`` of every :meth:`send` so far."""
        return list(self._spans)
