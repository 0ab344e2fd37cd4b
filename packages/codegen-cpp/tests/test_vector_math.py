"""The runtime header's vectorized math against eager torch, through generated kernels.

All kernels of this module are built into ONE library (one compile), each run on random inputs
plus special values, long enough to exercise the vector loop and the scalar tail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import sympy
import torch
from cpp_test_groups import flat, pointwise_group
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend
from inductor_ir import KernelGroup, ops

N = 4099  # 256 vectors of 16 lanes and a tail of 3
SPECIALS = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-40, 1e-7, 3.4e38, -3.4e38]

UNARY: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], tuple[float, float]]] = {
    "exp": (torch.exp, (-100.0, 88.0)),
    "log": (torch.log, (0.0, 1e6)),
    "sin": (torch.sin, (-100.0, 100.0)),
    "cos": (torch.cos, (-100.0, 100.0)),
    "tanh": (torch.tanh, (-12.0, 12.0)),
    "erf": (torch.erf, (-5.0, 5.0)),
    "erfc": (torch.erfc, (-5.0, 11.0)),
    "sigmoid": (torch.sigmoid, (-30.0, 30.0)),
    "sqrt": (torch.sqrt, (0.0, 1e4)),
    "log1p": (torch.log1p, (-0.9, 100.0)),
    "floor": (torch.floor, (-100.0, 100.0)),
    "round": (torch.round, (-10.0, 10.0)),
}


def _unary_group(op_name: str) -> KernelGroup:
    def body(x: sympy.Symbol) -> None:
        value = ops.load("src", x)
        ops.store("dst", x, getattr(ops, op_name)(value))

    return pointwise_group(
        f"unary_{op_name}", body, [flat("src", torch.float32, N)], [flat("dst", torch.float32, N)], N
    )


def _pow_group() -> KernelGroup:
    def body(x: sympy.Symbol) -> None:
        ops.store("dst", x, ops.pow(ops.load("a", x), ops.load("b", x)))

    ins = [flat("a", torch.float32, N), flat("b", torch.float32, N)]
    return pointwise_group("binary_pow", body, ins, [flat("dst", torch.float32, N)], N)


def _half_group(dtype: torch.dtype) -> KernelGroup:
    """Load a 16-bit float, compute in float32, store 16-bit and float32."""

    def body(x: sympy.Symbol) -> None:
        value = ops.load("src", x)
        wide = ops.to_dtype(value, torch.float32, dtype)
        doubled = ops.mul(wide, ops.constant(3.0, torch.float32))
        ops.store("dst", x, ops.to_dtype(doubled, dtype, torch.float32))
        ops.store("wide", x, doubled)

    outs = [flat("dst", dtype, N), flat("wide", torch.float32, N)]
    return pointwise_group(f"half_{str(dtype)[6:]}", body, [flat("src", dtype, N)], outs, N)


def _to_16_bit_group(dtype: torch.dtype) -> KernelGroup:
    """Round float32 to a 16-bit float, in the vector loop and the scalar tail: as a store and in the compute type."""

    def body(x: sympy.Symbol) -> None:
        value = ops.load("src", x)
        ops.store("dst", x, ops.to_dtype(value, dtype, torch.float32))
        ops.store("rounded", x, ops.to_dtype(ops.to_dtype(value, dtype, torch.float32), torch.float32, dtype))

    outs = [flat("dst", dtype, N), flat("rounded", torch.float32, N)]
    return pointwise_group(f"to_{str(dtype)[6:]}", body, [flat("src", torch.float32, N)], outs, N)


def _random_group() -> KernelGroup:
    """uniform and normal samples from (seed, element index)."""

    def body(x: sympy.Symbol) -> None:
        seed = ops.load("seed", sympy.Integer(0))
        offset = ops.index_expr(x, torch.int64)
        ops.store("uniform", x, ops.rand(seed, offset))
        ops.store("normal", x, ops.randn(seed, offset))

    outs = [flat("uniform", torch.float32, N), flat("normal", torch.float32, N)]
    return pointwise_group("random", body, [flat("seed", torch.int64, 1)], outs, N)


@pytest.fixture(scope="module")
def kernels(backend: CppBackend) -> dict[str, Callable[..., None]]:
    groups = [_unary_group(name) for name in UNARY] + [
        _pow_group(),
        _half_group(torch.float16),
        _half_group(torch.bfloat16),
        _to_16_bit_group(torch.bfloat16),
        _to_16_bit_group(torch.float16),
        _random_group(),
    ]
    sources = [backend.generate(group) for group in groups]
    assert all(source.vectorized for source in sources)
    # 4099 elements are below CppConfig.parallel_threshold: no thread start-up in these kernels.
    assert not any("#pragma omp" in source.source for source in sources)
    compiled = backend.compile(sources)
    return {group.name: kernel for group, kernel in zip(groups, compiled)}


def _inputs(low: float, high: float, specials: Sequence[float] = SPECIALS) -> torch.Tensor:
    values = torch.empty(N).uniform_(low, high)
    values[-len(specials) :] = torch.tensor(specials)  # some in the tail, some in the last vector
    return values


@pytest.mark.parametrize("op_name", sorted(UNARY))
def test_unary_math_matches_eager(kernels: dict[str, Callable[..., None]], op_name: str) -> None:
    reference, (low, high) = UNARY[op_name]
    src = _inputs(low, high)
    dst = torch.empty_like(src)
    kernels[f"unary_{op_name}"](src, dst)
    torch.testing.assert_close(dst, reference(src), rtol=4e-6, atol=1e-6, equal_nan=True)


def test_pow_matches_eager(kernels: dict[str, Callable[..., None]]) -> None:
    a = torch.empty(N).uniform_(0.0, 10.0)
    b = torch.empty(N).uniform_(-4.0, 4.0)
    dst = torch.empty_like(a)
    kernels["binary_pow"](a, b, dst)
    torch.testing.assert_close(dst, torch.pow(a, b), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_loads_compute_in_float32_and_round_on_store(
    kernels: dict[str, Callable[..., None]], dtype: torch.dtype
) -> None:
    src = (torch.randn(N) * 100).to(dtype)
    src[-6:] = torch.tensor([float("inf"), float("-inf"), float("nan"), 6e-8, -0.0, 65504.0]).to(dtype)
    dst, wide = torch.empty_like(src), torch.empty(N)
    kernels[f"half_{str(dtype)[6:]}"](src, dst, wide)
    expected_wide = src.float() * 3.0
    torch.testing.assert_close(wide, expected_wide, equal_nan=True)
    torch.testing.assert_close(dst, expected_wide.to(dtype), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_float32_rounds_to_16_bits_as_eager_does(kernels: dict[str, Callable[..., None]], dtype: torch.dtype) -> None:
    """Round to nearest even on random bit patterns, halfway cases of both parities (bfloat16's and
    float16's), carries into the exponent, overflow, the largest finite values, infinities, subnormal
    inputs and results; NaNs stay NaN."""
    generator = torch.Generator().manual_seed(0)
    bits = torch.randint(-(2**31), 2**31, (N,), generator=generator, dtype=torch.int64).to(torch.int32)
    bits[:1024] = torch.randint(-(2**15), 2**15, (1024,), generator=generator, dtype=torch.int32) * 65536 + 0x8000
    near_one = torch.randint(0x387FF000, 0x47800000, (1024,), generator=generator, dtype=torch.int64)
    bits[1024:2048] = ((near_one & ~0x1FFF) | 0x1000).to(torch.int32)  # float16's halfway cases, subnormal results
    bits[2048:2064] = torch.tensor([0x7F7FFFFF, 0x7F7F8000, 0x3F807FFF, 0x3F808000, 0x3F818000, 0x7F800000, 0xFF800000,
                                    0x00000001, 0x80008000, 0x007FFFFF, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0, 0x80000000,
                                    0x477FF000], dtype=torch.int64).to(torch.int32)
    src = bits.view(torch.float32)
    dst, rounded = torch.empty(N, dtype=dtype), torch.empty(N)
    kernels[f"to_{str(dtype)[6:]}"](src, dst, rounded)
    expected = src.to(dtype)
    nan = expected.isnan()
    assert torch.equal(dst.isnan(), nan) and torch.equal(rounded.isnan(), nan)
    assert torch.equal(dst[~nan].view(torch.int16), expected[~nan].view(torch.int16))
    assert torch.equal(rounded[~nan].view(torch.int32), expected[~nan].float().view(torch.int32))


def test_16_bit_floats_load_exactly(kernels: dict[str, Callable[..., None]]) -> None:
    """Every float16 bit pattern (subnormals, infinities, NaNs included) widens to float32 as eager widens it."""
    for start in range(0, 2**16, N):
        chunk = torch.arange(start, start + N, dtype=torch.int64).remainder(2**16).to(torch.int32)
        src = (chunk - (chunk >= 2**15).to(torch.int32) * 2**16).to(torch.int16).view(torch.float16)
        dst, wide = torch.empty_like(src), torch.empty(N)
        kernels["half_float16"](src, dst, wide)
        expected = src.float() * 3.0
        nan = expected.isnan()
        assert torch.equal(wide.isnan(), nan)
        assert torch.equal(wide[~nan].view(torch.int32), expected[~nan].view(torch.int32))


def test_random_numbers_are_deterministic_per_seed_and_well_distributed(
    kernels: dict[str, Callable[..., None]],
) -> None:
    def sample(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        uniform, normal = torch.empty(N), torch.empty(N)
        kernels["random"](torch.tensor([seed]), uniform, normal)
        return uniform, normal

    seed = int(torch.randint(0, 2**31, ()))
    uniform, normal = sample(seed)
    again, _ = sample(seed)
    other, _ = sample(seed + 1)
    assert torch.equal(uniform, again) and not torch.equal(uniform, other)
    assert 0.0 <= float(uniform.min()) and float(uniform.max()) < 1.0
    assert abs(float(uniform.mean()) - 0.5) < 0.03
    assert abs(float(normal.mean())) < 0.1 and abs(float(normal.std()) - 1.0) < 0.1


DENSE_N = (1 << 20) + 5  # a million points on a uniform grid, a scalar tail of 5
DENSE_SPECIALS = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-40, 1e-7, -1e-7]
DENSE_SPECIALS += [0.921875, -0.921875, 0.9218749, 4.0, -4.0, 3.9, 6.0, -6.0, 10.0, 88.0, 3.4e38, -3.4e38]


# erf (one table polynomial per 1/2 of |x|): within 6.8e-8 over every float of [-6, 6] (2026-11-30).
@pytest.mark.parametrize(("op_name", "tolerance"), [("erf", 1e-7), ("tanh", 2.5e-7)])
def test_dense_erf_and_tanh_stay_close_to_the_exact_value(backend: CppBackend, op_name: str, tolerance: float) -> None:
    """erf and tanh on 1M points of [-6, 6] plus edge values, against float64 and torch's float32."""

    def body(x: sympy.Symbol) -> None:
        ops.store("dst", x, getattr(ops, op_name)(ops.load("src", x)))

    group = pointwise_group(
        f"dense_{op_name}",
        body,
        [flat("src", torch.float32, DENSE_N)],
        [flat("dst", torch.float32, DENSE_N)],
        DENSE_N,
    )
    (kernel,) = backend.compile([backend.generate(group)])
    src = torch.linspace(-6.0, 6.0, DENSE_N)
    src[: len(DENSE_SPECIALS)] = torch.tensor(DENSE_SPECIALS)  # in the vector loop
    src[-5:] = torch.tensor(DENSE_SPECIALS[:5])  # and in the scalar tail
    dst = torch.empty_like(src)
    kernel(src, dst)
    reference = getattr(torch, op_name)
    exact = reference(src.double())
    torch.testing.assert_close(dst.double(), exact, rtol=0, atol=tolerance, equal_nan=True)
    torch.testing.assert_close(dst, reference(src), rtol=0, atol=1e-6, equal_nan=True)
    # erf(-0.0) and tanh(-0.0) are -0.0, bit for bit; tiny values keep their relative precision.
    assert torch.equal(dst[:2].view(torch.int32), src[:2].view(torch.int32))
    tiny = exact.abs() < 1e-6
    torch.testing.assert_close(dst[tiny].double(), exact[tiny], rtol=3e-7, atol=3e-45)


def test_dense_erfc_is_within_a_few_ulp_of_the_exact_value(backend: CppBackend) -> None:
    """erfc on 1M points of [-6, 10.1] (its float range ends at 10.05) plus edge values, relative to
    float64: every float of that range was within 2.8 ulp (2.1e-7) where the result is normal and
    1.6 units of the smallest subnormal where it is not (2026-11-30)."""

    def body(x: sympy.Symbol) -> None:
        ops.store("dst", x, ops.erfc(ops.load("src", x)))

    ins, outs = [flat("src", torch.float32, DENSE_N)], [flat("dst", torch.float32, DENSE_N)]
    (kernel,) = backend.compile([backend.generate(pointwise_group("dense_erfc", body, ins, outs, DENSE_N))])
    src = torch.linspace(-6.0, 10.1, DENSE_N)
    src[: len(DENSE_SPECIALS)] = torch.tensor(DENSE_SPECIALS)
    src[-5:] = torch.tensor(DENSE_SPECIALS[:5])
    dst = torch.empty_like(src)
    kernel(src, dst)
    exact = torch.erfc(src.double())
    torch.testing.assert_close(dst.double(), exact, rtol=2.5e-7, atol=3e-45, equal_nan=True)
    torch.testing.assert_close(dst, torch.erfc(src), rtol=1e-6, atol=3e-45, equal_nan=True)


def test_gelu_forward_and_backward_are_as_accurate_as_eager(backend: CppBackend) -> None:
    """Exact GELU and its backward through compile_graph (erf and exp in one kernel) on a dense grid
    of [-10, 10] plus edge values, against float64: at least as close as eager's float32 kernels
    (Kiln 1.6e-7 and 1.6e-7 of max(1, |exact|), eager 1.1e-6 and 5.7e-7, 2026-11-30)."""

    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)

    def backward(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten.gelu_backward(g, x)

    x = torch.linspace(-10.0, 10.0, DENSE_N)
    specials = [v for v in DENSE_SPECIALS if not abs(v) > 10.0]  # eager's gelu(inf) is nan
    x[: len(specials)] = torch.tensor(specials)
    g = torch.randn(DENSE_N, generator=torch.Generator().manual_seed(7))
    for fn, inputs in ((forward, [x]), (backward, [g, x])):
        graph = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*inputs)
        compiled = inductor_ir.compile_graph(graph, inputs, backends={"cpu": backend})
        assert any("kiln::erf(" in source.source for source in compiled.sources)
        result = compiled(*inputs)
        got = result[0] if isinstance(result, (tuple, list)) else result
        exact = fn(*(t.double() for t in inputs))
        eager = fn(*inputs)
        torch.testing.assert_close(got, eager, rtol=1e-5, atol=1e-5, equal_nan=True)
        finite = exact.isfinite()
        scale = exact[finite].abs().clamp_min(1.0)
        error = ((got.double()[finite] - exact[finite]).abs() / scale).max().item()
        eager_error = ((eager.double()[finite] - exact[finite]).abs() / scale).max().item()
        assert error <= min(3e-7, eager_error), (fn.__name__, error, eager_error)
        assert torch.equal(got.isnan(), exact.isnan())


def test_exp_matches_eager_bit_for_bit_on_nearly_every_input(backend: CppBackend) -> None:
    """exp against torch.exp, bit for bit, on randn * 30 (fuzz a097e3dab0: cos(exp(81)) amplified a
    1-ulp difference of exp(81) to a different result) and on a dense grid of [-87, 88]."""

    def body(x: sympy.Symbol) -> None:
        ops.store("dst", x, ops.exp(ops.load("src", x)))

    group = pointwise_group(
        "dense_exp", body, [flat("src", torch.float32, DENSE_N)], [flat("dst", torch.float32, DENSE_N)], DENSE_N
    )
    (kernel,) = backend.compile([backend.generate(group)])
    g = torch.Generator().manual_seed(12)
    spread = torch.randn(DENSE_N, generator=g) * 30
    spread[:3] = torch.tensor([81.0, -81.0, 88.5])
    grid = torch.linspace(-87.0, 88.0, DENSE_N)
    for src in (spread, grid):
        dst = torch.empty_like(src)
        kernel(src, dst)
        expected = torch.exp(src)
        same = (dst.view(torch.int32) == expected.view(torch.int32)).double().mean().item()
        assert same > 0.985, f"exp equals torch.exp bit for bit on {same:.2%} of inputs"  # 90% before
        assert torch.equal(dst[:3], expected[:3])
        torch.testing.assert_close(dst, expected, rtol=1.2e-7, atol=0)  # the rest within 1 ulp
