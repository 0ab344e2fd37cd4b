"""Small hand-built kernel groups, to test the generator from its own input (no lowering)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
import torch

from inductor_ir import BufferRecord, KernelGroup, KernelNode

ONE = sympy.Integer(1)


def flat(name: str, dtype: torch.dtype, size: sympy.Expr | int) -> BufferRecord:
    """A contiguous 1-D buffer."""
    return BufferRecord(name, dtype, (sympy.sympify(size),), (ONE,))


def pointwise_group(
    name: str,
    body: Callable[[sympy.Symbol], None],
    inputs: Sequence[BufferRecord],
    outputs: Sequence[BufferRecord],
    size: sympy.Expr | int,
    size_symbols: Sequence[sympy.Symbol] = (),
) -> KernelGroup:
    """A 1-D pointwise group of one node whose body is ``body(x0)``; it may store several outputs."""

    def node_body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        body(xs[0])  # type: ignore[arg-type]

    node = KernelNode(outputs[0], node_body, "pointwise")
    return KernelGroup(
        name=name,
        device="cpu",
        pointwise_size=(sympy.sympify(size),),
        reduction_size=(),
        nodes=(node,),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        size_symbols=tuple(size_symbols),
    )
