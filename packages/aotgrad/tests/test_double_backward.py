"""Double backward through compiled regions: second derivatives match eager, or raise clearly.

A backward under ``create_graph=True`` recomputes the region's gradients differentiably (its
functional forward replayed eagerly); regions that cannot be replayed (random ops, input
mutations) give gradients whose differentiation raises a clear error instead of dropping the
second-order term. Everything is compared with eager on seeded random inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from aotgrad_helpers import strict
from torch import nn

import aotgrad


class FirstOrderOnly:
    """A compiler whose compiled graphs refuse to run with grad mode on: a compiled backward must
    never be what a create_graph backward differentiates (its ops would have no second-order history)."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graph = aotgrad.eager_compiler(gm, example_inputs)

        def run(args: list[Any]) -> Any:
            assert not torch.is_grad_enabled(), "a compiled graph ran with grad mode on"
            return graph(args)

        return aotgrad.mark_boxed(run)


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    return aotgrad.aot_function(fn, fw_compiler=FirstOrderOnly(), config=strict())


FUNCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "cube": lambda x, w: (x**3 * w).sum(),
    "sin_tanh_matmul": lambda x, w: torch.tanh(x.sin() @ w.t()).pow(2).mean(),
    "softmax_log": lambda x, w: torch.log_softmax(x * w, dim=-1).exp().pow(3).sum(),
    # a no_grad block: its value is a constant for every derivative order, as in eager
    "no_grad_scale": lambda x, w: _scaled_by_constant_norm(x, w),
}


def _scaled_by_constant_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        scale = x.norm()
    return (x.exp() * w * scale).sum() + (x * x.detach()).sum()


def _inputs(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5 if name == "sin_tanh_matmul" else 3, 4, dtype=torch.float64, requires_grad=True)
    return x, w


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_hessian_vector_products_match_eager(name: str) -> None:
    fn = FUNCTIONS[name]
    x, w = _inputs(name)
    v = torch.randn_like(x)
    results = []
    for f in (fn, _compiled(fn)):
        gx, gw = torch.autograd.grad(f(x, w), (x, w), create_graph=True)
        assert gx.requires_grad and gw.requires_grad
        # d/d(x, w) of <gx, v> + |gw|^2: second derivatives with respect to both inputs.
        results.append(torch.autograd.grad((gx * v).sum() + gw.pow(2).sum(), (x, w)))
    for got, expected in zip(results[1], results[0]):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functional_hessian_matches_eager(name: str) -> None:
    fn = FUNCTIONS[name]
    x, w = _inputs(name)
    compiled = _compiled(fn)
    w = w.detach()
    expected = torch.autograd.functional.hessian(lambda t: fn(t, w), x.detach())
    got = torch.autograd.functional.hessian(lambda t: compiled(t, w), x.detach())
    torch.testing.assert_close(got, expected)


def test_double_backward_with_respect_to_the_tangent() -> None:
    """The double-backward trick for a Jacobian-vector product differentiates the gradient with
    respect to the tangent fed to the first backward."""
    fn = FUNCTIONS["sin_tanh_matmul"]
    results = []
    for f in (fn, _compiled(fn)):
        x, w = _inputs("sin_tanh_matmul")
        out = f(x, w).reshape(1).expand(2) * torch.arange(1.0, 3.0, dtype=torch.float64)
        u = torch.ones(2, dtype=torch.float64, requires_grad=True)
        (gx,) = torch.autograd.grad(out, x, u, create_graph=True)
        results.append(torch.autograd.grad(gx.sum(), u))
    torch.testing.assert_close(results[1], results[0])


class Critic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Softplus(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def _gradient_penalty_step(critic: nn.Module, run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> list[torch.Tensor]:
    """A WGAN-GP critic step: the loss includes the norm of the gradient with respect to the input."""
    critic.zero_grad()
    x = x.clone().requires_grad_(True)
    score = run(x).sum()
    (grad,) = torch.autograd.grad(score, x, create_graph=True)
    loss = score + ((grad.norm(dim=1) - 1) ** 2).mean()
    loss.backward()
    return [p.grad.clone() for p in critic.parameters()]  # type: ignore[union-attr]


def test_gradient_penalty_of_a_module_matches_eager() -> None:
    torch.manual_seed(1)
    critic = Critic()
    x = torch.randn(8, 6)
    compiled = aotgrad.aot_module(critic, fw_compiler=FirstOrderOnly(), config=strict())
    expected = _gradient_penalty_step(critic, critic, x)
    for _ in range(2):  # the second step runs the cached region
        got = _gradient_penalty_step(critic, compiled, x)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)


def test_input_passed_twice_gets_each_use_differentiated() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a.sin() * b.pow(3)).sum()

    torch.manual_seed(2)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    results = []
    for f in (fn, _compiled(fn)):
        (g,) = torch.autograd.grad(f(x, x), x, create_graph=True)
        results.append(torch.autograd.grad(g.pow(2).sum(), x))
    torch.testing.assert_close(results[1], results[0])


def test_first_order_backward_after_create_graph_uses_the_compiled_backward() -> None:
    fn = FUNCTIONS["cube"]
    x, w = _inputs("cube")
    compiled = _compiled(fn)
    y = compiled(x, w)
    torch.autograd.grad(y, x, create_graph=True)
    y.backward()  # the graph was kept by create_graph: a plain backward runs the compiled one
    torch.testing.assert_close(x.grad, 3 * x.detach() ** 2 * w.detach())


def test_create_graph_after_a_freed_backward_raises_like_eager() -> None:
    fn = FUNCTIONS["cube"]
    x, w = _inputs("cube")
    y = _compiled(fn)(x, w)
    y.backward()
    with pytest.raises(RuntimeError, match="a second time"):
        torch.autograd.grad(y, x, create_graph=True)


@pytest.mark.parametrize(
    ("module", "reason"),
    [(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Tanh()), "random numbers")],
    ids=["dropout"],
)
@pytest.mark.filterwarnings(r"ignore:Using backward\(\) with create_graph=True")
def test_unreplayable_regions_raise_instead_of_dropping_the_term(module: nn.Module, reason: str) -> None:
    torch.manual_seed(3)
    compiled = aotgrad.aot_module(module, fw_compiler=FirstOrderOnly(), config=strict())
    x = torch.randn(6, 4, requires_grad=True)
    # create_graph without a second differentiation still works (first-order gradients)...
    compiled(x).pow(2).sum().backward(create_graph=True)
    assert x.grad is not None
    # ...but differentiating the gradient raises, by torch.autograd.grad or .backward().
    (g,) = torch.autograd.grad(compiled(x).pow(2).sum(), x, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match=f"double backward .*{reason}.*frontend.disable"):
        torch.autograd.grad(g.sum(), x)
    (g,) = torch.autograd.grad(compiled(x).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"double backward"):
        (compiled(x).sum() + g.pow(2).sum()).backward()
    for p in module.parameters():
        p.grad = None  # backward(create_graph=True) made reference cycles through .grad


def test_training_batch_norm_replays_on_the_running_statistics_it_read() -> None:
    """The region updates BatchNorm's running statistics in place: the replay for a double backward
    runs on copies of their old values, and the second-order gradient is eager's."""

    def grads(model: Callable[..., Any], x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        (g,) = torch.autograd.grad(model(x).pow(2).sum(), x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sin().sum(), x)
        return g.detach(), gg

    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Tanh())
    reference = copy.deepcopy(module)
    compiled = aotgrad.aot_module(module, fw_compiler=FirstOrderOnly(), config=strict())
    x = torch.randn(6, 4, requires_grad=True)
    for got, want in zip(grads(compiled, x), grads(reference, x)):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(module[1].running_mean, reference[1].running_mean)


def test_saved_tensor_hooks_keep_no_inputs_and_a_create_graph_backward_says_so() -> None:
    """Under saved-tensor hooks (offloading, activation checkpointing) the region keeps no inputs of
    its own: first-order gradients are unchanged, a create_graph backward raises clearly."""
    fn = FUNCTIONS["sin_tanh_matmul"]
    x, w = _inputs("sin_tanh_matmul")
    compiled = _compiled(fn)
    with torch.autograd.graph.save_on_cpu():
        y = compiled(x, w)
        expected = fn(x, w)
    torch.testing.assert_close(torch.autograd.grad(y, x, retain_graph=True), torch.autograd.grad(expected, x))
    with pytest.raises(RuntimeError, match=r"double backward .*saved-tensor hooks"):
        torch.autograd.grad(y, x, create_graph=True)


F = nn.functional
NORMS: dict[str, Callable[..., torch.Tensor]] = {
    "batch_norm_train": lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=True, momentum=0.25),
    "batch_norm_train_no_stats": lambda x, m, v, w, b: F.batch_norm(x, None, None, w, b, training=True),
    "batch_norm_eval": lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
    "instance_norm": lambda x, m, v, w, b: F.instance_norm(x, m, v, w, b, use_input_stats=True, momentum=0.3),
    "conv_instance_norm": lambda x, m, v, w, b: F.instance_norm(F.conv1d(x, x[:3].detach(), padding=2), m, v, w, b),
}


@pytest.mark.parametrize("wanted", ["weight", "weight_bias", "all"])
@pytest.mark.parametrize("name", sorted(NORMS))
def test_batch_norm_gradients_have_eagers_history_under_create_graph(name: str, wanted: str) -> None:
    """fuzz 1fd27694ca, f9549b8353: with only the weight requiring grad, eager's gradient of a batch
    norm's weight has history (its fused backward takes the weight) though it does not depend on it;
    the replayed decomposition gave one without, so a second differentiation raised instead of
    finding no term. The replay differentiates batch norm whole, as eager does."""
    _check_norm_history(NORMS[name], wanted)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("wanted", ["weight", "weight_bias"])
@pytest.mark.parametrize("name", sorted(NORMS))
def test_batch_norm_on_an_expanded_input_keeps_eagers_history(
    name: str, wanted: str, dtype: torch.dtype
) -> None:
    """fuzz f2b40baedb: a region taking an expanded input runs on its distinct elements, and its
    replay graph with batch norm whole was not traced for such a region: the decomposed batch norm
    replayed, and the weight's gradient had no history (no second-order gradients at all)."""
    _check_norm_history(NORMS[name], wanted, expanded=True, dtype=dtype)


def test_batch_norm_on_an_expanded_input_of_symbolic_size_keeps_eagers_history() -> None:
    """fuzz f2b40baedb, with the expanded input's size symbolic (bound to another input's size)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    def fn(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, None, None, w, b, training=True) * y

    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC, DimDynamic.STATIC]
    )
    with mode:
        y_fake = mode.from_tensor(torch.randn(4, 3, 5), symbolic_context=dynamic)
        x_fake = mode.from_tensor(torch.randn(1, 3, 5)).expand(y_fake.shape[0], 3, 5)
        w_fake, b_fake = (mode.from_tensor(torch.randn(3)).requires_grad_() for _ in range(2))
    compiled = aotgrad.aot_graph(
        fn, [x_fake, y_fake, w_fake, b_fake], fw_compiler=FirstOrderOnly(), config=strict()
    )
    for n in (4, 6):
        results = []
        for f in (fn, compiled):
            g = torch.Generator().manual_seed(n)
            x, y = torch.randn(1, 3, 5, generator=g).expand(n, 3, 5), torch.randn(n, 3, 5, generator=g)
            w, b = torch.randn(3, generator=g).requires_grad_(), torch.randn(3, generator=g).requires_grad_()
            out = f(x, y, w, b)
            grads = torch.autograd.grad(out, (w, b), torch.randn(out.shape, generator=g), create_graph=True)
            results.append([[gr.requires_grad for gr in grads], out.detach(), *(gr.detach() for gr in grads)])
        (want_history, *want), (got_history, *got) = results
        assert got_history == want_history, (
            f"requires_grad of the gradients: {got_history} compiled, {want_history} eager"
        )
        for got_value, want_value in zip(got, want):
            torch.testing.assert_close(got_value, want_value)


@pytest.mark.parametrize("op", [F.hardshrink, F.softshrink])
def test_an_op_fake_tensors_decompose_at_symbolic_sizes_keeps_eagers_history(op: Callable[..., torch.Tensor]) -> None:
    """fuzz 2aef1325d5: at symbolic sizes fake tensors decompose ``hardshrink`` (its C++ meta takes
    no symbolic size) into ``where(|x| <= 0.5, 0, x)``; the replay differentiated that, and the
    gradient had no history where eager's ``hardshrink_backward`` has some (no second order at all)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    def fn(x: torch.Tensor) -> torch.Tensor:
        return op(x)

    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.STATIC, DimDynamic.DYNAMIC])
    x_fake = mode.from_tensor(torch.randn(1, 8), symbolic_context=dynamic).requires_grad_()
    assert isinstance(x_fake.shape[1], torch.SymInt)
    compiled = aotgrad.aot_graph(fn, [x_fake], fw_compiler=FirstOrderOnly(), config=strict())
    for n in (8, 9, 13):
        results = []
        for f in (fn, compiled):
            g = torch.Generator().manual_seed(n)
            x = torch.randn(1, n, generator=g).requires_grad_()
            out = f(x)
            (grad,) = torch.autograd.grad(out, x, torch.randn(out.shape, generator=g), create_graph=True)
            second = torch.autograd.grad((grad * torch.randn(grad.shape, generator=g)).sum(), x)
            results.append([grad.requires_grad, out.detach(), grad.detach(), *second])
        (want_history, *want), (got_history, *got) = results
        assert got_history == want_history, f"requires_grad of the gradient: {got_history} compiled, {want_history} eager"
        for got_value, want_value in zip(got, want):
            torch.testing.assert_close(got_value, want_value)


def test_a_region_restored_from_its_plan_replays_a_graph_of_each_calls_sizes() -> None:
    """A region rebuilt from a saved plan (Kiln's graph cache) has no forward graph: its first
    double backward traced one from its inputs, at their sizes, and every later call of a region of
    symbolic sizes replayed that graph, whose reshapes then refused the new sizes."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    from aotgrad.plans import aot_graph_from_plans, export_plans

    def fn(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1)
        return (flat * flat.sin()).reshape(x.shape[0], -1)

    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC, DimDynamic.DYNAMIC])
    x_fake = mode.from_tensor(torch.randn(4, 3, 5), symbolic_context=dynamic).requires_grad_()
    assert isinstance(x_fake.shape[0], torch.SymInt)
    gm = torch.fx.symbolic_trace(fn)
    first = aotgrad.aot_graph(gm, [x_fake], fw_compiler=FirstOrderOnly(), config=strict())
    first(torch.randn(4, 3, 5, requires_grad=True))
    plans = export_plans(first, lambda run: run)
    restored = aot_graph_from_plans(gm, [x_fake], plans, lambda run: run, fw_compiler=FirstOrderOnly(), config=strict())
    for n in (4, 6, 9):
        results = []
        for f in (fn, restored):
            g = torch.Generator().manual_seed(n)
            x = torch.randn(n, 3, n + 1, generator=g).requires_grad_()
            out = f(x)
            (grad,) = torch.autograd.grad(out, x, torch.randn(out.shape, generator=g), create_graph=True)
            (second,) = torch.autograd.grad((grad * torch.randn(grad.shape, generator=g)).sum(), x)
            results.append([out.detach(), grad.detach(), second])
        for got_value, want_value in zip(results[1], results[0]):
            torch.testing.assert_close(got_value, want_value)


def test_batch_norm_beside_a_data_dependent_op_keeps_eagers_history() -> None:
    """Like fuzz f2b40baedb: the replay graph with batch norm whole was traced without unbacked
    symbols, so a region with `masked_select` failed to trace it and replayed without history."""

    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, None, None, w, b, training=True).sum() + x.masked_select(x > 0).sum() * w.sum()

    _check_norm_history(lambda x, m, v, w, b: fn(x, w, b), "weight_bias")


def _check_norm_history(
    fn: Callable[..., torch.Tensor], wanted: str, expanded: bool = False, dtype: torch.dtype = torch.float32
) -> None:
    """`fn(x, running_mean, running_var, weight, bias)` compiled gives eager's values, gradients under
    create_graph=True (and whether they have history), second-order gradients and running statistics."""

    def run(fn: Callable[..., torch.Tensor]) -> list[Any]:
        g = torch.Generator().manual_seed(4)
        x = torch.randn(1 if expanded else 4, 3, 5, generator=g)
        x = x.expand(4, 3, 5) if expanded else x
        w, b = torch.randn(3, generator=g), torch.randn(3, generator=g)
        stats = [torch.randn(3, generator=g), torch.rand(3, generator=g) + 0.5]
        x, w, b, *stats = (t.to(dtype) for t in (x, w, b, *stats))
        leaves = [x, w, b] if wanted == "all" else [w, b] if wanted == "weight_bias" else [w]
        for leaf in leaves:
            leaf.requires_grad_()
        y = fn(x, *stats, w, b)
        grads = torch.autograd.grad(y, leaves, torch.randn(y.shape, generator=g).to(dtype), create_graph=True)
        history = [gr.requires_grad for gr in grads]
        terms = [(gr * torch.randn(gr.shape, generator=g).to(dtype)).sum() for gr in grads if gr.requires_grad]
        second = torch.autograd.grad(sum(terms), leaves, allow_unused=True) if terms else ()
        return [y.detach(), history, [gr.detach() for gr in grads], list(second), stats]

    got, want = run(aotgrad.aot_function(fn, fw_compiler=FirstOrderOnly(), config=strict())), run(fn)
    assert got[1] == want[1], f"requires_grad of the gradients: {got[1]} compiled, {want[1]} eager"
    for got_value, want_value in zip([got[0], *got[2], *got[3], *got[4]], [want[0], *want[2], *want[3], *want[4]]):
        _assert_same_or_both_zero(got_value, want_value)


def _assert_same_or_both_zero(got: torch.Tensor | None, want: torch.Tensor | None) -> None:
    """Close values; None (no gradient) on one side only where the other is zeros."""
    if got is None or want is None:
        present = want if got is None else got
        assert present is None or not present.count_nonzero()
        return
    torch.testing.assert_close(got, want)


def test_double_backward_through_an_in_place_update_of_an_activation() -> None:
    # `out += identity` on an activation that requires grad (after a graph break): the replay reads the
    # old value through a copy taken with history, so the second-order terms reach the weight.
    def block(out: torch.Tensor, identity: torch.Tensor) -> torch.Tensor:
        out += identity
        return (out.sin() * out).sum()

    torch.manual_seed(0)
    weight, identity = torch.randn(6, requires_grad=True), torch.randn(6, requires_grad=True)
    compiled = aotgrad.aot_function(block, fw_compiler=aotgrad.eager_compiler, config=strict())
    results = []
    for run in (block, compiled):
        loss = run(weight * 1.5, identity)
        first = torch.autograd.grad(loss, [weight, identity], create_graph=True)
        second = torch.autograd.grad(first[0].square().sum() + first[1].sum(), [weight, identity])
        results.append((loss.detach(), *(g.detach() for g in first), *second))
    for got, want in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(got, want)


def _floor_through_a_full_view(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    t = a.flip(0)
    t.view(-1).floor_()  # fuzz 7c9650df5a: functionalized, the base's gradient lost its history
    return t.abs().amax() + (w * t).sum()


def _zero_through_an_unsqueeze(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    t = a * w
    t.unsqueeze(0).zero_()
    return (t * t).sum() + (a * w).pow(2).sum()


def _copy_through_a_transpose(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    t = a.sin()
    t.t().copy_(torch.ones(3, 4))
    return (t * t.exp()).sum()


def _into_an_input_through_a_view(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a.view(-1).round_()  # `a` requires grad (an activation): an input mutation through a full view
    return (a.abs() * w).sum()


WRITES_INTO_VIEWS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "floor_through_a_full_view": _floor_through_a_full_view,
    "zero_through_an_unsqueeze": _zero_through_an_unsqueeze,
    "copy_through_a_transpose": _copy_through_a_transpose,
    "into_an_input_through_a_view": _into_an_input_through_a_view,
}


@pytest.mark.parametrize("name", sorted(WRITES_INTO_VIEWS))
def test_writes_into_views_keep_eagers_gradient_history(name: str) -> None:
    # Eager records a write into a view as a CopySlices node, whose gradient keeps the incoming
    # gradient's history even where the op's derivative is zero; the functional graph folded a write
    # into a full view back through a plain view, and the gradients came out without history.
    fn = WRITES_INTO_VIEWS[name]
    compiled = _compiled(fn)
    for seed in range(3):
        results = []
        for run in (fn, compiled):
            g = torch.Generator().manual_seed(seed)
            a = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
            w = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
            v = torch.randn(4, 3, generator=g, dtype=torch.float64)
            first = torch.autograd.grad(run(a * 2, w), (a, w), create_graph=True, allow_unused=True)
            flags = [g is not None and g.requires_grad for g in first]
            terms = [(g * v).sum() for g in first if g is not None and g.requires_grad]
            second = torch.autograd.grad(sum(terms), (a, w), allow_unused=True) if terms else ()
            results.append((flags, first, second))
        (want_flags, want_first, want_second), (got_flags, got_first, got_second) = results
        assert got_flags == want_flags, f"seed {seed}: gradients requiring grad {got_flags}, eager {want_flags}"
        for got, want in zip((*got_first, *got_second), (*want_first, *want_second), strict=True):
            _assert_same_or_both_zero(got, want)


def _instance_norm_beside_a_write_into_a_view(
    mask: torch.Tensor, x: torch.Tensor, stats: tuple[torch.Tensor, torch.Tensor], w: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    # fuzz 3577c8a563: a write into a view makes the replay keep its in-place ops, and the running
    # statistics' update then overwrote what batch norm's autograd node had saved.
    mask.expand(2, *mask.shape).masked_fill_(mask.expand(2, *mask.shape) > 0, False)
    return nn.functional.instance_norm(x * w.view(1, -1, 1), *stats, w, b, use_input_stats=True, momentum=0.3)


def _batch_norm_beside_a_write_into_a_view(
    mask: torch.Tensor, x: torch.Tensor, stats: tuple[torch.Tensor, torch.Tensor], w: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    t = x.sin()
    t.view(-1).floor_()
    mask.view(-1).zero_()
    return nn.functional.batch_norm(t + x, *stats, w, b, training=True, momentum=0.2)


def _batch_norm_and_a_buffer_updated_in_place(
    mask: torch.Tensor, x: torch.Tensor, stats: tuple[torch.Tensor, torch.Tensor], w: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    # The user's own update of the buffers before batch norm reads them (eager's batch norm saves its
    # running statistics: updating them after it raises in eager too), one through a view.
    stats[0].mul_(0.5).add_(1.0)
    stats[1].view(-1).add_(0.25)
    y = nn.functional.batch_norm(x, *stats, w, b, training=True, momentum=0.1)
    return y * y.tanh() * stats[1].view(1, -1, 1)


RUNNING_STATISTICS: dict[str, Callable[..., torch.Tensor]] = {
    "instance_norm_beside_a_write_into_a_view": _instance_norm_beside_a_write_into_a_view,
    "batch_norm_beside_a_write_into_a_view": _batch_norm_beside_a_write_into_a_view,
    "batch_norm_and_a_buffer_updated_in_place": _batch_norm_and_a_buffer_updated_in_place,
}


def _running_statistics_case(fn: Callable[..., torch.Tensor], seed: int, retain: bool) -> list[Any]:
    """Values, running statistics, gradients and gradients of gradients of `fn` (one or, with
    `retain`, two create_graph backwards, the first with retain_graph=True)."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.randint(0, 2, (1, 3, 4), generator=g).bool()
    x = torch.randn(2, 3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    stats = (torch.rand(3, generator=g, dtype=torch.float64), torch.rand(3, generator=g, dtype=torch.float64) + 0.5)
    w = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    cotangent = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    out = fn(mask, x, stats, w, b)
    results: list[Any] = [out.detach(), mask.clone(), *(s.clone() for s in stats)]
    for _ in range(2 if retain else 1):
        first = torch.autograd.grad(out, (x, w, b), cotangent, create_graph=True, retain_graph=True)
        terms = [(f * torch.randn(f.shape, generator=g, dtype=torch.float64)).sum() for f in first if f.requires_grad]
        second = torch.autograd.grad(sum(terms), (x, w, b), allow_unused=True, retain_graph=retain)
        results += [[f.requires_grad for f in first], *(f.detach() for f in first), *second]
    return results


@pytest.mark.parametrize("retain", [False, True])
@pytest.mark.parametrize("name", sorted(RUNNING_STATISTICS))
def test_running_statistics_updated_beside_a_double_backward_match_eager(name: str, retain: bool) -> None:
    # The replay's batch norm is given copies of the running statistics: its autograd node saves
    # them, and a replay that keeps its in-place ops writes the new statistics into them.
    fn = RUNNING_STATISTICS[name]
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    for seed in range(2):
        want = _running_statistics_case(fn, seed, retain)
        got = _running_statistics_case(compiled, seed, retain)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if isinstance(w, list):
                assert g == w, f"seed {seed}, result {i}: requires_grad {g}, eager {w}"
            else:
                _assert_same_or_both_zero(g, w)
