"""Kernel deduction: which kernels a runtime really executes for a :class:`~edgeplan.ir.Graph`.

A runtime does not run the IR node by node: an exporter or converter folds batch norm into the convolution before
it and drops dropout, the runtime fuses an activation (or a residual add) into the convolution, and picks one of
several kernels for a convolution (li2023 §3.2, §4.1). This pass deduces that list of kernels from the IR alone,
by rules kept as data per runtime family in ``edgeplan/data/kernel_rules/*.json``:

=========================  ==================================================================================
profile                    what it models
=========================  ==================================================================================
``torch-eager``            eager PyTorch in eval mode: one aten operator per node, batch norm not folded; views
                           (flatten, reshape, permute, ...) and eval dropout run but move no data; fused: a
                           module's fast path (``nn.MultiheadAttention``) and an operator the IR writes as several
                           nodes (``conv1d``, ``avg_pool1d``, ``repeat_interleave``): the graph's ``fused_calls``
``onnxruntime``            edgeplan's ONNX export + ONNX Runtime CPU graph optimizations without NCHWc (ARM64,
                           x86-64 without AVX2, or ``ORT_ENABLE_EXTENDED``): Conv+BatchNorm folding,
                           Conv+activation -> ``FusedConv``, Gemm+activation -> ``FusedGemm``, SiLU -> ``QuickGelu``
``onnxruntime-nchwc8/16``  the default level (``ORT_ENABLE_ALL``) on x86-64 with AVX2 / AVX-512F: as above, then
                           ORT's NCHWc layout transform (Conv+Add+activation in one ``nchwc.Conv``, batch norm as
                           a 1x1 depthwise NCHWc conv, ``ReorderInput``/``ReorderOutput`` kernels at the borders)
``tflite-gpu-VENDOR``      the TFLite GPU delegate (li2023 Alg. 3.1 fusion, then Alg. 3.2 kernel selection among
                           Conv2D, Winograd, GroupedConv2D) for ``adreno`` (6xx), ``adreno5xx``, ``mali``,
                           ``powervr``, ``amd``
``litert-xnnpack``         LiteRT on a CPU after litert-torch: one kernel per TFLite operator of the converted
                           file (``xnnpack.OP`` where the XNNPACK delegate takes it, ``tflite.OP`` on LiteRT's
                           default kernels): the converter's layout (a minimum cut between NHWC and NCHW,
                           with ``TRANSPOSE`` operators), explicit ``PAD``/``PADV2``, batch norm and constant
                           steps folded into the convolution or fully connected layer beside them, activations
                           fused; operators no IR node stands for are named ``OP:node``
``litert-xnnpack-int8``    the same after int8 quantization: the operators the quantizer keeps in float
                           (``quantized.float_ops``) between a ``DEQUANTIZE`` and a ``QUANTIZE``, the int8
                           operators XNNPACK has no kernel for on the default kernels
=========================  ==================================================================================

Every IR node other than the graph inputs ends in exactly one :class:`Kernel` or in
:attr:`KernelDeduction.eliminated` with the reason; :func:`deduce_kernels` checks this before it returns. Kernels
a runtime inserts that no IR node stands for (ORT's reorders, LiteRT's transposes and pads) have no nodes.

:func:`compare_kernels` compares a deduction with what a runtime reports;
:func:`edgeplan.measure.kernel_check.check_onnxruntime` does the whole comparison against ONNX Runtime's
optimized graph of an ONNX file, :func:`edgeplan.measure.litert_delegate.check_litert` against a ``.tflite`` file's
operators and XNNPACK's partitions. Pure passes: loads without torch, onnx or onnxruntime.

Modules: :mod:`~edgeplan.ir.kernels.rules` (rule files, node labels), :mod:`~edgeplan.ir.kernels.result`
(:class:`Kernel`, :class:`KernelDeduction`), :mod:`~edgeplan.ir.kernels.groups` (kernels under construction and
their fusion), :mod:`~edgeplan.ir.kernels.deduce` (:func:`deduce_kernels`, torch eager),
:mod:`~edgeplan.ir.kernels.ort` (ORT fusions and the NCHWc transform), :mod:`~edgeplan.ir.kernels.tflite`
(li2023 Alg. 3.1 and 3.2), :mod:`~edgeplan.ir.kernels.litert` (litert-torch's operators and XNNPACK),
:mod:`~edgeplan.ir.kernels.compare` (:func:`compare_kernels`),
:mod:`~edgeplan.ir.kernels.selection` (the implementation eager PyTorch selects for a convolution by its shapes and
threads: oneDNN or its own; checked against the profiler by
:func:`edgeplan.measure.kernel_check.check_torch_implementations`).
"""

from __future__ import annotations

from edgeplan.ir.kernels.compare import KernelMismatch, compare_kernels
from edgeplan.ir.kernels.deduce import deduce_kernels
from edgeplan.ir.kernels.result import Kernel, KernelDeduction
from edgeplan.ir.kernels.rules import KernelRules, load_rules, node_label, profiles
from edgeplan.ir.kernels.tflite import select_tflite_conv_kernel

__all__ = [
    "Kernel",
    "KernelDeduction",
    "KernelMismatch",
    "KernelRules",
    "compare_kernels",
    "deduce_kernels",
    "load_rules",
    "node_label",
    "profiles",
    "select_tflite_conv_kernel",
]
