"""Run a partitioned model for real as a pipeline of Ray actors and measure its throughput (parthasarathy2022).

A partition plan cuts a model at candidate points into stages ``0..k-1``; stage ``i`` sends the output of its
last point to stage ``i + 1`` over a link. In a pipeline every stage and every link works on a different input
at the same time, so the throughput is ``1 / bottleneck``, the bottleneck being the slowest part: the largest of
the stages' compute times and the links' transfer times.

Here each stage is a :class:`Stage` actor holding the whole graph with the same seeded weights (so a split run
computes what a local run computes) and running its own nodes; each link is a :class:`Link` actor that forwards
a message after ``size_bytes * 8 / bandwidth`` seconds, ``size_bytes`` being the real bytes of the tensors it
carries (divided by a compression ratio when one is given). Links are actors of their own, so transfers overlap
compute as on a real network. Every actor runs its calls one at a time, in order.

:func:`run_pipeline` first times each stage on its own (nothing else running), predicts the bottleneck, then
streams inputs through the chain ``stage 0 -> link 0 -> stage 1 -> ...`` by chaining object references, with a
bounded number of inputs in flight, and measures the period between completions at the last stage. It checks
that every output equals a local run of the whole graph.

:func:`pipeline_stages` turns a plan into stages and checks from the graph's structure that only the cut point's
output crosses each cut. It and the actor classes import neither torch nor Ray at module level.

Modules: :mod:`.stages` (plan -> stages, message sizes), :mod:`.actors` (the Ray actors) and :mod:`.runner`
(:func:`run_pipeline`, :class:`PipelineOptions`, :class:`PipelineResult`).
"""

from __future__ import annotations

from edgeplan.runtimes.pipeline.actors import Link, Stage
from edgeplan.runtimes.pipeline.runner import PipelineOptions, PipelineResult, run_pipeline
from edgeplan.runtimes.pipeline.stages import Message, PipelineStage, message_bytes, pipeline_stages, transfer_ms

__all__ = ["Link", "Message", "PipelineOptions", "PipelineResult", "PipelineStage", "Stage", "message_bytes",
           "pipeline_stages", "run_pipeline", "transfer_ms"]
