"""Graph counts against the reference, torch._dynamo.explain, on the seed programs (tests only)."""

from __future__ import annotations

import pytest
import torch

import capture


def bar(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def no_break(x, y):
    return torch.sin(x) + torch.cos(y)


def two_breaks(x):
    y = x * 2
    print("one")
    y = y + 1
    print("two")
    return y.relu()


def with_item(x):
    y = x * 2
    s = y.sum().item()
    return y * s


@pytest.mark.parametrize("fn", [bar, no_break, two_breaks, with_item])
def test_graph_and_break_counts_match_dynamo(fn) -> None:
    dynamo = pytest.importorskip("torch._dynamo")
    torch.manual_seed(0)
    args = (torch.randn(10), torch.randn(10)) if fn.__code__.co_argcount == 2 else (torch.randn(10),)
    dynamo.reset()
    # Both keep `.item()` in the graph (capture's default; TorchDynamo's when configured so).
    with dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        reference = dynamo.explain(fn)(*args)
    ours = capture.explain(fn, *args)
    assert ours.graph_count == reference.graph_count
    assert ours.graph_break_count == reference.graph_break_count
