"""Python that real code runs inside captured functions and that stays in one graph: existing dicts keyed
by tuples and dtypes, library options objects (frozen dataclasses) and `torch.library.custom_op` functions,
pytree helpers called in user code, and builtins or library callables mixing tensors and Python values.
Each is compared with eager on seeded inputs, with its graph count."""

from __future__ import annotations

import collections
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
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

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
