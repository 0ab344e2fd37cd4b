"""Every opcode of this Python is handled or listed as unsupported with a reason; breaks never crash."""

from __future__ import annotations

import dis
import sys

import pytest
import torch

import capture
import capture.cache
from capture.bytecode import dialects
from capture.bytecode.registry import HANDLERS, UNSUPPORTED, registrations, unsupported_reason


def test_every_opcode_is_handled_or_explained() -> None:
    missing = [name for name in dis.opmap if name not in HANDLERS and name not in UNSUPPORTED
               and not name.startswith("INSTRUMENTED_")]
    assert not missing, f"Python {sys.version_info[:2]}: opcodes with neither handler nor reason: {missing}"
    for name in dis.opmap:
        if name not in HANDLERS:
            reason = unsupported_reason(name)
            assert reason and "not supported by capture" not in reason, name


def test_registrations_cover_every_supported_version() -> None:
    covered = {(r.opname, v) for r in registrations() for v in ((3, 11), (3, 12), (3, 13))
               if r.min_version <= v <= r.max_version}
    assert ("LOAD_METHOD", (3, 11)) in covered and ("LOAD_METHOD", (3, 12)) not in covered
    assert ("BINARY_SLICE", (3, 12)) in covered and ("RETURN_CONST", (3, 12)) in covered
    assert ("POP_JUMP_FORWARD_IF_FALSE", (3, 11)) in covered
    for name in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "CALL_KW", "TO_BOOL",
                 "CONVERT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "SET_FUNCTION_ATTRIBUTE", "LOAD_FAST_CHECK",
                 "POP_JUMP_IF_TRUE", "CALL", "LOAD_ATTR", "END_FOR", "MAKE_FUNCTION"):
        assert (name, (3, 13)) in covered, name
    for name in ("KW_NAMES", "FORMAT_VALUE", "PRECALL"):
        assert (name, (3, 13)) not in covered, name
    assert ("CALL_KW", (3, 12)) not in covered and ("TO_BOOL", (3, 12)) not in covered


def test_dialect_table_matches_the_supported_versions() -> None:
    assert set(dialects.SUPPORTED) == {(3, 11), (3, 12), (3, 13)}
    assert capture.cache.SUPPORTED_PYTHONS == dialects.SUPPORTED
    assert dialects.DIALECTS[(3, 13)].null_after_callable and not dialects.DIALECTS[(3, 12)].null_after_callable


def uses_unsupported_opcodes(x):
    values = {1, 2, 3}  # BUILD_SET: unsupported, a graph break
    y = x * len(values)
    try:
        z = y + 1
    except RuntimeError:
        z = y
    return z


def test_unsupported_opcode_is_a_break_not_a_crash() -> None:
    x = torch.randn(4)
    opt = capture.optimize("eager")(uses_unsupported_opcodes)
    torch.testing.assert_close(opt(x), uses_unsupported_opcodes(x))


def comprehension_and_slices(xs, x):
    squares = [v * v for v in xs]
    head = squares[1:]
    total = {k: v for k, v in zip("ab", head)}
    return x[1:3] + total["a"] + sum(head)


def test_comprehensions_and_slices() -> None:
    x = torch.randn(5)
    xs = [1, 2, 3]
    backend_graphs: list[torch.fx.GraphModule] = []

    def backend(gm, inputs):
        backend_graphs.append(gm)
        return gm.forward

    torch.testing.assert_close(capture.optimize(backend)(comprehension_and_slices)(xs, x),
                               comprehension_and_slices(xs, x))
    assert len(backend_graphs) == 1


def test_slice_assignment_is_one_graph() -> None:
    """`t[1:3] = v` (STORE_SLICE on 3.12, BUILD_SLICE + STORE_SUBSCR on 3.11) writes in the graph."""
    def f(x):
        y = x.clone()
        y[1:3] = 0.5
        y[:1] = x[3:4] * 2
        return y

    backend_graphs: list[torch.fx.GraphModule] = []

    def backend(gm, inputs):
        backend_graphs.append(gm)
        return gm.forward

    x = torch.randn(5)
    torch.testing.assert_close(capture.optimize(backend)(f)(x), f(x))
    assert len(backend_graphs) == 1


@pytest.mark.parametrize("value", [0.5, -0.5])
def test_conditional_expression_branches(value: float) -> None:
    def f(x, flag=True):
        y = x if flag else -x
        return y * 2 if y.sum() > 0 else y - 1

    x = torch.full((3,), value) + torch.rand(3) * 0.1 * value
    torch.testing.assert_close(capture.optimize("eager")(f)(x), f(x))
