"""Resume functions and eager copies keep exception tables CPython can trust.

A resume function jumps into the middle of its original code. The `bytecode` library computes a try
block's handler depth by following the flow from the first instruction, which never reaches the
start of a try block the resume point lies in: the depth was left at its unset marker (32768), and
an exception raised there left values on the stack that the handler then misused (a with block's
exit called with four arguments, a class's method replaced, a crash in the garbage collector).
Found by the Python-level fuzzer (`tools/pyfuzz`, seed 2193).
"""

from __future__ import annotations

import dis

import pytest
import torch
from bytecode import Bytecode
from capture_helpers import RecordingBackend

import capture
from capture.bytecode.assemble import BytecodeAssemblyError, assemble, check_exception_depths
from capture.bytecode.codegen import ORIGINS

LOG: list[str] = []


def _raise_in_a_try_in_a_with(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    with torch.no_grad():
        n = len(y)
        try:
            if n > -3:
                raise ValueError(n)
            x = undefined_function(y)  # type: ignore[name-defined]  # noqa: F821  (never reached)
        except ValueError as error:
            LOG.append(str(error))
    return x + 1, n


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    capture.reset()
    LOG.clear()


def test_an_exception_raised_in_a_resumed_try_block_is_handled_as_in_eager() -> None:
    compiled = capture.optimize(RecordingBackend())(_raise_in_a_try_in_a_with)
    generator = torch.Generator().manual_seed(3)
    for rows in (4, 4, 6, 7, 8):  # 6: sizes become symbolic; 7 and 8 reuse that code
        x, y = torch.randn(rows, 5, generator=generator), torch.randn(rows, 5, generator=generator)
        result, n = compiled(x, y)
        torch.testing.assert_close(result, x + 1)
        assert n == rows and LOG[-1] == str(rows) and torch.is_grad_enabled()
    assert len(LOG) == 5
    for code in list(ORIGINS):
        check_exception_depths(code)  # every resume function made so far


def test_a_handler_deeper_than_the_stack_is_refused() -> None:
    def fn(a: int) -> int:
        try:
            return 10 // a
        except ZeroDivisionError:
            return 0

    check_exception_depths(fn.__code__)
    assert any(entry.depth >= 0 for entry in dis._parse_exception_table(fn.__code__))  # type: ignore[attr-defined]
    with pytest.raises(BytecodeAssemblyError, match="expects stack depth"):
        check_exception_depths(fn.__code__.replace(co_stacksize=0))
    code = assemble(Bytecode.from_code(fn.__code__, conserve_exception_block_stackdepth=True), at_least=9,
                    keep_handler_depths=True)
    assert code.co_stacksize >= 9 and code.co_exceptiontable == fn.__code__.co_exceptiontable
