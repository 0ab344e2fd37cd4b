"""Outputs the loss does not reach get no materialized zero gradients (autograd would fill one per
output, BatchNorm's new running statistics included, and the backward would multiply them by saved
values); the results match eager's, None gradients included."""

from __future__ import annotations

import torch
from torch.profiler import profile

import aotgrad


class _NormThenTwoHeads(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.norm(x)
        return self.head(y), y * 2


def _pair() -> tuple[_NormThenTwoHeads, _NormThenTwoHeads]:
    model = _NormThenTwoHeads()
    reference = _NormThenTwoHeads()
    reference.load_state_dict(model.state_dict())
    return model, reference


def test_gradients_match_eager_when_the_loss_reads_one_output_or_the_other() -> None:
    model, reference = _pair()
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler)
    for pick in (0, 1):
        x = torch.randn(16, 8)
        x_compiled, x_eager = x.clone().requires_grad_(), x.clone().requires_grad_()
        compiled(x_compiled)[pick].square().sum().backward()
        reference(x_eager)[pick].square().sum().backward()
        torch.testing.assert_close(x_compiled.grad, x_eager.grad)
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            # A parameter the loss does not reach: None in eager, and from the compiled backward.
            if q.grad is None:
                assert p.grad is None, name
            else:
                torch.testing.assert_close(p.grad, q.grad, msg=name)
        torch.testing.assert_close(model.norm.running_var, reference.norm.running_var)
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)


def test_backward_fills_no_zero_gradients_for_running_statistics() -> None:
    model, _ = _pair()
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler)
    x = torch.randn(16, 8, requires_grad=True)
    compiled(x)[0].sum().backward()  # compile and run once
    logits, _ = compiled(x)
    with profile() as trace:
        logits.sum().backward()
    zeros = [event for event in trace.events() if event.name in ("aten::zeros", "aten::full")]
    # None for the three BatchNorm statistics (autograd would have filled one per output), nor for
    # the differentiable `y * 2` the loss ignores: the backward takes it as a structural zero.
    assert not zeros, [event.cpu_parent.name if event.cpu_parent else None for event in zeros]
