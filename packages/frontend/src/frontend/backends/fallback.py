"""Running a graph eagerly when a backend cannot compile it, with the reason logged (or raised)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

import aotgrad
from frontend.context import CompileContext
from frontend.errors import BackendCompileError, describe_error
from inductor_ir import failed_check


def _graph_tensors(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[torch.Tensor]:
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    tensors += list(gm.parameters()) + list(gm.buffers())
    for node in gm.graph.nodes:
        value = node.meta.get("val", node.meta.get("example_value"))
        if isinstance(value, torch.Tensor):
            tensors.append(value)
    return tensors


def graph_device_types(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> set[str]:
    """Device types ("cpu", "cuda", ...) of a graph's tensor inputs, parameters, buffers and values.

    CPU scalars (0-dim tensors) count too: eager PyTorch mixes them with any device, but a
    generated CUDA kernel cannot read CPU memory, so such a graph is treated as mixing devices.
    """
    return {t.device.type for t in _graph_tensors(gm, example_inputs)}


def mixed_devices_reason(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], devices: set[str]) -> str:
    """Why a graph on `devices` is not compiled, with the fix when only CPU scalars cause the mix."""
    reason = f"it mixes devices {sorted(devices)}; Kiln compiles one device per graph"
    others = [t for t in _graph_tensors(gm, example_inputs) if t.device.type == "cpu"]
    if others and all(t.dim() == 0 for t in others):
        reason += " (here: CPU scalar tensors; pass Python numbers or move them to the device)"
    return reason


def fall_back(
    gm: torch.fx.GraphModule,
    context: CompileContext,
    what: str,
    reason: str,
    error: BaseException | None = None,
) -> Callable[..., Any]:
    """`gm` itself (run eagerly), after logging `reason`; raises instead if fallbacks are off."""
    message = f"{context.label}: {what} runs eagerly: {reason}"
    repro = context.repro.write_failure(gm, error) if context.repro is not None and error is not None else None
    if repro is not None:
        message += f" [repro script: {repro}]"
    if not context.config.fallback_to_eager:
        raise BackendCompileError(
            f"{message}. (fallback_to_eager=False; set it to True to run such graphs eagerly, "
            "or try backend='aot_eager' to see whether the failure is in the kernel backend)"
        ) from error
    context.events.emit("fallbacks", message + " (set fallback_to_eager=False to raise instead)")
    return gm


def compile_or_fall_back(
    compile_graph: Callable[[], Callable[..., Any]],
    gm: torch.fx.GraphModule,
    context: CompileContext,
    what: str,
) -> Callable[..., Any]:
    """`compile_graph()`, or `gm` run eagerly if compiling (or the first call) fails.

    The first call is guarded too: C++ and Triton compile lazily on first launch. Graphs handed
    over here are functional (aotgrad applies input mutations itself), so re-running one is safe.
    A compiled callable that takes aotgrad's boxed convention (``fn(args)``) stays boxed.
    """
    try:
        compiled = compile_graph()
    except BackendCompileError:
        raise
    except Exception as error:
        return fall_back(gm, context, what, f"compiling it failed ({describe_error(error)})", error)
    if aotgrad.is_boxed(compiled):
        return _BoxedFirstCallGuard(compiled, gm, context, what)
    return _FirstCallGuard(compiled, gm, context, what)


def unboxed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` called with its inputs as arguments, whether it takes them boxed (one list) or not."""
    if not aotgrad.is_boxed(fn):
        return fn

    def call(*args: Any) -> Any:
        return fn(list(args))

    call.compiled = getattr(fn, "compiled", fn)  # type: ignore[attr-defined]
    return call


class _FirstCallGuard:
    """Calls the compiled graph; if its very first call raises, switches to eager for good (unless a
    runtime check of the data failed: that error is the user's, raised as eager would raise it)."""

    def __init__(self, compiled: Callable[..., Any], gm: torch.fx.GraphModule, context: CompileContext, what: str):
        self._run = compiled
        self._gm: torch.fx.GraphModule | None = gm
        self._context = context
        self._what = what
        self.compiled = compiled

    def __call__(self, *args: Any) -> Any:
        if self._gm is None:
            return self._run(*args)
        gm, self._gm = self._gm, None
        try:
            return self._run(*args)
        except KeyboardInterrupt:
            self._gm = gm  # interrupted, not failed: the next call is still a guarded first run
            raise
        except Exception as error:
            if failed_check(error) is not None:
                self._gm = gm  # bad data (an index out of range), not a bad graph: keep it compiled
                raise
            _raise_if_eager_fails_alike(gm, args, error, self, gm)
            self._run = fall_back(gm, self._context, self._what, f"its first run failed ({describe_error(error)})", error)
            return self._run(*args)


class _BoxedFirstCallGuard(_FirstCallGuard):
    """`_FirstCallGuard` for a compiled graph called boxed (``fn(args)``, which may empty `args`)."""

    boxed_call: Literal[True] = True

    def __call__(self, args: list[Any]) -> Any:  # type: ignore[override]
        if self._gm is None:
            return self._run(args)
        gm, self._gm = self._gm, None
        inputs = list(args)  # the compiled graph empties `args`; eager needs them again if it fails
        try:
            return self._run(args)
        except KeyboardInterrupt:
            self._gm = gm  # interrupted, not failed: the next call is still a guarded first run
            raise
        except Exception as error:
            if failed_check(error) is not None:
                self._gm = gm  # bad data (an index out of range), not a bad graph: keep it compiled
                raise
            _raise_if_eager_fails_alike(gm, inputs, error, self, gm)
            eager = fall_back(gm, self._context, self._what, f"its first run failed ({describe_error(error)})", error)
            self._run = _Unboxing(eager)
            return eager(*inputs)


def _raise_if_eager_fails_alike(
    gm: torch.fx.GraphModule, inputs: Sequence[Any], error: Exception, guard: _FirstCallGuard, kept: torch.fx.GraphModule
) -> None:
    """When the eager graph raises on these inputs too (an error of the same type: an index out of
    range that a fallback kernel checked, a shape eager refuses), the data is at fault, not the
    compiled graph: it stays compiled (and its next call is still a guarded first run) and eager's
    error is raised. Otherwise return: the compiled graph failed where eager does not."""
    try:
        gm.forward(*inputs)  # not gm(...): torch.fx prints the graph's code on an error raised there
    except type(error) as eager_error:
        guard._gm = kept
        raise eager_error from None
    except Exception:
        return


class _Unboxing:
    """Calls an unboxed callable (the eager graph) with a boxed list of inputs."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, args: list[Any]) -> Any:
        inputs = list(args)
        args.clear()
        return self.fn(*inputs)
