"""Programs whose bytecode differs most between the supported Pythons give the same graphs on each.

On 3.13 these compile to its new instructions (LOAD_FAST_LOAD_FAST, STORE_FAST_STORE_FAST,
STORE_FAST_LOAD_FAST, CALL_KW, TO_BOOL, COMPARE_OP's bool bit, CONVERT_VALUE/FORMAT_WITH_SPEC,
MAKE_FUNCTION + SET_FUNCTION_ATTRIBUTE, the NULL after the callable); on 3.11/3.12 to the older ones.
"""

from __future__ import annotations

import operator

import pytest
import torch
from capture_helpers import RecordingBackend

import capture
from capture.bytecode import dialects


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    capture.reset()


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _ops(backend: RecordingBackend) -> list[list[object]]:
    return [[node.target for node in gm.graph.nodes if node.op == "call_function" or node.op == "call_method"]
            for gm in backend.graphs]


def test_the_running_python_has_a_dialect() -> None:
    assert dialects.DIALECT is dialects.current()
    assert dialects.CURRENT in dialects.SUPPORTED


def swapped_locals_across_a_break(x, y):
    a, b = y, x  # STORE_FAST_STORE_FAST on 3.13
    a = a.sin()
    capture.graph_break()
    return a - b  # LOAD_FAST_LOAD_FAST: both locals must reach the resume function


def test_locals_read_by_a_superinstruction_are_live_across_a_break() -> None:
    backend = RecordingBackend()
    x, y = _randn(4), _randn(4, seed=1)
    torch.testing.assert_close(capture.optimize(backend)(swapped_locals_across_a_break)(x, y),
                               swapped_locals_across_a_break(x, y))
    assert _ops(backend) == [["sin"], [operator.sub]]


def negated_comparison(x):
    y = x * 2
    if not (y.sum() > 0):  # COMPARE_OP (bool bit on 3.13) then UNARY_NOT on a tensor: a break at `not`
        return y - 1
    return y + 1


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_not_of_a_tensor_comparison_takes_the_eager_branch(sign: float) -> None:
    x = _randn(4).abs() * sign
    torch.testing.assert_close(capture.optimize("eager")(negated_comparison)(x), negated_comparison(x))


def branch_on_comparison(x):
    y = x.cos()
    if y.sum() > 2:  # the comparison stays in the first graph; the break is at the jump
        return y * 3
    return y / 3


def test_comparison_before_a_data_dependent_jump_stays_in_the_graph() -> None:
    backend = RecordingBackend()
    x = _randn(5)
    torch.testing.assert_close(capture.optimize(backend)(branch_on_comparison)(x), branch_on_comparison(x))
    assert _ops(backend)[0] == ["cos", "sum", operator.gt]


def keyword_call_after_break(x, scale):
    def inner(v, k=2.0, *, shift=0.5) -> torch.Tensor:  # defaults, kwdefaults, annotations
        return v * k + shift * scale

    y = x.tanh()
    capture.graph_break()
    return inner(y, k=3.0) + inner(y, shift=1.5)  # CALL_KW on 3.13, KW_NAMES before


def test_closure_with_defaults_and_keyword_calls() -> None:
    backend = RecordingBackend()
    x = _randn(3)
    compiled = capture.optimize(backend)(keyword_call_after_break)
    torch.testing.assert_close(compiled(x, 2.0), keyword_call_after_break(x, 2.0))
    assert len(backend.graphs) == 2


def formatted_keys(x, n):
    table = {f"{n!r:>3}": x.exp(), f"{n}-{n + 1}": x.neg()}  # CONVERT_VALUE, FORMAT_WITH_SPEC, FORMAT_SIMPLE
    return table[f"{n!r:>3}"] + table[f"{n}-{n + 1}"]


def test_f_strings_of_constants_are_folded() -> None:
    backend = RecordingBackend()
    x = _randn(3)
    torch.testing.assert_close(capture.optimize(backend)(formatted_keys)(x, 7), formatted_keys(x, 7))
    assert len(backend.graphs) == 1


def truthy_python_values(x, items, flag):
    out = x
    if items and not flag:  # TO_BOOL of a list and of a bool
        out = out + len(items)
    while items:  # a loop on a Python value, unrolled
        out = out * items.pop()
    return out


def test_truth_of_python_values_is_answered_at_trace_time() -> None:
    backend = RecordingBackend()
    x = _randn(3)
    compiled = capture.optimize(backend)(truthy_python_values)
    torch.testing.assert_close(compiled(x, [2, 3], False), truthy_python_values(x, [2, 3], False))
    assert len(backend.graphs) == 1


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x).relu()  # LOAD_ATTR with the method bit and the NULL after the callable on 3.13
        return torch.cat([h, x], dim=-1).sum(dim=0, keepdim=True)  # keyword calls (CALL_KW)


def test_module_with_method_and_keyword_calls_is_one_graph() -> None:
    torch.manual_seed(0)
    model = Scaled()
    backend = RecordingBackend()
    x = _randn(2, 4)
    torch.testing.assert_close(capture.optimize(backend)(model)(x), model(x))
    assert len(backend.graphs) == 1
