"""How well the activations sent at cut points compress: ZFP (lossy, fixed accuracy) then LZ4, measured for real.

parthasarathy2022 (eq. 4) divides each transfer size by the product of the average ZFP and LZ4 compression
ratios. We measure them on the model's own activations: the graph is run on a seeded random input (random
weights, as everywhere in edgeplan), the output of each candidate point is compressed with ``zfpy`` at a fixed
absolute tolerance, the ZFP stream with ``lz4.frame``, and the sizes are reported. Random weights make
activations noisier than trained ones, so these ratios are a conservative estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from edgeplan.errors import InvalidInputError
from edgeplan.ir import Graph, OpKind, Ref
from edgeplan.measure.graph_exec import Env, GraphExecutor

__all__ = ["Compression", "measure_compression"]


@dataclass(frozen=True)
class Compression:
    """Sizes of one activation: raw, after ZFP, after ZFP then LZ4; ``ratio`` is raw over the final size."""

    raw_bytes: int
    zfp_bytes: int
    zfp_lz4_bytes: int

    @property
    def ratio(self) -> float:
        """Total compression ratio (ZFP ratio x LZ4 ratio)."""
        return self.raw_bytes / self.zfp_lz4_bytes


def measure_compression(graph: Graph, points: Sequence[str], tolerance: float = 1e-3,
                        seed: int = 0) -> dict[str, Compression]:
    """Compress the real output of every point of ``graph`` (see the module docstring).

    Parameters
    ----------
    graph
        The model.
    points
        Node names whose first output is measured (graph inputs allowed).
    tolerance
        ZFP's absolute error bound.
    seed
        Seed of the weights and the input.

    Returns
    -------
    dict
        Point name -> :class:`Compression`.
    """
    import lz4.frame
    import zfpy

    if not tolerance > 0:
        raise InvalidInputError(f"ZFP tolerance must be positive, got {tolerance}")
    wanted = set(points)
    missing = wanted - {n.name for n in graph.nodes}
    if missing:
        raise InvalidInputError(f"graph {graph.name!r} has no node(s) {sorted(missing)}")
    executor = GraphExecutor(graph, seed=seed)
    env: Env = executor.example_inputs()
    grabbed: dict[str, torch.Tensor] = {n.name: env[Ref(n.name)] for n in graph.inputs if n.name in wanted}
    with torch.inference_mode():
        for node in graph.nodes:
            if node.kind is OpKind.INPUT:
                continue
            executor.run_nodes([node.name], env)
            if node.name in wanted:
                grabbed[node.name] = env[Ref(node.name)].clone()
    out = {}
    for name, tensor in grabbed.items():
        array = tensor.detach().float().contiguous().numpy()
        # ZFP codes blocks of 4 along every axis: a batch axis of 1 would be padded to 4, so drop it
        shaped = array.reshape(array.shape[1:]) if array.ndim > 1 and array.shape[0] == 1 else array
        zfp = zfpy.compress_numpy(shaped, tolerance=tolerance)
        out[name] = Compression(array.nbytes, len(zfp), len(lz4.frame.compress(zfp)))
    return out
