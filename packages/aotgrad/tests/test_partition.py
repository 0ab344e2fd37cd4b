"""The partitioners on their own: min_cut saves fewer bytes, never recomputes expensive or random ops."""

from __future__ import annotations

import pytest
import torch
import torch.fx
from aotgrad_helpers import TransformerBlock

import aotgrad
from aotgrad.compile import trace_region
from aotgrad.decompositions import default_decompositions
from aotgrad.partition.maxflow import INFINITE, FlowNetwork
from aotgrad.report import measure_saved
from aotgrad.tracing import JointGraph
from aotgrad.tracing.graph_passes import is_random

aten = torch.ops.aten
EXPENSIVE = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.convolution.default}


def _joint(fn, inputs: list[torch.Tensor]) -> JointGraph:
    mask = [x.requires_grad for x in inputs]
    joint = trace_region(fn, inputs, mask, default_decompositions()).joint
    assert joint is not None
    return joint


def _block_joint() -> JointGraph:
    block = TransformerBlock(dim=64, heads=4, p=0.1).train()
    names = [n for n, _ in block.named_parameters()]
    params = list(block.parameters())

    def fn(*flat: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(block, dict(zip(names, flat[: len(names)])), flat[len(names) :])

    return _joint(fn, [*params, torch.randn(4, 16, 64, requires_grad=True)])


@pytest.fixture(scope="module")
def block_joint() -> JointGraph:
    return _block_joint()


def _targets(gm: torch.fx.GraphModule) -> list[object]:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_min_cut_saves_markedly_fewer_bytes_on_a_transformer_block(block_joint: JointGraph) -> None:
    plain = measure_saved(block_joint, aotgrad.save_all)
    cut = measure_saved(block_joint, aotgrad.min_cut)
    assert cut.activation_bytes < 0.8 * plain.activation_bytes, (plain, cut)
    assert cut.recomputed_ops > 0


def test_min_cut_never_recomputes_matmuls_or_random_ops(block_joint: JointGraph) -> None:
    forward, backward = aotgrad.min_cut(block_joint)
    _, plain_backward = aotgrad.save_all(block_joint)
    count = lambda gm, ops: sum(t in ops for t in _targets(gm))  # noqa: E731
    # The backward's matmuls are exactly those of the plain split: the gradient matmuls, no recompute.
    assert count(backward, EXPENSIVE) == count(plain_backward, EXPENSIVE)
    assert not any(is_random(n) for n in backward.graph.nodes)
    assert any(is_random(n) for n in forward.graph.nodes)


def test_partitions_compute_the_same_gradients() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x @ w)
        return (h.sigmoid() * h.tanh()).sum(-1)

    x, w = torch.randn(8, 16, requires_grad=True), torch.randn(16, 16, requires_grad=True)
    joint = _joint(fn, [x, w])
    tangent = torch.randn(8)
    results = []
    for partition in (aotgrad.save_all, aotgrad.min_cut):
        forward, backward = partition(joint)
        outs = forward(x.detach(), w.detach())
        saved = outs[joint.num_fwd_outputs :]
        results.append((outs[0], backward(*saved, tangent)))
    expected = torch.autograd.grad(fn(x, w), [x, w], tangent)
    for out, grads in results:
        torch.testing.assert_close(out, fn(x, w).detach())
        for g, e in zip(grads, expected):
            torch.testing.assert_close(g, e)


def test_pointwise_chain_is_recomputed_not_saved() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.sin().cos().exp().sum()

    joint = _joint(fn, [torch.randn(32, 32, requires_grad=True)])
    forward, _ = aotgrad.min_cut(joint)
    saved = list(forward.graph.nodes)[-1].args[0][joint.num_fwd_outputs :]
    assert [n.op for n in saved] == ["placeholder"]  # only x: sin/cos/exp come back in the backward
    assert measure_saved(joint, aotgrad.save_all).activation_bytes > 0


def test_max_flow_min_cut_on_a_known_network() -> None:
    net = FlowNetwork()
    for tail, head, cap in [("s", "a", 10), ("s", "b", 5), ("a", "b", 15), ("a", "t", 4), ("b", "t", 10)]:
        net.add_edge(tail, head, cap)
    value, source_side = net.min_cut("s", "t")
    assert value == 14 and source_side == {"s", "a", "b"}
    net2 = FlowNetwork()
    net2.add_edge("s", "m", INFINITE)
    net2.add_edge("m", "t", 7)
    assert net2.min_cut("s", "t") == (7, {"s", "m"})


def test_saved_bytes_report_on_a_module() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    report = aotgrad.saved_bytes_report(model, [torch.randn(16, 32)])
    assert report.min_cut.total_bytes <= report.save_all.total_bytes
    assert "min_cut" in str(report) and "save_all" in str(report)


def test_min_cut_saves_dropout_masks_as_bool(block_joint: JointGraph) -> None:
    forward, backward = aotgrad.min_cut(block_joint)
    saved = list(forward.graph.nodes)[-1].args[0][block_joint.num_fwd_outputs :]
    masks = [n for n in saved if n.meta["val"].dtype == torch.bool]
    assert len(masks) == 3  # attention, projection and MLP dropout
    placeholders = [n for n in backward.graph.nodes if n.op == "placeholder"]
    assert sum(n.meta["val"].dtype == torch.bool for n in placeholders) == 3


def test_min_cut_never_recomputes_convolutions() -> None:
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    names = [n for n, _ in conv.named_parameters()]

    def fn(*flat: torch.Tensor) -> torch.Tensor:
        y = torch.func.functional_call(conv, dict(zip(names, flat[:2])), (flat[2],))
        return torch.nn.functional.silu(y).pow(2).mean()

    joint = _joint(fn, [*conv.parameters(), torch.randn(2, 3, 8, 8, requires_grad=True)])
    convolutions = lambda gm: sum(t is aten.convolution.default for t in _targets(gm))  # noqa: E731
    forward, backward = aotgrad.min_cut(joint)
    assert convolutions(forward) == 1 and convolutions(backward) == 0
    assert (
        measure_saved(joint, aotgrad.min_cut).activation_bytes
        <= measure_saved(joint, aotgrad.save_all).activation_bytes
    )


def _residual_stack(x: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
    # A pre-norm residual stream: h_k = h_{k-1} + norm(h_{k-1}) @ w_k; each add is cheap to recompute.
    h = x
    for w in weights:
        normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = h + normed @ w
    return h.sum()


def _bytes(node: torch.fx.Node) -> int:
    value = node.meta["val"]
    return value.numel() * value.element_size()


def test_min_cut_rebuilds_no_value_from_more_than_three_large_saved_tensors() -> None:
    torch.manual_seed(0)
    inputs = [
        torch.randn(64, 32, requires_grad=True),
        *(torch.randn(32, 32, requires_grad=True) for _ in range(8)),
    ]
    joint = _joint(_residual_stack, inputs)
    forward, backward = aotgrad.min_cut(joint)
    # In the backward, a value that does not depend on the tangents is a recomputed one; its frontier
    # is the saved values it is rebuilt from. Without the limit the last layer's residual came back
    # from the input and all eight matmul outputs.
    placeholders = [n for n in backward.graph.nodes if n.op == "placeholder"]
    num_saved = len(placeholders) - joint.num_fwd_outputs
    saved = set(placeholders[:num_saved])
    frontier: dict[torch.fx.Node, set[torch.fx.Node]] = {n: {n} for n in saved}
    widest = 0
    for node in backward.graph.nodes:
        if node.op != "call_function" or not all(p in frontier for p in node.all_input_nodes):
            continue
        frontier[node] = set().union(*(frontier[p] for p in node.all_input_nodes))
        if isinstance(node.meta.get("val"), torch.Tensor):
            widest = max(widest, sum(4 * _bytes(p) >= _bytes(node) for p in frontier[node]))
    assert 1 <= widest <= 3
    tangent = torch.randn(())
    outs = forward(*(t.detach() for t in inputs))
    grads = backward(*outs[joint.num_fwd_outputs :], tangent)
    expected = torch.autograd.grad(_residual_stack(*inputs), inputs, tangent)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)
