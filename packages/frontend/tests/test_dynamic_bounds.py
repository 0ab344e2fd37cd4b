"""Slice bounds, rolls and other size arithmetic at symbolic sizes, against eager at every size.

A graph recompiled for a second size (automatic dynamic shapes) is reused for every later size
its guards accept: its bounds must clamp as Python clamps them (``x[-5:]`` of 3 elements starts
at 0, ``x[2:-2]`` of 3 elements is empty), and Python's floor ``%`` must stay floor ``%`` in
generated code (``-5 % s`` of a roll).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import frontend
from frontend.backends import inductor as inductor_backend

SIZES = (2, 2, 3, 5, 7, 8, 12)
"""The first size compiles static, the second repeats it, the third recompiles with a symbolic
size, and the rest reuse that graph (or one more, where a guard splits the range)."""

PROGRAMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "negative_start": lambda x: x[-5:] * 2,
    "stepped_both_ends": lambda x: torch.cummax(x[2:-2:2], 0)[1],
    "start_past_end": lambda x: x[6:] + 1,
    "stop_before_start": lambda x: x[:-6].sum(0, keepdim=True) + x[:1],
    "negative_stop_step_3": lambda x: x[1:-1:3].exp(),
    "roll_by_more_than_size": lambda x: x.roll(5, 0),
    "roll_negative": lambda x: x.roll(-3, 0) * x,
    "slice_assign_negative": lambda x: x.clone().index_fill(0, torch.tensor([0]), 0.0)[-4:].cumsum(0),
}


def _use_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    import codegen_triton

    def triton_on_cpu(device_type: str, config: object) -> object:
        options = codegen_triton.TritonBackend.parse_options(config.kernel_backend_options("cuda"))  # type: ignore[attr-defined]
        return codegen_triton.TritonBackend("cpu", options)

    monkeypatch.setattr(inductor_backend, "load_kernel_backend", triton_on_cpu)


def _slice_assign(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[-4:] = 0.5
    y[1:-5] = y[1:-5] * 3
    return y


PROGRAMS["slice_assign"] = _slice_assign


@pytest.mark.parametrize("kernels", ["cpp", "triton"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bounds_match_eager_at_every_size(name: str, kernels: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if kernels == "triton":
        pytest.importorskip("triton")
        if not __import__("os").environ.get("TRITON_INTERPRET"):
            pytest.skip(
                "the Triton kernels run on CPU tensors only in Triton's interpreter (TRITON_INTERPRET=1)"
            )
        _use_triton(monkeypatch)
    fn = PROGRAMS[name]
    frontend.reset()
    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    generator = torch.Generator().manual_seed(11)
    for size in SIZES:
        x = torch.randn(size, generator=generator)
        expected, actual = fn(x), compiled(x)
        assert actual.shape == expected.shape, (size, actual.shape, expected.shape)
        torch.testing.assert_close(actual, expected, msg=lambda m, s=size: f"size {s}: {m}")
    # the repeated size reuses its graph; guards on the bounds may split the symbolic range
    assert compiled.kiln_context.graphs_compiled < len(SIZES) - 1


def _scatter_add_into_a_chunk(x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    part = x.chunk(3, 1)[0]
    return part.scatter_add(1, index % part.size(1), src)


def test_a_backward_reads_every_size_symbol_it_uses() -> None:
    """fuzz 32d948aaab: the backward took only ``(s1 + 2) // 3`` (a chunk's size, saved) and
    tangents of that size, not ``s1`` itself: its kernels named a symbol no input gave."""
    frontend.reset()
    compiled = frontend.compile(_scatter_add_into_a_chunk, options={"fallback_to_eager": False})
    generator = torch.Generator().manual_seed(12)
    for size in (1, 1, 2, 4, 5):
        x = torch.randn(size, size + 1, generator=generator)
        index = torch.randint(-5, 5, (size, size), generator=generator)
        src = torch.randn(size, size, generator=generator, requires_grad=True)
        expected = torch.autograd.grad(_scatter_add_into_a_chunk(x, index, src).sin().sum(), src)
        actual = torch.autograd.grad(compiled(x, index, src).sin().sum(), src)
        torch.testing.assert_close(actual, expected, msg=lambda m, s=size: f"size {s}: {m}")


@pytest.mark.parametrize("op", ["std", "var", "var_mean"])
def test_variance_at_symbolic_sizes(op: str) -> None:
    """fuzz a506d2230a: ``x.std(-1)`` traces ``correction=1.0``; at a symbolic size its divisor
    ``s0 - 1.0`` held a float that no code generator prints."""

    def fn(x: torch.Tensor) -> Any:
        return getattr(torch, op)(x, -1, keepdim=True)

    frontend.reset()
    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    generator = torch.Generator().manual_seed(13)
    for size in (2, 2, 3, 6):
        x = torch.randn(4, size, generator=generator)
        torch.testing.assert_close(compiled(x), fn(x))


def _quantile_over_a_unit_dim(x: torch.Tensor) -> torch.Tensor:
    return torch.quantile(x, 0.0, dim=-2, interpolation="lower")


def test_a_size_is_never_read_from_the_stride_of_a_unit_dim() -> None:
    # The backward's saved sort indices are (1, s, 1); FX recorded s for the stride of dim 0, the sort
    # returned 1 there, and the size was read from it (fuzz feebf912b2: a gradient of shape (1, 1)).
    compiled = frontend.compile(_quantile_over_a_unit_dim, options={"fallback_to_eager": False})
    for columns in (2, 2, 3, 5):
        x = torch.randn(1, columns, dtype=torch.float64, requires_grad=True)
        got = compiled(x)
        (got_grad,) = torch.autograd.grad(got, x, torch.ones_like(got))
        want = _quantile_over_a_unit_dim(x)
        (want_grad,) = torch.autograd.grad(want, x, torch.ones_like(want))
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_grad, want_grad)


def _clamp_by_tensors(x: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x, low, high)


def test_empty_tensors_at_symbolic_sizes_pass_their_stride_checks() -> None:
    # An empty (.., 36, 0) value saved for the backward: its strides are whatever its producer chose
    # (fuzz 39f7d92fdc, 5a90f8ee35: "stride 0 must be s36*s49", then a gradient of a wrong shape).
    compiled = frontend.compile(_clamp_by_tensors, options={"fallback_to_eager": False})
    for grow in (0, 0, 1, 3):
        x = torch.randint(0, 2**20, (24 + grow, 4 + grow, 36 + grow, 0))
        low = torch.randn(24 + grow, 4 + grow, 36 + grow, 0, requires_grad=True)
        high = (torch.rand(24 + grow, 1, 1, 0) + 0.1).requires_grad_()
        got = compiled(x, low, high)
        grads = torch.autograd.grad(got, (low, high), torch.ones_like(got), allow_unused=True)
        want = _clamp_by_tensors(x, low, high)
        assert got.shape == want.shape
        for grad, leaf in zip(grads, (low, high)):
            assert grad is None or grad.shape == leaf.shape


@pytest.mark.parametrize(("scale", "mode"), [(0.5, "nearest"), (2.0, "nearest"), (0.5, "bilinear"), (1.5, "bilinear")])
def test_interpolation_by_a_dyadic_scale_compiles_at_symbolic_sizes(scale: float, mode: str) -> None:
    # Its output size is int(s * scale) (`TruncToInt(0.5*ToFloat(s))` in torch's ShapeEnv): exact
    # in double for a dyadic scale, so it is floor division (fuzz 45e89d381a: "cannot print TruncToInt").
    def resize(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(x, scale_factor=scale, mode=mode) * 2

    compiled = frontend.compile(resize, options={"fallback_to_eager": False})
    for side in (6, 6, 7, 9, 12):
        x = torch.randn(2, 3, side, side + 1)
        torch.testing.assert_close(compiled(x), resize(x))


def test_interpolation_by_any_other_scale_still_matches_eager() -> None:
    def resize(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(x, scale_factor=1.7, mode="nearest") + 1

    compiled = frontend.compile(resize)
    for side in (6, 6, 7, 9, 13):
        x = torch.randn(1, 2, side, side)
        torch.testing.assert_close(compiled(x), resize(x))


def test_a_softmax_over_an_empty_tensors_long_dim_trains_in_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    # (2053, 0) float16 under bf16 autocast, its gradient taken (fuzz ec00d7d9ca): a reduction with no
    # outputs over 2053 rows, which the split plan spread by dividing by its output count.
    pytest.importorskip("triton")
    if not __import__("os").environ.get("TRITON_INTERPRET"):
        pytest.skip("the Triton kernels run on CPU tensors only in Triton's interpreter (TRITON_INTERPRET=1)")
    _use_triton(monkeypatch)

    def program(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.nn.functional.softmax(x, -2, dtype=torch.float32)

    frontend.reset()
    leaf = torch.randn(0, dtype=torch.float16, requires_grad=True)
    got = frontend.compile(program, options={"fallback_to_eager": False})(leaf.expand(2053, 0))
    assert got.shape == (2053, 0) and got.dtype == torch.float32
    (grad,) = torch.autograd.grad(got.sum(), leaf)
    assert grad.shape == (0,)


@pytest.mark.parametrize("mode", ["linear", "bilinear"])
def test_linear_interpolation_of_an_infinite_edge_pixel_at_symbolic_sizes(mode: str) -> None:
    # At symbolic sizes the Python dispatcher ran torch's own upsampling (v1 + (v2 - v1) * a: nan where
    # both neighbours are the same inf pixel) instead of eager's weighted sum (fuzz d8f15e6cd8); and a
    # dim keeping its size (width 6 -> 6) read its right neighbour with weight 0 (inf * 0: nan).
    def resize(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(x, size=(8,) if mode == "linear" else (8, 6), mode=mode)

    compiled = frontend.compile(resize, options={"fallback_to_eager": False})
    for side in (2, 2, 3, 5):
        shape = (3, 1, side) if mode == "linear" else (3, 1, side, side + 1)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(side))
        x[-1, 0, ..., -1] = float("-inf")
        got, want = compiled(x), resize(x)
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
        torch.testing.assert_close(got, want, equal_nan=True)


def _narrow_by_a_tensor(x: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    return x.narrow(0, start, 2) * 2


def test_narrow_by_a_tensor_start_compiles_and_checks_its_bounds() -> None:
    # The start is data: the view's bounds are a Piecewise of it, which the wrapper printed as a name
    # (NameError: 'Piecewise'), and the graph ran eagerly (strict OpInfo's narrow).
    compiled = frontend.compile(_narrow_by_a_tensor, options={"fallback_to_eager": False})
    x = torch.randn(5, 3)
    for start in (0, 1, 3, -2):
        torch.testing.assert_close(compiled(x, torch.tensor(start)), _narrow_by_a_tensor(x, torch.tensor(start)))
    with pytest.raises((RuntimeError, IndexError)):
        _narrow_by_a_tensor(x, torch.tensor(4))  # eager refuses a start whose 2 rows pass the end
    with pytest.raises((RuntimeError, IndexError)):
        compiled(x, torch.tensor(4))
