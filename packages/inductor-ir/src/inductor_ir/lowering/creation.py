"""Lowerings that create tensors: full, scalar_tensor, arange, iota, and seeded random numbers.

Random numbers: a lowering first makes a one-element int64 *seed buffer* with a fallback call of
``aten.randint`` (so it follows ``torch.manual_seed``), then a ``Pointwise`` computing
``ops.rand(seed, offset)`` / ``ops.randn(seed, offset)`` where ``offset`` is the element's linear
(row-major) index. Each backend maps (seed, offset) to numbers with its own counter-based generator;
results match eager in distribution only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.layout import Layout, contiguous_strides
from inductor_ir.ir.nodes import FallbackKernel, IRNode, Pointwise
from inductor_ir.lowering.common import const, convert, round_scalar
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import sympify_int

aten = torch.ops.aten
Index = Sequence[sympy.Expr]


def _device(device: Any) -> str:
    return str(torch.device(device)) if device is not None else "cpu"


@lowering(aten.full.default)
def full(ctx: LoweringContext, size: Sequence[Any], fill_value: Any, *, dtype: torch.dtype | None = None,
         layout: Any = None, device: Any = None, pin_memory: Any = None) -> Pointwise:  # fmt: skip
    """A tensor of ``size`` filled with ``fill_value``."""
    out = ctx.out_dtype(dtype or torch.get_default_dtype())
    sizes = tuple(sympify_int(s) for s in size)
    if out in (torch.float16, torch.bfloat16, torch.float32) and isinstance(fill_value, (int, float)):
        # The value as the tensor holds it: a float16 tensor of 1e5 is inf even where kernels compute
        # in float32 (a number given to arithmetic, `x * 0.1`, keeps its precision: not this path).
        fill_value = round_scalar(fill_value, out)
    return Pointwise(lambda index: const(fill_value, out), sizes, out, _device(device), (ctx.origin,))


@lowering(aten.scalar_tensor.default)
def scalar_tensor(ctx: LoweringContext, value: Any, *, dtype: torch.dtype | None = None, layout: Any = None,
                  device: Any = None, pin_memory: Any = None) -> Pointwise:  # fmt: skip
    """A 0-d tensor."""
    return full(ctx, [], value, dtype=dtype, device=device)


@lowering(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(ctx: LoweringContext, *args: Any, dtype: torch.dtype | None = None, layout: Any = None,
           device: Any = None, pin_memory: Any = None) -> Pointwise:  # fmt: skip
    """``start + step * i`` for i in range(length)."""
    start, step = 0, 1
    if len(args) == 1:
        end = args[0]
    elif len(args) == 2:
        start, end = args
    else:
        start, end, step = args
    out = ctx.out_dtype(dtype or torch.int64)
    val = ctx.meta()
    if isinstance(val, torch.Tensor):
        length = sympify_int(val.shape[0])
    elif all(isinstance(v, int) for v in (start, end, step)):
        length = sympy.Integer(max(0, -(-(end - start) // step)))
    else:
        raise NotLowerable("arange length")
    compute = out if out.is_floating_point or out == torch.int64 else torch.int64

    def inner(index: Index) -> Any:
        i = ops.index_expr(index[0], torch.int64)
        value = ops.add(ops.mul(convert(i, compute, torch.int64), const(step, compute)), const(start, compute))
        return convert(value, out, compute)

    return Pointwise(inner, (length,), out, _device(device), (ctx.origin,))


@lowering(torch.ops.prims.iota.default)
def iota(ctx: LoweringContext, length: Any, *, start: Any, step: Any, dtype: torch.dtype, device: Any,
         requires_grad: bool) -> Pointwise:  # fmt: skip
    """``start + step * i`` as ``dtype``."""
    n = sympify_int(length)

    def inner(index: Index) -> Any:
        value = ops.add(ops.mul(ops.index_expr(index[0], torch.int64), const(step, torch.int64)), const(start, torch.int64))
        return convert(value, dtype, torch.int64)

    return Pointwise(inner, (n,), dtype, _device(device), (ctx.origin,))


def _seed_buffer(ctx: LoweringContext, device: str) -> FallbackKernel:
    """A one-element int64 tensor of random bits drawn from torch's generator by the wrapper."""
    layout = Layout(device, torch.int64, (sympy.Integer(1),), (sympy.Integer(1),))
    seed = FallbackKernel(
        ctx.new_name(), layout, aten.randint.low, (-(2**62), 2**62, [1]), {"dtype": torch.int64, "device": torch.device(device)}
    )
    ctx.register(seed)
    return seed


def random_values(ctx: LoweringContext, size: Sequence[sympy.Expr], device: str, dtype: torch.dtype, kind: str) -> Pointwise:
    """Uniform [0, 1) (``kind='rand'``) or standard normal (``'randn'``) values of ``size``."""
    if not dtype.is_floating_point:
        raise NotLowerable("random integers")
    seed = _seed_buffer(ctx, device)
    seed_load = seed.make_loader()
    strides = contiguous_strides(size)

    def inner(index: Index) -> Any:
        offset = sum((i * s for i, s in zip(index, strides)), sympy.Integer(0))
        value = getattr(ops, kind)(seed_load([sympy.Integer(0)]), ops.index_expr(offset, torch.int64))
        return convert(value, dtype, torch.float32)

    return Pointwise(inner, tuple(size), dtype, device, (ctx.origin,))


@lowering(aten.rand.default, aten.randn.default)
def rand(ctx: LoweringContext, size: Sequence[Any], *, generator: Any = None, dtype: torch.dtype | None = None,
         layout: Any = None, device: Any = None, pin_memory: Any = None) -> Pointwise:  # fmt: skip
    """Seeded uniform/normal random numbers (see the module docstring)."""
    if generator is not None:
        raise NotLowerable("explicit generator")
    out = ctx.out_dtype(dtype or torch.get_default_dtype())
    return random_values(ctx, [sympify_int(s) for s in size], _device(device), out, ctx.origin)


@lowering(aten.rand_like.default, aten.randn_like.default)
def rand_like(ctx: LoweringContext, x: IRNode, *, dtype: torch.dtype | None = None, layout: Any = None,
              device: Any = None, pin_memory: Any = None, memory_format: Any = None) -> Pointwise:  # fmt: skip
    """Random numbers shaped like ``x``."""
    kind = ctx.origin.removesuffix("_like")
    return random_values(ctx, x.get_size(), _device(device) if device else x.device, dtype or x.dtype, kind)


@lowering(aten.native_dropout.default)
def native_dropout(ctx: LoweringContext, x: IRNode, p: float, train: bool | None) -> tuple[IRNode, IRNode]:
    """(x * mask / (1 - p), mask) with ``mask = rand >= p``."""
    if train is False or not x.dtype.is_floating_point:
        raise NotLowerable("eval-mode or integer dropout")
    noise = ctx.realize(random_values(ctx, x.get_size(), x.device, torch.float32, "rand"))
    nload = noise.make_loader()
    mask = Pointwise(lambda index: ops.ge(nload(index), ops.constant(float(p), torch.float32)), x.get_size(), torch.bool, x.device, (ctx.origin,))
    mask_buf = ctx.realize(mask)
    mload, xload, dtype = mask_buf.make_loader(), x.make_loader(), x.dtype
    scale = 0.0 if p >= 1 else 1.0 / (1.0 - p)

    def inner(index: Index) -> Any:
        value = ops.mul(convert(xload(index), torch.float32, dtype), ops.constant(scale, torch.float32))
        kept = ops.where(mload(index), value, ops.constant(0.0, torch.float32))
        return convert(kept, dtype, torch.float32)

    return Pointwise(inner, x.get_size(), dtype, x.device, (ctx.origin,)), mask_buf


@lowering(aten.zeros.default, aten.ones.default)
def zeros(ctx: LoweringContext, size: Sequence[Any], *, dtype: torch.dtype | None = None, layout: Any = None,
          device: Any = None, pin_memory: Any = None) -> Pointwise:  # fmt: skip
    """``full(size, 0)`` / ``full(size, 1)``."""
    return full(ctx, size, 0 if ctx.origin == "zeros" else 1, dtype=dtype, device=device)


@lowering(aten._efficientzerotensor.default)
def efficient_zero_tensor(ctx: LoweringContext, size: Sequence[Any], *, dtype: torch.dtype | None = None,
                          layout: Any = None, device: Any = None, pin_memory: Any = None) -> Pointwise:  # fmt: skip
    """Autograd's zero gradient, as real zeros: eager's ZeroTensor has no storage, so running it as
    a fallback would hand the wrapper a buffer it cannot write into."""
    return full(ctx, size, 0, dtype=dtype, device=device)


@lowering(aten.zeros_like.default, aten.ones_like.default, aten.full_like.default)
def zeros_like(ctx: LoweringContext, x: IRNode, *args: Any, dtype: torch.dtype | None = None, layout: Any = None,
               device: Any = None, pin_memory: Any = None, memory_format: Any = None) -> Pointwise:  # fmt: skip
    """A tensor shaped like ``x`` filled with 0, 1 or ``fill_value``."""
    value = {"zeros_like": 0, "ones_like": 1}.get(ctx.origin, args[0] if args else 0)
    out = ctx.out_dtype(dtype or x.dtype)
    return Pointwise(lambda index: const(value, out), x.get_size(), out, _device(device) if device else x.device, (ctx.origin,))


@lowering(aten.new_zeros.default, aten.new_ones.default, aten.new_full.default)
def new_full(ctx: LoweringContext, x: IRNode, size: Sequence[Any], *args: Any, dtype: torch.dtype | None = None,
             layout: Any = None, device: Any = None, pin_memory: Any = None) -> Pointwise:  # fmt: skip
    """A new tensor of ``size`` with ``x``'s dtype and device unless given."""
    value = {"new_zeros": 0, "new_ones": 1}.get(ctx.origin, args[0] if args else 0)
    return full(ctx, size, value, dtype=dtype or x.dtype, device=device or x.device)
