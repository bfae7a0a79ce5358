"""Run an offloading plan for real: the mobile and the cloud are two processes linked by TCP.

The calling process is the *mobile*: it runs its segments with its own thread count and sends the tensors live
at each switch to the *cloud*, a subprocess (:mod:`edgeplan.runtimes.split_server`) that holds the same graph and
the same seeded weights, runs the cloud segments and sends the live tensors back. The link's bandwidth is
emulated by the sender, which paces its chunks so that the last byte of ``size_bytes`` leaves
``size_bytes * 8 / (mbps * 1e6)`` seconds after the first (the plan's transfer model; the loopback itself is
orders of magnitude faster). End-to-end latency is measured on the mobile from the moment the inputs exist to the
moment the outputs are back, and the outputs are compared with a local run of the whole graph.
"""

from __future__ import annotations

import json
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.ir import Ref
from edgeplan.ir.layer_chain import LayerChain
from edgeplan.measure.graph_exec import Env, GraphExecutor
from edgeplan.measure.harness import use_threads

__all__ = ["SplitRun", "SplitRunOptions", "run_split", "recv_message", "send_message"]

_HEADER = struct.Struct("!II")  # header length, payload length
_CHUNK_BYTES = 16 * 1024


def _send_paced(sock: socket.socket, payload: memoryview, mbps: float | None) -> None:
    """Send ``payload``; with ``mbps``, pace it so it takes ``len * 8 / (mbps * 1e6)`` seconds in all."""
    if mbps is None or not payload:
        sock.sendall(payload)
        return
    bytes_per_s = mbps * 1e6 / 8
    start = time.perf_counter()
    sent = 0
    while sent < len(payload):
        n = min(_CHUNK_BYTES, len(payload) - sent)
        wait = start + (sent + n) / bytes_per_s - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        sock.sendall(payload[sent : sent + n])
        sent += n


def send_message(sock: socket.socket, header: dict[str, object], tensors: Env | None = None,
                 mbps: float | None = None) -> int:
    """Send a JSON header and tensors (raw, C order); only the tensor bytes are paced. Returns their size."""
    tensors = tensors or {}
    arrays = [np.ascontiguousarray(t.detach().cpu().numpy()) for t in tensors.values()]
    meta = [{"ref": [r.node, r.index], "shape": list(a.shape), "dtype": str(a.dtype), "nbytes": a.nbytes}
            for r, a in zip(tensors, arrays, strict=True)]
    head = json.dumps({**header, "tensors": meta}).encode()
    payload = b"".join(a.tobytes() for a in arrays)
    sock.sendall(_HEADER.pack(len(head), len(payload)) + head)
    _send_paced(sock, memoryview(payload), mbps)
    return len(payload)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise MeasurementError("the split-execution peer closed the connection; see its error output above")
        got += k
    return buf


def recv_message(sock: socket.socket) -> tuple[dict[str, object], Env]:
    """Receive one message sent by :func:`send_message`."""
    head_len, payload_len = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    header = json.loads(bytes(_recv_exact(sock, head_len)))
    payload = _recv_exact(sock, payload_len)
    env: Env = {}
    offset = 0
    for m in header.pop("tensors"):
        a = np.frombuffer(payload, dtype=np.dtype(m["dtype"]), count=int(np.prod(m["shape"], dtype=np.int64)),
                          offset=offset).reshape(m["shape"])
        env[Ref(m["ref"][0], int(m["ref"][1]))] = torch.from_numpy(a)
        offset += m["nbytes"]
    return header, env


@dataclass(frozen=True)
class SplitRun:
    """What a real split execution measured.

    Attributes
    ----------
    latency_ms
        Median end-to-end latency on the mobile side.
    samples_ms
        Every timed run.
    uploaded_bytes, downloaded_bytes
        Tensor bytes sent each way per inference.
    max_abs_error
        Largest difference between the split run's outputs and a local run of the whole graph.
    """

    latency_ms: float
    samples_ms: tuple[float, ...]
    uploaded_bytes: int
    downloaded_bytes: int
    max_abs_error: float

    @property
    def iqr_ms(self) -> float:
        """Interquartile range of the samples."""
        q = np.percentile(self.samples_ms, [25, 75])
        return float(q[1] - q[0])


def _groups(segments: Sequence[tuple[int, int, str]]) -> list[tuple[str, list[tuple[int, int]]]]:
    """Consecutive segments on the same side, grouped: the cloud runs a group per request."""
    groups: list[tuple[str, list[tuple[int, int]]]] = []
    for first, last, side in segments:
        if groups and groups[-1][0] == side:
            groups[-1][1].append((first, last))
        else:
            groups.append((side, [(first, last)]))
    return groups


def _start_server(model: str, threads: int, seed: int, down_mbps: float,
                  input_shape: tuple[int, ...] | None) -> tuple[subprocess.Popen[str], int]:
    cmd = [sys.executable, "-m", "edgeplan.runtimes.split_server", "--model", model, "--threads", str(threads),
           "--seed", str(seed), "--down-mbps", repr(down_mbps)]
    if input_shape:
        cmd += ["--input-shape", "x".join(map(str, input_shape))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        proc.stdout.close()
    except BaseException:
        _stop(proc)
        raise
    if not line.startswith("READY "):
        _stop(proc)
        raise MeasurementError(f"the cloud process for {model} did not start (said {line!r}); see its error above")
    return proc, int(line.split()[1])


def _stop(proc: subprocess.Popen[str]) -> None:
    """Kill the cloud process if it is still running and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@dataclass(frozen=True)
class SplitRunOptions:
    """How :func:`run_split` runs each side and how often it times.

    Attributes
    ----------
    mobile_threads, cloud_threads
        Intra-op threads of each side.
    repeats, warmup
        Timed and untimed inferences.
    seed
        Weight seed (must be the one the mobile side's executor was built with).
    input_shape
        The input override the cloud process builds the graph with (``None``: the zoo model's own).
    """

    mobile_threads: int = 1
    cloud_threads: int = 2
    repeats: int = 5
    warmup: int = 1
    seed: int = 0
    input_shape: tuple[int, ...] | None = None


def run_split(executor: GraphExecutor, chain: LayerChain, segments: Sequence[tuple[int, int, str]], *,
              model: str, up_mbps: float, down_mbps: float, options: SplitRunOptions | None = None) -> SplitRun:
    """Execute ``segments`` split between this process (mobile) and a cloud subprocess; time it end to end.

    Parameters
    ----------
    executor, chain
        The mobile side's executor (built with ``options.seed``) and the graph's layer chain.
    segments
        ``(first, last, side)`` covering all layers in order; side ``"mobile"`` or ``"cloud"``.
    model
        The zoo spec the cloud process builds the same graph from.
    up_mbps, down_mbps
        Emulated link speeds.
    options
        Threads, repeats, seed and input shape; default :class:`SplitRunOptions`.

    Returns
    -------
    SplitRun
    """
    options = options or SplitRunOptions()
    repeats, warmup = options.repeats, options.warmup
    if repeats < 1 or warmup < 0:
        raise InvalidInputError(f"a split run needs repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    covered = [i for first, last, _ in segments for i in range(first, last + 1)]
    if covered != list(range(len(chain))):
        raise InvalidInputError(f"segments {list(segments)} do not cover layers 0..{len(chain) - 1} in order")
    inputs = executor.example_inputs()
    groups = _groups(segments)
    uses_cloud = any(side == "cloud" for side, _ in groups)
    proc: subprocess.Popen[str] | None = None
    port = 0
    if uses_cloud:
        proc, port = _start_server(model, options.cloud_threads, options.seed, down_mbps, options.input_shape)
    sock: socket.socket | None = None
    try:
        if proc is not None:
            sock = socket.create_connection(("127.0.0.1", port), timeout=120)
            sock.settimeout(None)  # transfers over an emulated 3G link may take minutes
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        samples: list[float] = []
        up = down = 0
        outputs: tuple[torch.Tensor, ...] = ()
        with use_threads(options.mobile_threads), torch.inference_mode():
            for k in range(warmup + repeats):
                t0 = time.perf_counter()
                env: Env = {r: inputs[r] for r in chain.live[0]}
                up = down = 0
                for side, ranges in groups:
                    if side == "mobile":
                        for first, last in ranges:
                            env = executor.run_layers(chain, first, last, env)
                        continue
                    assert sock is not None
                    up += send_message(sock, {"op": "run", "ranges": ranges}, env, up_mbps)
                    _, env = recv_message(sock)
                    down += sum(t.numel() * t.element_size() for t in env.values())
                outputs = tuple(env[r] for r in chain.graph.outputs)
                if k >= warmup:
                    samples.append((time.perf_counter() - t0) * 1e3)
        if sock is not None:
            send_message(sock, {"op": "quit"})
    finally:
        if sock is not None:
            sock.close()
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            _stop(proc)
    with use_threads(options.mobile_threads):
        reference = executor.run(inputs)
    error = max(float((a - b).abs().max()) for a, b in zip(outputs, reference, strict=True))
    return SplitRun(statistics.median(samples), tuple(samples), up, down, error)
