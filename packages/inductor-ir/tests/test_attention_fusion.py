"""Hand-written attention (softmax(q @ k.T * scale) @ v) becomes one fused attention call on CPU."""

from __future__ import annotations

import pytest
import torch
from inductor_ir_testing import check_interpret, rand, rewritten

import inductor_ir

aten = torch.ops.aten
FUSED = aten._scaled_dot_product_flash_attention_for_cpu.default
LONG = 96


def _ops(program: inductor_ir.Program) -> list[object]:
    return [b.op for b in program.buffers if isinstance(b, inductor_ir.ExternKernel)]


def _heads(qkv: torch.Tensor, heads: int) -> list[torch.Tensor]:
    batch, seq, width = qkv.shape
    return [t.view(batch, seq, heads, width // (3 * heads)).transpose(1, 2) for t in qkv.chunk(3, dim=-1)]


@pytest.mark.parametrize("scaling", ["div", "mul", "none"])
def test_hand_written_attention_is_one_fused_call(scaling: str) -> None:
    def fn(qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = _heads(qkv, 2)
        scores = q @ k.transpose(-1, -2)
        scores = scores / 4.0 if scaling == "div" else scores * 0.25 if scaling == "mul" else scores
        out = torch.softmax(scores, dim=-1) @ v
        return out.transpose(1, 2).reshape(qkv.shape[0], qkv.shape[1], -1) * 2.0

    program = check_interpret(fn, lambda: [rand(2, LONG, 48)])
    assert _ops(program) == [FUSED]  # no bmm left; q, k, v read in place from the projection


def test_attention_whose_probabilities_are_used_again_is_left_alone() -> None:
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        probabilities = torch.softmax(q @ k.transpose(-1, -2) / 3.0, dim=-1)
        return probabilities @ v, probabilities.sum(-1)

    program = check_interpret(fn, lambda: [rand(1, 2, LONG, 8), rand(1, 2, LONG, 8), rand(1, 2, LONG, 8)])
    assert FUSED not in _ops(program) and aten.bmm.default in _ops(program)


def test_keys_shared_by_heads_are_read_through_a_broadcast_view() -> None:
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.expand(1, 2, -1, -1).transpose(-1, -2), dim=-1) @ v

    program = check_interpret(fn, lambda: [rand(1, 2, LONG, 8), rand(1, 1, LONG, 8), rand(1, 2, LONG, 8)])
    assert _ops(program) == [FUSED]


def test_a_matmul_broadcast_is_left_alone() -> None:
    # q has one head, k two: the first matmul broadcasts q (an expand that is not a no-op).
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v

    program = check_interpret(fn, lambda: [rand(1, 1, LONG, 8), rand(1, 2, LONG, 8), rand(1, 2, LONG, 8)])
    assert FUSED not in _ops(program)


def test_symbolic_sequence_length() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1) @ v

    example = [rand(1, 2, 9, 4), rand(1, 2, 9, 4), rand(1, 2, 9, 4)]
    gm = make_fx(fn, tracing_mode="symbolic")(*example)
    program = inductor_ir.lower(rewritten(gm), example)
    assert _ops(program) == [FUSED]
    fresh = [rand(1, 2, 13, 4), rand(1, 2, 13, 4), rand(1, 2, 13, 4)]
    (got,) = inductor_ir.interpret(program, fresh)
    torch.testing.assert_close(got, fn(*fresh), rtol=1e-5, atol=1e-5)


def test_training_through_aotgrad_keeps_gradients_exact() -> None:
    aotgrad = pytest.importorskip("aotgrad")

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return (torch.softmax(q @ k.transpose(-1, -2) * 0.3, dim=-1) @ v).tanh().sum()

    def compiler(gm: torch.fx.GraphModule, example: list[torch.Tensor]) -> object:
        program = inductor_ir.lower(rewritten(gm), example)
        return lambda *args: inductor_ir.interpret(program, list(args))

    compiled = aotgrad.aot_function(
        fn, fw_compiler=compiler, decompositions=inductor_ir.decompositions(),
        config=aotgrad.AotConfig(fallback_to_eager=False),
    )  # fmt: skip
    inputs = [rand(1, 2, LONG, 8).requires_grad_() for _ in range(3)]
    expected_inputs = [t.detach().clone().requires_grad_() for t in inputs]
    compiled(*inputs).backward()
    fn(*expected_inputs).backward()
    for got, expected in zip(inputs, expected_inputs):
        torch.testing.assert_close(got.grad, expected.grad, rtol=1e-4, atol=1e-5)
