"""A graph called boxed lets go of each input after its last use, as eager autograd frees saved
tensors node by node: a backward's saved activations must not all live until its end."""

from __future__ import annotations

import weakref

import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir

_watched: list[weakref.ref[torch.Tensor]] = []
_seen_alive: list[bool] = []


@torch.library.custom_op("inductor_ir_tests::probe_alive", mutates_args=())
def probe_alive(x: torch.Tensor) -> torch.Tensor:
    """Records whether the watched tensor (if any) still exists when this call runs; returns ``x + 1``."""
    if _watched:
        _seen_alive.append(_watched[0]() is not None)
    return x + 1


@probe_alive.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _graph(early: torch.Tensor, late: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # `early` is last read by the first kernel; the probe runs after it, on a value made from `late`.
    first = (early.sin() * 2).sum(0)
    return first, torch.ops.inductor_ir_tests.probe_alive(late.cos()) * 3


def test_an_input_is_released_after_its_last_use_when_called_boxed() -> None:
    torch.manual_seed(0)
    example = [torch.randn(64, 32), torch.randn(32)]
    compiled = inductor_ir.compile_graph(
        make_fx(_graph)(*example), example, backends={"cpu": ReferenceBackend()}
    )
    early, late = torch.randn(64, 32), torch.randn(32)
    want = _graph(early, late)
    _seen_alive.clear()
    _watched[:] = [weakref.ref(early)]
    args = [early, late]
    del early  # the list is the only holder, as in a backward called with its saved values
    got = compiled.call(args)
    assert args == []  # the wrapper emptied the list
    assert _seen_alive == [False], "the wrapper still held the input when a later step ran"
    assert_close(list(got), list(want))
    _watched.clear()


def test_an_unread_input_is_released_before_the_first_step() -> None:
    def graph(unused: torch.Tensor, late: torch.Tensor) -> torch.Tensor:
        return torch.ops.inductor_ir_tests.probe_alive(late.cos())

    example = [torch.randn(8), torch.randn(8)]
    compiled = inductor_ir.compile_graph(
        make_fx(graph)(*example), example, backends={"cpu": ReferenceBackend()}
    )
    unused, late = torch.randn(8), torch.randn(8)
    _seen_alive.clear()
    _watched[:] = [weakref.ref(unused)]
    args = [unused, late]
    del unused
    (got,) = compiled.call(args)
    assert _seen_alive == [False]
    assert_close(got, late.cos() + 1)
    _watched.clear()


def test_an_input_returned_as_an_output_is_kept() -> None:
    def graph(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, (x * y).sum()

    example = [torch.randn(8), torch.randn(8)]
    compiled = inductor_ir.compile_graph(
        make_fx(graph)(*example), example, backends={"cpu": ReferenceBackend()}
    )
    x, y = torch.randn(8), torch.randn(8)
    same, total = compiled.call([x, y])
    assert same is x or same.data_ptr() == x.data_ptr()
    assert_close(total, (x * y).sum())
