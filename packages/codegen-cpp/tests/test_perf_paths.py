"""The fast paths of the C++ backend: each still computes eager's result, and takes the fast form.

Behaviour only (no timings): index simplification with loop ranges, integer powers as
multiplications, permuted copies as vector loads, ``arange`` indices used as plain indices.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
import sympy
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend
from codegen_cpp.codegen.indexing import simplify_index, upper_bound
from codegen_cpp.codegen.lanes import VECTOR_LANES
from inductor_ir import FloorDiv, ModularIndexing

X0, X1 = (sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(2))


def _evaluate(expr: sympy.Expr, env: dict[sympy.Symbol, int]) -> int:
    """`expr` at integer values of its symbols (FloorDiv and ModularIndexing evaluate exactly)."""
    return int(expr.subs(env))


@pytest.mark.parametrize(
    "expr",
    [
        FloorDiv(128 * X0 + X1, 8192),
        ModularIndexing(X0 + FloorDiv(X1, 128), 1, 64),
        8192 * FloorDiv(X0, 64) + 128 * ModularIndexing(X0, 1, 64) + X1,
        ModularIndexing(512 * X0 + X1, 32, 7),
        FloorDiv(3 * X0 + X1, 5),
        ModularIndexing(X0 + X1 - 3, 4, 8),
        FloorDiv(2 * X0 - X1 + 300, 4),
        FloorDiv(64 * X0 + 3 * X1, 64),
    ],
)
def test_simplified_index_has_the_same_value_everywhere(expr: sympy.Expr) -> None:
    ranges = {X0: sympy.Integer(256), X1: sympy.Integer(128)}
    simple = simplify_index(expr, ranges)
    rng = random.Random(0)
    points = [(0, 0), (255, 127)] + [(rng.randrange(256), rng.randrange(128)) for _ in range(500)]
    for a, b in points:
        env = {X0: a, X1: b}
        assert _evaluate(simple, env) == _evaluate(expr, env), (expr, simple, env)


def test_simplification_removes_what_the_ranges_make_trivial() -> None:
    ranges = {X0: sympy.Integer(256), X1: sympy.Integer(128)}
    assert simplify_index(FloorDiv(128 * X0 + X1, 8192), ranges) == FloorDiv(X0, 64)
    assert simplify_index(ModularIndexing(X0 + FloorDiv(X1, 128), 1, 64), ranges) == ModularIndexing(X0, 1, 64)
    assert simplify_index(8192 * FloorDiv(X0, 64) + 128 * ModularIndexing(X0, 1, 64) + X1, ranges) == 128 * X0 + X1
    assert upper_bound(3 * X0 + X1, ranges) == 3 * 255 + 127
    assert upper_bound(X0 - X1, ranges) is None
    # a product with no numeric coefficient (a stepped slice of a stack at a symbolic size) was an
    # endless recursion (fuzz ccecec9bfc)
    assert upper_bound(X0 * X1, ranges) == 255 * 127
    assert upper_bound(2 * X0 * X1 + 1, ranges) == 2 * 255 * 127 + 1


def _compile(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor], backend: CppBackend) -> tuple[object, str]:
    gm = make_fx(fn)(*inputs)
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cpu": backend})
    return compiled, "\n".join(source.source for source in compiled.sources)


def _run(compiled: object, *inputs: torch.Tensor) -> torch.Tensor:
    result = compiled(*inputs)  # type: ignore[operator]
    return result[0] if isinstance(result, (tuple, list)) else result


def test_gelu_tanh_power_is_multiplications(backend: CppBackend) -> None:
    def gelu(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))

    x = torch.randn(37, 53) * 3
    compiled, source = _compile(gelu, [x], backend)
    assert "kiln::pow" not in source
    torch.testing.assert_close(_run(compiled, x), gelu(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("exponent", [-2.0, -1.0, 0.0, 0.5, 2.0, 4.0, 2.5])
def test_powers_match_eager(backend: CppBackend, exponent: float) -> None:
    x = torch.rand(40, 19) + 0.5
    compiled, _ = _compile(lambda t: torch.pow(t, exponent), [x], backend)
    torch.testing.assert_close(_run(compiled, x), torch.pow(x, exponent), rtol=1e-5, atol=1e-6)


def test_permuted_copy_loads_vectors(backend: CppBackend) -> None:
    # Attention's "transpose heads back, then reshape": a permute whose result is contiguous.
    def merge_heads(x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 1, 3).reshape(4 * 64, 2 * 64) * 2.0

    x = torch.randn(4, 64, 2, 64).permute(0, 2, 1, 3)  # (4, 2, 64, 64), strides of (4, 64, 2, 64)
    compiled, source = _compile(merge_heads, [x], backend)
    assert "kiln::gather" not in source
    torch.testing.assert_close(_run(compiled, x), merge_heads(x))


def test_arange_index_is_a_plain_index(backend: CppBackend) -> None:
    # A causal mask built by indexing with arange (as transformers' masks are).
    def mask(ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1])
        rows = ids[:, positions]
        return torch.where(positions[None, :, None] >= positions[None, None, :], rows[:, :, None].float(), -1.0)

    ids = torch.randint(0, 50, (4, 64))
    compiled, source = _compile(mask, [ids], backend)
    assert "kiln::gather" not in source
    torch.testing.assert_close(_run(compiled, ids), mask(ids))


def test_embedding_sum_and_norm_match_eager(backend: CppBackend) -> None:
    # GPT-2's first layer norm: token + position embeddings, then a normalization.
    def embed(ids: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor) -> torch.Tensor:
        h = wte[ids] + wpe[torch.arange(ids.shape[1])]
        return torch.nn.functional.layer_norm(h, (h.shape[-1],))

    ids, wte, wpe = torch.randint(0, 100, (4, 64)), torch.randn(100, 128), torch.randn(64, 128)
    compiled, _ = _compile(embed, [ids, wte, wpe], backend)
    torch.testing.assert_close(_run(compiled, ids, wte, wpe), embed(ids, wte, wpe), rtol=1e-4, atol=1e-5)


def test_source_files_exist(backend: CppBackend, cache_dir: Path) -> None:
    x = torch.randn(33)
    compiled, _ = _compile(lambda t: t.sin() + 1, [x], backend)
    torch.testing.assert_close(_run(compiled, x), x.sin() + 1)
    assert backend.last_library is not None and backend.last_library.exists()


@pytest.mark.parametrize("widths", [(32, 48, 16), (5, 20, 7)])
def test_concatenation_matches_eager(backend: CppBackend, widths: tuple[int, ...]) -> None:
    # Masked loads: whole vectors inside one input are plain loads, straddling ones gathers. Where
    # every boundary is a multiple of the vector's lanes (32 and 80), no vector straddles one: each
    # vector's mask is decided once, from lane 0's column (test_uniform_masks.py).
    def concat(*parts: torch.Tensor) -> torch.Tensor:
        return torch.cat([p * 2.0 for p in parts], dim=1) + 1.0

    parts = [torch.randn(9, w) for w in widths]
    compiled, source = _compile(concat, parts, backend)
    boundaries = [sum(widths[: k + 1]) for k in range(len(widths) - 1)]
    assert ("kiln::any_lane" in source) == any(b % VECTOR_LANES for b in boundaries)
    torch.testing.assert_close(_run(compiled, *parts), concat(*parts))


def test_padding_matches_eager(backend: CppBackend) -> None:
    def pad(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x, (3, 21)) * 0.5

    x = torch.randn(6, 40)
    compiled, _ = _compile(pad, [x], backend)
    torch.testing.assert_close(_run(compiled, x), pad(x))
