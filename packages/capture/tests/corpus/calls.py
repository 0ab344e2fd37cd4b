"""Calling conventions: *args/**kwargs forwarding, defaults, keyword-only, functools.partial and friends."""

from __future__ import annotations

import functools
import operator
from typing import Any

import torch

from ._registry import args, program, randn, x, xy

F = "calls"


def _combine(a: torch.Tensor, b: torch.Tensor, *, alpha: float = 1.0, beta: float = 0.0) -> torch.Tensor:
    return a * alpha + b * beta


def _forward_all(*args: Any, **kwargs: Any) -> torch.Tensor:
    return _combine(*args, **kwargs)


def _variadic_sum(*tensors: torch.Tensor) -> torch.Tensor:
    total = tensors[0]
    for t in tensors[1:]:
        total = total + t
    return total


def _kwargs_only(**options: float) -> float:
    return sum(options.values())


def _defaults(t: torch.Tensor, k: int = 2, shift: float = 0.5) -> torch.Tensor:
    return t * k + shift


@functools.lru_cache(maxsize=None)  # noqa: UP033
def _cached_constant(n: int) -> float:
    return float(n) / 3


def _log_calls(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs) + 1

    return wrapper


@_log_calls
def _decorated(t: torch.Tensor) -> torch.Tensor:
    return t.exp()


@program(F, xy((4,)))
def star_args_forwarding(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _forward_all(a, b, alpha=2.0, beta=-1.0)


@program(F, xy((4,)))
def star_kwargs_forwarding(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    options = {"alpha": 0.5, "beta": 3.0}
    return _forward_all(a, b, **options)


@program(F, xy((4,)))
def tuple_unpack_call(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    pair = (a, b)
    return _combine(*pair, beta=1.0)


@program(F, x(4))
def variadic_positional(a: torch.Tensor) -> torch.Tensor:
    return _variadic_sum(a, a.sin(), a.cos(), a * 2)


@program(F, x(4))
def variadic_keyword(a: torch.Tensor) -> torch.Tensor:
    return a * _kwargs_only(x=1.0, y=2.0, z=0.5)


@program(F, x(4))
def default_arguments(a: torch.Tensor) -> torch.Tensor:
    return _defaults(a) + _defaults(a, 3) + _defaults(a, shift=-1.0)


@program(F, xy((4,)))
def partial_positional(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    add_b = functools.partial(torch.add, b)
    return add_b(a) * 2


@program(F, xy((4,)))
def partial_keyword(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    fn = functools.partial(_combine, alpha=3.0, beta=0.5)
    return fn(a, b)


@program(F, x(4, 4))
def partial_of_torch_fn(a: torch.Tensor) -> torch.Tensor:
    softmax_last = functools.partial(torch.softmax, dim=-1)
    return softmax_last(a)


@program(F, x(4))
def nested_partial(a: torch.Tensor) -> torch.Tensor:
    inner = functools.partial(_combine, alpha=2.0)
    outer = functools.partial(inner, beta=-1.0)
    return outer(a, a.exp())


@program(F, x(4))
def functools_reduce(a: torch.Tensor) -> torch.Tensor:
    return functools.reduce(operator.add, [a, a * 2, a * 3])


@program(F, x(4))
def lru_cached_helper(a: torch.Tensor) -> torch.Tensor:
    return a * _cached_constant(4)


@program(F, x(4))
def wraps_decorator(a: torch.Tensor) -> torch.Tensor:
    return _decorated(a)


@program(F, xy((4,)))
def operator_module_calls(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return operator.mul(operator.add(a, b), operator.neg(b))


@program(F, x(4))
def keyword_torch_call(a: torch.Tensor) -> torch.Tensor:
    return torch.clamp(input=a, min=-0.5, max=0.5)


@program(F, args(lambda: randn(4), lambda: {"alpha": 2.0, "beta": 3.0}))
def kwargs_dict_input(a: torch.Tensor, options: dict[str, float]) -> torch.Tensor:
    return _combine(a, a, **options)


@program(F, x(4))
def method_via_getattr_call(a: torch.Tensor) -> torch.Tensor:
    names = ["sin", "cos"]
    return sum(getattr(a, n)() for n in names)


@program(F, x(3, 3))
def builtin_callable_table(a: torch.Tensor) -> torch.Tensor:
    table = {"relu": torch.relu, "tanh": torch.tanh}
    return table["relu"](a) + table["tanh"](a)
