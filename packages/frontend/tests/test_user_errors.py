"""What a user sees when their own code fails inside a compiled function: their exception, at their line.

A shape error in ``x @ w`` is raised as eager raises it (the same type and message), its traceback
ends at the user's line under the user's function name, nothing is printed before it, and
``fallback_to_eager=False`` does not turn it into a Kiln error. `explain` names torch functions as
the user wrote them.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import pytest
import torch

import frontend

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _matmul_after_relu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.relu(x)
    return y @ w


def _matmul_after_branch(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.relu(x)
    if y.sum() > 0:
        y = y * 2
    return y @ w


def _eager_error(fn: Callable[..., Any], *args: Any) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value


@pytest.mark.parametrize("fn", [_matmul_after_relu, _matmul_after_branch])
@pytest.mark.parametrize("fallback_to_eager", [True, False])
def test_shape_error_is_the_users_runtime_error(
    fn: Callable[..., Any], fallback_to_eager: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(0)
    x, w = torch.randn(4, 5), torch.randn(6, 3)
    expected = _eager_error(fn, x, w)
    compiled = frontend.compile(fn, options={"fallback_to_eager": fallback_to_eager})
    capfd.readouterr()
    with pytest.raises(RuntimeError) as info:
        compiled(x, w)
    assert type(info.value) is RuntimeError
    assert str(info.value).splitlines()[0] == "mat1 and mat2 shapes cannot be multiplied (4x5 and 6x3)"
    assert str(info.value) == str(expected)
    # The innermost frame is the user's line, named as the user's function.
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.filename, last.name, last.line) == (__file__, fn.__name__, "return y @ w")
    names = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert not [name for name in names if name.startswith(("resume_in_", "break_in_"))], names
    # Nothing (a fake-tensor traceback, a log line) is printed ahead of the exception.
    printed = capfd.readouterr()
    assert printed.err == "" and printed.out == "", printed


def test_compiled_function_still_runs_after_a_shape_error() -> None:
    torch.manual_seed(0)
    compiled = frontend.compile(_matmul_after_relu, options={"fallback_to_eager": False})
    with pytest.raises(RuntimeError):
        compiled(torch.randn(4, 5), torch.randn(6, 3))
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    torch.testing.assert_close(compiled(x, w), _matmul_after_relu(x, w))


def _bar(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_explain_names_torch_functions_as_written() -> None:
    torch.manual_seed(0)
    explanation = frontend.explain(_bar, torch.randn(10), torch.randn(10))
    text = str(explanation)
    ops = text.split("Ops per Graph:\n", 1)[1].split("Out Guards:", 1)[0].split()
    assert ops[:7] == ["Ops", "1:", "torch.abs", "operator.add", "operator.truediv", "sum", "operator.lt"]
    assert "built-in" not in text and " at 0x" not in text
    assert "resume_in_" not in text and "break_in_" not in text
