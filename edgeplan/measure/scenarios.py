"""Measurement scenarios: a runtime, a thread count and a data representation, each a device profile.

li2023 (§3.1) finds that a latency predictor only transfers within one *combination* of cores and data
representation: a model measured on one big core in fp32 says little about four cores in int8. Each scenario here
is such a combination on this machine, with its own measurements and its own predictors:

=====================  ============  =======  =========================================================
scenario               runtime       threads  data representation
=====================  ============  =======  =========================================================
``torch-fp32-1t``      eager PyTorch  1        float32
``torch-fp32-2t``      eager PyTorch  2        float32
``ort-fp32-1t``        ONNX Runtime   1        float32 (CPU provider, default graph optimizations)
``ort-fp32-2t``        ONNX Runtime   2        float32
``ort-int8-1t``        ONNX Runtime   1        int8: static QDQ quantization (uint8 activations, int8 per-channel
                                               weights), which ORT runs as ``QLinearConv`` & co.
``ort-int8-2t``        ONNX Runtime   2        int8
``litert-fp32-1t``     LiteRT         1        float32 (the model converted by litert-torch, XNNPACK delegate)
``litert-fp32-2t``     LiteRT         2        float32
``litert-int8-1t``     LiteRT         1        int8: static post-training quantization by ai-edge-quantizer (int8
                                               weights and activations); XNNPACK's int8 kernels, LiteRT's
                                               where XNNPACK has none, float between conversions where the
                                               quantizer has no int8 form (``litert-xnnpack-int8``)
=====================  ============  =======  =========================================================

PyTorch's own int8 path (FX quantization to fbgemm) is not a scenario: ONNX Runtime's quantizer is the one
production CPU deployments use, and one int8 runtime is enough for li2023's int8 findings.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgeplan.errors import InvalidInputError

__all__ = ["SCENARIOS", "Scenario", "get_scenario"]


@dataclass(frozen=True)
class Scenario:
    """One measurement scenario (a device profile of this machine).

    Attributes
    ----------
    name
        ``{runtime}-{dtype}-{threads}t``, e.g. ``torch-fp32-2t``.
    runtime
        ``"torch"``, ``"onnxruntime"`` or ``"litert"`` (as in :data:`edgeplan.measure.RUNTIMES`).
    threads
        Intra-op threads.
    dtype
        ``"float32"`` or ``"int8"``.
    """

    name: str
    runtime: str
    threads: int
    dtype: str

    @property
    def kernel_profile(self) -> str:
        """Which kernels the runtime runs: the kernel-rule profile ``torch-eager`` (see :mod:`edgeplan.ir.kernels`),
        or for ONNX Runtime ``onnxruntime-{dtype}``: its kernels are read from ORT's own optimized graph
        (:func:`edgeplan.costmodels.opwise.graph_ops.onnxruntime_ops`), whose NCHWc and int8 rewrites depend on the
        CPU and the quantizer (the rule profiles ``onnxruntime-nchwc*`` check the float case against it); for
        LiteRT ``litert-xnnpack`` (``litert-xnnpack-int8``), the converter's operators and the XNNPACK delegate's
        partition."""
        if self.runtime == "torch":
            return "torch-eager"
        if self.runtime == "litert":
            return "litert-xnnpack" if self.dtype == "float32" else f"litert-xnnpack-{self.dtype}"
        return f"onnxruntime-{self.dtype}"


def _make(runtime: str, short: str, dtype: str, threads: int) -> Scenario:
    tag = "fp32" if dtype == "float32" else dtype
    return Scenario(f"{short}-{tag}-{threads}t", runtime, threads, dtype)


#: Every scenario by name.
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        *(_make("torch", "torch", "float32", t) for t in (1, 2)),
        *(_make("onnxruntime", "ort", "float32", t) for t in (1, 2)),
        *(_make("onnxruntime", "ort", "int8", t) for t in (1, 2)),
        *(_make("litert", "litert", "float32", t) for t in (1, 2)),
        _make("litert", "litert", "int8", 1),
    )
}


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name``.

    Raises
    ------
    InvalidInputError
        For an unknown name; the message lists the known ones.
    """
    try:
        return SCENARIOS[name]
    except KeyError:
        raise InvalidInputError(f"unknown scenario {name!r}; choose one of {', '.join(SCENARIOS)}") from None
