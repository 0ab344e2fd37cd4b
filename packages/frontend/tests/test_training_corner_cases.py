"""Training corner cases end to end, under aot_eager and inductor, against eager on seeded inputs.

* Double backward (gradient penalties, Hessian-vector products, `autograd.functional.hessian`)
  gives eager's second derivatives, or a clear error where a graph cannot be replayed (dropout).
* A GRU fed a non-contiguous input gets eager's parameter gradients under inductor (the forward's
  saved gate slices keep the strides the backward was compiled for).
* Recurrent layers and attention trained under automatic dynamic shapes over three sequence
  lengths: no eager fallback, and a bounded number of compilations.
* A residual ``out += identity`` after a graph break updates the next graph's input (an activation
  that requires grad) in place: compiled, not run eagerly, with eager's gradients.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
import torch
from torch import nn

import frontend

STRICT = {"fallback_to_eager": False}
BACKENDS = ("aot_eager", "inductor")


class Critic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 12), nn.Softplus(), nn.Linear(12, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def _second_order(critic: nn.Module, run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> list[torch.Tensor]:
    """A gradient-penalty step's parameter gradients, a Hessian-vector product and a full Hessian."""
    critic.zero_grad()
    x = x.clone().requires_grad_(True)
    score = run(x).sum()
    (grad,) = torch.autograd.grad(score, x, create_graph=True)
    (score + ((grad.norm(dim=1) - 1) ** 2).mean()).backward()
    penalty = [p.grad.clone() for p in critic.parameters()]  # type: ignore[union-attr]
    (grad,) = torch.autograd.grad(run(x).pow(2).sum(), x, create_graph=True)
    (hvp,) = torch.autograd.grad(grad, x, torch.linspace(-1, 1, x.numel()).reshape(x.shape))
    hessian = torch.autograd.functional.hessian(lambda t: run(t).tanh().sum(), x[:2].detach())
    return [*penalty, hvp, hessian]


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("backend", BACKENDS)
def test_second_derivatives_match_eager(backend: str) -> None:
    torch.manual_seed(0)
    critic = Critic()
    compiled = frontend.compile(critic, backend=backend, options=STRICT)
    x = torch.randn(5, 6)
    for got, expected in zip(_second_order(critic, compiled, x), _second_order(critic, critic, x), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("backend", BACKENDS)
def test_double_backward_through_dropout_raises_clearly(backend: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.3), nn.Tanh())
    compiled = frontend.compile(model, backend=backend, options=STRICT)
    x = torch.randn(4, 6, requires_grad=True)
    (grad,) = torch.autograd.grad(compiled(x).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"double backward \(create_graph=True\).*random numbers.*frontend\.disable"):
        torch.autograd.grad(grad.sum(), x)


def _training_results(module: nn.Module, run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> list[torch.Tensor]:
    module.zero_grad()
    x = x.detach().requires_grad_(True)
    out = run(x)
    out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape))
    return [out.detach(), x.grad, *(p.grad for p in module.parameters())]  # type: ignore[list-item]


@pytest.mark.slow
@pytest.mark.usefixtures("fresh_cache")
def test_gru_gradients_on_a_transposed_input_under_inductor() -> None:
    """The GRU's forward saves slices of its gate projections (strides with gaps); the backward,
    compiled for those strides, must get them (the class is swept in inductor-ir's
    test_output_layouts.py, on views of every kind and on non-contiguous inputs)."""
    torch.manual_seed(0)
    gru = nn.GRU(4, 6)
    x = torch.randn(3, 2, 4).transpose(0, 1)  # (seq, batch, features) read from a batch-major tensor
    compiled = frontend.compile(lambda t: gru(t)[0], backend="inductor", options=STRICT)
    expected = _training_results(gru, lambda t: gru(t)[0], x)
    got = _training_results(gru, compiled, x)
    for name, a, b in zip(["output", "input", *(n for n, _ in gru.named_parameters())], got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")


def _sequence_model(kind: str) -> tuple[nn.Module, Callable[[torch.Tensor], torch.Tensor], int]:
    if kind == "gru":
        gru = nn.GRU(4, 6)
        return gru, lambda t: gru(t)[0], 4
    attention = nn.MultiheadAttention(8, 2)
    return attention, lambda t: attention(t, t, t)[0], 8


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize(
    ("kind", "backend", "max_graphs"),
    # A GRU's capture unrolls its time loop (a graph per length); attention is captured once more,
    # with a symbolic length, when the second length comes.
    [("gru", "aot_eager", 3), ("attention", "aot_eager", 2), ("attention", "inductor", 2)],
)
def test_training_at_three_sequence_lengths_under_automatic_dynamic(
    kind: str, backend: str, max_graphs: int, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    module, fn, width = _sequence_model(kind)
    compiled = frontend.compile(fn, backend=backend, options=STRICT)
    with caplog.at_level(logging.WARNING):
        for length in (3, 5, 4):
            x = torch.randn(length, 2, width)
            for a, b in zip(_training_results(module, compiled, x), _training_results(module, fn, x), strict=True):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert not [r for r in caplog.records if "eager" in r.getMessage()], "a graph ran eagerly"
    assert compiled.kiln_context.graphs_compiled <= max_graphs


def _put_one_value(base: torch.Tensor, rows: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    return base.index_put((rows, torch.tensor(0)), value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gradient_of_a_broadcast_value_is_summed_to_its_shape(backend: str) -> None:
    """fuzz caeafd26ab: index_put's backward gives a 0-d value the gradient of shape (rows,), which
    autograd sums to the value's shape; the compiled backward allocated it with the 0-d strides."""
    compiled = frontend.compile(_put_one_value, backend=backend, options=STRICT)
    base, rows = torch.randn(3, 2), torch.tensor([2, 0])
    value = torch.randn((), requires_grad=True)
    expected_value = value.detach().clone().requires_grad_()
    cotangent = torch.randn(3, 2)
    compiled(base, rows, value).backward(cotangent)
    _put_one_value(base, rows, expected_value).backward(cotangent)
    torch.testing.assert_close(value.grad, expected_value.grad)


class _BrokenResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.second(torch.relu(self.first(x)))
        print(end="")  # a graph break: `out` is an input of the next graph
        out += x
        return torch.relu_(out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_in_place_update_after_a_graph_break_is_compiled(backend: str) -> None:
    torch.manual_seed(0)
    model = _BrokenResidual()
    compiled = frontend.compile(model, backend=backend, options=STRICT)
    gradients = []
    data = torch.randn(4, 8)
    for run in (model, compiled):
        x = data.clone().requires_grad_()
        run(x).square().sum().backward()
        gradients.append([x.grad, *(p.grad for p in model.parameters())])
        model.zero_grad(set_to_none=True)
    for got, want in zip(gradients[1], gradients[0], strict=True):
        torch.testing.assert_close(got, want)
    assert compiled.kiln_context.graphs_compiled == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_trains_like_eager(mode: str, dtype: torch.dtype) -> None:
    # fuzz 53e90098b0: eager's CPU kernel returns an empty offset2bag in sum mode where the meta
    # function says one per index; the compiled forward copied it into the recorded shape and failed.
    torch.manual_seed(0)
    weight = torch.randn(10, 4, dtype=dtype, requires_grad=True)
    indices = torch.randint(0, 10, (3, 5))

    def bags(weight: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding_bag(indices, weight, mode=mode)

    compiled = frontend.compile(bags, options=STRICT)
    results = []
    for run in (bags, compiled):
        out = run(weight, indices)
        out.float().square().sum().backward()
        results.append((out.detach(), weight.grad))
        weight.grad = None
    for got, want in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(got, want)


class NormsBesideAWriteIntoAView(nn.Module):
    """Instance and batch norm updating their running statistics, beside a write into a view of an
    input (fuzz 3577c8a563: the double backward's replay then keeps its in-place ops)."""

    def __init__(self) -> None:
        super().__init__()
        self.instance = nn.InstanceNorm1d(3, affine=True, track_running_stats=True, momentum=0.3)
        self.batch = nn.BatchNorm1d(3, momentum=0.2)

    def forward(self, mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        mask.expand(2, *mask.shape).masked_fill_(mask.expand(2, *mask.shape) > 0, False)
        return self.batch(self.instance(x).tanh()) * x


def _norms_double_backward(model: nn.Module, run: Callable[..., torch.Tensor], seed: int) -> list[object]:
    """Outputs, running statistics, gradients (twice, retain_graph=True) and gradients of gradients."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.randint(0, 2, (1, 3, 5), generator=g).bool()
    x = torch.randn(4, 3, 5, generator=g, requires_grad=True)
    leaves = [x, *model.parameters()]
    out = run(mask, x)
    results: list[object] = [out.detach(), mask.clone(), *(b.clone() for b in model.buffers())]
    for _ in range(2):
        first = torch.autograd.grad(out, leaves, torch.randn(out.shape, generator=g), create_graph=True, retain_graph=True)
        penalty = sum((f * torch.randn(f.shape, generator=g)).sum() for f in first)
        second = torch.autograd.grad(penalty, leaves, allow_unused=True, retain_graph=True)
        results += [[f.requires_grad for f in first], *(f.detach() for f in first), *second]
    return results


@pytest.mark.parametrize("backend", BACKENDS)
def test_norms_updating_running_statistics_beside_a_write_into_a_view_double_backward(backend: str) -> None:
    torch.manual_seed(0)
    eager_model = NormsBesideAWriteIntoAView()
    model = NormsBesideAWriteIntoAView()
    model.load_state_dict(eager_model.state_dict())
    compiled = frontend.compile(model, backend=backend, options=STRICT)
    for seed in range(2):
        want = _norms_double_backward(eager_model, eager_model, seed)
        got = _norms_double_backward(model, compiled, seed)
        assert len(got) == len(want)
        for i, (a, w) in enumerate(zip(got, want, strict=True)):
            if isinstance(w, list):
                assert a == w, f"seed {seed}, result {i}"
            elif w is None or a is None:
                present = a if w is None else w
                assert present is None or not present.count_nonzero(), f"seed {seed}, result {i}"
            else:
                torch.testing.assert_close(a, w, rtol=1e-4, atol=1e-5, msg=lambda m, i=i: f"seed {seed}, result {i}: {m}")
