"""Python features inside captured code: user classes, generators, functools, context managers, collections,
autograd features (custom Functions, hooks, checkpoint, vmap), match statements."""

from __future__ import annotations

import collections
import contextlib
import functools
from dataclasses import dataclass
from typing import NamedTuple

import pytest
import torch
from capture_helpers import RecordingBackend

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


def make_counter():
    total = 0

    def count_and_scale(b):
        nonlocal total
        total += 1
        print("graph break")
        return b * total

    return count_and_scale


def test_resume_function_reads_the_cells_of_its_own_closure() -> None:
    # Two closures of one code: the second passes the first's entry (its cell holds 0 too) and must
    # resume after the break over its own cell, not over the cell of the closure that compiled it.
    x = torch.ones(2)
    first = capture.optimize("eager")(make_counter())
    torch.testing.assert_close(first(x), x)
    torch.testing.assert_close(first(x), x * 2)
    second = capture.optimize("eager")(make_counter())
    torch.testing.assert_close(second(x), x)
    torch.testing.assert_close(second(x), x * 2)


def counts_twice_under_no_grad(x):
    total = 0

    def inner(b):
        nonlocal total
        total += 1
        print("graph break")
        return b * total

    with torch.no_grad():  # the outer frame runs eagerly (a break inside a with block): inner is compiled
        y = inner(inner(x))
    return y, total


def test_closure_made_on_each_call_resumes_over_its_own_cell() -> None:
    opt = capture.optimize("eager")(counts_twice_under_no_grad)
    x = torch.ones(2)
    for _ in range(3):
        y, total = opt(x)
        torch.testing.assert_close(y, x * 2)
        assert total == 2


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


# --- collections, contexts, autograd features ---------------------------------


def _compiled(fn):  # type: ignore[no-untyped-def]
    backend = RecordingBackend()
    return capture.optimize(backend)(fn), backend


def test_set_and_deque_rebuilt_after_a_graph_break() -> None:
    def fn(x):
        seen = {n % 3 for n in range(7)}
        window = collections.deque([x], maxlen=2)
        window.append(x * 2)
        capture.graph_break()
        window.append(x * 3)
        seen.add(9)
        return window, seen

    compiled, backend = _compiled(fn)
    x = torch.randn(4)
    window, seen = compiled(x)
    assert seen == {0, 1, 2, 9} and isinstance(window, collections.deque) and window.maxlen == 2
    torch.testing.assert_close(list(window), [x * 2, x * 3])
    assert backend.count == 2


def test_dict_views_keep_their_type_across_a_graph_break() -> None:
    def fn(x):
        d = {"a": x, "b": x + 1}
        keys, values = d.keys(), d.values()
        capture.graph_break()
        return x * len(keys & {"a", "z"}), type(keys).__name__, type(values).__name__

    compiled, _ = _compiled(fn)
    x = torch.randn(3)
    out, keys_type, values_type = compiled(x)
    torch.testing.assert_close(out, x)
    assert (keys_type, values_type) == ("dict_keys", "dict_values")


def test_counter_and_defaultdict_missing_keys() -> None:
    def fn(x):
        counts = collections.Counter("aab")
        groups = collections.defaultdict(list)
        groups["k"].append(x)
        return x * counts["a"] + counts["zzz"], len(counts), dict(groups)

    compiled, backend = _compiled(fn)
    x = torch.randn(3)
    out, size, groups = compiled(x)
    torch.testing.assert_close(out, x * 2)
    assert size == 2 and list(groups) == ["k"] and backend.count == 1


def test_suppress_continues_after_the_block_in_one_graph() -> None:
    def fn(x):
        with contextlib.suppress(KeyError):
            x = x * 2
            x = x + {}["missing"]
        return x + 1

    x = torch.randn(3)
    assert capture.explain(fn, x).graph_count == 1
    compiled, _ = _compiled(fn)
    torch.testing.assert_close(compiled(x), x * 2 + 1)


def test_inference_mode_and_no_grad_decorator_stop_gradients() -> None:
    @torch.no_grad()
    def stats(t):
        return t.mean()

    def fn(x):
        with torch.inference_mode():
            y = x * 2
        return y, stats(x), x * 3

    compiled, backend = _compiled(fn)
    x = torch.randn(3, requires_grad=True)
    y, s, z = compiled(x)
    assert not y.requires_grad and not s.requires_grad and z.requires_grad and backend.count == 1
    assert torch.is_grad_enabled()


def test_custom_function_uses_its_own_backward() -> None:
    class HalfGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):  # type: ignore[no-untyped-def]
            return t * 3

        @staticmethod
        def backward(ctx, grad):  # type: ignore[no-untyped-def]
            return grad * 0.5

    compiled, backend = _compiled(lambda x: HalfGrad.apply(x.sin()) + 1)
    x = torch.randn(4, requires_grad=True)
    out = compiled(x)
    torch.testing.assert_close(out, x.detach().sin() * 3 + 1)
    (grad,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(grad, x.detach().cos() * 0.5)
    assert backend.count == 1


def test_tensor_hook_survives_dead_code_elimination() -> None:
    def fn(x):
        b = x * 2
        out = b + 1
        b.register_hook(lambda g: g * 10)
        return out

    def eliminating(gm, example_inputs):  # type: ignore[no-untyped-def]
        gm.graph.eliminate_dead_code()
        gm.recompile()
        return gm.forward

    compiled = capture.optimize(eliminating)(fn)
    x = torch.randn(3, requires_grad=True)
    (grad,) = torch.autograd.grad(compiled(x).sum(), x)
    torch.testing.assert_close(grad, torch.full((3,), 20.0))


def test_vmap_and_checkpoint_in_one_graph() -> None:
    def fn(x):
        rows = torch.vmap(lambda r: r.dot(r))(x)
        return torch.utils.checkpoint.checkpoint(lambda t: t.relu() * 2, rows, use_reentrant=False)

    compiled, backend = _compiled(fn)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), (x * x).sum(1).relu() * 2)
    assert backend.count == 1


def test_break_inside_a_loop_runs_the_rest_eagerly() -> None:
    def fn(x):
        while x.norm() > 0.1:
            x = x * 0.5
        return x

    compiled, backend = _compiled(fn)
    x = torch.randn(8) * 4
    torch.testing.assert_close(compiled(x), fn(x))
    assert backend.count == 1  # the loop's condition; the resumed loop does not compile a graph per iteration


def test_slots_and_match_statement() -> None:
    class Point:
        __slots__ = ("x", "y")
        __match_args__ = ("x", "y")

        def __init__(self, x, y):  # type: ignore[no-untyped-def]
            self.x, self.y = x, y

    def fn(t):
        match Point(t, 2.0):
            case Point(a, b):
                return a * b
        return t

    compiled, backend = _compiled(fn)
    t = torch.randn(3)
    torch.testing.assert_close(compiled(t), t * 2)
    assert backend.count == 1


def test_environment_reads_are_guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    def fn(x):
        return x * (2 if os.environ.get("KILN_TEST_CAPTURE_FLAG", "0") == "1" else 3)

    compiled, backend = _compiled(fn)
    x = torch.randn(3)
    monkeypatch.setenv("KILN_TEST_CAPTURE_FLAG", "1")
    torch.testing.assert_close(compiled(x), x * 2)
    monkeypatch.delenv("KILN_TEST_CAPTURE_FLAG")
    torch.testing.assert_close(compiled(x), x * 3)
    assert backend.count == 2


def test_tensor_hook_refuses_to_be_traced_by_a_backend() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(x):
        b = x * 2
        b.register_hook(lambda g: g * 3)
        return b + 1

    def tracing(gm, example_inputs):  # type: ignore[no-untyped-def]
        with pytest.raises(RuntimeError, match="register_hook"):
            make_fx(gm)(*example_inputs)
        return gm.forward

    x = torch.randn(3, requires_grad=True)
    (grad,) = torch.autograd.grad(capture.optimize(tracing)(fn)(x).sum(), x)
    torch.testing.assert_close(grad, torch.full((3,), 6.0))


def test_aliased_inputs_are_guarded() -> None:
    compiled, backend = _compiled(lambda xs: xs[0] * 2 + xs[1])
    t, u = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled([t, t]), t * 3)
    torch.testing.assert_close(compiled([t, u]), t * 2 + u)  # one placeholder no longer fits: recompiled
    assert backend.count == 2


def test_existing_ordered_dict_and_deque_are_updated_in_place() -> None:
    history = collections.deque([1.0], maxlen=2)
    scales = collections.OrderedDict(a=1.0, b=2.0)

    def fn(x):
        history.append(3.0)
        scales.move_to_end("a")
        scales["c"] = 4.0
        return x * sum(history) * len(scales)

    compiled, backend = _compiled(fn)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 4.0 * 3)
    assert list(history) == [1.0, 3.0] and list(scales) == ["b", "a", "c"] and backend.count == 1


def test_module_built_in_the_function_gets_new_weights_each_call() -> None:
    def fn(x):
        return torch.nn.Linear(3, 3)(x)

    compiled, _ = _compiled(fn)
    x = torch.randn(2, 3)
    torch.manual_seed(0)
    expected = [fn(x), fn(x)]
    torch.manual_seed(0)
    torch.testing.assert_close([compiled(x), compiled(x)], expected)


def test_decorated_function_is_captured_whole() -> None:
    @torch.no_grad()
    def fn(x):
        return x.exp() + 1

    x = torch.randn(3, requires_grad=True)
    assert capture.explain(fn, x).graph_count == 1
    compiled, _ = _compiled(fn)
    out = compiled(x)
    assert not out.requires_grad and torch.is_grad_enabled()
    torch.testing.assert_close(out, x.detach().exp() + 1)


def test_functions_written_in_c_are_compiled_each_in_its_own_cache() -> None:
    """`optimize(torch.sin)`, `F.gelu`, `Tensor.relu`: functions with no bytecode are captured through a
    Python caller, one code object per function (a shared one reached the recompile limit)."""
    import torch.nn.functional as F
    from capture_helpers import RecordingBackend

    functions = [torch.sin, torch.cos, torch.tanh, torch.exp, torch.sigmoid, torch.abs, torch.neg, torch.square,
                 torch.erf, F.gelu, F.silu, torch.Tensor.relu]
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    for function in functions:
        backend = RecordingBackend()
        compiled = capture.optimize(backend)(function)
        torch.testing.assert_close(compiled(x), function(x))
        torch.testing.assert_close(compiled(x + 1), function(x + 1))
        assert backend.count == 1, function
        assert compiled.__name__ == function.__name__
