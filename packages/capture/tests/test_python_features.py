"""Python features inside captured code: user classes, generators, functools, context managers."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import pytest
import torch

import capture


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    capture.reset()


class Affine:
    def __init__(self, weight, bias):
        self.weight = weight
        self.bias = bias

    def __call__(self, x):
        return x * self.weight + self.bias

    @property
    def doubled(self):
        return self.weight * 2


@dataclass(frozen=True)
class Frozen:
    value: torch.Tensor
    scale: int = 3


class Pair(NamedTuple):
    first: torch.Tensor
    second: torch.Tensor


class Scaled:
    def __init__(self, factor):
        self.factor = factor

    def __enter__(self):
        return self.factor

    def __exit__(self, *exc):
        return None


def uses_objects(x):
    affine = Affine(2.0, x)
    frozen = Frozen(x)
    pair = Pair(x, x + 1)._replace(second=x - 1)
    add_twice = functools.partial(torch.add, alpha=2)
    total = functools.reduce(lambda a, b: a + b, [x, x, x])
    doubled = sum(t * 2 for t in (x, x))
    with Scaled(3) as factor:
        scaled = x * factor
    ordered = sorted({"b": 2.0, "a": 5.0}.items(), key=lambda kv: kv[1])
    return affine(x) + affine.doubled + frozen.value * frozen.scale + pair.second + add_twice(x, x) + total \
        + doubled + scaled + ordered[0][1], affine, pair


def test_user_objects_and_functional_helpers_in_one_graph() -> None:
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x = torch.randn(4)
    got, affine, pair = capture.optimize(backend)(uses_objects)(x)
    expected, expected_affine, expected_pair = uses_objects(x)
    torch.testing.assert_close(got, expected)
    assert type(affine) is Affine and affine.weight == 2.0
    torch.testing.assert_close(affine.bias, expected_affine.bias)
    assert type(pair) is Pair
    torch.testing.assert_close(pair.second, expected_pair.second)
    assert len(graphs) == 1


def break_inside_no_grad(x, w):
    y = x @ w
    with torch.no_grad():
        z = y * 2
        print("inside no_grad")
        z = z + 1
    return y + z, torch.is_grad_enabled()


def test_graph_break_inside_no_grad_block() -> None:
    x, w = torch.randn(3, 3), torch.randn(3, 3, requires_grad=True)
    explanation = capture.explain(break_inside_no_grad, x, w)
    assert explanation.graph_count == 2
    opt = capture.optimize("eager")(break_inside_no_grad)
    got, grad_inside = opt(x, w)
    expected, expected_grad = break_inside_no_grad(x, w)
    torch.testing.assert_close(got, expected)
    assert grad_inside == expected_grad and torch.is_grad_enabled()
    got.sum().backward()
    assert w.grad is not None


class Tally:
    total = 0

    def __call__(self, a):
        type(self).total += 1
        return a * type(self).total


class SubTally(Tally):
    pass


def test_class_attribute_state_is_guarded() -> None:
    SubTally.total = 0
    opt = capture.optimize("eager")(SubTally())
    x = torch.ones(2)
    results = [opt(x)[0].item() for _ in range(3)]
    assert results == [1.0, 2.0, 3.0]


def test_generator_function_is_inlined() -> None:
    def powers(x, n):
        for i in range(n):
            yield x ** i

    def use(x):
        return sum(powers(x, 4))

    graphs: list[torch.fx.GraphModule] = []
    opt = capture.optimize(lambda gm, inputs: graphs.append(gm) or gm.forward)(use)
    x = torch.randn(3)
    torch.testing.assert_close(opt(x), use(x))
    assert len(graphs) == 1


def closure_across_break(x, y):
    scale = y * 2
    times_scale = lambda t: t * scale  # noqa: E731 - a closure over a cell variable
    print("graph break")
    out = times_scale(x)
    scale = scale + 10
    return out + times_scale(x)


def nonlocal_accumulator(x):
    total = x

    def add(v):
        nonlocal total
        total = total + v

    add(x)
    print("graph break")
    add(x * 2)
    return total


@pytest.mark.parametrize("fn", [closure_across_break, nonlocal_accumulator])
def test_graph_break_in_function_with_closures(fn) -> None:
    x, y = torch.randn(3), torch.randn(3)
    args = (x, y) if fn is closure_across_break else (x,)
    opt = capture.optimize("eager")(fn)
    for _ in range(2):
        torch.testing.assert_close(opt(*args), fn(*args))
    assert capture.explain(fn, *args).graph_count == 2


def catches_key_error(x, table):
    try:
        scale = table["missing"]
    except KeyError:
        scale = 2.0
    return x * scale


def catches_own_raise(x):
    try:
        raise ValueError("four letters")
    except ValueError as error:
        y = x + len(str(error))
    return y


def uncaught_key_error(x, table):
    try:
        return x * table["missing"]
    except IndexError:
        return x


@pytest.mark.parametrize("fn", [catches_key_error, catches_own_raise])
def test_exceptions_caught_inside_the_graph(fn) -> None:
    x = torch.randn(3)
    args = (x, {"present": 1.0}) if fn is catches_key_error else (x,)
    torch.testing.assert_close(capture.optimize("eager")(fn)(*args), fn(*args))
    explanation = capture.explain(fn, *args)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0


def test_uncaught_exception_propagates_like_eager() -> None:
    with pytest.raises(KeyError, match="missing"):
        capture.optimize("eager")(uncaught_key_error)(torch.randn(3), {})
