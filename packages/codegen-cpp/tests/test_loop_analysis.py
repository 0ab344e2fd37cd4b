"""Loop planning: how indices move across vector lanes, and merging of adjacent dims."""

from __future__ import annotations

import sympy
import torch

from codegen_cpp.codegen.lanes import lane_stride
from codegen_cpp.codegen.space import plan_space
from inductor_ir import BufferRecord, FloorDiv, KernelGroup, KernelNode, ModularIndexing, ops

X0, X1, X2 = (sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(3))


def test_lane_stride_of_affine_indices() -> None:
    assert lane_stride(X1 + 64 * X0, X1) == 1
    assert lane_stride(X1 + 64 * X0, X0) == 64
    assert lane_stride(3 * X0 + 5, X1) == 0


def test_lane_stride_sees_through_reshape_arithmetic() -> None:
    # A view's index: contiguous along x2 although it has // and % terms.
    index = X2 + 64 * X1 + 1024 * FloorDiv(256 * X0 + 16 * X1 + X2, 1024)
    index += 16 * ModularIndexing(X0 + FloorDiv(16 * X1 + X2, 256), 1, 4)
    assert lane_stride(index, X2) == 1
    assert lane_stride(ModularIndexing(X2, 1, 32), X2) == 1
    assert lane_stride(FloorDiv(X2, 16), X2) == 0


def test_lane_stride_refuses_what_can_wrap_within_a_vector() -> None:
    assert lane_stride(ModularIndexing(X2, 1, 10), X2) is None  # wraps every 10 lanes
    assert lane_stride(FloorDiv(X2, 4), X2) is None
    assert lane_stride(FloorDiv(X2 + 3, 16), X2) is None  # crosses a multiple of 16


def _group(sizes: tuple[int, ...], index_of: list[sympy.Expr]) -> KernelGroup:
    record = BufferRecord(
        "out", torch.float32, tuple(sympy.Integer(s) for s in sizes), (sympy.Integer(1),) * len(sizes)
    )

    def body(xs: list[sympy.Expr], rs: list[sympy.Expr]) -> None:
        subs = dict(zip((X0, X1, X2), xs))
        value = ops.load("src", index_of[0].xreplace(subs))
        ops.store("out", index_of[1].xreplace(subs), value)

    src = BufferRecord("src", torch.float32, (sympy.Integer(1),), (sympy.Integer(1),))
    node = KernelNode(record, body, "pointwise")
    size_exprs = tuple(sympy.Integer(s) for s in sizes)
    return KernelGroup("g", "cpu", size_exprs, (), (node,), (src,), (record,))


def test_contiguous_dims_merge_into_one_loop() -> None:
    space = plan_space(_group((1000, 37), [37 * X0 + X1, 37 * X0 + X1]))
    assert space.x_sizes == (37000,)
    (merged,) = space.loop_xs
    assert space.body_xs == (0, merged)


def test_broadcast_dims_do_not_merge_and_size_one_dims_drop() -> None:
    space = plan_space(_group((8, 1, 37), [X2, 37 * X0 + X2]))  # a row broadcast over 8 rows
    assert space.x_sizes == (8, 37)
    assert space.body_xs[1] == 0
