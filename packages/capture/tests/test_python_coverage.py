"""Python that real code runs inside captured functions and that stays in one graph: existing dicts keyed
by tuples and dtypes, library options objects (frozen dataclasses) and `torch.library.custom_op` functions,
pytree helpers called in user code, and builtins or library callables mixing tensors and Python values.
Each is compared with eager on seeded inputs, with its graph count."""

from __future__ import annotations

import collections
import functools
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from capture_helpers import RecordingBackend

import capture


def _compile(fn: Any, **options: Any) -> tuple[Any, RecordingBackend]:
    backend = RecordingBackend()
    return capture.optimize(backend, nopython=True, **options)(fn), backend


def _randn(seed: int, *shape: int, **kwargs: Any) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), **kwargs)


_BY_DEVICE_AND_DTYPE = {("cpu", torch.float16): ("half", 2.0), ("cpu", torch.float32): ("single", 3.0),
                        (1, None): 0.5}


def test_existing_dict_with_tuple_and_dtype_keys() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, str]:
        mode, scale = _BY_DEVICE_AND_DTYPE.get((x.device.type, x.dtype), ("other", 1.0))
        shift = _BY_DEVICE_AND_DTYPE[(1, None)]
        count = sum(1 for key in _BY_DEVICE_AND_DTYPE if key[0] == x.device.type)
        return x * scale + shift + count, mode

    compiled, backend = _compile(f)
    for dtype in (torch.float32, torch.float16, torch.float64):
        x = _randn(0, 3, 4).to(dtype)
        result, mode = compiled(x)
        expected, expected_mode = f(x)
        torch.testing.assert_close(result, expected)
        assert mode == expected_mode
    assert backend.count == 3  # one graph per dtype (each picks a different entry)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_linear_cross_entropy_chunked_options(reduction: str) -> None:
    options_module = pytest.importorskip("torch.nn.modules.linear_cross_entropy_options", reason="a newer torch's API")
    LinearCrossEntropyOptions = options_module.LinearCrossEntropyOptions

    options = LinearCrossEntropyOptions(allow_retain_graph=True, batch_chunk_size=3)

    def f(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.linear_cross_entropy(x, w, target, reduction=reduction, options=options)

    compiled, backend = _compile(f)
    target = torch.randint(0, 10, (8,), generator=torch.Generator().manual_seed(2))
    results = []
    for run in (compiled, f):
        x = _randn(0, 8, 4, requires_grad=True)
        w = _randn(1, 10, 4, requires_grad=True)
        loss = run(x, w, target)
        loss.sum().backward()
        results.append((loss, x.grad, w.grad))
    torch.testing.assert_close(results[0], results[1])
    assert backend.count == 1


Pair = collections.namedtuple("Pair", "first second")


def test_pytree_helpers_in_user_code_stay_in_one_graph() -> None:
    def f(tree: dict[str, Any], other: dict[str, Any]) -> tuple[Any, ...]:
        leaves, spec = pytree.tree_flatten(tree)
        scaled = pytree.tree_unflatten([leaf * spec.num_leaves for leaf in leaves], spec)
        summed = pytree.tree_map(lambda a, b: a + b, scaled, other)
        pairs = pytree.tree_leaves(tree, is_leaf=lambda node: isinstance(node, Pair))
        pytree.tree_map_(lambda t: t.mul_(2), other)
        ordered = pytree.tree_map(torch.sin, collections.OrderedDict(k=tree["p"].first))
        return summed, len(pairs), pytree.tree_structure(tree).num_leaves, ordered, spec.unflatten(leaves)

    def inputs(seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        def tree(offset: int) -> dict[str, Any]:
            return {"p": Pair(_randn(seed + offset, 2), _randn(seed + offset + 1, 1)), "q": [(_randn(seed + 2, 3),)]}

        return tree(0), tree(10)

    compiled, backend = _compile(f)
    for seed in (0, 1):
        tree, other = inputs(seed)
        result = compiled(tree, other)
        expected_tree, expected_other = inputs(seed)
        expected = f(expected_tree, expected_other)
        torch.testing.assert_close(result, expected)
        torch.testing.assert_close(other, expected_other)  # tree_map_'s in-place updates happened
        assert type(result[0]["p"]) is Pair and type(result[3]) is collections.OrderedDict
    assert backend.count == 1


def test_associative_scan_over_a_tuple_is_one_graph() -> None:
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine(left: tuple[torch.Tensor, torch.Tensor], right: tuple[torch.Tensor, torch.Tensor]) -> Any:
        a_left, b_left = left
        a_right, b_right = right
        return a_left * a_right, a_right * b_left + b_right

    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        _, states = associative_scan(combine, (a, b), dim=1, combine_mode="generic")
        return states

    def sequential(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        state, states = b[:, 0], [b[:, 0]]
        for i in range(1, a.shape[1]):
            state = a[:, i] * state + b[:, i]
            states.append(state)
        return torch.stack(states, dim=1)

    compiled, backend = _compile(f)
    a, b = _randn(0, 2, 6, 3).sigmoid(), _randn(1, 2, 6, 3)
    torch.testing.assert_close(compiled(a, b), sequential(a, b))
    assert backend.count == 1


def test_min_max_mixing_one_element_tensors_and_numbers() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        top, low = x.max(), x.min()
        return x * min(top, 0.5) + max(-0.25, low) + min(x.shape[0], top) + max([low, top, 0.0]) + min(top, low)

    compiled, backend = _compile(f)
    for seed in (0, 1):
        x = _randn(seed, 5)
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1


def test_sum_with_start_keyword() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return sum([x, x * 2], start=x.cos()) + sum((1, 2), start=3)

    compiled, backend = _compile(f)
    x = _randn(0, 4)
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1


def test_in_over_a_list_holding_a_tensor_and_a_list_indexed_by_a_constant_tensor() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        items = [1, 2, x]
        found = (2 in items) + (x in [x, 3]) + (5 in (1, 2, 3))
        scaled = [x, x * 2, x * 3]
        return scaled[torch.tensor(1)] + scaled[torch.tensor(-1)] * found

    compiled, backend = _compile(f)
    x = _randn(0, 4)
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1


class _Plain:
    def __init__(self, value: float) -> None:
        self.value = value


def test_equality_and_identity_of_user_objects_and_classes() -> None:
    def f(x: torch.Tensor, a: _Plain, b: _Plain) -> torch.Tensor:
        if a == None:  # noqa: E711 (the point: == on an object without __eq__)
            x = x + 1
        if a is b:
            x = x * 2
        if a == b:
            x = x - 3
        if a.__class__ is _Plain and _Plain == type(b) and not (_Plain != _Plain):  # noqa: E721 (== on classes is the point)
            x = x * a.value
        return x

    compiled, backend = _compile(f)
    first, second = _Plain(2.0), _Plain(2.0)
    x = _randn(0, 4)
    for a, b in ((first, second), (first, first), (second, first)):
        torch.testing.assert_close(compiled(x, a, b), f(x, a, b))
    assert backend.count == 2  # `a is b` is guarded: the same object again recompiles once


class _Config(collections.OrderedDict):
    def scaled(self, factor: float) -> dict[str, Any]:
        return {key: value * factor for key, value in self.items()}


class _Registry(dict):
    pass


def test_dict_subclasses_fromkeys_and_update_from_pairs() -> None:
    def f(x: torch.Tensor) -> tuple[Any, ...]:
        config = _Config(weight=x, bias=2)
        defaults = collections.defaultdict.fromkeys(["a", "b"], 1)
        registry = _Registry.fromkeys(["c"], x)
        table: dict[str, Any] = {}
        table.update([("a", x), ("b", 2)])
        table.update(zip(["c"], [3]))
        scaled = config.scaled(3)
        return config, defaults, registry, scaled["weight"] + scaled["bias"] * table["a"] * table["b"] * table["c"]

    compiled, backend = _compile(f)
    x = _randn(0, 3)
    result, expected = compiled(x), f(x)
    torch.testing.assert_close(result, expected)
    assert [type(r) for r in result[:3]] == [_Config, collections.defaultdict, _Registry]
    assert result[1].default_factory is None
    assert backend.count == 1


def _add_scaled(a: torch.Tensor, b: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return a + b * scale


_ADD_TRIPLE = functools.partial(_add_scaled, scale=3.0)


def test_namedtuple_made_inside_and_a_module_level_partial() -> None:
    def f(x: torch.Tensor) -> Any:
        Point = collections.namedtuple("Point", ["first", "second"])
        point = Point(x, _ADD_TRIPLE(x, x.sin()))
        return point, point.second * 2

    compiled, backend = _compile(f)
    x = _randn(0, 4)
    result, expected = compiled(x), f(x)
    torch.testing.assert_close(tuple(result[0]), tuple(expected[0]))
    torch.testing.assert_close(result[1], expected[1])
    assert type(result[0]).__name__ == "Point" and result[0]._fields == ("first", "second")
    assert type(result[0]).__module__ == __name__
    assert backend.count == 1


def test_legacy_tensor_types_and_the_class_of_a_tensor() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        same = 1.0 if x.__class__ is torch.Tensor and x.__class__.__name__ == "Tensor" else 0.0
        return x.type(torch.HalfTensor), x.type(torch.DoubleTensor) + same, x.type(torch.FloatTensor)

    compiled, backend = _compile(f)
    x = _randn(0, 4)
    result, expected = compiled(x), f(x)
    torch.testing.assert_close(result, expected)
    assert [r.dtype for r in result] == [torch.float16, torch.float64, torch.float32]
    assert backend.count == 1


def test_pytree_of_a_size_and_a_wrong_leaf_count() -> None:
    def f(x: torch.Tensor) -> tuple[Any, ...]:
        leaves, spec = pytree.tree_flatten({"size": x.shape, "t": x})
        back = pytree.tree_unflatten(leaves, spec)
        return back["t"] * back["size"][0], type(back["size"]).__name__, len(leaves)

    compiled, backend = _compile(f)
    x = _randn(0, 3, 2)
    result, expected = compiled(x), f(x)
    torch.testing.assert_close(result[0], expected[0])
    assert result[1:] == expected[1:]
    assert backend.count == 1

    def wrong(x: torch.Tensor) -> Any:
        return pytree.tree_unflatten([x], pytree.tree_structure((1, 2)))

    with pytest.raises(ValueError, match="has length 1"):
        capture.optimize(RecordingBackend())(wrong)(x)  # raised as eager raises it
