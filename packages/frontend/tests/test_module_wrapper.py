"""OptimizedModule shares state, attributes and modes with the module it wraps."""

from __future__ import annotations

import torch
from torch import nn

from capture import OptimizedModule


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 3)
        self.drop = nn.Dropout(0.5)
        self.scale = 2.0
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.lin(x)) * self.scale


def _wrap(net: Net) -> OptimizedModule:
    return OptimizedModule(net, net.forward)


def test_state_dict_keys_and_parameters_are_shared() -> None:
    net = Net()
    wrapped = _wrap(net)
    assert list(wrapped.state_dict()) == list(net.state_dict())
    assert all(a is b for a, b in zip(wrapped.parameters(), net.parameters()))
    assert [n for n, _ in wrapped.named_parameters()] == [n for n, _ in net.named_parameters()]
    assert [n for n, _ in wrapped.named_buffers()] == ["count"]
    other = Net()
    wrapped.load_state_dict(other.state_dict())
    assert torch.equal(net.lin.weight, other.lin.weight)
    prefixed = {f"_orig_mod.{k}": v.clone() + 1 for k, v in other.state_dict().items()}
    wrapped.load_state_dict(prefixed)
    assert torch.equal(net.lin.weight, other.lin.weight + 1)


def test_attributes_reach_the_original() -> None:
    net = Net()
    wrapped = _wrap(net)
    assert wrapped.scale == 2.0 and wrapped.lin is net.lin
    wrapped.scale = 3.0
    assert net.scale == 3.0
    wrapped.new_attribute = "x"
    assert net.new_attribute == "x"
    assert wrapped.original is net
    assert "lin" in dir(wrapped)
    assert repr(wrapped).startswith("OptimizedModule(Net(")


def test_train_eval_apply_to_both() -> None:
    net = Net()
    wrapped = _wrap(net)
    wrapped.eval()
    assert not net.training and not wrapped.training and not net.drop.training
    x = torch.randn(4, 6)
    assert torch.equal(wrapped(x), net(x))
    wrapped.train()
    assert net.training and net.drop.training and wrapped.training


def test_optimizer_on_wrapper_updates_original() -> None:
    net = Net()
    wrapped = _wrap(net)
    before = net.lin.weight.detach().clone()
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    wrapped(torch.randn(4, 6)).sum().backward()
    optimizer.step()
    assert not torch.equal(before, net.lin.weight)
