"""Unbacked symbols: data-dependent ops run as FallbackKernels whose results bind ``u0`` in the wrapper.

Graphs come from ``make_fx`` under a ShapeEnv that allows data-dependent outputs (what aotgrad traces
for ``nonzero``, ``masked_select``, ``unique`` and ``item()``). One compile serves every result size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import sympy
import torch
from inductor_ir_reference_backend import ReferenceBackend
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import inductor_ir
from inductor_ir.ir.program import Program
from inductor_ir.unbacked import UnbackedSymbolError, bind_results


def _compile(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> inductor_ir.CompiledGraph:
    shape_env = ShapeEnv(allow_dynamic_output_shape_ops=True, allow_scalar_outputs=True)
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
    fakes = [mode.from_tensor(x, static_shapes=True) for x in inputs]
    with mode:
        gm = make_fx(fn, tracing_mode="real")(*fakes)
    return inductor_ir.compile_graph(gm, fakes, backends={"cpu": ReferenceBackend()})


def _check(fn: Callable[..., Any], make: Callable[[torch.Generator], tuple[torch.Tensor, ...]]) -> inductor_ir.CompiledGraph:
    generator = torch.Generator().manual_seed(0)
    compiled = _compile(fn, make(generator))
    for _ in range(4):  # fresh values each call: other result sizes, same compiled graph
        inputs = make(generator)
        torch.testing.assert_close(compiled(*inputs), fn(*inputs))
    return compiled


def test_nonzero_size_is_bound_from_its_result_and_used_by_later_kernels() -> None:
    compiled = _check(lambda x: (torch.nonzero(x > 0).float().sum(0) + 1,),
                      lambda g: (torch.randn(4, 5, generator=g),))
    assert "u0 = buf" in compiled.wrapper and ".size(0)" in compiled.wrapper
    assert compiled.sources, "the reduction over nonzero's rows is a generated kernel"


def test_masked_select_and_boolean_mask_feed_pointwise_and_reductions() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        picked = torch.masked_select(x, x > 0)
        return picked.exp(), x[x < 0].sum(), picked.numel() * x

    _check(fn, lambda g: (torch.randn(37, generator=g),))


@pytest.mark.fake_unique_int64
def test_unique_outputs_share_their_size_symbol() -> None:
    _check(lambda x: tuple(t * 2 for t in torch.unique(x.round(), return_counts=True)),
           lambda g: (torch.randn(30, generator=g) * 3,))


def test_item_feeds_a_size_and_its_runtime_check_raises_like_eager() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.zeros(x.sum().long().item() + 2) + 1,)

    compiled = _check(fn, lambda g: ((torch.rand(4, generator=g) * 3).round(),))
    negative = torch.full((4,), -2.0)
    with pytest.raises(RuntimeError):
        fn(negative)
    with pytest.raises(RuntimeError, match="data-dependent"):
        compiled(negative)


def test_split_sizes_from_tolist_are_checked_before_the_kernels_read_them() -> None:
    def fn(x: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(t.sum(0) for t in torch.split(x, counts.tolist()))

    compiled = _compile(fn, (torch.randn(10, 3), torch.tensor([3, 2, 5])))
    for counts in ([3, 2, 5], [1, 1, 8], [0, 4, 6]):
        x, sizes = torch.randn(10, 3), torch.tensor(counts)
        torch.testing.assert_close(compiled(x, sizes), fn(x, sizes))
    with pytest.raises(RuntimeError):
        fn(torch.randn(10, 3), torch.tensor([3, 2, 4]))
    with pytest.raises(RuntimeError, match="u0 \\+ u1 \\+ u2"):
        compiled(torch.randn(10, 3), torch.tensor([3, 2, 4]))


def test_float_items_reach_kernels_only_through_aten_calls() -> None:
    # A float in a kernel's int size arguments would be truncated: ops reading one run as ATen calls.
    def fn(x: torch.Tensor) -> tuple[Any, ...]:
        scale = x.max().item()
        return x * scale + x.sum().item(), torch.ones(torch.sym_int(x.abs().sum().item()) + 1), scale

    compiled = _check(fn, lambda g: (torch.randn(8, generator=g),))
    assert "math.trunc(zuf" in compiled.wrapper


def test_repeat_interleave_result_size_is_bound() -> None:
    _check(lambda x, r: (torch.repeat_interleave(x, r) * 2,),
           lambda g: (torch.randn(4, generator=g), torch.randint(0, 3, (4,), generator=g)))


def test_a_symbol_no_result_size_gives_is_refused_at_compile_time() -> None:
    # The caller (the frontend) then runs the graph eagerly, naming this reason.
    with pytest.raises(UnbackedSymbolError, match="u7"):
        bind_results(Program(), (), {sympy.Symbol("u7", integer=True)}, None)


def test_an_assert_scalar_node_is_checked_once_its_symbol_is_bound() -> None:
    """aotgrad writes the user's `torch._check(n <= 8)` as `aten._assert_scalar`: the wrapper checks
    it, and the `item()` it reads runs although nothing else uses it."""
    def fn(x: torch.Tensor) -> tuple[torch.Tensor]:
        torch.ops.aten._assert_scalar.default(x.max().item() <= 8, "n <= 8")
        return (x * 2,)

    inputs = (torch.tensor([3, 8]),)
    shape_env = ShapeEnv(allow_dynamic_output_shape_ops=True, allow_scalar_outputs=True)
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
    fakes = [mode.from_tensor(x, static_shapes=True) for x in inputs]
    with mode:
        gm = make_fx(fn, tracing_mode="real")(*fakes)
    shape_env.deferred_runtime_asserts.clear()  # the node alone must give the check
    compiled = inductor_ir.compile_graph(gm, fakes, backends={"cpu": ReferenceBackend()})
    torch.testing.assert_close(compiled(*inputs), fn(*inputs))
    with pytest.raises(RuntimeError, match="u0 <= 8 is false"):
        compiled(torch.tensor([3, 9]))


def _pinned_item(x: torch.Tensor) -> tuple[torch.Tensor]:
    n = x.max().item()
    torch.ops.aten._assert_scalar.default(n >= 8, "n >= 8")
    torch.ops.aten._assert_scalar.default(n <= 8, "n <= 8")
    return (x[:n] * n,)


def _pinned_nonzero_count(x: torch.Tensor) -> tuple[torch.Tensor]:
    m = torch.nonzero(x).size(0)
    torch.ops.aten._assert_scalar.default(m >= 3, "m >= 3")
    torch.ops.aten._assert_scalar.default(m <= 3, "m <= 3")
    return (x * m,)


@pytest.mark.parametrize(("fn", "good", "bad", "failed"), [
    (_pinned_item, [3, 8, 1, 0, 0, 0, 0, 0, 0, 0], [3, 7, 1, 0, 0, 0, 0, 0, 0, 0], r"u0 >= 8 is false"),
    (_pinned_nonzero_count, [3, 8, 1, 0], [3, 0, 1, 0], r"u0 >= 3 is false"),
])
def test_checks_that_pin_a_symbol_to_a_constant_are_still_checked(fn: Any, good: list[int], bad: list[int],
                                                                  failed: str) -> None:
    """Checks pinning an unbacked symbol to one value make the ShapeEnv replace it by that constant:
    the node's value and sizes read as 8 and the checks as True. The wrapper still reads the symbol (from
    the FX node's `unbacked_bindings`) and checks the conditions as traced."""
    inputs = (torch.tensor(good),)
    shape_env = ShapeEnv(allow_dynamic_output_shape_ops=True, allow_scalar_outputs=True)
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
    fakes = [mode.from_tensor(x, static_shapes=True) for x in inputs]
    with mode:
        gm = make_fx(fn, tracing_mode="real")(*fakes)
    assert shape_env.replacements  # the symbol is a constant now
    shape_env.deferred_runtime_asserts.clear()  # the nodes alone must give the checks
    compiled = inductor_ir.compile_graph(gm, fakes, backends={"cpu": ReferenceBackend()})
    torch.testing.assert_close(compiled(*inputs), fn(*inputs))
    with pytest.raises(RuntimeError, match=failed):
        compiled(torch.tensor(bad))


@pytest.mark.parametrize("scale", ["float", "int"])
def test_a_scalar_input_that_is_an_expression_of_unbound_symbols_is_read_from_the_input(scale: str) -> None:
    """A backward graph takes the forward's ``x.mean().item() * 2`` as a saved scalar ``2.0*zuf0``:
    no input gives ``zuf0`` itself, so the wrapper reads the input as a new symbol (it printed
    ``2.0*zuf0`` and failed with a NameError; pyfuzz with gradients)."""
    shape_env = ShapeEnv(allow_dynamic_output_shape_ops=True, allow_scalar_outputs=True)
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
    generator = torch.Generator().manual_seed(0)
    x, t = torch.randn(4, 5, generator=generator), torch.randn(4, 5, generator=generator)

    def saved(x: torch.Tensor) -> Any:
        return x.mean().item() * 2 if scale == "float" else x.sum().round().long().item() * 2 + 1

    fake_x, fake_t = mode.from_tensor(x, static_shapes=True), mode.from_tensor(t, static_shapes=True)
    with mode:
        symbolic = saved(fake_x)
        shape_env.pending_fresh_unbacked_symbols.clear()  # made outside the traced graph, given to it
        gm = make_fx(lambda s, t: (t * s, t.sum() + s), tracing_mode="real")(symbolic, fake_t)
    compiled = inductor_ir.compile_graph(gm, [symbolic, fake_t], backends={"cpu": ReferenceBackend()})
    for _ in range(3):
        x, t = torch.randn(4, 5, generator=generator), torch.randn(4, 5, generator=generator)
        value = saved(x)
        torch.testing.assert_close(compiled(value, t), (t * value, t.sum() + value))


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -2.5])
def test_a_float_item_input_is_not_read_by_the_size_checks(value: float) -> None:
    """A backward at symbolic sizes takes a saved ``item()`` float: the size checks read every
    scalar symbol with ``int()``, which raised OverflowError for an infinite float (eager gives inf)."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    shape_env = ShapeEnv(allow_dynamic_output_shape_ops=True, allow_scalar_outputs=True)
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    fake_t = mode.from_tensor(torch.randn(4, 5), symbolic_context=context)
    with mode:
        fake_u = fake_t[:, 0].clone()  # a second input of size s0: checked against the first
        symbolic = fake_t.sum().item()
        shape_env.pending_fresh_unbacked_symbols.clear()
        gm = make_fx(lambda s, t, u: (t * s + u[:, None],), tracing_mode="real")(symbolic, fake_t, fake_u)
    compiled = inductor_ir.compile_graph(gm, [symbolic, fake_t, fake_u], backends={"cpu": ReferenceBackend()})
    generator = torch.Generator().manual_seed(0)
    for rows in (3, 6):
        t, u = torch.randn(rows, 5, generator=generator), torch.randn(rows, generator=generator)
        torch.testing.assert_close(compiled(value, t, u), (t * value + u[:, None],), equal_nan=True)
