"""Launching compiled Triton kernels directly.

Triton's own launch path (`JITFunction.run`) binds and specializes every argument on every call, which
costs tens of microseconds. Here a kernel is compiled once per `Variant` (argument types, which pointers
are 16-byte aligned, block sizes, warps, stages) with `triton.compile`, and each call goes straight to
the compiled kernel's launcher with a precomputed grid.

Compiling is slow (LLVM and ptxas, about half a second per kernel and configuration), so the variants a
graph will need are compiled ahead in worker processes (see `compile_pool.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["FastKernel", "Variant", "compile_variant", "kernel_source", "make_variant"]

_POINTER_TYPES: dict[torch.dtype, str] = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float64: "fp64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "u1",
}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class Variant:
    """One specialization of a kernel: what `triton.compile` needs besides the function itself.

    Attributes:
        types: the Triton type of each runtime argument (`*fp32`, `i32`, ...), in order.
        aligned: positions of pointer arguments whose address is a multiple of 16 bytes.
        blocks: the constexpr block sizes, in the order of the function's parameters after the runtime ones.
        num_warps, num_stages: compile options.
    """

    types: tuple[str, ...]
    aligned: tuple[int, ...]
    blocks: tuple[int, ...]
    num_warps: int
    num_stages: int


def _value_type(value: Any) -> tuple[str, bool] | None:
    """(Triton type, 16-byte aligned) of a runtime argument or of its stand-in (a dtype for a pointer)."""
    if isinstance(value, torch.Tensor):
        name = _POINTER_TYPES.get(value.dtype)
        return None if name is None else ("*" + name, value.data_ptr() % 16 == 0)
    if isinstance(value, torch.dtype):
        name = _POINTER_TYPES.get(value)
        return None if name is None else ("*" + name, True)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return ("i32" if _INT32_MIN <= value <= _INT32_MAX else "i64"), False


def make_variant(args: Sequence[Any], blocks: Sequence[int], num_warps: int, num_stages: int) -> Variant | None:
    """The variant for these runtime arguments (tensors, or dtypes standing for aligned tensors, and ints).

    Returns None when an argument has a type the direct path does not handle (Triton's path is used).
    """
    types: list[str] = []
    aligned: list[int] = []
    for position, value in enumerate(args):
        typed = _value_type(value)
        if typed is None:
            return None
        types.append(typed[0])
        if typed[1]:
            aligned.append(position)
    return Variant(tuple(types), tuple(aligned), tuple(blocks), num_warps, num_stages)


def kernel_source(fn: Any, variant: Variant) -> Any:
    """Triton's `ASTSource` of `fn` (a `@triton.jit` function, or anything with its `__name__` and
    `arg_names`) specialized to `variant`."""
    from triton.compiler import ASTSource

    names = list(fn.arg_names)
    runtime = len(variant.types)
    if runtime + len(variant.blocks) != len(names):
        raise ValueError(f"{fn.__name__}: {len(names)} parameters, got {runtime} arguments and {len(variant.blocks)} blocks")
    signature = dict(zip(names, variant.types))
    signature.update({name: "constexpr" for name in names[runtime:]})
    constexprs = {(runtime + k,): block for k, block in enumerate(variant.blocks)}
    attrs = {(position,): [["tt.divisibility", 16]] for position in variant.aligned}
    return ASTSource(fn, signature, constexprs, attrs)


COMPILE_OPTIONS: dict[str, bool] = {"enable_reflect_ftz": False}
"""Triton compile options of every GPU kernel: libdevice's functions keep float32 subnormals (Triton
flushes them by default: fmod(1e-40, -1.5) gave 0, so 1e-40 // -1.5 gave -0.0 where eager gives -1)."""


def compile_variant(fn: Any, variant: Variant, target: Any) -> Any:
    """`triton.compile` of `fn` (a `@triton.jit` function) for `variant` and a `GPUTarget`."""
    import triton

    options: dict[str, Any] = {"num_warps": variant.num_warps, "num_stages": variant.num_stages, **COMPILE_OPTIONS}
    if getattr(fn, "debug", False):  # a kernel with runtime checks: its asserts compiled in (codegen/checks.py)
        options.update(debug=True, sanitize_overflow=False)
    return triton.compile(kernel_source(fn, variant), target=target, options=options)


class FastKernel:
    """A compiled kernel and its launcher: `launch(grid, args)` with the runtime arguments only."""

    def __init__(self, compiled: Any, variant: Variant) -> None:
        """Loads the kernel on the current device (raises Triton's `OutOfResources` when it cannot run)."""
        from triton.runtime.driver import driver

        compiled._init_handles()
        self.compiled = compiled
        self.variant = variant
        runner = compiled.run
        self.function = compiled.function
        self.get_stream = driver.active.get_current_stream
        self.blocks = variant.blocks
        self.aligned = variant.aligned
        # `call(grid_x, grid_y, grid_z, stream, function, *middle, *args, *blocks)` launches. Without
        # scratch memory, Triton's C launch function is called directly (its Python wrapper only
        # allocates scratch space); otherwise its launcher object, with no launch hooks.
        raw = getattr(runner, "launch", None)
        scratch = (getattr(runner, "global_scratch_size", 1), getattr(runner, "profile_scratch_size", 1))
        if raw is not None and scratch == (0, 0) and hasattr(runner, "launch_pdl"):
            self.call = raw
            self.middle: tuple[Any, ...] = (
                runner.launch_cooperative_grid, runner.launch_pdl, None, None, compiled.packed_metadata, None, None, None,
            )
        else:
            self.call = runner
            self.middle = (compiled.packed_metadata, None, None, None)

    def launch(self, grid: tuple[int, int, int], device: int, args: Sequence[Any]) -> None:
        """Launch on the current stream of CUDA device `device`."""
        self.call(grid[0], grid[1], grid[2], self.get_stream(device), self.function, *self.middle, *args, *self.blocks)
