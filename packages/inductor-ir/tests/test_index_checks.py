"""Each lowering that indexes by data states what eager raises for an out-of-range index
(``IndexCheck``), and wraps negative indices only where eager does; the reference interpreter
checks it. Integer division by zero raises eager's ``RuntimeError``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from inductor_ir_testing import assert_close
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir

_X = (6, 5)

# (name, function of (x, index), a valid index (negative ones where eager wraps), invalid indices)
_CASES: list[tuple[str, Callable[[torch.Tensor, torch.Tensor], Any], torch.Tensor, list[torch.Tensor]]] = [
    ("getitem", lambda x, i: x[i] + 1, torch.tensor([-1, 2, -6]), [torch.tensor([0, 6, 1]), torch.tensor([-7, 0, 1])]),
    ("gather", lambda x, i: torch.gather(x, 1, i), torch.tensor([[4, 0]] * 6), [torch.tensor([[5, 0]] * 6), torch.tensor([[-1, 0]] * 6)]),
    ("embedding", lambda x, i: F.embedding(i, x).sum(-1), torch.tensor([5, 0, 3]), [torch.tensor([6, 0, 1]), torch.tensor([-1, 0, 1])]),
    ("index_select", lambda x, i: torch.index_select(x, 0, i), torch.tensor([5, 1]), [torch.tensor([6, 1]), torch.tensor([-1, 1])]),
    ("scatter_add", lambda x, i: torch.scatter_add(x, 0, i, torch.ones(1, 5)), torch.tensor([[5, 0, 1, 2, 3]]),
     [torch.tensor([[6, 0, 1, 2, 3]]), torch.tensor([[-1, 0, 1, 2, 3]])]),
    ("index_put", lambda x, i: torch.index_put(x, (i,), torch.ones(5), accumulate=True), torch.tensor([-1, 2]),
     [torch.tensor([6, 2]), torch.tensor([-7, 2])]),
    ("index_add", lambda x, i: torch.index_add(x, 0, i, torch.ones(2, 5)), torch.tensor([5, 2]),
     [torch.tensor([6, 2]), torch.tensor([-1, 2])]),
    # Eager's kernels differ: index_select along dim 1 and index_add with an int64 index and alpha 1
    # on 2+ dims raise RuntimeError, the other forms IndexError.
    ("index_select_dim1", lambda x, i: torch.index_select(x, 1, i), torch.tensor([4, 1]), [torch.tensor([5, 1]), torch.tensor([-2, 1])]),
    ("index_select_1d", lambda x, i: torch.index_select(x[0], 0, i), torch.tensor([4, 1]), [torch.tensor([5, 1]), torch.tensor([-2, 1])]),
    ("index_add_alpha", lambda x, i: torch.index_add(x, 0, i, torch.ones(2, 5), alpha=2), torch.tensor([5, 2]),
     [torch.tensor([6, 2]), torch.tensor([-1, 2])]),
    ("index_add_int32", lambda x, i: torch.index_add(x, 1, i.int(), torch.ones(6, 2)), torch.tensor([4, 2]),
     [torch.tensor([5, 2]), torch.tensor([-1, 2])]),
    ("index_add_1d", lambda x, i: torch.index_add(x[0], 0, i, torch.ones(2)), torch.tensor([4, 2]),
     [torch.tensor([5, 2]), torch.tensor([-1, 2])]),
]  # fmt: skip


def _eager_error(fn: Callable[..., Any], *args: torch.Tensor) -> type[Exception]:
    try:
        fn(*args)
    except (IndexError, RuntimeError) as error:
        return type(error)
    raise AssertionError("eager accepted the index")


@pytest.mark.parametrize("name", [case[0] for case in _CASES])
def test_reference_interpreter_raises_like_eager(name: str) -> None:
    _, fn, valid, invalid = next(case for case in _CASES if case[0] == name)
    x = torch.randn(*_X)
    gm = make_fx(fn)(x, valid)
    program = inductor_ir.lower(gm, [x, valid])
    assert not program.lowering_errors, program.lowering_errors
    assert_close(inductor_ir.interpret(program, [x, valid]), [fn(x, valid)])
    for index in invalid:
        expected = _eager_error(fn, x, index)
        with pytest.raises(expected) as raised:
            inductor_ir.interpret(program, [x, index])
        check = inductor_ir.failed_check(raised.value)
        assert isinstance(check, inductor_ir.IndexCheck) and check.op.startswith("aten."), raised.value
        assert type(raised.value) is expected


def test_index_check_message_names_value_size_and_op() -> None:
    check = inductor_ir.IndexCheck("RuntimeError", "aten.gather.default", 1, 'File "m.py", line 3, in f')
    error = check.exception(7, 5, "cpp_fused_gather_0")
    assert type(error) is RuntimeError and inductor_ir.failed_check(error) is check
    assert str(error) == (
        'index 7 is out of bounds for dimension 1 with size 5 (aten.gather.default; at File "m.py", line 3, in f; '
        "compiled kernel cpp_fused_gather_0)"
    )
    division = inductor_ir.DivisionCheck().exception("cpp_k", "floor_divide")
    assert type(division) is RuntimeError and str(division).startswith("ZeroDivisionError")
