"""Training a CPU convolution net channels-last (``layout_policy.TRAINING_CHANNELS_LAST``, on by
default): the forward returns its saved feature maps channels-last, the backward is compiled for
them, and every result equals eager's; from the graph cache too, and when the compiled forward
falls back to eager on its first call. A residual net's gradients match eager's both ways, on an
input where no pre-activation sits within float32's rounding of zero (there any summation order
may flip a ReLU mask, eager's own included)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

import frontend
import frontend.graph_cache.lookup as lookup
import inductor_ir
import inductor_ir.layout_policy as layout_policy
from frontend.backends.inductor import _SavedLayouts

STRICT = {"fallback_to_eager": False}


def _net() -> torch.nn.Module:
    torch.manual_seed(0)

    def block(fan_in: int, fan_out: int, stride: int) -> list[torch.nn.Module]:
        conv = torch.nn.Conv2d(fan_in, fan_out, 3, stride=stride, padding=1, bias=False)
        return [conv, torch.nn.BatchNorm2d(fan_out), torch.nn.ReLU()]

    return torch.nn.Sequential(
        *block(3, 16, 1),
        *block(16, 24, 2),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(24, 5),
    )


def _step(model: torch.nn.Module, fn: Any, x: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_(True)
    out = fn(x)
    cotangent = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    (out * cotangent).sum().backward()
    result = {"out": out.detach(), "x.grad": x.grad}
    result.update({f"grad.{n}": p.grad for n, p in model.named_parameters()})
    result.update({f"buffer.{n}": b for n, b in model.named_buffers() if b.is_floating_point()})
    return result


def _assert_same(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-5, msg=name)


def _channels_last(layout: Any) -> bool:
    size, stride = [int(n) for n in layout.size], [int(n) for n in layout.stride]
    return len(size) == 4 and stride[1] == 1 and stride[3] == size[1]


def _images(seed: int) -> torch.Tensor:
    return torch.randn(4, 3, 12, 12, generator=torch.Generator().manual_seed(seed))


def test_training_steps_match_eager_and_run_channels_last(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graphs: list[Any] = []

    def compile_graph(*args: Any, **kwargs: Any) -> Any:
        graphs.append(compile_graph_of_inductor_ir(*args, **kwargs))
        return graphs[-1]

    compile_graph_of_inductor_ir = inductor_ir.compile_graph
    monkeypatch.setattr(inductor_ir, "compile_graph", compile_graph)
    monkeypatch.setattr(layout_policy, "TRAINING_CHANNELS_LAST", True)
    model = _net().train()
    reference = copy.deepcopy(model)
    compiled = frontend.compile(model, options=STRICT)
    for seed in (1, 2):
        _assert_same(_step(model, compiled, _images(seed)), _step(reference, reference, _images(seed)))
    forward, backward = graphs
    saved = [o for o in forward.program.outputs if len(getattr(o, "layout", ()) and o.layout.size) == 4]
    assert any(_channels_last(o.layout) for o in saved)  # saved feature maps come back channels-last
    backward_convs = [
        b
        for b in backward.program.buffers
        if isinstance(b, inductor_ir.ExternKernel) and b.op is torch.ops.aten.convolution_backward.default
    ]
    assert backward_convs and all(_channels_last(b.args[0].layout) for b in backward_convs)


def test_a_cached_channels_last_training_graph_matches_eager(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(layout_policy, "TRAINING_CHANNELS_LAST", True)
    model = _net().train()
    reference = copy.deepcopy(model)
    _step(model, frontend.compile(model, options=STRICT), _images(1))
    _step(reference, reference, _images(1))
    frontend.reset()  # a new process: capture's code forgotten, the cache's memory too
    monkeypatch.setattr(lookup, "_STORES", {})
    loaded = frontend.compile(model, options=STRICT)
    _assert_same(_step(model, loaded, _images(2)), _step(reference, reference, _images(2)))


def test_saved_values_keep_the_compiled_layout_after_a_fallback() -> None:
    # The compiled forward returned output 1 channels-last; after a fallback eager returns NCHW.
    nchw = torch.randn(2, 4, 3, 3)
    channels_last = tuple(nchw.contiguous(memory_format=torch.channels_last).stride())

    def eager(*args: Any) -> tuple[torch.Tensor, ...]:
        return (args[0] * 2, nchw)

    runner = _SavedLayouts(eager, {1: channels_last})
    first = runner([torch.ones(3)])
    assert first[1].stride() == channels_last and torch.equal(first[1], nchw)
    again = runner([torch.ones(3)])  # still converted on later calls
    assert again[1].stride() == channels_last and torch.equal(again[0], torch.full((3,), 2.0))


def _smallest_pre_activation(model: torch.nn.Module, x: torch.Tensor) -> float:
    """The smallest magnitude reaching a ReLU in ``model`` (a copy in float64) on ``x``."""
    smallest = [float("inf")]

    def record(value: torch.Tensor) -> torch.Tensor:
        smallest[0] = min(smallest[0], value.abs().min().item())
        return torch.relu(value)

    reference = copy.deepcopy(model).double()
    for module in reference.modules():
        if isinstance(module, torch.nn.ReLU):
            module.forward = record  # type: ignore[method-assign]
    with torch.no_grad(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.nn.functional, "relu", record)
        reference(x.double())
    return smallest[0]


@pytest.mark.parametrize("channels_last", [True, False])
def test_residual_net_training_matches_eager(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, channels_last: bool
) -> None:
    import tools.bench.models_micro  # noqa: F401  (registers resnet_tiny)
    from tools.bench.registry import MODELS, BuildContext

    monkeypatch.setattr(layout_policy, "TRAINING_CHANNELS_LAST", channels_last)
    torch.manual_seed(0)
    model = MODELS["resnet_tiny"].build(BuildContext("cpu")).model.train()
    reference = copy.deepcopy(model)
    inputs = (torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(seed)) for seed in range(1, 20))
    x = next(x for x in inputs if _smallest_pre_activation(model, x) > 1e-6)
    compiled = frontend.compile(model, options=STRICT)
    _assert_same(_step(model, compiled, x), _step(reference, reference, x))
