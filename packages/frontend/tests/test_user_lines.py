"""Errors raised from compiled code name the user's source line.

Capture records the user's frames at every graph node (FX's ``node.meta["stack_trace"]``);
aotgrad and inductor_ir read it to say where a failing op came from.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import frontend


def _line_of(fn, text: str) -> int:  # type: ignore[no-untyped-def]
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def gather_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    y = x * 2
    return y[idx] + 1


def helper(y: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.gather(y, 0, idx)


def calls_helper(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return helper(x.sin(), idx) * 3


@pytest.mark.parametrize(
    ("fn", "text", "error"),
    [(gather_rows, "y[idx]", IndexError), (helper, "torch.gather", RuntimeError), (calls_helper, "torch.gather", RuntimeError)],
    ids=["index", "gather", "gather_in_a_callee"],
)
def test_runtime_check_names_the_users_line(fn, text: str, error: type[Exception]) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn(5, generator=torch.Generator().manual_seed(0))
    idx = torch.tensor([1, 7])
    with pytest.raises(error) as eager:
        fn(x, idx)
    compiled = frontend.compile(fn)
    with pytest.raises(error) as raised:
        compiled(x, idx)
    message = str(raised.value)
    assert str(eager.value).split(" (")[0] in message
    line = _line_of(helper if fn is calls_helper else fn, text)
    assert f'{__file__}", line {line}' in message, message
    frontend.reset()


def test_graph_nodes_carry_the_callers_frames() -> None:
    seen: list[str] = []

    def record(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        seen.extend(n.meta.get("stack_trace", "") for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    frontend.compile(calls_helper, backend=record)(torch.randn(5), torch.tensor([1, 2]))
    gather = next(trace for trace in seen if "torch.gather" in trace)
    assert gather.index("in calls_helper") < gather.index("in helper")  # outermost frame first
    frontend.reset()
