"""Dynamic shapes end to end: frontend.compile(dynamic=...) through capture, aotgrad, inductor_ir and C++."""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import frontend


def toy_example(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x.sin()
    z = y.cos()
    return y, z


class Block(nn.Module):
    """A pre-norm transformer block (layer norm, attention, GELU MLP) over any sequence length."""

    def __init__(self, width: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def test_toy_example_dynamic_true_compiles_one_kernel_set_for_ten_shapes() -> None:
    compiled = frontend.compile(toy_example, dynamic=True, options={"fallback_to_eager": False})
    shapes = [(8192, 1024), (3, 7), (5, 5), (64, 2), (100, 3), (17, 33), (2, 2), (1000, 9), (7, 129), (256, 256)]
    for shape in shapes:
        x = torch.randn(shape)
        y, z = compiled(x)
        torch.testing.assert_close(y, x.sin())
        torch.testing.assert_close(z, x.sin().cos())
    context = compiled.kiln_context
    assert context.graphs_compiled == 1
    assert context.recompilations == 0


def test_transformer_block_default_dynamic_compiles_at_most_twice() -> None:
    torch.manual_seed(0)
    block = Block()
    compiled = frontend.compile(block, options={"fallback_to_eager": False})
    lengths = (7, 64, 100, 128, 511, 512, 64)
    with torch.no_grad():
        for seq in lengths:
            x = torch.randn(2, seq, 32)
            torch.testing.assert_close(compiled(x), block(x), rtol=1e-4, atol=1e-4)
    assert compiled.kiln_context.graphs_compiled <= 2


def test_transformer_block_training_gradients_under_automatic_dynamic() -> None:
    # aot_eager: capture + aotgrad's joint graph over a symbolic length; the C++ kernels of the
    # symbolic backward are checked in packages/codegen-cpp/tests/test_dynamic.py (and cost seconds).
    torch.manual_seed(1)
    block = Block(width=16)
    compiled = frontend.compile(block, backend="aot_eager", options={"fallback_to_eager": False})
    for seq in (7, 64, 100, 128, 511, 512):
        x = torch.randn(2, seq, 16, requires_grad=True)
        reference = x.detach().clone().requires_grad_(True)
        out = compiled(x)
        expected = block(reference)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        grad = torch.randn_like(out)
        ours = torch.autograd.grad(out, [x, *block.parameters()], grad)
        theirs = torch.autograd.grad(expected, [reference, *block.parameters()], grad)
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
    assert compiled.kiln_context.graphs_compiled <= 2


def test_compile_profiler_names_the_guard_and_the_line_that_installed_it() -> None:
    def clipped(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 4:  # the branch installs a size guard on this line
            return x[:4] * 2
        return x + 1

    with frontend.CompileProfiler() as prof:
        profiled = frontend.compile(clipped, backend=prof, dynamic=True)
        for n in (6, 9, 3):
            x = torch.randn(n, 3)
            torch.testing.assert_close(profiled(x), clipped(x))
    report = prof.report()
    assert len(prof.recompilations) == 1
    assert "L[0].size(0) > 4" in report
    assert "L[0].size(0) = 3" in report
    assert "test_dynamic.py:" in report and "if x.shape[0] > 4:" in report


def test_mark_dynamic_through_frontend() -> None:
    compiled = frontend.compile(lambda x: torch.relu(x) * 2, backend="aot_eager", dynamic=False)
    x = torch.randn(5, 3)
    frontend.mark_dynamic(x, 0)
    torch.testing.assert_close(compiled(x), torch.relu(x) * 2)
    for n in (7, 12):
        y = torch.randn(n, 3)
        torch.testing.assert_close(compiled(y), torch.relu(y) * 2)
    assert compiled.kiln_context.graphs_compiled == 1


def test_kiln_logs_recompiles_with_the_guard_line(caplog: pytest.LogCaptureFixture) -> None:
    def halves(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] % 2 == 0:  # installs the size guard
            return x.view(2, -1).sum(0)
        return x * 2

    with frontend.config.patch(logs=frozenset({"recompiles"})):
        compiled = frontend.compile(halves, backend="eager", dynamic=True)
    with caplog.at_level(logging.WARNING, logger="kiln"):
        for n in (4, 8, 5):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), halves(x))
    assert "L[0].size(0) = 5" in caplog.text
    assert "if x.shape[0] % 2 == 0:" in caplog.text


def _half_broadcast(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    head = x.narrow(0, x.size(0) // 3, x.size(0) // 2)  # one row while size(0) is 2 or 3
    return torch.fmax(x, head) + head * 2, head.squeeze(0) - 1, head.squeeze() * 3


@pytest.mark.parametrize("dims", [(), (4,)])
def test_a_symbolic_size_of_one_broadcasts_and_squeezes(dims: tuple[int, ...]) -> None:
    # At a symbolic size s0, `head` has s0 // 2 rows: 1 for s0 in {2, 3}, as the trace guarded when it
    # broadcast `head` against `x` and squeezed it. The results have eager's shapes (the broadcast had
    # s0 // 2 rows, the squeezes kept the dim).
    torch.manual_seed(0)
    compiled = frontend.compile(_half_broadcast, dynamic=True, options={"fallback_to_eager": False})
    for rows in (2, 3):
        x = torch.randn(rows, *dims)
        for got, want in zip(compiled(x), _half_broadcast(x), strict=True):
            torch.testing.assert_close(got, want)
