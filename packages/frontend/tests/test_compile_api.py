"""frontend.compile end to end: decorator forms, modules, the triage ladder, training."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import frontend

from .models import MLP, TinyResNet

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _pointwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * torch.cos(y) + 1


def test_decorator_with_and_without_arguments() -> None:
    @frontend.compile
    def plain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * torch.cos(y) + 1

    @frontend.compile(backend="eager")
    def with_args(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * torch.cos(y) + 1

    x, y = torch.randn(6, 5), torch.randn(6, 5)
    torch.testing.assert_close(plain(x, y), _pointwise(x, y))
    torch.testing.assert_close(with_args(x, y), _pointwise(x, y))
    assert plain.__name__ == "plain"


def test_optimize_is_not_a_context_manager() -> None:
    with pytest.raises(TypeError, match="decorator"):
        with frontend.optimize("eager"):
            pass


def test_disable_returns_the_original() -> None:
    assert frontend.compile(_pointwise, disable=True) is _pointwise


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])


def test_triage_ladder_matches_eager(backend: str) -> None:
    torch.manual_seed(0)
    model = MLP()
    # Strict: a stage that cannot handle the model must fail here, not quietly run it eagerly.
    compiled = frontend.compile(model, backend=backend, options={"fallback_to_eager": False})
    for batch in (8, 8, 3):
        x = torch.randn(batch, 16)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])


def test_training_through_a_compiled_module(backend: str) -> None:
    torch.manual_seed(0)
    reference = TinyResNet()
    model = TinyResNet()
    model.load_state_dict(reference.state_dict())
    compiled = frontend.compile(model, backend=backend, options={"fallback_to_eager": False})
    optimizer = torch.optim.SGD(compiled.parameters(), lr=0.05)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(2):
        data, target = torch.randn(4, 3, 16, 16), torch.randint(10, (4,))
        optimizer.zero_grad(True)
        reference_optimizer.zero_grad(True)
        loss = loss_fn(compiled(data), target)
        loss.backward()
        reference_loss = loss_fn(reference(data), target)
        reference_loss.backward()
        torch.testing.assert_close(loss, reference_loss, rtol=1e-4, atol=1e-4)
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            assert p.grad is not None, name
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4, msg=name)
        optimizer.step()
        reference_optimizer.step()
    torch.testing.assert_close(model.bn.running_mean, reference.bn.running_mean)


def test_module_wrapper_follows_eval_and_shares_parameters() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    compiled = frontend.compile(model, backend="eager")
    assert isinstance(compiled, frontend.OptimizedModule)
    assert list(compiled.state_dict()) == list(model.state_dict())
    compiled.eval()
    assert not model.training
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(x), model(x))
    with torch.no_grad():
        model[0].weight.mul_(2)
    torch.testing.assert_close(compiled(x), model(x))


def test_recompiling_a_compiled_module_starts_from_the_original() -> None:
    model = torch.nn.Linear(4, 4)
    once = frontend.compile(model, backend="eager")
    twice = frontend.compile(once, backend="aot_eager")
    assert twice.original is model
    x = torch.randn(2, 4)
    torch.testing.assert_close(twice(x), model(x))


def test_custom_callable_backend_sees_graph_and_inputs() -> None:
    seen: list[tuple[int, list[Any]]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        seen.append((len(list(gm.graph.nodes)), example_inputs))
        return gm.forward

    x, y = torch.randn(3, 3), torch.randn(3, 3)
    torch.testing.assert_close(frontend.compile(_pointwise, backend=backend)(x, y), _pointwise(x, y))
    assert len(seen) == 1 and all(isinstance(t, torch.Tensor) for t in seen[0][1])


def test_mode_and_options_together_layer_options_over_the_mode() -> None:
    """torch.compile rejects mode= with options=; Kiln applies the mode, then the options."""
    torch.manual_seed(0)
    compiled = frontend.compile(_pointwise, mode="reduce-overhead", options={"cudagraph_copy_outputs": False})
    settings = compiled.kiln_context.config
    assert (settings.cudagraphs, settings.cudagraph_copy_outputs) == (True, False)
    off = frontend.compile(_pointwise, mode="max-autotune", options={"cudagraphs": False})
    assert (off.kiln_context.config.max_autotune, off.kiln_context.config.cudagraphs) == (True, False)
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    torch.testing.assert_close(off(x, y), _pointwise(x, y))
    with pytest.raises(frontend.InvalidOptionError) as info:
        frontend.compile(_pointwise, mode="reduce-overhead", options={"cudagraph": True})
    assert str(info.value).splitlines()[0].startswith("unknown option 'cudagraph'; valid options are: debug,")
