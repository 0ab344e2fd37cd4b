"""ATen graphs through inductor_ir with the C++ backend, compared with eager on random inputs.

Cases are batched: each test traces ONE function returning many results, so a test costs one
C++ library compile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend
from codegen_cpp.codegen.lanes import VECTOR_LANES


def compile_and_check(
    backend: CppBackend,
    fn: Callable[..., Any],
    *inputs: torch.Tensor,
    tracing_mode: str = "real",
    **tolerances: float,
) -> Any:
    """make_fx ``fn``, compile it with the C++ backend, and compare every output with eager."""
    gm = make_fx(fn, tracing_mode=tracing_mode)(*inputs)
    compiled = inductor_ir.compile_graph(gm, list(inputs), backends={"cpu": backend})
    expected = fn(*inputs)
    actual = compiled(*inputs)
    if isinstance(expected, torch.Tensor):
        expected, actual = (expected,), (actual,)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m, i=i: f"output {i}: {m}", **tolerances)
    return compiled


def test_pointwise_broadcast_and_noncontiguous(backend: CppBackend) -> None:
    def f(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            (x * 2.5 + y).relu() - x.abs().sqrt(),
            torch.sigmoid(x) * torch.tanh(y) + bias,  # broadcast along rows
            x.exp().log1p() / (y.abs() + 1.0),
            torch.where(x > y, x, y * 3.0),
            torch.clamp(x, -0.5, 0.5) + torch.erf(y),
            t.t() + x,  # transposed (strided) input
            x[:, ::2] * 2.0,  # strided slice
            torch.nn.functional.gelu(x) + torch.nn.functional.silu(y),
            x.pow(3.0) + y.pow(2) + torch.rsqrt(x.abs() + 0.1),
            torch.maximum(x, y) - torch.minimum(x, bias),
        )

    x, y = torch.randn(67, 45), torch.randn(67, 45)
    compiled = compile_and_check(backend, f, x, y, torch.randn(45), torch.randn(45, 67))
    text = "\n".join(s.source for s in compiled.sources)
    assert "return lane * (" in text  # the transposed input is a constant-stride gather


def test_reductions(backend: CppBackend) -> None:
    def f(x: torch.Tensor, b: torch.Tensor, big: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            big.sum(),  # one big reduction to a scalar: split across threads
            big.amax() + big.abs().mean(),
            x.sum(-1),
            x.sum(0),  # reduction over the non-contiguous dim
            x.amax(-1),
            x.amin(0),
            x.argmax(-1),
            x.argmin(0),
            x.mean(-1, keepdim=True),
            torch.var(x, -1),
            (x * 0.1).exp().prod(-1),
            (b > 0.5).any(-1),
            x.sum(),
            (x - x.mean(-1, keepdim=True)).abs().max(),
        )

    x = torch.randn(53, 131)
    # `big` is positive: its sum has no cancellation, so a different summation order (threads) stays
    # within rtol; a zero-mean input's sum of 70001 terms is dominated by rounding.
    compiled = compile_and_check(backend, f, x, torch.rand(53, 131), torch.rand(70001), rtol=1e-5, atol=1e-5)
    assert any("split across threads" in s.source for s in compiled.sources)
    # Row reductions vectorize along the row; column reductions across the outputs.
    assert any(s.vectorized_across_outputs for s in compiled.sources)
    assert any(
        s.vectorized and not s.vectorized_across_outputs for s in compiled.sources
    )


def test_softmax_layer_norm(backend: CppBackend) -> None:
    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.softmax(x, -1),
            torch.log_softmax(x, -1),
            torch.softmax(x, 0),
            torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
        )

    x = torch.randn(37, 259) * 3
    compiled = compile_and_check(backend, f, x, torch.randn(259), torch.randn(259), rtol=1e-5, atol=1e-5)
    # exp(x - max) of the sum loop is kept in a scratch row for the division loop, not recomputed.
    assert any(
        "kiln::store(scratch" in s.source and "kiln::load(scratch" in s.source for s in compiled.sources
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_float_dtypes(backend: CppBackend, dtype: torch.dtype) -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x * y + 1.0, torch.sin(x) + y.exp(), torch.softmax(x, -1), x.sum(-1), x.float() * 2)

    x, y = torch.randn(19, 70).to(dtype), torch.randn(19, 70).to(dtype)
    tol = {torch.float64: 1e-9, torch.float16: 1e-2, torch.bfloat16: 2e-2}[dtype]
    compile_and_check(backend, f, x, y, rtol=tol, atol=tol)


def test_integer_and_bool(backend: CppBackend) -> None:
    def f(a: torch.Tensor, b: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            a + b * 3,
            a // (b.abs() + 1),
            a % (b.abs() + 1),
            a.to(torch.int32) * 2,
            (a > b) & m,
            (a > b) | ~m,
            torch.where(m, a, b),
            a.sum(-1),
            m.to(torch.float32) + a.to(torch.float32),
        )

    a = torch.randint(-50, 50, (23, 41))
    b = torch.randint(-50, 50, (23, 41))
    compile_and_check(backend, f, a, b, torch.rand(23, 41) > 0.5)


def test_talk_sin_cos_example_is_one_vectorized_kernel_with_a_scalar_tail(backend: CppBackend) -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.sin()
        return y, y.cos()

    x = torch.randn(1000, 37)  # 37000 elements: vectors of 16 and a tail
    compiled = compile_and_check(backend, f, x, tracing_mode="symbolic")
    assert len(compiled.sources) == 1
    (source,) = compiled.sources
    assert source.vectorized
    text = source.source
    assert "kiln::sin(" in text and "kiln::cos(" in text
    assert "kiln::load(" in text and "kiln::store(" in text  # vector loop
    assert "kiln::load1(" in text and "kiln::store1(" in text  # scalar tail
    assert "_vec_end" in text and "#pragma omp parallel for" in text
    assert f"x0 += {VECTOR_LANES}" in text and "x1" not in text  # the two dims run as one loop, as in the talk
    # The same kernel serves another size (the sizes are arguments).
    other = torch.randn(3, 5)
    outputs = compiled(other)
    torch.testing.assert_close(outputs[1], other.sin().cos())


def test_masked_and_indirect_loads_are_vectorized(backend: CppBackend) -> None:
    def f(
        x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor, table: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        return (
            torch.nn.functional.pad(torch.cat([x, y], 1), (1, 2)).sin(),  # masked loads
            torch.nn.functional.pad(x, (3, 0, 0, 1), value=2.0) * 2,
            torch.nn.functional.embedding(idx, table).sum(1),  # indirect loads
            table[idx[:, 0]] + 1.0,
        )

    x, y = torch.randn(33, 40), torch.randn(33, 23)
    idx, table = torch.randint(0, 50, (6, 9)), torch.randn(50, 48)
    compiled = compile_and_check(backend, f, x, y, idx, table)
    assert all(s.vectorized for s in compiled.sources)
    assert any("kiln::gather_masked" in s.source for s in compiled.sources)


def test_reductions_propagate_nan_and_break_ties_like_eager(backend: CppBackend) -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.amax(-1), x.amin(0), x.argmax(-1), x.argmin(0), x.argmax(0), torch.maximum(x, x.flip(0)))

    x = torch.randn(40, 70)
    x[3, 5] = x[10, 50] = float("nan")
    x[7, :] = float("-inf")  # a row of ties: the first index wins
    x[:, 9] = 5.0
    compile_and_check(backend, f, x)
