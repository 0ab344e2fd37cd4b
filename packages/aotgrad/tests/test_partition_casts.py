"""min_cut's choice between saving and recomputing a dtype cast of a graph input (a parameter).

A parameter's bf16 copy that feeds a matmul is saved (recomputing it would read the fp32 weight
again and write the copy once more, just for the backward's GEMM to read it); a cast that only
fuses into pointwise ops is recomputed (no fewer bytes either way, and it holds no memory).
"""

from __future__ import annotations

import torch
import torch.fx

import aotgrad
from aotgrad.compile import trace_region
from aotgrad.decompositions import default_decompositions
from aotgrad.tracing import JointGraph

aten = torch.ops.aten
CASTS = (aten._to_copy.default, torch.ops.prims.convert_element_type.default)


def _joint(fn, inputs: list[torch.Tensor]) -> JointGraph:
    mask = [x.requires_grad for x in inputs]
    joint = trace_region(fn, inputs, mask, default_decompositions()).joint
    assert joint is not None
    return joint


def _saved(forward: torch.fx.GraphModule, joint: JointGraph) -> list[torch.fx.Node]:
    return list(list(forward.graph.nodes)[-1].args[0][joint.num_fwd_outputs :])


def _casts_of_placeholders(gm: torch.fx.GraphModule, dtype: torch.dtype) -> list[torch.fx.Node]:
    """Casts to `dtype` in `gm` whose source is (a view of) one of its primal placeholders (a
    parameter or input the forward saved as it is; not a tangent, not a saved activation)."""
    found = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in CASTS and node.meta["val"].dtype == dtype:
            source = node.args[0]
            while source.op == "call_function" and source.target.is_view:
                source = source.args[0]
            if source.op == "placeholder" and source.name.startswith("primals"):
                found.append(node)
    return found


def _run_partition(joint: JointGraph, inputs: list[torch.Tensor], tangent: torch.Tensor):
    forward, backward = aotgrad.min_cut(joint)
    outs = forward(*[x.detach() for x in inputs])
    grads = backward(*outs[joint.num_fwd_outputs :], tangent)
    return outs[: joint.num_fwd_outputs], grads


def test_bf16_copy_of_a_parameter_feeding_a_matmul_is_saved_not_recomputed() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x.to(torch.bfloat16) @ w.to(torch.bfloat16).t()).float().tanh()

    torch.manual_seed(0)
    # x needs its gradient too, so the backward's `grad @ w` reads the weight's copy.
    x, w = torch.randn(16, 32, requires_grad=True), torch.randn(24, 32, requires_grad=True)
    joint = _joint(fn, [x, w])
    forward, backward = aotgrad.min_cut(joint)
    saved = _saved(forward, joint)
    copies = [n for n in saved if n.op == "call_function" and n.target in CASTS and n.meta["val"].dtype == torch.bfloat16]
    assert sorted(tuple(n.meta["val"].shape) for n in copies) == [(16, 32), (24, 32)], saved
    # The backward reads the copies: no fp32 weight to read again, no cast kernel of its own.
    assert not any(n.op == "placeholder" for n in saved), saved
    assert not _casts_of_placeholders(backward, torch.bfloat16)

    tangent = torch.randn(16, 24)
    (out,), grads = _run_partition(joint, [x, w], tangent)
    expected_out = fn(x, w)
    expected = torch.autograd.grad(expected_out, [x, w], tangent)
    torch.testing.assert_close(out, expected_out.detach())
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


class _Block(torch.nn.Module):
    """RMSNorm, then a SiLU-gated MLP, all under bf16 autocast: LLaMA's parameter casts in small."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = torch.nn.Parameter(torch.randn(dim))
        self.gate, self.up = torch.nn.Linear(dim, 2 * dim, bias=False), torch.nn.Linear(dim, 2 * dim, bias=False)
        self.down = torch.nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
            return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def _block_fn(block: _Block):
    names = [n for n, _ in block.named_parameters()]

    def fn(*flat: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(block, dict(zip(names, flat[:-1])), (flat[-1],))

    return fn


def test_autocast_linear_weights_cross_as_bf16_and_gradients_match_eager() -> None:
    torch.manual_seed(0)
    block = _Block(32)
    params = list(block.parameters())
    x = torch.randn(4, 8, 32, requires_grad=True)
    fn = _block_fn(block)
    joint = _joint(fn, [*params, x])
    forward, backward = aotgrad.min_cut(joint)
    saved = _saved(forward, joint)
    weight_copies = {
        tuple(n.meta["val"].shape) for n in saved if n.op == "call_function" and n.meta["val"].dtype == torch.bfloat16
    }
    # The three linear weights' bf16 copies are saved (as the weight or its transposed view).
    for weight in (block.gate.weight, block.up.weight, block.down.weight):
        assert tuple(weight.shape) in weight_copies or tuple(weight.t().shape) in weight_copies, (weight.shape, saved)
    assert not _casts_of_placeholders(backward, torch.bfloat16)

    tangent = torch.randn(4, 8, 32)
    (out,), grads = _run_partition(joint, [*params, x], tangent)
    expected_out = fn(*params, x)
    expected = torch.autograd.grad(expected_out, [*params, x], tangent)
    torch.testing.assert_close(out, expected_out.detach())
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_cast_that_only_fuses_into_pointwise_ops_is_recomputed() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x.to(torch.bfloat16) * w.to(torch.bfloat16)).float().sin()

    torch.manual_seed(0)
    x, w = torch.randn(16, 32), torch.randn(32, requires_grad=True)
    joint = _joint(fn, [x, w])
    forward, backward = aotgrad.min_cut(joint)
    saved = _saved(forward, joint)
    # Saving the copy would write 2 bytes an element in the forward and read 2 in the backward;
    # recomputing it reads the fp32 weight (4) inside the backward's fused kernel: no saving.
    assert not any(n.op == "call_function" and n.target in CASTS and n.meta["val"].shape == (32,) for n in saved)
    assert _casts_of_placeholders(backward, torch.bfloat16)
    tangent = torch.randn(16, 32)
    _, grads = _run_partition(joint, [x, w], tangent)
    torch.testing.assert_close(grads[-1], torch.autograd.grad(fn(x, w), [w], tangent)[0])


def test_autocast_module_trains_like_eager_through_aot_module() -> None:
    torch.manual_seed(0)
    block = _Block(32)
    reference = _Block(32)
    reference.load_state_dict(block.state_dict())
    compiled = aotgrad.aot_module(block, fw_compiler=aotgrad.eager_compiler)
    x = torch.randn(4, 8, 32)
    tangent = torch.randn(4, 8, 32)
    (compiled(x) * tangent).sum().backward()
    (reference(x) * tangent).sum().backward()
    for (name, got), want in zip(block.named_parameters(), reference.parameters()):
        torch.testing.assert_close(got.grad, want.grad, msg=name)
