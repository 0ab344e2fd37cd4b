"""Binding a call's arguments to a frame's parameters without `inspect`: the same values, the same errors."""

from __future__ import annotations

import inspect
import random
from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend

import capture
from capture.cache import bind_frame_arguments


def _by_inspect(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any] | None:
    code = fn.__code__
    try:
        bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return [bound.arguments[name] for name in code.co_varnames[:nargs]]


def _same(expected: Any, got: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(got, dict) and list(expected) == list(got) and all(expected[k] is got[k] for k in expected)
    if isinstance(expected, (list, tuple)):
        return type(expected) is type(got) and len(expected) == len(got) and all(map(_same, expected, got))
    return expected is got


def f_everything(a, b=2, *args, c, d=4, **kw): ...  # type: ignore[no-untyped-def]
def f_positional_only(a, /, b, c=3): ...  # type: ignore[no-untyped-def]
def f_forward(self, x, mask=None, **kwargs): ...  # type: ignore[no-untyped-def]
def f_star(*args, **kwargs): ...  # type: ignore[no-untyped-def]
def f_positional_only_and_kwargs(a, /, b=1, **kw): ...  # type: ignore[no-untyped-def]
def f_keyword_only(a, b, *, c=1): ...  # type: ignore[no-untyped-def]
def f_nothing(): ...  # type: ignore[no-untyped-def]


FUNCTIONS = [f_everything, f_positional_only, f_forward, f_star, f_positional_only_and_kwargs, f_keyword_only, f_nothing]


def test_binding_agrees_with_inspect_on_random_calls() -> None:
    rng = random.Random(0)
    values = [torch.randn(2), 1, None, "s"]  # a tensor: a binder must never compare values with ==
    names = ["a", "b", "c", "d", "x", "mask", "self", "zz"]
    valid = 0
    for _ in range(4000):
        fn = rng.choice(FUNCTIONS)
        args = tuple(rng.choice(values) for _ in range(rng.randint(0, 5)))
        kwargs = {k: rng.choice(values) for k in rng.sample(names, rng.randint(0, 4))}
        expected = _by_inspect(fn, args, kwargs)
        if expected is None:
            with pytest.raises(TypeError):
                bind_frame_arguments(fn, args, kwargs)
            continue
        valid += 1
        assert _same(expected, bind_frame_arguments(fn, args, kwargs)), (fn.__name__, args, kwargs)
    assert valid > 500


class _Keywords(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *, scale: float = 1.0,
                **extra: Any) -> torch.Tensor:
        y = self.lin(input_ids) * scale
        return y if attention_mask is None else y * attention_mask


def test_models_called_with_keywords_match_eager_and_reuse_their_graph() -> None:
    torch.manual_seed(0)
    model = _Keywords()
    backend = RecordingBackend()
    compiled = capture.optimize(backend)(model)
    for _ in range(3):
        x, mask = torch.randn(2, 4), torch.randn(2, 4)
        torch.testing.assert_close(compiled(input_ids=x, attention_mask=mask, scale=2.0),
                                   model(input_ids=x, attention_mask=mask, scale=2.0))
    torch.testing.assert_close(compiled(x, scale=0.5), model(x, scale=0.5))
    assert len(backend.graphs) == 2  # one per distinct call shape (mask given or not, scale a constant)
