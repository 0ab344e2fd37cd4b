"""The graph cache's key: a stable hash of everything that changes what compiling a graph produces.

`key_components` names each part (so a test, or a puzzled user, can see which one changed) and
`graph_key` hashes them together:

* ``graph``: the captured FX graph's code, its submodules (class, settings, train/eval mode, and the
  code of classes outside torch.nn), the code of Python functions it calls, and the contents of
  constant tensors it holds (parameters and buffers count by their metadata: they are inputs);
* ``inputs`` and ``state``: each example input's and parameter's shape (sizes as symbols where
  dynamic), strides, dtype, device and requires_grad; non-tensor inputs by value;
* ``shapes``: the ranges of the size symbols and the shape guards recorded so far;
* ``modes``: grad mode, autocast, the default dtype, deterministic algorithms and float32 matmul
  precision, which the traced graphs bake in;
* ``options``: the frontend's options that reach the compiled code, each stage's typed options by
  their ``hash()`` (capture, aotgrad, inductor_ir) and the kernel backend's ``hash()``;
* ``versions``: Python, torch and triton versions, Kiln's package versions and a fingerprint of
  their installed files (a development checkout changes without a new version);
* ``device``: the machine kind, and for CUDA the GPU's name and compute capability.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import json
import platform
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from frontend.config import Config

__all__ = ["FORMAT_VERSION", "graph_key", "key_components", "shape_env_of"]

FORMAT_VERSION = "2"
"""Bumped whenever what an entry holds changes shape: old entries then simply miss."""

KILN_PACKAGES: tuple[str, ...] = ("capture", "aotgrad", "inductor_ir", "codegen_cpp", "codegen_triton", "frontend")
# Options that do not change compiled code (where things are written, what is logged).
_NEUTRAL_OPTIONS = frozenset({"debug", "debug_dir", "logs", "cache_dir", "graph_cache"}) | frozenset(
    {"repro_after", "repro_level", "repro_dir", "report", "progress"}  # diagnostics: what is written or shown
)
_NEUTRAL_BACKEND_FIELDS = frozenset({"cache_dir", "debug_dir", "compile_workers"})


def _digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _code_digest(fn: Any) -> str | None:
    """A digest of a Python function's (or class's) source; None for builtins and C functions."""
    code = getattr(fn, "__code__", None)
    if isinstance(code, types.CodeType):
        return _digest(_code_text(code))
    if isinstance(fn, type):
        try:
            return _digest(inspect.getsource(fn))
        except (OSError, TypeError):
            return f"{fn.__module__}.{fn.__qualname__}"
    return None


def _code_text(code: types.CodeType) -> str:
    """A code object's bytecode, names and constants, nested code objects (lambdas, comprehensions)
    spelled the same way (their repr holds a memory address, different in every process)."""
    consts = [_code_text(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    return repr((code.co_code, consts, code.co_names))


def _torch_owned(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module.split(".", 1)[0] in {"torch", "builtins", "operator", "math", "_operator"}


def _tensor_meta(value: torch.Tensor) -> list[Any]:
    return [
        [str(n) for n in value.shape], [str(n) for n in value.stride()], str(value.storage_offset()),
        str(value.dtype), str(value.device), bool(value.requires_grad), str(value.layout),
    ]


def _value_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ["tensor", *_tensor_meta(value)]
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ["sym", type(value).__name__, str(value)]
    if isinstance(value, (bool, int, float, str, type(None))):
        return [type(value).__name__, repr(value)]
    return [f"{type(value).__module__}.{type(value).__qualname__}"]


def _content_digest(value: torch.Tensor) -> str:
    """A digest of a constant tensor's values (they are compiled into the graph)."""
    if value.is_meta or value.is_sparse:
        return "no data"
    data = value.detach().to("cpu").contiguous().reshape(-1)
    try:
        return _digest(data.view(torch.uint8).numpy().tobytes()) if data.numel() else "empty"
    except (RuntimeError, TypeError):  # a dtype without a byte view
        return _digest(repr(data.tolist()))


def _graph_part(gm: torch.fx.GraphModule) -> dict[str, Any]:
    states = {id(t) for t in (*gm.parameters(), *gm.buffers())}
    modules = []
    for name, module in gm.named_modules():
        if module is gm:
            continue
        cls = type(module)
        entry = [name, f"{cls.__module__}.{cls.__qualname__}", module.extra_repr(), module.training]
        if not _torch_owned(cls):
            entry.append(_code_digest(cls))
        modules.append(entry)
    functions = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and not _torch_owned(node.target):
            functions.append([node.name, _code_digest(node.target)])
    constants = []
    for name, value in sorted(vars(gm).items()):
        if isinstance(value, torch.Tensor) and id(value) not in states:
            constants.append([name, *_tensor_meta(value), _content_digest(value)])
    return {"code": gm.code, "modules": modules, "functions": functions, "constants": constants}


def shape_env_of(example_inputs: Sequence[Any]) -> Any:
    """The ShapeEnv of the example inputs' fake mode (None for real or static inputs)."""
    for value in example_inputs:
        env = getattr(getattr(value, "fake_mode", None), "shape_env", None)
        if env is not None:
            return env
    return None


def _shape_part(example_inputs: Sequence[Any]) -> dict[str, Any]:
    env = shape_env_of(example_inputs)
    if env is None:
        return {}
    ranges = {str(s): str(r) for s, r in getattr(env, "var_to_range", {}).items()}
    guards = sorted(str(getattr(g, "expr", g)) for g in getattr(env, "guards", ()))
    return {"ranges": dict(sorted(ranges.items())), "guards": guards}


def _modes_part() -> dict[str, Any]:
    autocast: dict[str, list[Any] | None] = {}
    for device in ("cpu", "cuda"):
        try:
            enabled = torch.is_autocast_enabled(device)
            autocast[device] = [enabled, str(torch.get_autocast_dtype(device)) if enabled else None]
        except (RuntimeError, TypeError, AttributeError):
            autocast[device] = None
    return {
        "grad": torch.is_grad_enabled(),
        "autocast": autocast,
        "default dtype": str(torch.get_default_dtype()),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "matmul precision": torch.get_float32_matmul_precision(),
    }


def _backend_identity(backend: Any) -> Any:
    inner = getattr(backend, "inner", backend)
    identity = getattr(inner, "hash", None)
    if callable(identity):
        return str(identity())
    cls = type(inner)
    config = getattr(inner, "config", None)
    fields = {}
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        fields = {f.name: repr(getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in _NEUTRAL_BACKEND_FIELDS}
    return [f"{cls.__module__}.{cls.__qualname__}", fields]


def _options_part(config: Config, backends: Mapping[str, Any]) -> dict[str, Any]:
    options = {name: repr(getattr(config, name)) for name in config.option_names() if name not in _NEUTRAL_OPTIONS}
    stages = {
        "capture": config.capture_config().hash(),
        "aotgrad": config.aot_config().hash(),
        "inductor_ir": config.inductor_config().hash(),
    }
    backend_ids = {device: _backend_identity(b) for device, b in sorted(backends.items())}
    return {"frontend": options, "stages": stages, "backends": backend_ids}


@functools.cache
def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@functools.cache
def _installed_files_digest(package: str) -> str:
    """Names, sizes and modification times of a package's installed files (cheap: no reads)."""
    try:
        module = sys.modules.get(package) or __import__(package)
    except ImportError:
        return "absent"
    root = Path(getattr(module, "__file__", "") or "").parent
    digest = hashlib.sha256(getattr(module, "__version__", "?").encode())
    for path in sorted(root.rglob("*")):
        if path.suffix in {".py", ".h", ".cpp", ".c"}:
            stat = path.stat()
            digest.update(f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@functools.cache
def versions_part() -> dict[str, Any]:
    """Python, torch, triton and Kiln's own versions and file fingerprints (fixed for a process)."""
    return {
        "python": sys.version,
        "torch": torch.__version__,
        "triton": _distribution_version("triton"),
        "kiln": {name: _installed_files_digest(name) for name in KILN_PACKAGES},
    }


def _device_part(device_type: str) -> dict[str, Any]:
    part: dict[str, Any] = {"machine": platform.machine(), "system": platform.system()}
    if device_type == "cuda" and torch.cuda.is_available():
        index = torch.cuda.current_device()
        part["gpu"] = [torch.cuda.get_device_name(index), list(torch.cuda.get_device_capability(index))]
    return part


def key_components(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    config: Config,
    backends: Mapping[str, Any],
    device_type: str,
) -> dict[str, Any]:
    """Every part of a graph's key, by name (see the module docstring); all JSON-serializable."""
    return {
        "format": FORMAT_VERSION,
        "graph": _graph_part(gm),
        "inputs": [_value_meta(x) for x in example_inputs],
        "state": [[name, *_tensor_meta(t)] for name, t in (*gm.named_parameters(), *gm.named_buffers())],
        "shapes": _shape_part(example_inputs),
        "modes": _modes_part(),
        "options": _options_part(config, backends),
        "versions": versions_part(),
        "device": _device_part(device_type),
    }


def graph_key(components: Mapping[str, Any]) -> str:
    """The hex digest of `components` (from `key_components`)."""
    return _digest(json.dumps(components, sort_keys=True, default=repr))
