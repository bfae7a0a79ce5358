"""The memory allocator a measurement ran under: recorded with it, and the setting that keeps freed memory.

glibc's ``malloc`` serves every block above its mmap threshold with a fresh ``mmap`` and gives it back with
``munmap`` when freed. The threshold adapts upwards as such blocks are freed, but never past 32 MiB on a 64-bit
system, so an operation whose buffers exceed 32 MiB (eager PyTorch's oneDNN convolution reorders its weights into
one: a 3x3 convolution of 1024 channels has 37.7 MB of them) touches fresh pages at every call, and each page
faults. What that costs is not the operation's: the same convolution can run several times slower in one network
than in another, by whether the allocator had a free block large enough left in its heap, which depends on every
tensor allocated before it. No per-operation predictor can see that.

:data:`KEEP_MEMORY` sets glibc's tunables so that no block is served by ``mmap`` and the heap is never trimmed:
freed memory stays in the process and is reused, as it is under the caching allocators serving deployments use
(jemalloc, tcmalloc; PyTorch's own on a GPU), so an operation's time depends far less on the allocations before it.
glibc reads the tunables when a process starts only, so ``--keep-memory`` (:func:`edgeplan.cli.common.keep_memory`)
re-runs its command with them set (:func:`with_keep_memory`). Whatever allocator settings a process runs under are
part of its measurements' device (:func:`allocator_settings`,
:attr:`edgeplan.measure.device.DeviceDescriptor.allocator`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["KEEP_MEMORY", "allocator_settings", "keeps_memory", "with_keep_memory"]

#: glibc tunables that keep freed memory in the process: no block is served by mmap (threshold 1 GiB), the heap is
#: never trimmed (4 GiB) and grows in steps of 256 MiB.
KEEP_MEMORY: dict[str, str] = {"MALLOC_MMAP_THRESHOLD_": str(2**30), "MALLOC_TRIM_THRESHOLD_": str(2**32),
                               "MALLOC_TOP_PAD_": str(2**28)}

#: Words in a preloaded library's name that make it a replacement allocator (jemalloc, tcmalloc, mimalloc).
_ALLOCATOR_WORDS = ("malloc",)


def allocator_settings(environ: Mapping[str, str] | None = None) -> str | None:
    """The allocator settings of a process with environment ``environ`` (default: this one's), or None for
    glibc's defaults.

    Parameters
    ----------
    environ
        Environment variables; ``os.environ`` when None.

    Returns
    -------
    str or None
        ``NAME=VALUE`` of every glibc ``MALLOC_*_`` tunable set, the ``glibc.malloc`` entries of
        ``GLIBC_TUNABLES``, and ``LD_PRELOAD=...`` of a preloaded allocator library (by file name), sorted and
        space-separated; None when there is none.
    """
    env = os.environ if environ is None else environ
    parts = [f"{k}={v}" for k, v in env.items() if k.startswith("MALLOC_") and k.endswith("_")]
    tunables = [t for t in env.get("GLIBC_TUNABLES", "").split(":") if t.startswith("glibc.malloc.")]
    if tunables:
        parts.append("GLIBC_TUNABLES=" + ":".join(sorted(tunables)))
    preload = [os.path.basename(p) for p in env.get("LD_PRELOAD", "").replace(":", " ").split()
               if any(w in os.path.basename(p) for w in _ALLOCATOR_WORDS)]
    if preload:
        parts.append("LD_PRELOAD=" + ":".join(preload))
    return " ".join(sorted(parts)) or None


def keeps_memory(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``environ`` (default: this process's) sets every tunable of :data:`KEEP_MEMORY` to its value."""
    env = os.environ if environ is None else environ
    return all(env.get(k) == v for k, v in KEEP_MEMORY.items())


def with_keep_memory(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``environ`` (default: this process's) with :data:`KEEP_MEMORY` set, for a child process."""
    return {**(os.environ if environ is None else environ), **KEEP_MEMORY}
