"""Symbolic sizes through aotgrad: one region compiled over fake inputs with symbolic dims serves every size.

Inputs are fake tensors from a ``FakeTensorMode`` with a ``ShapeEnv``, with chosen dims marked
``DimDynamic.DYNAMIC``. The forward (and, when training, the joint graph, the partition and the
backward) are traced once; then the compiled callable runs on real tensors of many sizes against
eager, and counting compilers check that nothing was compiled again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

import aotgrad

SIZES = (2, 3, 7, 17, 33)


def _symbolic_fake(mode: FakeTensorMode, tensor: torch.Tensor, dynamic: set[int]) -> torch.Tensor:
    dims = [DimDynamic.DYNAMIC if d in dynamic else DimDynamic.STATIC for d in range(tensor.dim())]
    fake = mode.from_tensor(tensor, symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims))
    return fake.requires_grad_(tensor.requires_grad)


class Counting:
    """A compiler that counts its calls and records the graphs it got (then runs them eagerly)."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(gm)
        return aotgrad.eager_compiler(gm, example_inputs)


class Block(nn.Module):
    """A pre-norm transformer block whose sequence length is read from the input."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = (
            t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2)
            for t in self.qkv(self.ln1(x)).chunk(3, dim=-1)
        )
        attn = torch.softmax(q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5, dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _compile(model: nn.Module, example: Sequence[torch.Tensor], dynamic: Sequence[set[int]]) -> tuple[Any, Counting, Counting]:
    mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = [_symbolic_fake(mode, t, d) for t, d in zip(example, dynamic, strict=True)]
    forward, backward = Counting(), Counting()
    compiled = aotgrad.aot_graph(
        model, fakes, fw_compiler=forward, bw_compiler=backward, config=aotgrad.AotConfig(fallback_to_eager=False)
    )
    return compiled, forward, backward


def _check(compiled: Any, model: nn.Module, inputs: list[torch.Tensor], train: bool) -> None:
    reference = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    out, expected = compiled(*inputs), model(*reference)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    if not train:
        return
    params = list(model.parameters())
    grad = torch.randn_like(expected)
    got = torch.autograd.grad(out, [*inputs, *params], grad)
    want = torch.autograd.grad(expected, [*reference, *params], grad)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_transformer_block_training_with_symbolic_sequence_length() -> None:
    torch.manual_seed(0)
    model = Block()
    compiled, forward, backward = _compile(model, [torch.randn(2, 9, 16, requires_grad=True)], [{1}])
    assert len(forward.graphs) == len(backward.graphs) == 1
    for n in SIZES:
        _check(compiled, model, [torch.randn(2, n, 16, requires_grad=True)], train=True)
    assert len(forward.graphs) == len(backward.graphs) == 1, "a new sequence length compiled again"
    sizes = {str(s) for node in forward.graphs[0].graph.nodes if node.op == "placeholder" for s in node.meta["val"].shape}
    assert any(not s.isdigit() for s in sizes), "the forward graph's inputs should have a symbolic size"


def test_inference_with_two_symbolic_dims() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.Softmax(dim=0))
    with torch.no_grad():
        compiled, forward, backward = _compile(model, [torch.randn(5, 9, 8)], [{0, 1}])
        for n in SIZES:
            _check(compiled, model, [torch.randn(n, n + 2, 8)], train=False)
    assert len(forward.graphs) == 1 and not backward.graphs


@pytest.mark.parametrize("partition", [aotgrad.partition.min_cut, aotgrad.partition.save_all])
def test_partitioners_with_symbolic_sizes(partition: Any) -> None:
    torch.manual_seed(0)

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(torch.tanh(x @ w) * x.shape[1], dim=0).sum(1)

    mode = FakeTensorMode(shape_env=ShapeEnv())
    x, w = torch.randn(6, 9, requires_grad=True), torch.randn(9, 9, requires_grad=True)
    fakes = [_symbolic_fake(mode, x, {0}), _symbolic_fake(mode, w, set())]
    forward, backward = Counting(), Counting()
    compiled = aotgrad.aot_graph(fn, fakes, fw_compiler=forward, bw_compiler=backward, partition=partition)
    for n in SIZES:
        x = torch.randn(n, 9, requires_grad=True)
        out, expected = compiled(x, w), fn(x, w)
        torch.testing.assert_close(out, expected)
        grad = torch.randn_like(out)
        got, want = torch.autograd.grad(out, [x, w], grad), torch.autograd.grad(expected, [x, w], grad)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert len(forward.graphs) == len(backward.graphs) == 1


def test_sizes_zero_and_one_are_specialized() -> None:
    """A dynamic dim of size 1 compiles its own region (a symbol is assumed >= 2, as torch does)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Softmax(dim=0))
    with torch.no_grad():
        compiled, forward, _ = _compile(model, [torch.randn(9, 4)], [{0}])
        for n in (1, 2, 5, 1):
            _check(compiled, model, [torch.randn(n, 4)], train=False)
    assert len(forward.graphs) == 2


ALIASING_CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "outputs_viewing_the_input": lambda x: (x.view(-1), x.t(), x[1:], x.sin()),
    "input_mutation": lambda x: x.add_(1).mul(2),
    "size_arithmetic": lambda x: x.new_zeros(x.shape[0] * 2) + x.sum(),
}


@pytest.mark.parametrize("name", sorted(ALIASING_CASES))
def test_views_mutations_and_size_arithmetic_with_symbolic_sizes(name: str) -> None:
    fn = ALIASING_CASES[name]
    mode = FakeTensorMode(shape_env=ShapeEnv())
    forward = Counting()
    compiled = aotgrad.aot_graph(
        fn, [_symbolic_fake(mode, torch.randn(5, 4), {0})], fw_compiler=forward, config=aotgrad.AotConfig(fallback_to_eager=False)
    )
    for n in SIZES:
        x = torch.randn(n, 4)
        x_ref = x.clone()
        torch.testing.assert_close(compiled(x), fn(x_ref))
        torch.testing.assert_close(x, x_ref)  # the mutation was written back
    assert len(forward.graphs) == 1


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, factor: int) -> torch.Tensor:
        return torch.tanh(self.linear(x)) * factor


def test_sizes_specialized_by_a_guard_key_the_region_by_value() -> None:
    """A fake input whose symbolic size a guard pinned (the capture of a recurrent layer guards its
    sequence length) still has SymInts in its shape, and a SymInt argument may be pinned too: the
    region key holds their values (a SymInt is unhashable), and real inputs of those sizes reuse it."""
    torch.manual_seed(0)
    model = Scaled()
    mode = FakeTensorMode(shape_env=ShapeEnv())
    fake = _symbolic_fake(mode, torch.randn(7, 8, requires_grad=True), {0})
    assert int(fake.shape[0]) == 7  # the guard: the symbol is replaced by 7
    assert isinstance(fake.shape[0], torch.SymInt)
    forward, backward = Counting(), Counting()
    compiled = aotgrad.aot_graph(
        model, [fake, fake.shape[0]], fw_compiler=forward, bw_compiler=backward, config=aotgrad.AotConfig(fallback_to_eager=False)
    )
    for _ in range(2):
        x = torch.randn(7, 8, requires_grad=True)
        reference = x.detach().clone().requires_grad_(True)
        out, expected = compiled(x, 7), model(reference, 7)
        torch.testing.assert_close(out, expected)
        grad = torch.randn_like(expected)
        for got, want in zip(
            torch.autograd.grad(out, [x, *model.parameters()], grad),
            torch.autograd.grad(expected, [reference, *model.parameters()], grad),
            strict=True,
        ):
            torch.testing.assert_close(got, want)
    assert len(forward.graphs) == len(backward.graphs) == 1, "the real inputs compiled the region again"


class PadAndNarrow(nn.Module):
    """Pads the sequence to a multiple of 4 (a window size, as Swin does) and narrows it by symbolic amounts."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        padded = F.pad(self.lin(x), (0, 0, 0, (-x.shape[1]) % 4))  # constant_pad_nd with a symbolic pad
        inner = padded.narrow(1, 1, x.shape[1] - 1)  # narrow -> slice of a view with symbolic sizes
        return inner.tanh() * padded.shape[1]


@pytest.mark.parametrize("train", [False, True])
def test_composite_ops_with_symbolic_arguments(train: bool) -> None:
    """`constant_pad_nd` and `narrow` reach C++ composite kernels that refuse symbolic sizes ("SymIntArrayRef
    expected to contain only concrete integers", "Cannot call storage_offset() on tensor with symbolic
    sizes/strides"); traced with symbolic sizes they must take their symbolic-aware kernels."""
    torch.manual_seed(0)
    model = PadAndNarrow()
    with torch.enable_grad() if train else torch.no_grad():
        compiled, forward, _backward = _compile(model, [torch.randn(2, 9, 8, requires_grad=train)], [{1}])
        for n in SIZES:
            _check(compiled, model, [torch.randn(2, n, 8, requires_grad=train)], train=train)
    assert len(forward.graphs) == 1


def test_a_gradient_pattern_first_seen_at_run_time_serves_only_its_own_sizes() -> None:
    """A graph compiled with symbolic sizes under no_grad (capture's resume function inside a
    ``torch.no_grad()`` block, pyfuzz seed 54430) is called with grad enabled: that region is traced
    from the real inputs, at their sizes, so an input of another size must not reuse it (its forward
    read a (6, 5) input as (7, 5)'s and its backward returned a (6, 5) gradient)."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.relu() * 0.5).cumsum(0).reshape(-1) + x.mean()

    mode = FakeTensorMode(shape_env=ShapeEnv())
    forward, backward = Counting(), Counting()
    with torch.no_grad():
        compiled = aotgrad.aot_graph(
            fn, [_symbolic_fake(mode, torch.randn(5, 4, requires_grad=True), {0})], fw_compiler=forward,
            bw_compiler=backward, config=aotgrad.AotConfig(fallback_to_eager=False),
        )
    for seed, n in enumerate((6, 7, 7, 9, 6)):
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 4, generator=generator).requires_grad_()
        reference = x.detach().clone().requires_grad_()
        out, expected = compiled(x), fn(reference)
        torch.testing.assert_close(out, expected)
        grad = torch.randn(expected.shape, generator=generator)
        torch.testing.assert_close(torch.autograd.grad(out, x, grad)[0], torch.autograd.grad(expected, reference, grad)[0])
    with torch.no_grad():
        x = torch.randn(11, 4)
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(backward.graphs) == 3  # one per size seen with grad; the no_grad region still serves every size
