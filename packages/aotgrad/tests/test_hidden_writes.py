"""In-place writes that eager's autograd does not record (under no_grad, `inference_mode`,
`set_grad_enabled(False)`, through `.data`, through a `.detach()` alias): the tensor takes the
written value and keeps its gradient path (`tracing/hidden_writes.py`). Compared with eager on
seeded random inputs: values, requires_grad, gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from aotgrad_helpers import RecordingCompiler, strict

import aotgrad


def _clip_no_grad(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w
    with torch.no_grad():
        h.clamp_(-1, 1)
    return h


def _clip_sin_no_grad(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.sin(x @ w)
    with torch.no_grad():
        h.clamp_(-0.5, 0.5)
    return h * 3


def _clip_data(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.sin(x @ w)
    h.data.clamp_(-0.5, 0.5)
    return h * 3


def _clip_detach_alias(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.sin(x @ w)
    h.detach().clamp_(-0.5, 0.5)
    return h * 3


def _clip_weight(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        w.clamp_(-0.5, 0.5)
    return torch.tanh(x @ w)


def _clip_view_no_grad(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.sin(x @ w)
    with torch.no_grad():
        h[:, :2].mul_(w[0, :2])  # a view, written from a tensor that requires grad
    return h * h


def _grad_disabled(mode: Callable[[], Any]) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def clip(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.sin(x @ w)
        with mode():
            h.clamp_(-0.5, 0.5)
        return torch.cos(h)

    return clip


CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "no_grad": _clip_no_grad,
    "no_grad_sin": _clip_sin_no_grad,
    "data": _clip_data,
    "detach_alias": _clip_detach_alias,
    "leaf_weight": _clip_weight,
    "view": _clip_view_no_grad,
    "set_grad_enabled": _grad_disabled(lambda: torch.set_grad_enabled(False)),
}


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(5, 4, generator=g).requires_grad_()
    w = torch.randn(4, 3, generator=g).requires_grad_()
    return x, w


def _run(fn: Callable[..., torch.Tensor], seed: int) -> tuple[torch.Tensor, list[Any], torch.Tensor]:
    x, w = _inputs(seed)
    out = fn(x, w)
    grads = list(torch.autograd.grad(out.sum(), (x, w), allow_unused=True)) if out.requires_grad else [None, None]
    return out.detach(), grads, w.detach().clone()


@pytest.mark.parametrize("name", sorted(CASES))
def test_hidden_write_keeps_gradient_path(name: str) -> None:
    fn = CASES[name]
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    for seed in (0, 1):
        x, w = _inputs(seed)
        expected = fn(x, w)
        actual = compiled(*_inputs(seed))
        assert actual.requires_grad == expected.requires_grad
        out, grads, weight = _run(fn, seed)
        out_c, grads_c, weight_c = _run(compiled, seed)
        torch.testing.assert_close(out_c, out)
        torch.testing.assert_close(weight_c, weight)  # a written leaf is written back
        for got, want in zip(grads_c, grads):
            assert (got is None) == (want is None)
            if want is not None:
                torch.testing.assert_close(got, want)


def test_leaf_weight_stays_a_leaf_and_accumulates() -> None:
    """A parameter clipped under no_grad inside the region: written back, still a leaf, `.grad` as eager's."""
    grads = []
    for fn in (_clip_weight, aotgrad.aot_function(_clip_weight, fw_compiler=aotgrad.eager_compiler, config=strict())):
        x, w = _inputs(3)
        fn(x, w).sum().backward()
        assert w.is_leaf and w.grad_fn is None
        grads.append((w.detach().clone(), w.grad))
    torch.testing.assert_close(grads[1], grads[0])


def test_optimizer_update_in_training_region() -> None:
    """`p.add_(g, alpha=-lr)` under no_grad with grad mode on around the region: compiled, the
    parameter updated in place, and the next forward reading it differentiates into the leaf."""
    def step(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            w.add_(g, alpha=-0.1)
        return torch.tanh(x @ w)

    results = []
    for fn in (step, aotgrad.aot_function(step, fw_compiler=aotgrad.eager_compiler, config=strict())):
        x, w = _inputs(4)
        g = torch.randn(4, 3, generator=torch.Generator().manual_seed(5))
        out = fn(x, w, g)
        out.sum().backward()
        results.append((out.detach(), w.detach().clone(), w.grad, x.grad))
    torch.testing.assert_close(results[1], results[0])


def test_inference_mode_block() -> None:
    """A write into a normal tensor inside `torch.inference_mode()`: as under no_grad."""
    fn = _grad_disabled(torch.inference_mode)
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    out, grads, _ = _run(fn, 6)
    out_c, grads_c, _ = _run(compiled, 6)
    torch.testing.assert_close(out_c, out)
    torch.testing.assert_close(grads_c, grads)


def test_saved_tensor_written_under_no_grad_is_not_silently_different() -> None:
    """An op saved `h` for backward, then `h` is clipped under no_grad: eager raises at backward
    (the version changed). The compiled region runs eagerly and raises the same error."""
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x @ w
        y = h * h
        with torch.no_grad():
            h.clamp_(-0.5, 0.5)
        return y + h

    x, w = _inputs(7)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        fn(x, w).sum().backward()
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        compiled(*_inputs(7)).sum().backward()


def test_detach_alias_written_from_a_grad_operand_is_not_silently_different() -> None:
    """`h.detach().add_(v)` with `v` requiring grad: the alias gets a history, `h` keeps its own;
    aotgrad cannot express both and runs the graph eagerly (with eager's gradients)."""
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.sin(x @ w)
        d = h.detach()
        d.add_(w.sum())
        return h * 2 + d

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)
    out, grads, _ = _run(fn, 8)
    out_c, grads_c, _ = _run(compiled, 8)
    torch.testing.assert_close(out_c, out)
    torch.testing.assert_close(grads_c, grads)


def test_optimizer_update_adds_no_copies() -> None:
    """The straight-through write of an optimizer-style update leaves no clone or copy in the graphs."""
    compiler = RecordingCompiler()

    def step(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            w.add_(g, alpha=-0.1)
        return torch.tanh(x @ w)

    compiled = aotgrad.aot_function(step, fw_compiler=compiler, bw_compiler=compiler, config=strict())
    x, w = _inputs(9)
    compiled(x, w, torch.randn(4, 3)).sum().backward()
    targets = {node.target for gm in compiler.graphs for node in gm.graph.nodes}
    assert not targets & {torch.ops.aten.clone.default, torch.ops.aten.copy.default}
