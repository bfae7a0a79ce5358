"""What a measurement ran on: CPU (vendor, family, model, stepping, ISA extensions, caches), cores, threads,
runtime and version, dtype, allocator settings, GPU.

A :class:`DeviceDescriptor` is stored with every measurement. Its :attr:`~DeviceDescriptor.key` hashes only the
fields that change a latency, so two machines of the same kind share a key and one machine that is upgraded
(new runtime version, other thread count) gets a new one. Its :attr:`~DeviceDescriptor.fingerprint` hashes the
machine alone (not the measurement's thread count or dtype), and :func:`same_device` says whether costs measured
on one descriptor's machine may stand for another's: CPUs that share a marketing name ("AMD EPYC") but differ in
family, model, ISA extensions or caches are told apart. The runtime is imported only inside
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
    "DESCRIPTOR_VERSION",
    "describe_device",
    "device_differences",
    "is_cuda_device",
    "same_device",
]

#: Runtimes edgeplan measures with.
RUNTIMES: tuple[str, ...] = ("torch", "onnxruntime", "litert")
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
#: What :func:`describe_device` records: 2 adds the CPU's identity, ISA extensions and caches. A descriptor
#: stored before (version 1) lacks them, so it cannot be told apart from another CPU of the same name.
DESCRIPTOR_VERSION = 2
#: The fields of the machine (not of one measurement's settings, nor provenance) that :attr:`fingerprint` hashes.
_MACHINE_FIELDS = (
    "cpu_model",
    "cpu_vendor",
    "cpu_family",
    "cpu_model_number",
    "cpu_stepping",
    "isa",
    "l1d_kib",
    "l2_kib",
    "l3_kib",
    "logical_cores",
    "physical_cores",
    "runtime",
    "runtime_version",
    "accelerator",
    "allocator",
)
#: The fields version 2 added; they count in :attr:`DeviceDescriptor.key` of version-2 descriptors only, so the
#: keys of stored version-1 descriptors (and the campaigns named after them) stay as they were.
_IDENTITY_FIELDS = ("cpu_vendor", "cpu_family", "cpu_model_number", "cpu_stepping", "isa", "l1d_kib", "l2_kib",
                    "l3_kib")
#: ISA extensions that change which kernels a runtime picks (x86 ``flags`` and Arm ``Features`` of /proc/cpuinfo).
ISA_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
    "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
    "asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2",
)
_CPUINFO = Path("/proc/cpuinfo")
_CPU_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
_VERSIONED_PACKAGES = ("torch", "onnxruntime", "onnx", "numpy", "torchvision", "timm", "ai-edge-litert", "litert-torch")


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
    cpu_vendor, cpu_family, cpu_model_number, cpu_stepping
        The CPU's identity from ``/proc/cpuinfo`` (x86 ``vendor_id``, ``cpu family``, ``model``, ``stepping``; Arm
        ``CPU implementer``, ``CPU architecture``, ``CPU part``, ``CPU revision``); None where it does not say.
        Two generations of one vendor's CPUs often share a ``cpu_model`` name in a virtual machine.
    isa
        The ISA extensions of :data:`ISA_FLAGS` the CPU has, sorted; None where unknown.
    l1d_kib, l2_kib, l3_kib
        Cache sizes of the first CPU (KiB, from sysfs); None where unknown.
    descriptor_version
        :data:`DESCRIPTOR_VERSION` for a descriptor made now; 1 for one stored before the CPU's identity was
        recorded (its identity fields are None, and :func:`same_device` cannot match it to any machine).
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
    cpu_vendor: str | None = None
    cpu_family: int | None = None
    cpu_model_number: int | None = None
    cpu_stepping: int | None = None
    isa: tuple[str, ...] | None = None
    l1d_kib: int | None = None
    l2_kib: int | None = None
    l3_kib: int | None = None
    descriptor_version: int = 1

    @property
    def key(self) -> str:
        """Stable 16-hex-digit id of the fields that change latency (not hostname, OS or Python)."""
        fields_: dict[str, object] = {name: getattr(self, name) for name in _KEY_FIELDS}
        if self.allocator is not None:  # glibc's defaults keep the keys of the measurements made before it counted
            fields_["allocator"] = self.allocator
        if self.descriptor_version > 1:  # version 1 keeps the keys of the measurements stored before
            fields_.update({name: _plain(getattr(self, name)) for name in _IDENTITY_FIELDS})
            fields_["descriptor_version"] = self.descriptor_version
        payload = json.dumps(fields_, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    @property
    def fingerprint(self) -> str:
        """Stable 12-hex-digit id of the machine: CPU identity, ISA extensions, caches, cores, runtime and version,
        accelerator and allocator settings; not the measurement's thread count or dtype, nor provenance."""
        fields_ = {name: _plain(getattr(self, name)) for name in _MACHINE_FIELDS}
        fields_["descriptor_version"] = self.descriptor_version
        payload = json.dumps(fields_, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:12]

    @property
    def described(self) -> bool:
        """Whether the CPU's identity was recorded (:attr:`descriptor_version` 2 or later)."""
        return self.descriptor_version >= DESCRIPTOR_VERSION

    def summary(self) -> str:
        """One line naming the machine: CPU name and identity, cores, runtime and version, fingerprint."""
        ident = ""
        if self.described:
            parts = [p for p in (self.cpu_vendor, _numbered("family", self.cpu_family),
                                 _numbered("model", self.cpu_model_number)) if p]
            ident = f" ({', '.join(parts)})" if parts else ""
        else:
            ident = " (CPU identity not recorded)"
        return (f"{self.cpu_model}{ident}, {self.logical_cores} cores, {self.runtime} {self.runtime_version}, "
                f"fingerprint {self.fingerprint}")

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
        optional = {"allocator", "descriptor_version", *_IDENTITY_FIELDS}  # absent from older descriptors
        missing, unknown = names - given.keys() - optional, given.keys() - names
        if missing or unknown:
            raise InvalidInputError(
                f"device descriptor: missing fields {sorted(missing)}, unknown fields {sorted(unknown)}; "
                "pass the output of DeviceDescriptor.to_dict()"
            )
        if isinstance(given.get("isa"), list):  # JSON has no tuples
            given["isa"] = tuple(given["isa"])  # type: ignore[arg-type]
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
        for name in ("accelerator", "allocator", "cpu_vendor"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidInputError(f"device descriptor: {name} must be a string or null, got {value!r}")
        for name in ("cpu_family", "cpu_model_number", "cpu_stepping", "l1d_kib", "l2_kib", "l3_kib"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise InvalidInputError(f"device descriptor: {name} must be an integer or null, got {value!r}")
        if self.isa is not None and not (isinstance(self.isa, tuple) and all(isinstance(f, str) for f in self.isa)):
            raise InvalidInputError(f"device descriptor: isa must be a list of strings or null, got {self.isa!r}")
        version = self.descriptor_version
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= DESCRIPTOR_VERSION:
            raise InvalidInputError(f"device descriptor: descriptor_version must be an integer from 1 to "
                                    f"{DESCRIPTOR_VERSION}, got {version!r}; a newer edgeplan wrote it: upgrade")


def same_device(a: DeviceDescriptor, b: DeviceDescriptor) -> bool:
    """Whether costs measured on ``a``'s machine may stand for ``b``'s: the same :attr:`~DeviceDescriptor.fingerprint`
    (CPU identity, ISA extensions, caches, cores, runtime and version, accelerator, allocator settings).

    Parameters
    ----------
    a, b
        Two descriptors; their thread counts and dtypes are the measurements' settings, not compared here.

    Returns
    -------
    bool
        False when either was recorded without the CPU's identity (:attr:`~DeviceDescriptor.described`): CPUs of
        one name differ too much to take one for the other unseen.
    """
    return a.described and b.described and a.fingerprint == b.fingerprint


def device_differences(a: DeviceDescriptor, b: DeviceDescriptor) -> list[str]:
    """What tells ``a``'s machine from ``b``'s, one ``"field: a-value vs b-value"`` per differing field.

    Returns
    -------
    list of str
        Empty when :func:`same_device` holds; a single line saying so when either descriptor lacks the CPU's
        identity.
    """
    if not (a.described and b.described):
        return ["CPU family, model, ISA extensions and caches not recorded (an older edgeplan), so it cannot be "
                "told from another CPU of that name"]
    return [f"{name}: {_shown(getattr(a, name))} vs {_shown(getattr(b, name))}" for name in _MACHINE_FIELDS
            if getattr(a, name) != getattr(b, name)]


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _numbered(what: str, value: int | None) -> str | None:
    return None if value is None else f"{what} {value}"


def _shown(value: object) -> str:
    return " ".join(value) if isinstance(value, tuple) else str(value)


def describe_device(runtime: str, threads: int, dtype: str = "float32", torch_device: str = "cpu") -> DeviceDescriptor:
    """Describe this machine for a measurement with ``runtime`` on ``torch_device``.

    Parameters
    ----------
    runtime
        ``"torch"`` or ``"onnxruntime"``.
    threads
        Intra-op thread count the measurement uses (at least 1).
    dtype
        Element type, one of :data:`DTYPES`.
    torch_device
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
    _check_arguments(runtime, threads, dtype, torch_device)
    text = _read_cpuinfo()
    vendor, family, model, stepping = _cpu_identity(text)
    l1d, l2, l3 = _cache_kib(_CPU_SYSFS)
    return DeviceDescriptor(
        cpu_model=_cpu_model(),
        logical_cores=os.cpu_count() or 0,
        physical_cores=_physical_cores(),
        threads=threads,
        runtime=runtime,
        runtime_version=_runtime_version(runtime),
        dtype=dtype,
        accelerator=_accelerator(torch_device),
        hostname=socket.gethostname(),
        os=platform.platform(),
        python=platform.python_version(),
        allocator=allocator_settings(),
        cpu_vendor=vendor,
        cpu_family=family,
        cpu_model_number=model,
        cpu_stepping=stepping,
        isa=_isa(text),
        l1d_kib=l1d,
        l2_kib=l2,
        l3_kib=l3,
        descriptor_version=DESCRIPTOR_VERSION,
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


def _first_block(text: str) -> dict[str, str]:
    """The ``name: value`` lines of the first processor of a ``/proc/cpuinfo`` text."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        name, _, value = line.partition(":")
        out.setdefault(name.strip(), value.strip())
    return out


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text, 0)
    except ValueError:
        return None


def _cpu_identity(text: str) -> tuple[str | None, int | None, int | None, int | None]:
    """``(vendor, family, model, stepping)`` of a ``/proc/cpuinfo`` text (x86 or Arm); None where it does not say."""
    block = _first_block(text)
    if "vendor_id" in block or "cpu family" in block:
        return (block.get("vendor_id") or None, _int(block.get("cpu family")), _int(block.get("model")),
                _int(block.get("stepping")))
    if "CPU implementer" in block:
        return (block["CPU implementer"], _int(block.get("CPU architecture")), _int(block.get("CPU part")),
                _int(block.get("CPU revision")))
    return None, None, None, None


def _isa(text: str) -> tuple[str, ...] | None:
    """The :data:`ISA_FLAGS` of a ``/proc/cpuinfo`` text, sorted; None when it lists no flags."""
    block = _first_block(text)
    flags = block.get("flags", block.get("Features"))
    if flags is None:
        return None
    have = set(flags.split())
    return tuple(sorted(f for f in ISA_FLAGS if f in have))


def _cache_kib(root: Path) -> tuple[int | None, int | None, int | None]:
    """``(L1d, L2, L3)`` sizes in KiB of the caches sysfs lists under ``root`` (one CPU's); None where absent."""
    sizes: dict[tuple[str, str], int] = {}
    try:
        indexes = sorted(root.glob("index*"))
    except OSError:
        return None, None, None
    for index in indexes:
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1, "M": 1024, "G": 1024 * 1024}.get(size[-1:], None)
        number = _int(size[:-1] if scale else size)
        if number is not None:
            sizes[(level, kind)] = number * scale if scale else number // 1024
    return sizes.get(("1", "Data")), sizes.get(("2", "Unified")), sizes.get(("3", "Unified"))


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
        if runtime == "litert":
            return f"ai-edge-litert {importlib.metadata.version('ai-edge-litert')} (XNNPACK)"
        import onnxruntime

        return str(onnxruntime.__version__)
    except (ImportError, importlib.metadata.PackageNotFoundError) as e:
        package = "ai-edge-litert" if runtime == "litert" else runtime
        raise MeasurementError(f"runtime {runtime!r} is not installed; install it with `pip install {package}`") from e


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
    from edgeplan._version import __version__

    versions = {"python": platform.python_version(), "edgeplan": __version__}
    for package in _VERSIONED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(versions.items())
