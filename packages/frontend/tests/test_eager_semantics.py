"""Compiled code behaves as eager where a capture could silently differ from it.

Tensor subclasses keep their type, errors eager raises are raised (with eager's type),
`retain_grad()` works, grad mode survives graph breaks inside `with torch.no_grad():`, a dict
changed while iterated raises, and shapes read after an in-place resize are the new ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import torch

import frontend

BACKENDS = ["aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _fresh(fresh_cache: None) -> None:
    torch.manual_seed(0)


def _outside() -> None:
    """A call capture does not trace (a graph break), as printing or logging would be."""
    print(end="")


class _Scaled(torch.Tensor):
    """A tensor subclass with the default `__torch_function__`: results of ops on it are `_Scaled` too."""


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_subclass_output_keeps_its_type(backend: str) -> None:
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1

    compiled = frontend.compile(double, backend=backend)
    x = torch.randn(3).as_subclass(_Scaled)
    got, expected = compiled(x), double(x)
    assert type(got) is type(expected) is _Scaled
    torch.testing.assert_close(got.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))
    plain = torch.randn(3)
    assert type(compiled(plain)) is torch.Tensor  # a plain tensor still compiles (its own entry)
    torch.testing.assert_close(compiled(plain), double(plain))


def _raises_like_eager(fn: Callable[..., Any], compiled: Callable[..., Any], *args: Any) -> None:
    with pytest.raises(Exception) as eager:
        fn(*args)
    with pytest.raises(Exception) as got:
        compiled(*args)
    assert type(got.value) is type(eager.value)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["abs_of_bool", "max_of_empty", "max_of_empty_intermediate", "max_over_an_empty_dim",
                                  "fill_overflowing_int8", "fill_of_an_expanded_int8", "full_like_overflowing_int16"])
def test_errors_eager_raises_are_raised(backend: str, case: str) -> None:
    int8 = torch.tensor([1, -3], dtype=torch.int8)
    cases: dict[str, tuple[Callable[[torch.Tensor], Any], torch.Tensor]] = {
        "abs_of_bool": (lambda t: t.abs() * 2, torch.randn(4) > 0),
        "max_of_empty": (lambda t: t.max(), torch.empty(0)),
        "max_of_empty_intermediate": (lambda t: (t + 1).max() * 2, torch.empty(0)),
        "max_over_an_empty_dim": (lambda t: torch.max(t * 2, dim=0), torch.empty(0, 3)),
        # "value cannot be converted to type int8_t without overflow" (fuzz 455c6abc1a)
        "fill_overflowing_int8": (lambda t: t.clone().fill_(300) * 2, int8),
        "fill_of_an_expanded_int8": (lambda t: t[:1].expand(2, 1).fill_(300), int8),
        "full_like_overflowing_int16": (lambda t: torch.full_like(t.short(), 70000), int8),
    }
    fn, value = cases[case]
    _raises_like_eager(fn, frontend.compile(fn, backend=backend), value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ops_eager_accepts_on_bool_and_integer_tensors_still_compile(backend: str) -> None:
    def masks(mask: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return (~mask).float() * (ids % 3 + ids.abs()).amax() + torch.where(mask, ids, -ids)

    compiled = frontend.compile(masks, backend=backend)
    mask, ids = torch.randn(5) > 0, torch.randint(-9, 9, (5,))
    torch.testing.assert_close(compiled(mask, ids), masks(mask, ids))


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_fill_with_a_number_that_fits_compiles_in_one_graph(backend: str) -> None:
    """Number writes are checked on one-element stand-ins; index_fill's stand-in index was 1, out of
    range there, so every index_fill broke the graph (strict OpInfo: "no graph")."""

    def fill(x: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.index_fill(1, rows, -2.5) * 2, torch.index_fill(x.to(torch.int16), 0, rows, 300)

    compiled = frontend.compile(fill, backend=backend, fullgraph=True)
    x, rows = torch.randn(4, 5), torch.tensor([0, 3])
    for got, want in zip(compiled(x, rows), fill(x, rows), strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_grad_inside_the_compiled_function(backend: str) -> None:
    def keep(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x * 2
        y.retain_grad()
        return (y * y).sum(), y

    compiled = frontend.compile(keep, backend=backend)
    x = torch.randn(3, requires_grad=True)
    loss, y = compiled(x)
    loss.backward()
    x2 = x.detach().clone().requires_grad_()
    loss2, y2 = keep(x2)
    loss2.backward()
    assert y.grad is not None
    torch.testing.assert_close(y.grad, y2.grad)
    torch.testing.assert_close(x.grad, x2.grad)


def _break_inside_no_grad(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        y = x * 2
        _outside()
        z = y + x
    return z, x * 3, y


def _break_after_set_grad_enabled(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    torch.set_grad_enabled(False)
    y = x * 2
    _outside()
    z = y + x
    torch.set_grad_enabled(True)
    return z, x * 3


@torch.no_grad()
def _break_in_no_grad_function(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2
    _outside()
    return y + x, x * 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_break_inside_no_grad, _break_after_set_grad_enabled, _break_in_no_grad_function],
                         ids=["with_no_grad", "set_grad_enabled", "no_grad_decorator"])
def test_grad_mode_across_a_graph_break(backend: str, fn: Callable[..., Any]) -> None:
    compiled = frontend.compile(fn, backend=backend)
    x = torch.randn(3, requires_grad=True)
    for _ in range(2):
        got, expected = compiled(x), fn(x)
        assert torch.is_grad_enabled()
        assert [t.requires_grad for t in got] == [t.requires_grad for t in expected]
        for a, b in zip(got, expected):
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_changed_while_iterated_raises(backend: str) -> None:
    def grow(x: torch.Tensor, table: dict[str, Any]) -> torch.Tensor:
        for key in table:
            table[key + "_next"] = x
        return x + 1

    with pytest.raises(RuntimeError, match="changed size during iteration"):
        grow(torch.randn(2), {"a": 1})
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        frontend.compile(grow, backend=backend)(torch.randn(2), {"a": 1})


@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_after_in_place_unsqueeze_with_dynamic_sizes(backend: str) -> None:
    def grow_rank(y: torch.Tensor) -> tuple[torch.Size, torch.Tensor]:
        y.unsqueeze_(0)
        return y.shape, y * 2

    compiled = frontend.compile(grow_rank, backend=backend)
    for n in (3, 4, 5):  # the second size recompiles with a symbolic size
        got_x = torch.randn(n)
        expected_x = got_x.clone()
        got, expected = compiled(got_x), grow_rank(expected_x)
        assert got[0] == expected[0] == torch.Size([1, n])
        torch.testing.assert_close(got[1], expected[1])
        assert got_x.shape == expected_x.shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_op_whose_fake_kernel_misstates_its_dtype_runs_eagerly(backend: str) -> None:
    """`bool_tensor ** True` is bool in eager and int64 in its meta function: compiled code read the
    bool buffer as int64 (fuzz 63cddd4172 gave 7424 for 0). The call runs in Python instead."""

    def powers(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.isneginf(x) ** True).to(torch.int16), (x > 0) ** True, (x > 0) ** False, (x > 0).int() ** 2

    x = torch.tensor([-1.5, 2.0, float("-inf")], dtype=torch.float16)
    for got, want in zip(frontend.compile(powers, backend=backend)(x), powers(x), strict=True):
        assert got.dtype == want.dtype and torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_group_norm_with_infinite_weights_gives_eagers_nan(dtype: torch.dtype) -> None:
    """ATen computes x * (rstd * w) + (b - rstd * w * mean): an infinite weight gives NaN where
    (x - mean) * rstd * w gave inf (fuzz 8077a37e89, ad1d7797d2)."""
    generator = torch.Generator().manual_seed(41)
    x = torch.randn(3, 8, 5, generator=generator).to(dtype)
    w, b = torch.randn(8, generator=generator).to(dtype), torch.randn(8, generator=generator).to(dtype)
    w[1], w[5] = float("inf"), float("-inf")

    def norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.group_norm(x, 4, w, b)

    got, want = frontend.compile(norm)(x, w, b), norm(x, w, b)
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got, want, equal_nan=True, atol=1e-2 if dtype == torch.float16 else 1e-5, rtol=1e-2)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("case", ["batch_norm_eval", "batch_norm_train", "instance_norm"])
def test_cpu_batch_norm_with_infinite_weights_gives_eagers_nan(case: str, transposed: bool) -> None:
    """Eager's CPU kernel computes x * alpha + beta per channel, alpha = invstd * w and
    beta = b - mean * alpha: an infinite weight gives NaN where (x - mean) * invstd * w + b gave
    inf (fuzz c2c8c2ad6f, bb19d840db, 0172f17172). On an input that is not contiguous eager takes
    the other formula, and gives inf (fuzz 2a2f8a6a5f)."""
    generator = torch.Generator().manual_seed(43)
    x = torch.randn(4, 6, 5, generator=generator)
    x = x.transpose(0, 2).contiguous().transpose(0, 2) if transposed else x
    w, b = torch.randn(6, generator=generator), torch.randn(6, generator=generator)
    w[2], w[4] = float("inf"), float("-inf")
    mean, var = torch.randn(6, generator=generator), torch.rand(6, generator=generator) + 0.5
    functions = {
        "batch_norm_eval": lambda x, w, b: torch.nn.functional.batch_norm(x, mean, var, w, b, training=False),
        "batch_norm_train": lambda x, w, b: torch.nn.functional.batch_norm(x, mean.clone(), var.clone(), w, b, training=True),
        "instance_norm": lambda x, w, b: torch.nn.functional.instance_norm(x, weight=w, bias=b),
    }
    fn = functions[case]
    got, want = frontend.compile(fn)(x, w, b), fn(x, w, b)
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got, want, equal_nan=True)


def test_the_gradient_of_sgn_after_rsqrt_is_zero() -> None:
    """Autograd's zero gradient (`_efficientzerotensor`, a tensor with no storage) ran as a fallback
    and then had a kernel write into it: a segmentation fault (fuzz 03c2377785)."""

    def sgn_of_rsqrt(x: torch.Tensor) -> torch.Tensor:
        return torch.sgn(torch.rsqrt(x))

    x = torch.randn(1, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(44)).requires_grad_()
    got, want = frontend.compile(sgn_of_rsqrt)(x), sgn_of_rsqrt(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    (grad,) = torch.autograd.grad(got, x, torch.ones_like(got))
    assert torch.equal(grad, torch.zeros_like(x))


@pytest.mark.parametrize("fallback", [False, True])
def test_an_index_into_a_tensor_with_no_elements_raises_eagers_error_and_the_graph_stays_compiled(
    fallback: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A kernel over an output with no elements checks no index (Kiln returned an empty tensor where
    eager raises; fuzz bc0814912e, 690a0c7d19, 2a5ef4db50); such graphs run eager's kernel, whose
    error on the first run is the data's, not the compiler's: the graph is not demoted to eager."""

    def pick(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.index_select(x, 2, index) * 2

    compiled = frontend.compile(pick, options={"fallback_to_eager": fallback})
    with caplog.at_level(logging.DEBUG, logger="kiln.fallbacks"):
        for _ in range(2):
            with pytest.raises(RuntimeError, match="out of DATA bounds"):
                compiled(torch.randn(1, 0, 5), torch.tensor([5]))
        x, index = torch.randn(1, 2, 5), torch.tensor([4, 0])
        torch.testing.assert_close(compiled(x, index), pick(x, index))
    assert "runs eagerly" not in caplog.text


@pytest.mark.parametrize("functional", [False, True])
def test_a_recurrent_layer_under_cpu_autocast_runs_as_eager_runs_it(functional: bool) -> None:
    """Eager runs an LSTM under CPU autocast as one oneDNN kernel (bfloat16 results in some torch
    versions, an error in others); a trace of its decomposition gave float32 (fuzz 8f13f6c260)."""
    torch.manual_seed(45)
    lstm = torch.nn.LSTM(4, 3)

    def f(x: torch.Tensor) -> torch.Tensor:
        if functional:
            out = torch.lstm(x * 2, [torch.zeros(1, 2, 3), torch.zeros(1, 2, 3)], list(lstm.parameters()), True, 1, 0.0, False, False, False)[0]
        else:
            out, _ = lstm(x * 2)
        return out + 1

    x = torch.randn(5, 2, 4)
    compiled = frontend.compile(f)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        try:
            want = f(x)
        except RuntimeError as error:
            with pytest.raises(type(error)):
                compiled(x)
            return
        got = compiled(x)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_a_half_linspace_compiles_and_matches_eager(dtype: torch.dtype) -> None:
    """fuzz 2353abaee6: the half linspace decomposition rounded its bounds through `torch.tensor`,
    which traced into the graph a `detach_` functionalization kept: the graph failed to compile."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return x + torch.linspace(-2, 2, x.size(-1), dtype=dtype)

    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(59))
    compiled = frontend.compile(f, options={"fallback_to_eager": False})
    assert torch.equal(compiled(x), f(x))


@pytest.mark.parametrize("functional", [False, True])
@pytest.mark.parametrize("steps", [12, 200])
def test_a_recurrent_layer_unrolls_only_over_short_sequences(functional: bool, steps: int) -> None:
    """fuzz 182002222 (a hang): a GRU over 2,053 steps compiled for minutes, unrolled into 2,053
    cells. Beyond 64 steps the layer is a graph break (its reason given) and runs eagerly; the
    code around it stays compiled."""
    torch.manual_seed(47)
    gru = torch.nn.GRU(5, 4, batch_first=True)

    def f(x: torch.Tensor) -> torch.Tensor:
        if functional:
            h0 = torch.zeros(1, x.size(0), 4)
            out = torch.gru(x * 2, h0, list(gru.parameters()), True, 1, 0.0, False, False, True)[0]
        else:
            out, _ = gru(x * 2)
        return out.sin() + 1

    x = torch.randn(3, steps, 5)
    explanation = frontend.explain(f, x)
    if steps > 64:
        assert explanation.graph_break_count == 1
        assert any("time steps runs eagerly" in str(reason) for reason in explanation.break_reasons)
    else:
        assert explanation.graph_break_count == 0
    with torch.no_grad():
        torch.testing.assert_close(frontend.compile(f)(x), f(x))
