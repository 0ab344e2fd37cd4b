"""Masks decided once per vector: rotary embeddings' ``rotate_half`` (``cat(-x[..., h:], x[..., :h])``)
and its backward (``slice_scatter`` into zeros) mask their loads with ``x % d >= h``; where the vector's
lanes divide ``d`` and ``h``, every vector lies wholly on one side, and the kernel tests lane 0's index
instead of comparing int64 lanes (codegen/lanes.py's ``lane_uniform_sign``)."""

from __future__ import annotations

import itertools
import random
import re

import pytest
import sympy
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend
from codegen_cpp.codegen.lanes import VECTOR_LANES, lane_uniform_sign
from codegen_cpp.codegen.unused import drop_unused_values
from inductor_ir import FloorDiv, ModularIndexing


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


def rope_backward(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    _, vjp = torch.func.vjp(lambda t: rope(t, cos, sin), x)
    return vjp(grad)[0]  # type: ignore[no-any-return]


def _compile(fn: object, inputs: list[torch.Tensor], backend: CppBackend) -> tuple[inductor_ir.CompiledGraph, str]:
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*inputs)  # type: ignore[arg-type]
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cpu": backend})
    return compiled, "\n".join(s.source for s in compiled.sources)


def _uniform(head_dim: int) -> bool:
    """Whether rotate_half's masks of this head dim are the same in all lanes of every vector."""
    return head_dim % VECTOR_LANES == 0 and (head_dim // 2) % VECTOR_LANES == 0


@pytest.mark.parametrize(("shape", "head_dim"), [((2, 4, 8), 32), ((3, 5, 7), 64), ((3, 5, 7), 24), ((2, 3, 9), 40), ((1, 3, 5), 48)])
def test_rotary_embedding_forward_and_backward_match_eager_bit_for_bit(
    backend: CppBackend, shape: tuple[int, int, int], head_dim: int
) -> None:
    batch, heads, seq = shape
    generator = torch.Generator().manual_seed(head_dim)
    x, grad = (torch.randn(batch, heads, seq, head_dim, generator=generator) for _ in range(2))
    cos, sin = (torch.randn(seq, head_dim, generator=generator) for _ in range(2))

    forward, forward_source = _compile(rope, [x, cos, sin], backend)
    backward, backward_source = _compile(rope_backward, [x, cos, sin, grad], backend)
    for source in (forward_source, backward_source):
        # The non-uniform path (a mask straddling vectors) keeps its per-lane masked loads.
        assert ("kiln::any_lane" in source) == (not _uniform(head_dim))
        if _uniform(head_dim):
            assert "kiln::i64x" not in source  # no int64 lanes of indices left

    for _ in range(2):  # fresh inputs on the second call
        expected, expected_grad = rope(x, cos, sin), rope_backward(x, cos, sin, grad)
        result, result_grad = forward(x, cos, sin), backward(x, cos, sin, grad)
        assert torch.equal(result, expected)
        assert torch.equal(result_grad, expected_grad)
        x, grad = torch.randn_like(x), torch.randn_like(grad)


def test_uniform_rotate_half_is_decided_per_vector(backend: CppBackend) -> None:
    """The structural change: no int64 lanes, no lane tests, no per-lane masked loads or selects."""
    x, grad = torch.randn(2, 4, 8, 64), torch.randn(2, 4, 8, 64)
    cos, sin = torch.randn(8, 64), torch.randn(8, 64)
    for fn, inputs in ((rope, [x, cos, sin]), (rope_backward, [x, cos, sin, grad])):
        _, source = _compile(fn, inputs, backend)
        tail = re.search(r"for \(int64_t (\w+) = \1_vec_end;", source)
        assert tail is not None
        vector_loop = source[: tail.start()]  # the vector loop, before its scalar tail
        for text in ("kiln::iota", "kiln::any_lane", "kiln::gather_masked", "kiln::where", "kiln::i64x"):
            assert text not in vector_loop, text
        # Lane 0's index decides: `if (tmpN)` with tmpN = ((x1 % 64) >= 32) or the like.
        assert re.search(r"= \(\(?x\d+( % 64\))?( - 32)? (>=|<) (0|32)\);", vector_loop), vector_loop
        assert re.search(r"if \(tmp\d+\) \{", vector_loop)


def _lanes_agree(expr: sympy.Expr, var: sympy.Symbol, other: sympy.Symbol, lanes: int) -> bool:
    """Whether ``expr >= 0`` has one truth value across the lanes of every vector, by enumeration."""
    function = sympy.lambdify((var, other), expr, modules=[{"FloorDiv": lambda a, b: a // b,
                                                            "ModularIndexing": lambda a, d, m: (a // d) % m}])
    for block, value in itertools.product(range(12), range(5)):
        truths = {function(lanes * block + lane, value) >= 0 for lane in range(lanes)}
        if len(truths) > 1:
            return False
    return True


def test_lane_uniform_sign_is_sound() -> None:
    """Every expression the proof accepts has one truth value per vector (checked by enumeration), and
    rotate_half's, concatenation's and slice_scatter's masks of multiples of the lanes are accepted."""
    x, y = sympy.symbols("x1 x0", integer=True, nonnegative=True)
    lanes = 8
    accepted = [
        ModularIndexing(x, 1, 32) - 16,
        x - 16,
        ModularIndexing(x + 64 * y, 1, 32) - 16 * y,
        15 - ModularIndexing(x, 1, 16),
        8 * FloorDiv(x, 32) + ModularIndexing(x, 1, 32) - 24,
    ]
    for expr in accepted:
        assert lane_uniform_sign(sympy.expand(expr), x, lanes), expr
        assert _lanes_agree(expr, x, y, lanes), expr
    random.seed(0)
    terms = [
        lambda: ModularIndexing(x, 1, random.choice([8, 12, 16, 24, 32])),
        lambda: ModularIndexing(x + random.choice([0, 4, 8]) * y, 1, random.choice([8, 16, 20])),
        lambda: FloorDiv(x, random.choice([2, 8, 16])),
        lambda: random.choice([1, -1, 2]) * x,
        lambda: random.choice([0, 4, 8, 16]) * y,
    ]
    for _ in range(300):
        expr = sympy.expand(sum(random.choice(terms)() for _ in range(random.randint(1, 2))) - random.randint(0, 33))
        if lane_uniform_sign(expr, x, lanes):
            assert _lanes_agree(expr, x, y, lanes), expr


def test_unread_values_are_dropped_but_not_checks_or_loads() -> None:
    lines = [
        "auto tmp1 = kiln::iota<kiln::i64x>((x1 % 32));",
        "auto tmp2 = (tmp1 - kiln::splat<kiln::i64x>(16));",
        "const auto tmp3 = kiln::checked_index<true>(tmp9, 10, 1);",
        "auto tmp4 = kiln::load(in_ptr0 + x1);",
        "auto tmp5 = ((x1 % 32) >= 16);",
        "if (tmp5) {",
        "}",
    ]
    assert drop_unused_values(lines) == lines[2:]


def _pad_rows(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(x, (0, 0, 2, 3)) * 3.0  # the mask moves with the row only


def _pad_of_cat(x: torch.Tensor) -> torch.Tensor:
    # Nested masks: the padding's around the concatenation's.
    return torch.nn.functional.pad(torch.cat((x, -x[:, :16]), dim=1), (16, 32)) + 1.0


def _max_of_cat(x: torch.Tensor) -> torch.Tensor:
    # A masked body inside a reduction loop (a max: exact in any order, as eager's sum is not).
    return torch.cat((x[:, 16:], x[:, :16] * 2.0), dim=1).amax(1)


def _column_max_of_cat(x: torch.Tensor) -> torch.Tensor:
    # Vectorized across outputs (columns), in tiles: the mask's condition is kept per output vector.
    return rotate_half(x * 2.0).amax(0)


def _rotate_between(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, rotate_half(x), x * 0.5).clone()


@pytest.mark.parametrize("fn", [_pad_rows, _pad_of_cat, _max_of_cat, _column_max_of_cat, _rotate_between])
@pytest.mark.parametrize("width", [64, 37, 48])
def test_other_masks_match_eager_bit_for_bit(backend: CppBackend, fn: object, width: int) -> None:
    """Masks decided per vector (row padding, concatenations at multiples of the lanes) and
    straddling ones (odd widths) nested in each other and inside a reduction loop."""
    x = torch.randn(7, width)
    compiled, _ = _compile(fn, [x], backend)
    for _ in range(2):
        assert torch.equal(compiled(x), fn(x))  # type: ignore[operator]
        x = torch.randn_like(x)
