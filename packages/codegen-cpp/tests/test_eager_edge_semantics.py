"""Float floor division, sign and int32/int64 wrapping match eager bit for bit in C++ kernels.

Eager's float floor division comes from the exact fmod, not floor(a / b): inf // 100 is nan,
-1 // inf is -1. Eager's sign of NaN is 0. Signed int arithmetic wraps in eager; without -fwrapv
g++ folds `(x + x) != 0` to `x != 0`.
"""

from __future__ import annotations

import platform
import warnings

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend

_SPECIAL = [float("inf"), float("-inf"), float("nan"), -0.0, 0.0, 1e300, -1e300, 1e-300, -1.0, 5.0]


def _floats(x: torch.Tensor, y: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.div(x, y, rounding_mode="floor"), x // s, torch.floor_divide(x, 100.0), torch.sign(x / y)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_float_floor_div_and_sign_match_eager(backend: CppBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(23)
    # 40 columns: vector lanes and the scalar tail both see every special value.
    x = torch.randn(len(_SPECIAL), 40, generator=generator, dtype=torch.float64) * 100
    x[:, 0] = torch.tensor(_SPECIAL)
    x[0, :len(_SPECIAL)] = torch.tensor(_SPECIAL)
    y = torch.randn(40, generator=generator, dtype=torch.float64) * 3
    y[:len(_SPECIAL)] = torch.tensor(_SPECIAL)
    x, y, s = x.to(dtype), y.to(dtype), torch.tensor(float("-inf"), dtype=dtype)
    compiled = inductor_ir.compile_graph(make_fx(_floats)(x, y, s), [x, y, s], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x, y, s), _floats(x, y, s), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got.isnan(), want.isnan()), f"result {k}"
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), f"result {k}: {got} != {want}"


def _wrapping(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t = x + x
    return torch.logical_xor(t, y), t.bool(), (x * 2) == 0


@pytest.mark.parametrize("dtype", (torch.int32, torch.int64), ids=str)
def test_signed_overflow_wraps_like_eager(backend: CppBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(29)
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, (3, 37), generator=generator, dtype=dtype)
    x[:, 0], x[:, 1], x[0, 2:20] = info.min, info.max, info.min
    y = torch.randint(0, 2, (37,), generator=generator, dtype=torch.uint8)
    compiled = inductor_ir.compile_graph(make_fx(_wrapping)(x, y), [x, y], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x, y), _wrapping(x, y), strict=True)):
        assert torch.equal(got, want), f"result {k}: {got} != {want}"


def _broadcast_ops(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    column = x.unsqueeze(-1)
    return x / column, x * column, (x / column).sum(0)


@pytest.mark.parametrize("dtype", (torch.float16, torch.float32, torch.float64), ids=str)
def test_broadcast_negative_zero_keeps_its_sign(backend: CppBackend, dtype: torch.dtype) -> None:
    # x[i] is broadcast along a vectorized row: a broadcast of -0.0 that became +0.0 flipped
    # x / -0.0 from inf to -inf and x * -0.0 from -0.0 to 0.0.
    generator = torch.Generator().manual_seed(31)
    x = torch.randn(37, generator=generator, dtype=torch.float64).to(dtype)
    x[3], x[20], x[30] = -0.0, 0.0, float("-inf")
    compiled = inductor_ir.compile_graph(make_fx(_broadcast_ops)(x), [x], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x), _broadcast_ops(x), strict=True)):
        assert torch.equal(got.isnan(), want.isnan()), f"result {k}"
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), f"result {k}: {got} != {want}"
        assert torch.equal(got.signbit(), want.signbit()), f"result {k}: signs of zeros differ"


def _divisions(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x / y.unsqueeze(-1), x / 3.0, x / 0.25


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_division_by_a_broadcast_divisor_is_exact(backend: CppBackend, dtype: torch.dtype) -> None:
    # Eager divides; a * (1 / b) is one ulp off for many values and overflows for a subnormal b.
    generator = torch.Generator().manual_seed(37)
    x = torch.randn(5, 37, generator=generator, dtype=torch.float64) * 1e-30
    y = torch.randn(5, generator=generator, dtype=torch.float64)
    y[1], y[2] = torch.finfo(dtype).tiny / 4, torch.finfo(dtype).max / 2
    x[2] *= 1e30 * torch.finfo(dtype).max / 4
    x, y = x.to(dtype), y.to(dtype)
    compiled = inductor_ir.compile_graph(make_fx(_divisions)(x, y), [x, y], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x, y), _divisions(x, y), strict=True)):
        assert torch.equal(got, want), f"result {k}: {got} != {want}"


def _roots(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x**0.5, x**-0.5, x**1.5


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16, torch.float32, torch.float64), ids=str)
def test_square_root_powers_match_eager(backend: CppBackend, dtype: torch.dtype) -> None:
    # Eager's ** 0.5 is sqrt and ** -0.5 rsqrt (-0.0 ** 0.5 is -0.0, -inf ** -0.5 nan), except
    # float16's, which is pow (+0.0, +0.0); x ** 0.5's gradient reads x ** -0.5.
    generator = torch.Generator().manual_seed(47)
    x = torch.randn(40, generator=generator, dtype=torch.float64).abs().to(dtype)
    x[:6] = torch.tensor([-0.0, 0.0, float("-inf"), float("inf"), float("nan"), -2.0], dtype=dtype)
    x[20:26] = x[:6]
    compiled = inductor_ir.compile_graph(make_fx(_roots)(x), [x], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x), _roots(x), strict=True)):
        assert torch.equal(got.isnan(), want.isnan()), f"result {k}: {got} != {want}"
        rtol = 1e-6 if dtype in (torch.float32, torch.float64) else 1e-2  # bfloat16 rsqrt: one ulp
        torch.testing.assert_close(got, want, equal_nan=True, rtol=rtol, atol=0, msg=f"result {k}")
        assert torch.equal(got.signbit() | got.isnan(), want.signbit() | want.isnan()), f"result {k}: signs"


def _product_minus(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return a * b - c, (a * b - c) * float("inf")


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_products_are_rounded_before_a_subtraction(backend: CppBackend, dtype: torch.dtype) -> None:
    # Eager rounds a * b before subtracting; an fma (g++'s default contraction) does not, so
    # a * b - (a * b) was a rounding error, and var's gradient of one element (inf * 0) inf, not nan.
    generator = torch.Generator().manual_seed(59)
    a, b = (torch.randn(37, generator=generator, dtype=dtype) for _ in range(2))
    c = a * b
    compiled = inductor_ir.compile_graph(make_fx(_product_minus)(a, b, c), [a, b, c], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(a, b, c), _product_minus(a, b, c), strict=True)):
        assert torch.equal(got.isnan(), want.isnan()), f"result {k}: {got} != {want}"
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), f"result {k}: {got} != {want}"


def _to_ints(x: torch.Tensor, one: torch.Tensor) -> tuple[torch.Tensor, ...]:
    nan = torch.var_mean(one, 0)[0]  # NaN, which g++ knows at compile time
    return (x.to(torch.int64), x.to(torch.int32), x.to(torch.int16), x.to(torch.int8), x.to(torch.uint8),
            nan.sum(0, dtype=torch.int64), nan.to(torch.int32), (x * 1e10).to(torch.int32),
            x.reshape(4, 10).sum(1, dtype=torch.int32), x.reshape(4, 10).sum(0, dtype=torch.int16))  # fmt: skip


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="eager converts as x86 does")
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.float16), ids=str)
def test_floats_out_of_an_integers_range_convert_as_eager_does(backend: CppBackend, dtype: torch.dtype) -> None:
    """NaN, infinities and out-of-range floats become the integer's minimum (through int32 and
    wrapped for narrow ints), in vector lanes, the scalar tail and constants g++ folds."""
    special = [float("nan"), float("inf"), float("-inf"), 3e9, -3e9, 1e20, 300.7, -129.5, 2.5, -2.5]
    x = torch.randn(40, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 200
    x[: len(special)] = torch.tensor(special)
    x, one = x.to(dtype), torch.ones((), dtype=dtype)
    compiled = inductor_ir.compile_graph(make_fx(_to_ints)(x, one), [x, one], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x, one), _to_ints(x, one), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got, want), f"result {k}: {got} != {want}"


def _variances(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (a.var(-1, correction=0), *torch.var_mean(a, -1, correction=0), b.var(0, correction=0),
            b.std(0, correction=0), a.var(-1))  # fmt: skip


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -2.5, 0.0])
def test_the_variance_of_one_element_is_nan_where_eager_says_so(backend: CppBackend, value: float) -> None:
    """A 0-d input has nothing to reduce: its deviation is (x - x)^2, NaN for inf and NaN (fuzz 2abebc449d)."""
    a, b = torch.tensor(value), torch.tensor([value, 1.0, float("inf"), -3.0])
    compiled = inductor_ir.compile_graph(make_fx(_variances)(a, b), [a, b], backends={"cpu": backend})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var's "degrees of freedom is <= 0"
        wanted = _variances(a, b)
    for k, (got, want) in enumerate(zip(compiled(a, b), wanted, strict=True)):
        torch.testing.assert_close(got, want, equal_nan=True, msg=f"result {k}")
        assert torch.equal(got.signbit(), want.signbit()), f"result {k}: {got} != {want}"


def _own_math(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.exp(x), torch.log(x.abs()), torch.sin(x), torch.cos(x), torch.tanh(x), torch.erf(x), torch.sigmoid(x)


def test_scalar_tails_compute_kilns_math_as_its_vector_loops(backend: CppBackend) -> None:
    """One input value gives one result bit for bit, in a vector lane or in the scalar tail: a max's
    backward compares a recomputed value with the saved maximum (fuzz bce478bc13: the gradient of
    sigmoid(x).amax(1) was 0 where the scalar and vector sigmoid differed)."""
    values = torch.linspace(-6, 6, 64, dtype=torch.float32) + 0.01
    x = torch.cat([values, values[:15]])  # 64 elements in vector loops, the last 15 in the tail
    compiled = inductor_ir.compile_graph(make_fx(_own_math)(x), [x], backends={"cpu": backend})
    for k, got in enumerate(compiled(x)):
        assert torch.equal(got[64:], got[:15]), f"result {k}: the tail differs from the vector lanes"


def _narrow_reductions_then_used(a: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> tuple[torch.Tensor, ...]:
    scattered = a.scatter_reduce(-1, index, src, "prod", include_self=False)
    return 100 // torch.where(scattered == 0, 1, scattered), a.sum(0, dtype=a.dtype) // 7


@pytest.mark.parametrize("dtype", (torch.int8, torch.uint8, torch.int16), ids=str)
def test_a_narrow_integer_reduction_wraps_before_its_consumers(backend: CppBackend, dtype: torch.dtype) -> None:
    """fuzz 92c06ef301: a product of int8 values (-270, eager -14) reached a fused floor division
    unwrapped: 100 // -270 = -1 where eager gives 100 // -14 = -8."""
    generator = torch.Generator().manual_seed(29)
    info = torch.iinfo(dtype)
    # One output element reached by three sources: a scalar reduction loop.
    a = torch.randint(info.min, info.max + 1, (1,), generator=generator).to(dtype)
    index = torch.zeros(3, dtype=torch.int64)
    src = torch.tensor([-9, 5, 6] if info.min < 0 else [9, 5, 7], dtype=dtype)
    gm = make_fx(_narrow_reductions_then_used, decomposition_table=inductor_ir.decompositions())(a, index, src)
    compiled = inductor_ir.compile_graph(gm, [a, index, src], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(a, index, src), _narrow_reductions_then_used(a, index, src), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got, want), f"result {k}"


def _reductions_given_a_dtype(x: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        x.sum(0, dtype=torch.float16),
        torch.log2((n / 300).sum(0, dtype=torch.float16)),
        x.mean(0, dtype=torch.float16),
        torch.linalg.vector_norm(x.half(), dim=0, dtype=torch.float32),
        x.sum(0, dtype=torch.float64),
    )


def test_a_reduction_given_a_dtype_casts_each_element_first(backend: CppBackend) -> None:
    """fuzz 77df321e23, 197d27d9e0: `sum(dtype=torch.float16)` adds float16-rounded elements, as
    eager casts the input first. Summed unrounded, k / 300 over k adding up to 0 gave exactly 0
    (log2: -inf) where eager's rounded terms leave 2 ** -17 (log2: -17)."""
    generator = torch.Generator().manual_seed(31)
    x = torch.randn(7, 45, generator=generator) * 3
    n = torch.randint(-10, 11, (7, 45), generator=generator)
    n[-1] = -n[:-1].sum(0)  # every column adds up to 0
    gm = make_fx(_reductions_given_a_dtype)(x, n)
    compiled = inductor_ir.compile_graph(gm, [x, n], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x, n), _reductions_given_a_dtype(x, n), strict=True)):
        assert got.dtype == want.dtype, f"result {k}"
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3, equal_nan=True, msg=f"result {k}")


def _half_steps(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.div(a, b, rounding_mode="floor"), torch.xlogy(x, y), torch.xlogy(x, 10)


def test_half_kernels_round_where_eagers_do(backend: CppBackend) -> None:
    """fuzz 7ba6007351: eager's bfloat16 floor division by a one-element tensor divides in float32
    (176 // 0.7695 = 228), as by a number; Kiln rounded each step (227). fuzz 378be538fa: eager's
    half xlogy rounds the logarithm first (-1.734 * log(10) = -3.984375, float32 throughout -4.0)."""
    a = torch.full((1, 40), 176, dtype=torch.uint8)
    b = torch.tensor([[0.76953125]], dtype=torch.bfloat16)
    x = torch.full((40,), -1.734375, dtype=torch.bfloat16)
    y = torch.full((40,), 10, dtype=torch.int16)
    gm = make_fx(_half_steps, decomposition_table=inductor_ir.decompositions())(a, b, x, y)
    compiled = inductor_ir.compile_graph(gm, [a, b, x, y], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(a, b, x, y), _half_steps(a, b, x, y), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got, want), f"result {k}: {got} != {want}"


def _xlogy_with_numbers(n: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.xlogy(n, 300), torch.xlogy(2.5, n), torch.xlogy(h, 1e5), torch.xlogy(n.bool(), 300)


def test_xlogy_takes_its_number_in_the_results_float_dtype(backend: CppBackend) -> None:
    """fuzz ca6ab2a629: `xlogy(int8 tensor, 300)` is `x * log(300.0)` in eager; Kiln made the number
    an int8 first (300 wraps to 44: 37.84 where eager gives 57.04). A half tensor does round it
    (`xlogy(half, 1e5)` is inf in eager)."""
    n = torch.arange(-4, 36, dtype=torch.int8)
    h = torch.linspace(-2, 2, 40).half()
    gm = make_fx(_xlogy_with_numbers, decomposition_table=inductor_ir.decompositions())(n, h)
    compiled = inductor_ir.compile_graph(gm, [n, h], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(n, h), _xlogy_with_numbers(n, h), strict=True)):
        assert got.dtype == want.dtype, f"result {k}"
        torch.testing.assert_close(got, want, equal_nan=True, msg=f"result {k}")


def _with_a_0d_float32_tensor(x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.fmod(x - t, t), x % t, t * x, t / x, x * t, x / t, torch.xlogy(x, t), torch.atan2(x, t)


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16), ids=str)
def test_a_0d_tensor_operand_is_rounded_to_half_as_eager_rounds_it(backend: CppBackend, dtype: torch.dtype) -> None:
    """fuzz f759b82c3d: `fmod(f16 - t, t)` with t a 0-d float32 tensor: eager casts t to float16
    first (as a Python number), Kiln divided by t's float32 value, so values next to a multiple of
    t came out a whole t apart (-0.61 where eager gives -0.001). Eager reads t unrounded only as
    the second operand of mul and div."""
    generator = torch.Generator().manual_seed(41)
    x = (torch.randn(1981, generator=generator) * 3).to(dtype)
    t = torch.tensor(0.6123456789)
    gm = make_fx(_with_a_0d_float32_tensor, decomposition_table=inductor_ir.decompositions())(x, t)
    compiled = inductor_ir.compile_graph(gm, [x, t], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x, t), _with_a_0d_float32_tensor(x, t), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got, want), f"result {k}: {(got != want).sum()} differ"


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16), ids=str)
def test_a_half_linspace_rounds_each_step_as_eager(backend: CppBackend, dtype: torch.dtype) -> None:
    """fuzz 589b58f292: float16 `linspace(-2, 2, 4)` is [-2, -0.66699, 0.66699, 2] in eager (each
    step rounded to float16); computed in float32, -0.66650 put `x + linspace(...) > 0` on the other
    side for x = 0.6667."""
    for start, end, steps in [(-2, 2, 4), (0.3256, 2.0517, 4), (-2.1816, 2.558, 7), (2.2983, 3.9884, 17)]:

        def spaced(x: torch.Tensor) -> tuple[torch.Tensor]:
            return (x + torch.linspace(start, end, steps, dtype=dtype),)

        x = torch.zeros(steps, dtype=dtype)
        gm = make_fx(spaced, decomposition_table=inductor_ir.decompositions())(x)
        (got,) = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})(x)
        (want,) = spaced(x)
        assert torch.equal(got, want), f"linspace({start}, {end}, {steps}): {got} != {want}"


def _through_integers(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return 7 / x.clamp(-120, 120).to(torch.int64), 7 / x.to(torch.int32), 7 / x.to(torch.int8), 7 / x.double().to(torch.int64)


@pytest.mark.parametrize("columns", [2, 67], ids=["scalar", "vector"])
def test_a_float_through_an_integer_has_no_negative_zero(backend: CppBackend, columns: int) -> None:
    """fuzz 4774f681ff: g++ (-fno-trapping-math) rewrote float(int64(x)) as trunc(x), so -0.3 became
    -0.0 and 7 / it -inf; an integer has no negative zero (eager: inf)."""
    generator = torch.Generator().manual_seed(37)
    x = torch.randn(3, columns, generator=generator) * 0.5
    x[:, 0] = torch.tensor([-0.3, -0.0, -0.9])
    gm = make_fx(_through_integers, decomposition_table=inductor_ir.decompositions())(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x), _through_integers(x), strict=True)):
        assert torch.equal(got, want), f"result {k}: {got[:, :3]} != {want[:, :3]}"


def _pooled_zeros(x: torch.Tensor) -> torch.Tensor:
    return 1 / torch.nn.functional.avg_pool2d(torch.fmod(x, x), 2, 1, 1)


def test_an_average_of_negative_zeros_is_positive_zero(backend: CppBackend) -> None:
    """fuzz 2636b1b19f: eager's window sum starts at +0.0, so -0.0 + -0.0 averages to +0.0 (1 / it:
    inf); Kiln summed from the first element and gave -0.0 (-inf)."""
    x = -torch.rand(1, 3, 4, 4) - 0.5  # fmod(x, x) is -0.0 everywhere
    gm = make_fx(_pooled_zeros, decomposition_table=inductor_ir.decompositions())(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})
    assert torch.equal(compiled(x), _pooled_zeros(x))


def _clamped(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.clamp(0, 3), x.clamp(min=0.0), x.clamp(max=0.0), x.clamp(-1, 0.0), torch.relu(x), torch.nn.functional.relu6(x)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_clamp_by_a_number_and_relu_keep_negative_zero(backend: CppBackend, dtype: torch.dtype) -> None:
    # fuzz 61a5709675: `a.clamp_(0, 3)` of -0.0 was +0.0, so `b // a` was inf where eager's is -inf
    x = torch.tensor(_SPECIAL * 4, dtype=dtype)  # 40 values: vector lanes and the scalar tail
    compiled = inductor_ir.compile_graph(make_fx(_clamped)(x), [x], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x), _clamped(x), strict=True)):
        assert torch.equal(got.isnan(), want.isnan()), f"result {k}"
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), f"result {k}: {got} != {want}"
        assert torch.equal(got.signbit(), want.signbit()), f"result {k}: the sign of zero: {got} != {want}"
