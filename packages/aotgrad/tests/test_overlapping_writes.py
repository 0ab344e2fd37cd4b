"""In-place writes through `expand`ed views of inputs, and into inputs whose elements overlap, as the
differential fuzzer found them: compiled without fallback, each gives eager's outputs and leaves
the inputs as eager leaves them (seeded inputs, holding 1e30 and infinities where a fold rounds)."""

from __future__ import annotations

import logging

import pytest
import torch
from aotgrad_helpers import check_against_eager, strict
from aotgrad_helpers import seeded_leaf as _leaf

import aotgrad


def _with_extremes(seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    t = _leaf(seed, shape)
    t.view(-1)[:3] = torch.tensor([1e30, float("-inf"), -1e30])
    return t


def _through_an_expand_that_repeats_nothing(a: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a.expand(-1, -1, -1, -1).diagonal().sign_()  # fuzz b38c96b190: 1e30 came back 0 (1e30 + (1 - 1e30))
    g = (w * 1e8).expand(1, -1)
    g[0].mul_(1e-8)  # a gradient flows through this one
    return g * 1, a


@pytest.mark.parametrize("no_grad", [True, False])
def test_a_write_through_an_expand_that_repeats_nothing_is_exact(no_grad: bool) -> None:
    check_against_eager(
        _through_an_expand_that_repeats_nothing,
        lambda: [_with_extremes(51, (1, 1, 1, 5)), _leaf(52, (6,), grad=True)],
        no_grad=no_grad,
    )


def _through_one_copy_of_an_expanded_input(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a.expand(3, 5)[1].sign_()  # folded through the expand: 1e30 came back 0, -inf NaN
    b[1, 1:].exp_()  # b: an expanded input
    return a * 1, b


def test_a_write_through_one_copy_of_an_expanded_input_is_exact() -> None:
    check_against_eager(
        _through_one_copy_of_an_expanded_input,
        lambda: [_with_extremes(53, (1, 5)), _with_extremes(54, (1, 4)).expand(2, 4)],
        no_grad=True,
    )


def _fill_through_an_expanded_input(a: torch.Tensor) -> torch.Tensor:
    a.unsqueeze(0).fill_(129)  # fuzz 83c75508b6: functionalization's fold through the expand failed for uint8
    return a


def _sub_through_an_empty_slice_of_an_expanded_input(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a[:, 1::2].sub_(b)  # fuzz 3ef32df605: the same for int32, writing no element


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32])
def test_writes_through_an_expanded_narrow_integer_input_give_eagers_result(dtype: torch.dtype) -> None:
    check_against_eager(
        _fill_through_an_expanded_input,
        lambda: [_leaf(55, (1, 1, 1), dtype).expand(1, 1, 1, 2)],
        no_grad=True,
    )
    check_against_eager(
        _sub_through_an_empty_slice_of_an_expanded_input,
        lambda: [_leaf(56, (1,), dtype).expand(9, 1), _leaf(57, (9, 0), torch.int64)],
        no_grad=True,
    )


def _integer_writes_beside_a_gradient(a: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    e = (a * 1).expand(3, 4)
    e[1].add_(5)  # traced with gradients on (w's), but none flows through it: no fold through the expand
    a.expand(3, 4)[2:].fill_(7)
    return e * 1, w.sin(), a


def test_writes_through_an_expanded_integer_tensor_in_a_training_graph_give_eagers_result() -> None:
    check_against_eager(
        _integer_writes_beside_a_gradient,
        lambda: [_leaf(64, (1, 4), torch.int32), _leaf(65, (3,), grad=True)],
    )


def _add_into_an_overlapping_input(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a.add_(b, alpha=-2)  # fuzz 9327aff3a2
    return a


def _shift_into_an_overlapping_input(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a.t().__irshift__(2)  # fuzz ef9cef2995
    return (b,)


def test_a_write_into_an_overlapping_input_runs_eagerly_without_fallback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Eager writes such an input element by element, in its own order: only eager defines the result,
    # so the graph runs eagerly even with fallback_to_eager=False, and says why.
    caplog.set_level(logging.WARNING, logger="aotgrad")
    check_against_eager(
        _add_into_an_overlapping_input,
        lambda: [_leaf(58, (3,), torch.int32).as_strided((2, 2), (1, 1)), _leaf(59, (1, 1), torch.int32)],
        no_grad=True,
    )
    check_against_eager(
        _shift_into_an_overlapping_input,
        lambda: [_leaf(60, (8,), torch.int32).as_strided((2, 7), (1, 1)), _leaf(61, (1, 1))],
        no_grad=True,
    )
    warnings = [r.getMessage() for r in caplog.records if "running this graph eagerly" in r.getMessage()]
    assert len(warnings) == 2 and all("overlap in memory" in w for w in warnings), warnings


def test_an_error_in_a_graph_that_runs_eagerly_is_eagers() -> None:
    # eager refuses a broadcast it cannot write: so does the graph that runs eagerly in its place
    compiled = aotgrad.aot_function(
        _add_into_an_overlapping_input, fw_compiler=aotgrad.eager_compiler, config=strict()
    )
    a = _leaf(62, (3,), torch.int32).as_strided((2, 2), (1, 1))
    with torch.no_grad(), pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        compiled(a, _leaf(63, (3, 2, 2), torch.int32))


def _copy_through_one_copy_of_an_expanded_activation(w: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t = w * 1.5
    t.expand(3, -1, -1, -1).narrow(0, 0, 1).copy_(v)  # fuzz 9581baeba1: a gradient flows through the write
    # folded through the expand, t was `t + (v - t)` in bfloat16, not v: a stable sort ordered it otherwise
    return t * 1, torch.sort(t, dim=0, stable=True)[1]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_write_through_an_expanded_activation_that_requires_grad_is_exact(dtype: torch.dtype) -> None:
    for seed in range(66, 76):
        check_against_eager(
            _copy_through_one_copy_of_an_expanded_activation,
            lambda seed=seed: [_leaf(seed, (4, 1, 3), dtype, grad=True), _leaf(seed + 100, (1, 1, 1, 1), dtype)],
        )


def _copy_into_part_of_an_expanded_activation(w: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t = w * 1.5
    t.expand(3, -1, -1)[1, 1:].copy_(v)  # part of t's memory: no plain view of t holds just those elements
    return t * 1, torch.sort(t, dim=0, stable=True)[1]


def test_a_float_write_into_part_of_an_expanded_activation_runs_eagerly(caplog: pytest.LogCaptureFixture) -> None:
    # With a gradient flowing, the `as_strided` rewrite is not taken; the fold through the expand
    # rounds: only eager gives the copied values, so the graph runs eagerly, and says why.
    caplog.set_level(logging.WARNING, logger="aotgrad")
    check_against_eager(
        _copy_into_part_of_an_expanded_activation,
        lambda: [_leaf(76, (3, 4), torch.bfloat16, grad=True), _leaf(77, (4,), torch.bfloat16)],
    )
    warnings = [r.getMessage() for r in caplog.records if "running this graph eagerly" in r.getMessage()]
    assert len(warnings) == 1 and "`expand`ed torch.bfloat16" in warnings[0], warnings
