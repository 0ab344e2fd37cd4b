"""Dynamic shapes through the Triton backend (CPU tier: Triton's interpreter).

Each case traces a function with ``make_fx(tracing_mode="symbolic")``, compiles it once with
``inductor_ir.compile_graph`` and ``TritonBackend``, and runs that one artifact on sizes from 2
(smaller than any block) to past a block, against eager. A counting wrapper around the backend checks
that no kernel is generated or compiled after the first time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend

SIZES = (2, 3, 7, 33, 130)


class CountingBackend:
    """A `KernelBackend` that delegates to another and counts kernel generation and compilation."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.generated = 0
        self.compiled = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, group: Any) -> Any:
        self.generated += 1
        return self.inner.generate(group)

    def compile(self, sources: Sequence[Any]) -> Any:
        self.compiled += 1
        return self.inner.compile(sources)


CASES: dict[str, tuple[Callable[..., Any], Callable[[int], list[torch.Tensor]]]] = {
    "sin_cos": (lambda x: (x.sin(), x.sin().cos()), lambda n: [torch.randn(n, n + 3)]),
    "softmax_and_layer_norm": (
        lambda x, w: (torch.softmax(x, -1), F.layer_norm(x, (x.shape[-1],), w)),
        lambda n: [torch.randn(3, n), torch.randn(n)],
    ),
    "reductions_first_dim": (lambda x: (x.sum(0), x.amax(0), x.var(0)), lambda n: [torch.randn(n, 5)]),
    "views_and_matmul": (
        lambda x, w: (x.view(x.shape[0], -1, 2).sum(-1), torch.relu(x @ w) / x.shape[1] ** 0.5),
        lambda n: [torch.randn(n, 2 * n), torch.randn(2 * n, 4)],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_compile_serves_every_size(name: str, cpu_backend: TritonBackend) -> None:
    fn, make_inputs = CASES[name]
    with torch.no_grad():
        gm = make_fx(fn, tracing_mode="symbolic", decomposition_table=inductor_ir.decompositions())(*make_inputs(9))
    fakes = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"]
    backend = CountingBackend(cpu_backend)
    compiled = inductor_ir.compile_graph(gm, fakes, backends={"cpu": backend})
    assert ".size(" in compiled.artifacts()["wrapper.py"]
    counts = (backend.generated, backend.compiled)
    for n in SIZES:
        inputs = make_inputs(n)
        expected, actual = fn(*inputs), compiled(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        for got, want in zip(actual, expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert (backend.generated, backend.compiled) == counts, "kernels were regenerated for a new size"


class _Block(torch.nn.Module):
    """A pre-norm transformer block whose sequence length is read from the input."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.fc1, self.fc2 = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = (
            t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2)
            for t in self.qkv(self.ln1(x)).chunk(3, dim=-1)
        )
        attn = torch.softmax(q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5, dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def test_transformer_block_forward_and_backward_over_symbolic_sequence_length(cpu_backend: TritonBackend) -> None:
    aotgrad = pytest.importorskip("aotgrad")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    torch.manual_seed(0)
    model = _Block()
    backend = CountingBackend(cpu_backend)
    graphs: list[Any] = []

    def compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(inductor_ir.compile_graph(gm, example_inputs, backends={"cpu": backend}))
        return graphs[-1]

    mode = FakeTensorMode(shape_env=ShapeEnv())
    dims = [DimDynamic.STATIC, DimDynamic.DYNAMIC, DimDynamic.STATIC]
    fake = mode.from_tensor(torch.randn(2, 9, 16), symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims))
    compiled = aotgrad.aot_graph(
        model, [fake.requires_grad_(True)], fw_compiler=compiler, config=aotgrad.AotConfig(fallback_to_eager=False)
    )
    counts = (len(graphs), backend.generated, backend.compiled)
    params = list(model.parameters())
    for seq in (2, 3, 5, 9, 20):
        x = torch.randn(2, seq, 16, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        out, expected = compiled(x), model(x_ref)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        grad = torch.randn_like(out)
        got = torch.autograd.grad(out, [x, *params], grad)
        want = torch.autograd.grad(expected, [x_ref, *params], grad)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert counts[0] == 2 and (len(graphs), backend.generated, backend.compiled) == counts
