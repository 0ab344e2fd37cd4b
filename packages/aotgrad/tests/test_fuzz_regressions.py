"""Programs the differential fuzzer (tools/fuzz/) found aotgrad getting wrong, shrunk, each run
compiled (eager forward and backward compilers, no fallback to eager) and compared with eager on
seeded random inputs: values, requires_grad of outputs and inputs, gradients."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from aotgrad_helpers import assert_same_results, check_against_eager, run_recorded, strict
from aotgrad_helpers import seeded_leaf as _leaf

import aotgrad

# --- copy_ into a tensor that does not require grad, from one that does -------------------------


def test_copy_into_an_intermediate_differentiates_the_source() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y[..., 0].copy_(w)  # w: float64, broadcast over y's first dim
        return y.sin()

    check_against_eager(fn, lambda: [_leaf(1, (3, 4)), _leaf(2, (1,), torch.float64, grad=True)])


def test_copy_into_a_transposed_intermediate_then_clamp() -> None:
    # fuzz a9864efd1f: `a2.t().copy_(a4)` then clamp with tensor bounds
    def fn(a2: torch.Tensor, a4: torch.Tensor, a7: torch.Tensor, a9: torch.Tensor) -> torch.Tensor:
        t5 = (a2 + 0).t().copy_(a4)
        return torch.clamp(t5, a7, a9)

    check_against_eager(
        fn,
        lambda: [_leaf(3, (4,), torch.float64), _leaf(4, (1,), torch.float64, True), _leaf(5, (), torch.float64, True),
                 _leaf(6, (4,), torch.float64, True)],
    )


def test_copy_of_an_integer_into_a_floor_division_result() -> None:
    # fuzz 5af0466de7
    def fn(a2: torch.Tensor, a9: torch.Tensor) -> torch.Tensor:
        t4 = torch.div(a2, 127, rounding_mode="floor")
        t4[..., 0].copy_(a9)
        return t4 * a2

    check_against_eager(fn, lambda: [_leaf(7, (3,), grad=True), _leaf(8, (), torch.int64)])


# --- addcmul on integer tensors with a float `value` -----------------------------------------------


@pytest.mark.parametrize("value", [0.5, -0.5, 1.5, -1.7, 2.7])
def test_integer_addcmul_truncates_a_float_value_as_eager(value: float) -> None:
    # fuzz 21ed8154f5 (out of place) and e2a027a481 (in place)
    def fn(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.addcmul(x, a, b, value=value), x.addcmul_(a, a, value=value)

    check_against_eager(fn, lambda: [_leaf(9, (2, 3), torch.int64), _leaf(10, (2, 3), torch.int64), _leaf(11, (3,), torch.int64)], no_grad=True)


def test_integer_addcmul_in_a_training_graph() -> None:
    def fn(x: torch.Tensor, a: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.addcmul(x, a, a, value=-1.5), w.sin()

    check_against_eager(fn, lambda: [_leaf(12, (4,), torch.int32), _leaf(13, (4,), torch.int32), _leaf(14, (4,), grad=True)])


# --- in place on an input that needs no grad, from an operand that does -----------------------------


def test_add_into_a_selected_input_makes_it_require_grad() -> None:
    # fuzz 155fba630f: eager's `a2` requires grad afterwards and the gradient reaches `a4`
    def fn(a2: torch.Tensor, a4: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a2.select(0, -1).add_(a4, alpha=-2)
        return a2, a2 * 3

    check_against_eager(fn, lambda: [_leaf(15, (3,)), _leaf(16, (), grad=True)])


def test_addcmul_into_a_selected_input_returns_the_view_with_its_gradient() -> None:
    # fuzz 72631da4cc: the returned view of the input requires grad too
    def fn(a2: torch.Tensor, a4: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t5 = a2.select(0, -1).addcmul_(a4, a4, value=-0.5)
        return t5, x.exp()

    check_against_eager(fn, lambda: [_leaf(17, (2, 3)), _leaf(18, (), grad=True), _leaf(19, (2,), grad=True)])


def test_input_written_from_a_grad_value_then_read_after_the_call() -> None:
    def fn(a: torch.Tensor, w: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
        a.mul_(w)
        buf.add_(1)  # a plain mutation beside it stays a no-grad write-back
        return (w * 2).sum()

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    grads = []
    for f in (fn, compiled):
        a, w, buf = _leaf(20, (4,)), _leaf(21, (4,), grad=True), _leaf(22, (4,))
        f(a, w, buf)
        assert a.requires_grad and not buf.requires_grad
        grads.append(torch.autograd.grad((a * a).sum(), w))
    torch.testing.assert_close(grads[1], grads[0])


# --- in-place writes into tensors whose elements share memory ---------------------------------------


def _expanded_fill(a: torch.Tensor, m: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t = a.expand(2, *a.shape).zero_()  # fuzz 2d8bb1792b, 28780b636b
    u = m.expand(3, *m.shape).masked_fill_(m > 0, 1)  # fuzz 9ad0ef0330
    v = (m * 2).expand(2, *m.shape).fill_(0.5)  # an intermediate
    return t, u, v * w, a, m


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("no_grad", [True, False])
def test_fill_through_an_expanded_view_writes_each_location_once(dtype: torch.dtype, no_grad: bool) -> None:
    check_against_eager(
        _expanded_fill, lambda: [_leaf(23, (1, 3), dtype), _leaf(24, (2, 1, 3)), _leaf(25, (3,), grad=True)], no_grad=no_grad
    )


def test_masked_fill_of_an_expanded_view_fills_where_any_copy_is_masked() -> None:
    def fn(a: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return a.expand(4, *a.shape).masked_fill_(m > 0, -1.0)

    check_against_eager(fn, lambda: [_leaf(26, (1, 3)), _leaf(27, (4, 1, 3))], no_grad=True)


def _with_infinities(seed: int, shape: tuple[int, ...], dtype: torch.dtype, grad: bool = False) -> torch.Tensor:
    t = _leaf(seed, shape, dtype)
    t.view(-1)[:3] = torch.tensor([float("inf"), float("-inf"), 60000.0])
    return t.requires_grad_(grad)


def _fills_of_expanded_infinities(a: torch.Tensor, m: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t = a.expand(2, *a.shape).masked_fill_(a.expand(2, *a.shape) > 0, 100.0)  # fuzz cc339a1008
    u = torch.exp(m).expand(2, *m.shape).masked_fill_(m > 0, 1)  # fuzz eb11f77442: exp overflows to inf
    v = (m * 1).expand(3, *m.shape).fill_(0.5)  # an infinite intermediate
    z = (m * 2).expand(2, *m.shape).zero_()
    return t, a, u, v, z, w.sin()


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("no_grad", [True, False])
def test_fill_through_an_expanded_view_overwrites_infinite_elements(dtype: torch.dtype, no_grad: bool) -> None:
    # the write lands in the expand's source: folding it back through the expand (`base + sum(new -
    # base)`) gave NaN where an infinite element was overwritten
    check_against_eager(
        _fills_of_expanded_infinities,
        lambda: [_with_infinities(41, (1, 4, 2), dtype), _with_infinities(42, (3,), dtype) * 30, _with_infinities(43, (5,), dtype, grad=True)],
        no_grad=no_grad,
    )


@pytest.mark.parametrize(
    "op",
    [
        lambda t, o: t.mul_(2),  # fuzz d29f473f4e .. e4b2f51c18: clamp_min_, add_, copy_, clamp_, pow_
        lambda t, o: t.clamp_min_(7),
        lambda t, o: t.add_(o),
        lambda t, o: t.copy_(o),
        lambda t, o: t.pow_(2),
    ],
)
@pytest.mark.parametrize("no_grad", [True, False])
def test_overlapping_writes_raise_eagers_error(op: Callable[..., Any], no_grad: bool) -> None:
    def fn(a: torch.Tensor, o: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return op(a.expand(2, *a.shape), o), w.sin()

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    for f in (fn, compiled):
        a = _leaf(28, (1, 3))
        with torch.no_grad() if no_grad else torch.enable_grad():
            with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
                f(a, _leaf(29, (2, 1, 3)), _leaf(30, (3,), grad=True))


def test_write_into_one_element_of_an_expanded_input() -> None:
    # fuzz 34c99881b3: eager changes the one shared element (every copy shows it)
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = a.narrow(0, 0, 1).exp_()
        return t, a + b

    check_against_eager(fn, lambda: [_leaf(31, (1,)).expand(6), _leaf(32, (6,))], no_grad=True)
    check_against_eager(fn, lambda: [_leaf(31, (1,)).expand(6), _leaf(32, (6,), grad=True)])


def test_in_place_on_an_expanded_int16_input_gives_eagers_result() -> None:
    # fuzz 75ee0db544 / 6ff6193df7: torch's functionalization cannot fold this write back for narrow
    # integers; it is made into a clone of the input's distinct elements, copied back
    def fn(a: torch.Tensor) -> torch.Tensor:
        return a.t().masked_fill_(a > 0, 1)

    check_against_eager(fn, lambda: [torch.tensor([3], dtype=torch.int16).expand(5)], no_grad=True)


# --- prod's gradient branches on the data in eager ------------------------------------------------


def _special(seed: int, shape: tuple[int, ...], dtype: torch.dtype, values: Sequence[float]) -> torch.Tensor:
    t = _leaf(seed, shape, torch.float64)
    flat = t.view(-1)
    for i, v in enumerate(values):
        flat[(7 * i + 3) % flat.numel()] = v
    return t.to(dtype).requires_grad_()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize(
    "values",
    [(), (float("inf"),), (float("nan"), 2.0), (0.0,), (0.0, float("inf")), (0.0, -0.0, float("-inf")), (0.0, 0.0, float("nan"))],
)
def test_prod_gradient_with_inf_nan_and_zeros_is_eagers(dtype: torch.dtype, values: tuple[float, ...]) -> None:
    # fuzz c117855fe5: eager's `grad * result / input` gives NaN at an inf input where no input is 0
    # fuzz 1a8338e35e: eager's product of all elements has gradient 0 with two zeros or more
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return x.prod(0), x[::3].prod(-1, keepdim=True), x.prod()

    check_against_eager(fn, lambda: [_special(33, (7, 4), dtype, values)])


@pytest.mark.parametrize("values", [(), (0.0, 0.0), (0.0, 0.0, float("inf"))])
def test_prod_double_backward_matches_eager(values: tuple[float, ...]) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.prod(1).sum() + x.prod()

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    results = []
    for f in (fn, compiled):
        x = _special(34, (3, 4), torch.float64, values)
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        results.append(torch.autograd.grad((g * g).sum(), x))
    torch.testing.assert_close(results[1], results[0], equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
@pytest.mark.parametrize("values", [(0.0, float("inf")), (0.0, float("nan")), (-0.0, 1e30, float("inf"))])
def test_prod_double_backward_with_one_zero_and_inf_is_eagers(
    dtype: torch.dtype, values: tuple[float, ...]
) -> None:
    """fuzz c835085280: with one zero and an inf the product is NaN; eager's second derivative is
    still 0 in places, where the replay's `where` of both branches leaked NaN from the other one."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.prod()

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    results = []
    for f in (fn, compiled):
        x = _special(35, (8, 2), dtype, values)
        (g,) = torch.autograd.grad(f(x), x, torch.tensor(0.75, dtype=dtype), create_graph=True)
        cotangent = torch.linspace(-2, 2, g.numel(), dtype=torch.float64).reshape(g.shape).to(dtype)
        results.append(torch.autograd.grad((g * cotangent).sum(), x))
    torch.testing.assert_close(results[1], results[0], equal_nan=True)


# --- in-place writes into expanded empty tensors -------------------------------------------------


@pytest.mark.parametrize(
    ("op", "shape"),
    [
        (lambda t, o: t.lerp_(o, 0.3), (0, 2)),  # fuzz 747ec6b29a
        (lambda t, o: t.mul_(100.0), (0, 5, 3)),  # fuzz 70e7e18eb0
        (lambda t, o: t.addcmul_(o, o, value=-0.5), (3, 0)),  # fuzz f9c96b258c
        (lambda t, o: t.exp_(), (0,)),  # fuzz 06dac9a412
    ],
)
def test_overlapping_write_into_an_expanded_empty_tensor_runs_as_eager(op: Callable[..., Any], shape: tuple[int, ...]) -> None:
    # A tensor without elements has no memory location written twice: eager runs these.
    def fn(a: torch.Tensor, o: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return op(a.expand(2, *a.shape), o), w.sin()

    check_against_eager(fn, lambda: [_leaf(40, shape), _leaf(41, ()), _leaf(42, (3,))], no_grad=True)


# --- a saved input with gaps, overwritten by the graph --------------------------------------------


class _StrideFaithfulBackward:
    """A backward compiler that reads each input with the strides it was traced with, as a compiled
    kernel does (an input with other strides is read out of its bounds: `as_strided` refuses)."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        strides = [x.stride() if isinstance(x, torch.Tensor) else None for x in example_inputs]

        def run(*args: Any) -> Any:
            args = tuple(
                a.as_strided(a.shape, s, a.storage_offset()) if s is not None else a for a, s in zip(args, strides)
            )
            return gm(*args)

        return run


def test_saved_input_with_gaps_keeps_its_strides_when_copied_before_its_update() -> None:
    # fuzz e07056360e: `a2` (`x[:, 1:-1]`) is saved for the backward and updated in place; the copy
    # kept for the backward was made contiguous, which the compiled backward read with `a2`'s strides
    def fn(a2: torch.Tensor, a6: torch.Tensor, a7: torch.Tensor, a10: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t3 = a2.mT
        a2[1:].mul_(a7)
        return a6 * a10, t3, a2

    def inputs() -> list[torch.Tensor]:
        x, w = _leaf(43, (9, 4, 2)), _leaf(44, (3,), grad=True)
        return [x[:, 1:-1], w[:-1], w[1:], _leaf(45, (2,), grad=True)]

    compiled = aotgrad.aot_function(
        fn, fw_compiler=aotgrad.eager_compiler, bw_compiler=_StrideFaithfulBackward(), config=strict()
    )
    assert_same_results(run_recorded(fn, inputs, False), run_recorded(compiled, inputs, False))


# --- double backward through a graph that updates an input in place --------------------------------


def _double_grads(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    leaves = [x for x in inputs if x.requires_grad]
    out = fn(*inputs)
    (g,) = torch.autograd.grad(out, leaves, create_graph=True)
    return [g.detach(), *torch.autograd.grad(g.pow(2).sum(), leaves)]


@pytest.mark.parametrize(
    "case",
    [
        "div_",  # fuzz 2b83dc0ff8: the written input is read by the gradient
        "bitwise_not_",  # fuzz 457dd500ff: an integer input written, not read by the gradient
    ],
)
def test_double_backward_through_an_in_place_update_of_an_input(case: str) -> None:
    def fn(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if case == "div_":
            t = a.t().div_(w)
        else:
            b[..., 0].bitwise_not_()
            t = a * 1
        return (w.expm1() * t).pow(2).sum() + (w * b).sum()

    def inputs() -> list[torch.Tensor]:
        return [_leaf(46, (3, 2)), _leaf(47, (2, 3), torch.int32), _leaf(48, (1,), grad=True)]

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    expected, actual = inputs(), inputs()
    for want, got in zip(_double_grads(fn, expected), _double_grads(compiled, actual)):
        torch.testing.assert_close(got, want)
    for want, got in zip(expected, actual):
        torch.testing.assert_close(got, want)


# --- factories of 256 rows and more --------------------------------------------------------------


def test_eye_of_256_rows_times_an_integer_input() -> None:
    # fuzz cd1f9182bd: torch's eye decomposition ranged over uint16, which CPU arange lacks
    def fn(a: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a * torch.eye(a.size(-2), a.size(-1), dtype=torch.float16), torch.eye(257)[:, :3] @ w

    check_against_eager(fn, lambda: [_leaf(17, (256, 1), torch.int64), _leaf(18, (3, 2), grad=True)])


# --- linear upsampling of infinite pixels ---------------------------------------------------------


@pytest.mark.parametrize("align_corners", [False, True])
def test_linear_upsampling_of_an_infinite_edge_pixel_is_infinite(align_corners: bool) -> None:
    # fuzz f9d594847d: torch's decomposition blends v1 + (v2 - v1) * a, nan where both are inf
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        size = torch.nn.functional.interpolate(x, size=5, mode="linear", align_corners=align_corners)
        return size, torch.nn.functional.interpolate(x, scale_factor=1.5, mode="linear", align_corners=align_corners)

    def inputs() -> list[torch.Tensor]:
        x = _leaf(19, (2, 3, 4))
        x[0, 0, -1], x[1, 2, -1], x[1, 1, 0] = float("inf"), float("-inf"), float("inf")
        return [x]

    check_against_eager(fn, inputs, no_grad=True)


def _recomputed_scale_upsampling(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.interpolate(x, scale_factor=0.75, recompute_scale_factor=True, mode="linear")


def test_linear_upsampling_with_a_recomputed_scale_at_symbolic_sizes_weighs_infinite_pixels_as_eager() -> None:
    # fuzz 12226dc8c7: with recompute_scale_factor=True the interpolation fell through to torch's
    # difference form at symbolic sizes: nan where a pixel next to an infinite one is -inf in eager
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    mode = FakeTensorMode(shape_env=ShapeEnv())
    fake = mode.from_tensor(
        torch.zeros(1, 2, 16),
        symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.STATIC, DimDynamic.STATIC, DimDynamic.DYNAMIC]),
    )
    compiled = aotgrad.aot_graph(_recomputed_scale_upsampling, [fake], fw_compiler=aotgrad.eager_compiler, config=strict())
    for n in (16, 19, 23):
        x = _leaf(43, (1, 2, n))
        x[0, 0, 0], x[0, 1, 2], x[0, 1, n - 1] = float("-inf"), float("inf"), float("inf")
        with torch.no_grad():
            expected = _recomputed_scale_upsampling(x)
            torch.testing.assert_close(compiled(x), expected, equal_nan=True)
        assert not expected.isnan().any()


# --- batch norm of half-precision activations with float32 parameters ------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_batch_norm_of_half_activations_with_float32_parameters_keeps_float32_statistics(dtype: torch.dtype) -> None:
    # ATen's mixed-type path returns the saved mean and invstd in float32; torch's decomposition
    # rounded them to the input's dtype and the weight's gradient read them (0.5% off eager's)
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.batch_norm(x, mean, var, w, b, training=True, momentum=0.1)
        return y * torch.linspace(-1, 1, y.shape[-1], dtype=y.dtype)

    def inputs() -> list[torch.Tensor]:
        x = (_leaf(44, (8, 4, 5, 5)) * 2 + 3).to(dtype).detach().requires_grad_(True)
        return [x, _leaf(45, (4,), grad=True), _leaf(46, (4,), grad=True), torch.zeros(4), torch.ones(4)]

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    results = []
    for function in (fn, compiled):
        args = inputs()
        out = function(*args)
        out.float().sum().backward()
        results.append((out, *(a.grad for a in args[:3]), args[3], args[4]))
    (out, x_grad, *float32_results), (eager_out, eager_x_grad, *eager_float32_results) = results[1], results[0]
    half_ulp = {"rtol": 8e-3, "atol": 1e-2}  # the half-precision results: within an ulp of eager's
    torch.testing.assert_close(out.float(), eager_out.float(), **half_ulp)
    torch.testing.assert_close(x_grad.float(), eager_x_grad.float(), **half_ulp)
    for got, want in zip(float32_results, eager_float32_results):  # weight and bias gradients, running stats
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


# --- threshold on integer tensors -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("threshold, value", [(0.5, -2.0), (-1.5, 3.5), (1.5, -2.7)])
def test_integer_threshold_keeps_every_digit_and_truncates_its_numbers(dtype: torch.dtype, threshold: float, value: float) -> None:
    # fuzz 66649e241f (int32), fd49a5e4a7 (int64): eager selects between integers, never via float
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.nn.functional.threshold(x, threshold, value), torch.nn.functional.threshold(x * 1, threshold, value, inplace=True)

    def inputs() -> list[torch.Tensor]:
        x = _leaf(40, (3, 5), dtype)
        x[0, :2] = torch.tensor([1566630915, -1566630915] if dtype == torch.int32 else [362427403577145863, -(2**62) + 1])
        return [x]

    check_against_eager(fn, inputs, no_grad=True)


# --- running statistics read back after a training-mode normalization --------------------------------


@pytest.mark.parametrize("norm", ["instance", "batch"])
def test_running_statistics_read_back_carry_no_gradient(norm: str) -> None:
    # fuzz 70889b9ae0: instance_norm copies its updated running variance into the caller's buffer;
    # eager updates it outside autograd (the buffer does not require grad, no gradient flows through it)
    def fn(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if norm == "instance":
            y = torch.nn.functional.instance_norm(x, mean, var, w, use_input_stats=True, momentum=0.3)
        else:
            y = torch.nn.functional.batch_norm(x, mean, var, w, training=True, momentum=0.3)
        return var.to(torch.float32), y, mean * 2

    check_against_eager(
        fn,
        lambda: [_leaf(44, (2, 3, 4), torch.float64, grad=True), _leaf(45, (3,), torch.float64),
                 _leaf(46, (3,), torch.float64).abs(), _leaf(47, (3,), torch.float64, grad=True)],
    )


# --- standard deviation of values whose squares overflow --------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("no_grad", [True, False])
def test_std_of_huge_values_is_finite_as_eager(dtype: torch.dtype, no_grad: bool) -> None:
    # fuzz b5494d9cc8: eager's CPU kernel accumulates in float64; a float32 variance of values near
    # 1e30 overflowed to inf before the square root
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.std(1, keepdim=True), torch.std(x), *torch.std_mean(x, 0, correction=0))

    def inputs() -> list[torch.Tensor]:
        x = _leaf(48, (6, 3), torch.float64)
        x[1, 0], x[4, 2] = 1e30, -1e30
        return [x.to(dtype).requires_grad_(not no_grad)]

    check_against_eager(fn, inputs, no_grad=no_grad)


def test_a_callers_table_gets_eagers_threshold_and_std() -> None:
    # a code generator's table holds torch's decompositions of these: they give eager's values too
    table = dict(torch._decomp.core_aten_decompositions())

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.nn.functional.threshold(x, 0.5, -2.0), y.std(1)

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, decompositions=table, config=strict())
    x = torch.tensor([1566630915, -3, 0, 1], dtype=torch.int32)
    y = _leaf(49, (3, 2))
    y[1, 0] = 1e30
    with torch.no_grad():
        for want, got in zip(fn(x, y), compiled(x, y)):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_in_place_write_into_an_input_whose_elements_overlap_runs_eagerly() -> None:
    # fuzz 73605f9f8f: `as_strided((3, 2), (1, 1))` shares memory between rows without a stride-0 dim;
    # the written-back new value left one shared location unsquared. The graph runs eagerly (even
    # without fallback: test_overlapping_writes.py): eager's result, eager's input afterwards.
    def fn(a: torch.Tensor) -> torch.Tensor:
        return a[::2].pow_(2)

    check_against_eager(fn, lambda: [torch.arange(4.0).as_strided((3, 2), (1, 1))], no_grad=True)


def _writes_through_one_copy_of_an_expand(a: torch.Tensor, m: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    e = (a * 1).expand(3, *a.shape)
    e.narrow(0, 1, 1).add_(-129)  # fuzz 7455664f14 (there on an input): one copy of each element written
    f = (m * 1).expand(2, *m.shape)
    f.select(0, -1).floor_()  # fuzz 98f463645b
    g = (w * 1e8).expand(2, *w.shape)
    g[0].mul_(1e-8)  # folded as base + (new - base), rounding lost the small result
    h = (m * 1).unsqueeze(-1).expand(2, 5, 3)
    h[1:].masked_fill_(h[1:] > 0, 100.0)  # fuzz 72dcf48ad8: a fill through a slice of an expand
    return e * 1, f * 1, g * 1, h * 1, a


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_write_through_one_copy_of_an_expanded_view_is_exact(dtype: torch.dtype) -> None:
    # Inference only: with gradients the write still folds through the expand (see overlap.py).
    check_against_eager(
        _writes_through_one_copy_of_an_expand,
        lambda: [_with_infinities(31, (1, 4), dtype), _with_infinities(32, (2, 5), dtype, grad=True), _leaf(33, (6,), grad=True)],
        no_grad=True,
    )


def _scales_one_copy_of_an_expand(w: torch.Tensor) -> torch.Tensor:
    g = (w * 2).expand(2, *w.shape)
    g[0].mul_(3)
    return g * 1


def test_a_write_through_one_copy_of_an_expanded_view_keeps_its_gradient() -> None:
    check_against_eager(_scales_one_copy_of_an_expand, lambda: [_leaf(34, (6,), grad=True)])


# --- writes through an unfold view --------------------------------------------------------------


def _scales_windows_of_an_input(a: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # fuzz 28f170bec4: functionalization folds the write back with unfold_backward, which zeroed
    # the elements no window covers (here every third column of `a`)
    a.unfold(1, 2, 3).select(0, -1).mul_(2.0)
    return y + 1


def _scales_windows_of_an_intermediate(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b = a * 1
    b.unfold(1, 2, 3).mul_(2.0)
    return b, b.sum()


def test_a_write_through_an_unfold_view_of_an_input_keeps_the_uncovered_elements() -> None:
    check_against_eager(_scales_windows_of_an_input, lambda: [_leaf(35, (2, 8)), _leaf(36, (2,))], no_grad=True)


@pytest.mark.parametrize("no_grad", [True, False])
def test_a_write_through_an_unfold_view_of_an_intermediate_keeps_the_uncovered_elements(no_grad: bool) -> None:
    check_against_eager(_scales_windows_of_an_intermediate, lambda: [_leaf(37, (3, 8))], no_grad=no_grad)


def test_a_write_through_an_unfold_view_with_a_gradient_runs_eagerly() -> None:
    # aotgrad cannot express it with a gradient: the graph runs eagerly, even without fallback
    check_against_eager(_scales_windows_of_an_intermediate, lambda: [_leaf(38, (3, 8), grad=True)])


def _fills_an_expand_of_windows(a: torch.Tensor) -> torch.Tensor:
    # fuzz af477f4c45: the fill was made into one copy of each location, a plain view of the unfold,
    # whose write functionalization refuses (step 1 < size 2: "internal overlap")
    t = a.unfold(-1, 2, 1)
    return t.expand(2, *t.shape).fill_(0)


def _fills_an_expand_of_spaced_windows(a: torch.Tensor) -> torch.Tensor:
    b = a * 1
    t = b.unfold(0, 2, 3)
    t.expand(3, *t.shape).fill_(7)  # through the plain unfold view, unfold_backward zeroed b[2::3]
    return b


def test_a_fill_through_an_expand_of_an_unfold_view_gives_eagers_result() -> None:
    check_against_eager(_fills_an_expand_of_windows, lambda: [_leaf(39, (1, 2), torch.uint8)], no_grad=True)
    check_against_eager(_fills_an_expand_of_spaced_windows, lambda: [_leaf(40, (8,))], no_grad=True)


def _adds_to_windows_of_an_input(a: torch.Tensor) -> torch.Tensor:
    a.unfold(0, 2, 2).add_(1)
    return a * 2


def test_a_write_through_an_unfold_view_of_an_input_with_a_storage_offset_is_eagers() -> None:
    # The write was made into an `as_strided` view of the input, which bakes in its storage offset:
    # traced on an input at offset 0, it wrote the wrong elements of one at offset 1 (the first
    # traced at offset 1 failed: "copy_ survived functionalization").
    compiled = aotgrad.aot_function(_adds_to_windows_of_an_input, fw_compiler=aotgrad.eager_compiler, config=strict())
    for offset in (0, 1, 0, 1):
        def inputs(offset: int = offset) -> list[torch.Tensor]:
            return [_leaf(41, (7,))[offset:offset + 6]]
        assert_same_results(
            run_recorded(_adds_to_windows_of_an_input, inputs, True), run_recorded(compiled, inputs, True)
        )


def _adds_to_overlapping_windows(a: torch.Tensor) -> torch.Tensor:
    b = a * 1
    b.unfold(0, 2, 1).add_(1)  # eager adds 1 twice to every element but the ends
    return b


def test_a_write_through_overlapping_windows_of_symbolic_size_runs_eagerly() -> None:
    # With symbolic sizes the unfold view was trusted to be distinct (as views of dense memory are):
    # the write, folded back once per element, added 1 where eager adds 2.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    mode = FakeTensorMode(shape_env=ShapeEnv())
    fake = mode.from_tensor(
        torch.zeros(9), symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC])
    )
    compiled = aotgrad.aot_graph(_adds_to_overlapping_windows, [fake], fw_compiler=aotgrad.eager_compiler, config=strict())
    for n in (2, 3, 9, 17):
        x = _leaf(42, (n,))
        with torch.no_grad():
            torch.testing.assert_close(compiled(x.clone()), _adds_to_overlapping_windows(x.clone()), rtol=0, atol=0)


# --- batch norm whose weight or bias is its running statistic -------------------------------------


def _norm_weighted_by_its_running_var(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.batch_norm(x, mean, var, var, b, training=True, momentum=0.25) * 2


def _norm_shifted_by_its_running_mean(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.batch_norm(x, mean, var, w, mean, training=True, momentum=0.5)


@pytest.mark.parametrize("no_grad", [True, False])
def test_batch_norm_applies_a_running_statistic_passed_as_weight_after_updating_it(no_grad: bool) -> None:
    # fuzz 4b5a7ef69f, 75375c7711: eager updates the running statistics, then applies the weight
    check_against_eager(
        _norm_weighted_by_its_running_var,
        lambda: [_leaf(39, (4, 3), grad=True), _leaf(40, (3,)), _leaf(41, (3,)).abs() + 0.5, _leaf(42, (3,))],
        no_grad=no_grad,
    )
    check_against_eager(
        _norm_shifted_by_its_running_mean,
        lambda: [_leaf(43, (5, 3), grad=True), _leaf(44, (3,)), _leaf(46, (3,)).abs() + 0.5, _leaf(45, (3,))],
        no_grad=no_grad,
    )


# --- advanced indexing with a 0-d index tensor beside others ----------------------------------------


def _index_put_at_a_0d_column(a: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return a.index_put((i.argsort(stable=True)[:2], torch.tensor(6)), v) * 2


def _index_at_a_0d_column(a: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.index.Tensor(a, [i, j]).sin()


@pytest.mark.parametrize("no_grad", [True, False])
def test_index_put_with_a_0d_index_beside_a_1d_one_is_eagers(no_grad: bool) -> None:
    """fuzz bc990cafd8: torch's fake `index` left a 0-d index tensor out of the indices' broadcast,
    so the gradient of `index_put`'s values (an `index`) had shape () where eager's has (2,)."""
    check_against_eager(
        _index_put_at_a_0d_column,
        lambda: [_leaf(50, (3, 7), grad=True), torch.tensor([4, 1, 7]), _leaf(51, (2,), grad=True)],
        no_grad=no_grad,
    )
    check_against_eager(
        _index_put_at_a_0d_column,
        lambda: [_leaf(52, (3, 7)), torch.tensor([4, 1, 7]), _leaf(53, (1,), grad=True)],
        no_grad=no_grad,
    )


@pytest.mark.parametrize("no_grad", [True, False])
def test_index_with_a_0d_index_beside_a_1d_one_has_eagers_shape_in_the_graph(no_grad: bool) -> None:
    """fuzz bc990cafd8: the forward graph's `index` had the fake shape (4,) for eager's (2, 4)."""
    graphs: list[torch.fx.GraphModule] = []

    def recording(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append(gm)
        return aotgrad.eager_compiler(gm, example_inputs)

    def make_inputs() -> list[Any]:
        return [_leaf(54, (3, 5, 4), grad=not no_grad), torch.tensor([2, 0]), torch.tensor(3)]

    check_against_eager(_index_at_a_0d_column, make_inputs, no_grad=no_grad)
    compiled = aotgrad.aot_function(_index_at_a_0d_column, fw_compiler=recording, config=strict())
    with torch.no_grad() if no_grad else torch.enable_grad():
        compiled(*make_inputs())
    (output,) = [n for n in graphs[0].graph.nodes if n.op == "output"]
    assert tuple(output.args[0][0].meta["val"].shape) == (2, 4)


@pytest.mark.parametrize("value_dtype", [torch.int64, torch.float64, torch.int8])
def test_index_fill_casts_a_tensor_value_to_the_filled_dtype(value_dtype: torch.dtype) -> None:
    """fuzz f7d29d42a6: eager fills an int32 tensor with an int64 0-d value; torch's decomposition
    passed the value on uncast to `index_put`, which refused the mixed dtypes."""

    def fn(x: torch.Tensor, index: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return x.index_fill(-1, index % x.size(-1), value) + x.clone().index_fill_(0, index[:1] % x.size(0), value)

    def make_inputs() -> list[Any]:
        return [torch.randint(-9, 9, (3, 4), dtype=torch.int32, generator=torch.Generator().manual_seed(8)),
                torch.tensor([5, -2, 7]), torch.tensor(-2.75 if value_dtype.is_floating_point else -2, dtype=value_dtype)]

    check_against_eager(fn, make_inputs, no_grad=True)
