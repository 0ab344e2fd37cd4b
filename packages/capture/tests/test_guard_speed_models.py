"""Guard checks on conv models (transformers MobileNetV2 / ResNet, tiny configs) and their fast paths.

The compiled guard layout makes the check cheaper per call: registration dicts compared whole against copies, one
dtype/device sample per module, requires_grad read only where it can be set, `is_cpu` instead of
`device`, and positional calls bound without `inspect`. Each test here fails if one of those
shortcuts skips a change that the graph depends on.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend

import capture
from capture.cache import DEFAULT_CACHE, bind_frame_arguments
from capture.guards import compile_guards, compile_guards_plainly

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)


def _mobilenet() -> torch.nn.Module:
    config = transformers.MobileNetV2Config(depth_multiplier=0.35, tf_padding=False, num_labels=10)
    return transformers.MobileNetV2ForImageClassification(config).eval()


def _resnet() -> torch.nn.Module:
    config = transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10)
    return transformers.ResNetForImageClassification(config).eval()


MODELS: dict[str, Callable[[], torch.nn.Module]] = {"mobilenet_v2": _mobilenet, "resnet": _resnet}


def _compiled(build: Callable[[], torch.nn.Module]) -> tuple[torch.nn.Module, Any, RecordingBackend, torch.Tensor]:
    capture.reset()
    torch.manual_seed(0)
    model = build()
    backend = RecordingBackend()
    x = torch.randn(1, 3, 32, 32)
    compiled = capture.optimize(backend)(model)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x).logits, model(x).logits)
    return model, compiled, backend, x


def _frame(model: torch.nn.Module, x: torch.Tensor) -> tuple[Any, list[Any], Any, Any]:
    entry = max((e for state in DEFAULT_CACHE.states.values() for e in state.entries),
                key=lambda e: len(e.guard_set.guards))
    fn = type(model).forward
    return entry, bind_frame_arguments(fn, (model, x), {}), fn.__globals__, fn.__closure__


def _first_bn(model: torch.nn.Module) -> torch.nn.BatchNorm2d:
    return next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))


def _first_conv(model: torch.nn.Module) -> torch.nn.Conv2d:
    return next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))


def _last_bn(model: torch.nn.Module) -> torch.nn.BatchNorm2d:
    return [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)][-1]


def _bn_to_double(model: torch.nn.Module) -> None:
    _last_bn(model).double()  # params and buffers of one leaf module only


def _bn_buffer_replaced(model: torch.nn.Module) -> None:
    bn = _first_bn(model)
    bn.running_var = bn.running_var.clone() + 0.5


def _bn_counter_replaced_by_equal(model: torch.nn.Module) -> None:
    bn = _first_bn(model)  # a 0-dim tensor: `==` with an equal one is True, identity is not
    bn.num_batches_tracked = bn.num_batches_tracked.clone()


def _conv_replaced(model: torch.nn.Module) -> None:
    for module in model.modules():
        for name, child in module.named_children():
            if isinstance(child, torch.nn.Conv2d):
                setattr(module, name, torch.nn.Conv2d(child.in_channels, child.out_channels, child.kernel_size,
                                                      child.stride, child.padding, groups=child.groups,
                                                      bias=child.bias is not None))
                return


def _sequential_item_replaced(model: torch.nn.Module) -> None:
    sequential = next(m for m in model.modules() if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList))
                      and len(m) > 0)
    sequential._modules[next(iter(sequential._modules))] = torch.nn.Identity()


def _float_buffer_requires_grad(model: torch.nn.Module) -> None:
    _last_bn(model).running_mean.requires_grad_(True)


def _weight_requires_grad(model: torch.nn.Module) -> None:
    _first_conv(model).weight.requires_grad_(False)


def _one_bn_train(model: torch.nn.Module) -> None:
    _last_bn(model).train()


def _hook_added(model: torch.nn.Module) -> None:
    _first_conv(model).register_forward_hook(lambda module, args, output: output * 2)


MUTATIONS: dict[str, Callable[[torch.nn.Module], None]] = {
    "bn_to_double": _bn_to_double, "bn_buffer_replaced": _bn_buffer_replaced,
    "bn_counter_replaced_by_equal": _bn_counter_replaced_by_equal, "conv_replaced": _conv_replaced,
    "sequential_item_replaced": _sequential_item_replaced, "float_buffer_requires_grad": _float_buffer_requires_grad,
    "weight_requires_grad": _weight_requires_grad, "one_bn_train": _one_bn_train,
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_fast_check_fails_after_each_mutation(model_name: str, mutation: str) -> None:
    model, _, _, x = _compiled(MODELS[model_name])
    entry, L, G, C = _frame(model, x)
    fast = compile_guards(entry.guard_set)
    with torch.no_grad():
        assert fast(L, G, C) and entry.check(L, G, C)
        MUTATIONS[mutation](model)
        assert not fast(L, G, C)
        assert not compile_guards_plainly(entry.guard_set)(L, G, C)


@pytest.mark.parametrize("mutation", ["bn_buffer_replaced", "conv_replaced", "sequential_item_replaced",
                                      "one_bn_train", "hook_added"])
def test_mutated_model_still_matches_eager(mutation: str) -> None:
    model, compiled, _, _ = _compiled(_resnet)
    mutate = _hook_added if mutation == "hook_added" else MUTATIONS[mutation]
    mutate(model)
    y = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(y).logits, model(y).logits)


def test_replaced_scalar_parameter_with_equal_value_recompiles() -> None:
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.scale = torch.nn.Parameter(torch.tensor(2.0))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * self.scale

    capture.reset()
    model = Scaled()
    backend = RecordingBackend()
    compiled = capture.optimize(backend)(model)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), model(x))
    model.scale = torch.nn.Parameter(torch.tensor(2.0))  # equal value, a different parameter
    entry, L, G, C = _frame(model, x)
    assert not entry.check(L, G, C)
    with torch.no_grad():
        model.scale.fill_(3.0)
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 2


def test_unchanged_model_hits_the_cache() -> None:
    model, compiled, backend, _ = _compiled(_mobilenet)
    with torch.no_grad():
        for _ in range(3):
            y = torch.randn(1, 3, 32, 32)
            torch.testing.assert_close(compiled(y).logits, model(y).logits)
    assert backend.count == 1


def test_check_is_a_few_batched_lines_and_faster_than_guard_by_guard() -> None:
    model, _, _, x = _compiled(_resnet)
    entry, L, G, C = _frame(model, x)
    source = entry.check.__kiln_source__
    assert "._modules[" not in source and ".encoder" not in source and ".stages" not in source
    fast, plain = compile_guards(entry.guard_set), compile_guards_plainly(entry.guard_set)

    def best(check: Callable[..., bool]) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(50):
                check(L, G, C)
            times.append(time.perf_counter() - start)
        return min(times)

    with torch.no_grad():
        assert fast(L, G, C) and plain(L, G, C)
        assert best(fast) * 3 < best(plain)


def _ref_bind(fn: Any, args: tuple[Any, ...]) -> list[Any] | str:
    code = fn.__code__
    try:
        bound = inspect.signature(fn).bind(*args)
    except TypeError:
        return "TypeError"
    bound.apply_defaults()
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return [bound.arguments[name] for name in code.co_varnames[:count]]


_DEFAULT: list[int] = []


def _sig_defaults(a: Any, b: Any = 2, c: Any = _DEFAULT) -> None: ...
def _sig_star(a: Any, *rest: Any, **extra: Any) -> None: ...
def _sig_positional_only(a: Any, b: Any, /, c: Any = 3, *rest: Any) -> None: ...
def _sig_only_kwargs(**extra: Any) -> None: ...
def _sig_keyword_only(a: Any, *, b: Any = 1) -> None: ...


@pytest.mark.parametrize("fn", [_sig_defaults, _sig_star, _sig_positional_only, _sig_only_kwargs, _sig_keyword_only])
def test_positional_binding_matches_inspect(fn: Any) -> None:
    for args in ((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)):
        expected = _ref_bind(fn, args)
        try:
            got: list[Any] | str = bind_frame_arguments(fn, args, {})
        except TypeError:
            got = "TypeError"
        assert got == expected, (fn.__name__, args)
        if isinstance(got, list) and isinstance(expected, list):
            assert all(g is e for g, e in zip(got, expected, strict=True) if not isinstance(e, (tuple, dict)))
