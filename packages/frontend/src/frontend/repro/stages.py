"""The stage a repro script calls: compile one graph as the failing backend did, run it, compare it.

``after="capture"`` hands the captured FX graph to the whole backend (aotgrad, lowering, kernels);
``after="aotgrad"`` hands an ATen graph straight to the backend's kernel compiler
(``inductor_ir.compile_graph`` with the device's code generator for "inductor"). Falling back to
eager is off here, so a failure raises with its own traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import torch

import inductor_ir
from frontend.backends.fallback import graph_device_types
from frontend.backends.kernel_backends import load_kernel_backend
from frontend.backends.registry import lookup_backend
from frontend.config import Config, config
from frontend.context import CompileContext
from frontend.errors import UnknownBackendError
from frontend.repro.accuracy import Mismatch, compare, float64_copy, to_float64

_QUIET = {"fallback_to_eager": False, "repro_after": None, "repro_level": "crash", "report": None, "debug": False}
"""What a repro's own compile must not do: fall back, write repros of itself, report, debug."""


class ReproducedMismatch(AssertionError):
    """A repro script's compiled graph gave a result that differs from eager's."""


def repro_config(options: Mapping[str, Any]) -> Config:
    """The process configuration with a repro's `options` applied and its own side effects off."""
    return config.with_options({**options, **_QUIET})


def _aten_graph_compiler(backend: str, cfg: Config) -> Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]:
    """The backend's compiler of aotgrad's ATen graphs."""
    if backend == "aot_eager":
        return lambda gm, inputs: gm
    if backend != "inductor":
        raise ValueError(
            f"backend {backend!r} has no ATen-graph compiler Kiln can call on its own; "
            "write the repro with after='capture' (KILN_REPRO_AFTER=capture)"
        )

    def compile_aten(gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        devices = graph_device_types(gm, inputs) or {"cpu"}
        if len(devices) > 1:
            raise ValueError(f"this graph mixes devices {sorted(devices)}; Kiln compiles one device per graph")
        (device,) = devices
        kernels = load_kernel_backend(device, cfg)
        return inductor_ir.compile_graph(gm, inputs, backends={device: kernels}, config=cfg.inductor_config())

    return compile_aten


def compile_stage(
    gm: torch.fx.GraphModule, inputs: list[Any], *, after: str, backend: str, options: Mapping[str, Any]
) -> Callable[..., Any]:
    """`gm` compiled by the stage after `after` ("capture" or "aotgrad") of `backend`."""
    cfg = repro_config(options)
    if after == "capture":
        context = CompileContext.for_config(cfg, "repro")
        try:
            compiler = lookup_backend(backend)
        except UnknownBackendError as error:
            raise UnknownBackendError(
                f"{error}\nA repro of a graph compiled by your own backend needs it registered under that name: "
                f"call frontend.register_backend(your_backend, name={backend!r}) before run_repro(...)"
            ) from None
        return compiler(gm, list(inputs), context)
    if after == "aotgrad":
        return _aten_graph_compiler(backend, cfg)(gm, list(inputs))
    raise ValueError(f"after must be 'capture' or 'aotgrad', got {after!r}")


def clone_inputs(inputs: list[Any]) -> list[Any]:
    """Independent copies of the tensor inputs (a compiled graph may update its inputs in place)."""
    def copy(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.detach().clone().requires_grad_(value.requires_grad)
        return value

    return [copy(value) for value in inputs]


def check_accuracy(
    gm: torch.fx.GraphModule, inputs: list[Any], compiled: Callable[..., Any]
) -> Mismatch | None:
    """Run `compiled` and `gm` (eager, and in float64 if needed) on copies of `inputs`; compare."""
    actual = compiled(*clone_inputs(inputs))
    with torch.no_grad():
        expected = gm(*clone_inputs(inputs))
    return compare(actual, expected, lambda: float64_copy(gm)(*to_float64(clone_inputs(inputs))))


def as_graph_module(model: torch.nn.Module) -> torch.fx.GraphModule:
    """A repro script's ``Repro()`` as an FX graph (its forward is generated FX code, so it traces as is)."""
    if isinstance(model, torch.fx.GraphModule):
        return model
    return torch.fx.symbolic_trace(model)


def run_repro(
    model: torch.nn.Module,
    inputs: list[Any],
    *,
    after: str,
    backend: str,
    kind: str = "crash",
    options: Mapping[str, Any] | None = None,
) -> None:
    """What a repro script runs: compile `model`'s graph as the failing stage did and run it.

    A crash raises from where it happens. For ``kind="accuracy"``, a result that differs from eager
    raises `ReproducedMismatch`. When neither happens, it says so on stderr and returns.
    """
    gm = as_graph_module(model)
    compiled = compile_stage(gm, inputs, after=after, backend=backend, options=options or {})
    if kind == "accuracy":
        mismatch = check_accuracy(gm, inputs, compiled)
        if mismatch is not None:
            raise ReproducedMismatch(f"compiled result differs from eager: {mismatch.describe()}")
        print("[kiln] repro: the compiled result matches eager: the mismatch did not reproduce", file=sys.stderr)
        return
    compiled(*clone_inputs(inputs))
    print("[kiln] repro: compiled and ran without an error: the failure did not reproduce", file=sys.stderr)
