"""Shared helpers of inductor_ir's tests: random inputs, and lower+interpret vs eager."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir

sys.path.insert(0, str(Path(__file__).parent))

TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


def rand(*shape: int, dtype: torch.dtype = torch.float32, layout: str = "contiguous") -> torch.Tensor:
    """Fresh random values (never zeros) of a dtype; ``layout``: contiguous, transposed or sliced."""
    full = list(shape)
    if layout == "transposed":
        full = full[::-1]
    elif layout == "sliced":
        full = full[:-1] + [full[-1] * 2]
    if dtype == torch.bool:
        t = torch.rand(full) > 0.5
    elif dtype.is_floating_point:
        t = torch.randn(full).to(dtype)
    else:
        t = torch.randint(-5, 6, full, dtype=dtype)
    if layout == "transposed":
        t = t.permute(*reversed(range(len(full))))
    elif layout == "sliced":
        t = t[..., ::2]
    return t


def assert_close(actual: Any, expected: Any) -> None:
    """Compare flat outputs with dtype-dependent tolerances (exact for ints and bools)."""
    actual_leaves = pytree.tree_leaves(actual)
    expected_leaves = pytree.tree_leaves(expected)
    assert len(actual_leaves) == len(expected_leaves)
    for a, e in zip(actual_leaves, expected_leaves):
        if not isinstance(e, torch.Tensor):
            assert a == e
            continue
        assert a.shape == e.shape, (a.shape, e.shape)
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        rtol, atol = TOLERANCES.get(e.dtype, (0, 0))
        torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)


def rewritten(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` after the graph rewrites ``compile_graph`` runs before lowering (fused attention, folded
    embedding gradients): what ``lower`` then sees."""
    return inductor_ir.fold_embedding_gradients_pass(inductor_ir.fuse_attention_pass(gm))


def check_interpret(
    fn: Callable[..., Any],
    make_inputs: Callable[[], Sequence[Any]],
    *,
    allow_fallback: bool = False,
) -> inductor_ir.Program:
    """Trace ``fn`` with make_fx, rewrite and lower it as ``compile_graph`` does, interpret it on *fresh*
    inputs and compare with eager."""
    example = list(make_inputs())
    gm = make_fx(fn)(*example)
    program = inductor_ir.lower(rewritten(gm), example)
    assert not program.lowering_errors, program.lowering_errors
    program.check()
    if not allow_fallback:
        fallbacks = [str(b.op) for b in program.buffers if type(b) is inductor_ir.FallbackKernel]
        fallbacks = [f for f in fallbacks if "randint" not in f]
        assert not fallbacks, f"fell back: {fallbacks}"
    fresh = list(make_inputs())
    assert_close(inductor_ir.interpret(program, fresh), pytree.tree_leaves(fn(*fresh)))
    return program
