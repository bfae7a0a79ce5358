"""What a measurement ran on: CPU, cores, threads, runtime and version, dtype, GPU.

A :class:`DeviceDescriptor` is stored with every measurement. Its :attr:`~DeviceDescriptor.key` hashes only the
fields that change a latency, so two machines of the same kind share a key and one machine that is upgraded
(new runtime version, other thread count) gets a new one. The runtime is imported only inside
:func:`describe_device`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from edgeplan.errors import InvalidInputError, MeasurementError
from edgeplan.measure.allocator import allocator_settings
from edgeplan.measure.harness import check_thread_count

__all__ = [
    "DTYPES",
    "RUNTIMES",
    "DeviceDescriptor",
    "collect_versions",
    "describe_device",
    "is_cuda_device",
]

#: Runtimes edgeplan measures with.
RUNTIMES: tuple[str, ...] = ("torch", "onnxruntime")
#: Element types a measurement can be made in.
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64", "int8", "uint8")

_KEY_FIELDS = (
    "cpu_model",
    "logical_cores",
    "physical_cores",
    "threads",
    "runtime",
    "runtime_version",
    "dtype",
    "accelerator",
)
_CPUINFO = Path("/proc/cpuinfo")
_VERSIONED_PACKAGES = ("torch", "onnxruntime", "onnx", "numpy", "torchvision", "timm")


@dataclass(frozen=True)
class DeviceDescriptor:
    """The machine and software a measurement ran on.

    Attributes
    ----------
    cpu_model
        ``model name`` from ``/proc/cpuinfo``, else :func:`platform.processor`, else ``"unknown"``.
    logical_cores
        :func:`os.cpu_count` (``0`` when unknown).
    physical_cores
        Distinct ``(physical id, core id)`` pairs in ``/proc/cpuinfo``; ``None`` where the file does not say.
    threads
        Intra-op threads the runtime was given.
    runtime
        ``"torch"`` or ``"onnxruntime"``.
    runtime_version
        The runtime's ``__version__``.
    dtype
        Element type of the measured computation, one of :data:`DTYPES`.
    accelerator
        GPU name when the runtime ran on CUDA, else ``None``.
    hostname, os, python
        Provenance only; not part of :attr:`key`.
    allocator
        The memory-allocator settings the process ran under
        (:func:`edgeplan.measure.allocator.allocator_settings`, e.g. glibc's tunables that keep freed memory), None
        for glibc's defaults. Part of :attr:`key` when set: which blocks fault fresh pages changes big operations'
        latency severalfold. Descriptors stored before it was recorded read as None.
    """

    cpu_model: str
    logical_cores: int
    physical_cores: int | None
    threads: int
    runtime: str
    runtime_version: str
    dtype: str
    accelerator: str | None
    hostname: str
    os: str
    python: str
    allocator: str | None = None

    @property
    def key(self) -> str:
        """Stable 16-hex-digit id of the fields that change latency (not hostname, OS or Python)."""
        fields_ = {name: getattr(self, name) for name in _KEY_FIELDS}
        if self.allocator is not None:  # glibc's defaults keep the keys of the measurements made before it counted
            fields_["allocator"] = self.allocator
        payload = json.dumps(fields_, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    def to_dict(self) -> dict[str, object]:
        """Return the fields as a JSON-serialisable dict (without :attr:`key`, which is derived)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> DeviceDescriptor:
        """Rebuild a descriptor from :meth:`to_dict` output.

        Parameters
        ----------
        data
            The fields; a ``"key"`` entry is accepted and must match the recomputed key.

        Returns
        -------
        DeviceDescriptor

        Raises
        ------
        InvalidInputError
            On missing or unknown fields, wrongly typed values, or a ``key`` that does not match.
        """
        names = {f.name for f in fields(cls)}
        given = {k: v for k, v in data.items() if k != "key"}
        missing, unknown = names - given.keys() - {"allocator"}, given.keys() - names
        if missing or unknown:
            raise InvalidInputError(
                f"device descriptor: missing fields {sorted(missing)}, unknown fields {sorted(unknown)}; "
                "pass the output of DeviceDescriptor.to_dict()"
            )
        descriptor = cls(**given)  # type: ignore[arg-type]
        descriptor._check_types()
        if "key" in data and data["key"] != descriptor.key:
            raise InvalidInputError(
                f"device descriptor: key {data['key']!r} does not match its fields (expected {descriptor.key!r}); "
                "the descriptor was edited by hand"
            )
        return descriptor

    def _check_types(self) -> None:
        for name in ("cpu_model", "runtime", "runtime_version", "dtype", "hostname", "os", "python"):
            if not isinstance(getattr(self, name), str):
                raise InvalidInputError(f"device descriptor: {name} must be a string, got {getattr(self, name)!r}")
        for name in ("logical_cores", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInputError(f"device descriptor: {name} must be an integer, got {value!r}")
        if self.physical_cores is not None and not isinstance(self.physical_cores, int):
            raise InvalidInputError(
                f"device descriptor: physical_cores must be an integer or null, got {self.physical_cores!r}"
            )
        for name in ("accelerator", "allocator"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidInputError(f"device descriptor: {name} must be a string or null, got {value!r}")


def describe_device(runtime: str, threads: int, dtype: str = "float32", device: str = "cpu") -> DeviceDescriptor:
    """Describe this machine for a measurement with ``runtime`` on ``device``.

    Parameters
    ----------
    runtime
        ``"torch"`` or ``"onnxruntime"``.
    threads
        Intra-op thread count the measurement uses (at least 1).
    dtype
        Element type, one of :data:`DTYPES`.
    device
        ``"cpu"``, or ``"cuda"`` / ``"cuda:N"`` with the torch runtime.

    Returns
    -------
    DeviceDescriptor

    Raises
    ------
    InvalidInputError
        On an unknown runtime, dtype or device, a bad thread count, or CUDA with onnxruntime.
    MeasurementError
        If the runtime is not installed or CUDA was asked for and is not available.
    """
    _check_arguments(runtime, threads, dtype, device)
    return DeviceDescriptor(
        cpu_model=_cpu_model(),
        logical_cores=os.cpu_count() or 0,
        physical_cores=_physical_cores(),
        threads=threads,
        runtime=runtime,
        runtime_version=_runtime_version(runtime),
        dtype=dtype,
        accelerator=_accelerator(device),
        hostname=socket.gethostname(),
        os=platform.platform(),
        python=platform.python_version(),
        allocator=allocator_settings(),
    )


def _check_arguments(runtime: str, threads: int, dtype: str, device: str) -> None:
    if runtime not in RUNTIMES:
        raise InvalidInputError(f"unknown runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
    check_thread_count(threads)
    if dtype not in DTYPES:
        raise InvalidInputError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if device != "cpu" and not is_cuda_device(device):
        raise InvalidInputError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'")
    if is_cuda_device(device) and runtime != "torch":
        raise InvalidInputError(f"runtime {runtime!r} is measured on the CPU only; use device='cpu'")


def is_cuda_device(device: str) -> bool:
    """Whether ``device`` names a CUDA device.

    Parameters
    ----------
    device
        A device name such as ``"cpu"``, ``"cuda"`` or ``"cuda:1"``.

    Returns
    -------
    bool
        True for ``"cuda"`` and ``"cuda:N"``.
    """
    return device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())


def _read_cpuinfo() -> str:
    try:
        return _CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _read_cpuinfo().splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or "unknown"


def _physical_cores() -> int | None:
    cores: set[tuple[str, str]] = set()
    physical_id = core_id = None
    for line in [*_read_cpuinfo().splitlines(), ""]:
        name, _, value = line.partition(":")
        name = name.strip()
        if name == "physical id":
            physical_id = value.strip()
        elif name == "core id":
            core_id = value.strip()
        elif not line.strip():
            if physical_id is not None and core_id is not None:
                cores.add((physical_id, core_id))
            physical_id = core_id = None
    return len(cores) or None


def _runtime_version(runtime: str) -> str:
    try:
        if runtime == "torch":
            import torch

            return str(torch.__version__)
        import onnxruntime

        return str(onnxruntime.__version__)
    except ImportError as e:
        raise MeasurementError(f"runtime {runtime!r} is not installed; install it with `pip install {runtime}`") from e


def _accelerator(device: str) -> str | None:
    if not is_cuda_device(device):
        return None
    import torch

    if not torch.cuda.is_available():
        raise MeasurementError(f"device {device!r} asked for, but CUDA is not available here; run on the CPU "
                               "('cpu') or on a machine with a CUDA GPU")
    index = int(device[5:]) if ":" in device else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise InvalidInputError(
            f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s); pick one of them"
        )
    return str(torch.cuda.get_device_name(index))


def collect_versions() -> dict[str, str]:
    """Versions of Python, edgeplan and the installed numerical packages, without importing them.

    Read once per process (the code that runs does not change under it, even if a package is reinstalled
    meanwhile): every stored measurement records them, and reading package metadata costs some 12 ms, which was
    nine tenths of a range campaign's time (thousands of small rows).

    Returns
    -------
    dict of str to str
        ``{"python": ..., "edgeplan": ..., "torch": ..., ...}``; packages that are not installed are left out.
        A new dict each call.
    """
    return dict(_versions())


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    from edgeplan import __version__

    versions = {"python": platform.python_version(), "edgeplan": __version__}
    for package in _VERSIONED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(versions.items())
